/* `Buffer` in the runtime module of the browser build (injected by the bundler wherever
   emnapi names it; no global is set): the `buffer` package, so `snapshot()` returns a
   Buffer and `Buffer.from(text, 'utf8')` works as in Node. The entry module takes the
   same class from the runtime (buffer-from-runtime.ts). */
export { Buffer } from 'buffer';
