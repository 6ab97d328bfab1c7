// `node:util` for the Node conformance modules when they run in the page: the one
// function they import, for the values they compare (JSON data, typed arrays). Anything
// else throws rather than guess.
function kind(v) {
  if (v === null || typeof v !== 'object') return 'primitive';
  if (Array.isArray(v)) return 'array';
  if (ArrayBuffer.isView(v)) return 'view';
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) return 'object';
  throw new TypeError(`isDeepStrictEqual (browser shim): unsupported value ${Object.prototype.toString.call(v)}`);
}

export function isDeepStrictEqual(a, b) {
  const ka = kind(a);
  if (ka !== kind(b)) return false;
  switch (ka) {
    case 'primitive':
      return Object.is(a, b);
    case 'array':
      return a.length === b.length && a.every((x, i) => isDeepStrictEqual(x, b[i]));
    case 'view': {
      if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b) || a.byteLength !== b.byteLength) return false;
      const ab = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
      const bb = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      return ab.every((x, i) => x === bb[i]);
    }
    default: {
      const ak = Object.keys(a);
      const bk = Object.keys(b);
      return ak.length === bk.length && ak.every((k) => Object.prototype.hasOwnProperty.call(b, k) && isDeepStrictEqual(a[k], b[k]));
    }
  }
}
