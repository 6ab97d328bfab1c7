/* `Buffer` in the browser build (injected by the bundler wherever the TypeScript layer or
   emnapi names it; no global is set): the `buffer` package, so `snapshot()` returns a
   Buffer and `Buffer.from(text, 'utf8')` works as in Node. */
export { Buffer } from 'buffer';
