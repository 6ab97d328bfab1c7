/* The runtime module of the browser build (stapel-runner-protocol.runtime.js): napi's
   generated browser loader for the crate's wasm (`stapel-runner-protocol-wasm`, resolved
   by scripts/build-browser.mjs) — it fetches the .wasm beside this module and
   instantiates it with emnapi before its importers run — and the Buffer class both
   modules of the build use. */
// @ts-expect-error resolved by scripts/build-browser.mjs (napi's generated loader)
export { default } from 'stapel-runner-protocol-wasm';
export { Buffer } from 'buffer';
