/* The browser build's native module, in place of ts/native.ts: the same N-API exports,
   compiled from the same crate (bindings-node) to wasm32-wasip1 and run by emnapi through
   @napi-rs/wasm-runtime. The runtime module (runtime.ts) fetches the .wasm beside it
   and instantiates it before this module's importers run (top-level await). */
import type * as Native from '../../native';
// @ts-expect-error the runtime module, beside the entry (scripts/build-browser.mjs)
import binding from 'stapel-runner-protocol-runtime';

export const native: typeof Native = binding as typeof Native;

/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags): in
 * the wasm build the native side copies what it wrote into this array before each call
 * returns (see bindings-node/src/boundary.rs).
 */
export const SCRATCH: Float64Array = native.scratch();
