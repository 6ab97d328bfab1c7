/* The browser build's native module, in place of ts/native.ts: the same N-API exports,
   compiled from the same crate (bindings-node) to wasm32-wasip1 and run by emnapi through
   @napi-rs/wasm-runtime. `stapel-runner-protocol-wasm` is napi's generated browser loader
   (scripts/build-browser.mjs points the bundler at it); it fetches the .wasm next to the
   bundle (`new URL(..., import.meta.url)`) and instantiates it before this module's
   importers run (top-level await). */
import type * as Native from '../../native';
// @ts-expect-error resolved by scripts/build-browser.mjs (napi's generated loader)
import binding from 'stapel-runner-protocol-wasm';

export const native: typeof Native = binding as typeof Native;

/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags): in
 * the wasm build the native side copies what it wrote into this array before each call
 * returns (see bindings-node/src/boundary.rs).
 */
export const SCRATCH: Float64Array = native.scratch();
