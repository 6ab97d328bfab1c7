/* `Buffer` in the entry module of the browser build (injected by the bundler wherever the
   TypeScript layer names it; no global is set): the runtime module's (buffer.ts), so the
   Buffers the native calls return and the ones the layer makes are one class. */
// @ts-expect-error the runtime module, beside the entry (scripts/build-browser.mjs)
export { Buffer } from 'stapel-runner-protocol-runtime';
