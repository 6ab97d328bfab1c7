// Area `wire` through the public API: decode, encode, fromObject, validate.
import * as srp from 'stapel-runner-protocol';
import { hex, same, steps } from './common.mjs';

function nested(depth) {
  let v = [];
  for (let i = 1; i < depth; i += 1) v = [v];
  return v;
}

function withNest(input, obj) {
  const out = { ...obj };
  if (input.nest) out[input.nest.key] = nested(input.nest.depth);
  return out;
}

function checkError(i, e, want) {
  if (!(e instanceof srp.RunnerProtocolError)) throw e;
  same(i, 'error code', e.code, want.code);
  if (want.violations !== undefined) {
    same(i, 'violations', (e.violations ?? []).map((v) => ({ location: v.location, rule: v.rule })), want.violations);
  }
  if (want.lines !== undefined) same(i, 'lines', e.lines, want.lines);
  if (want.text !== undefined) same(i, 'text', e.message, want.text);
}

export function run(vector) {
  for (const [i, input, expect] of steps(vector)) {
    const validate = input.validate ?? false;
    let msg;
    let error;
    try {
      if (typeof input.decode === 'string') {
        msg = srp.decode(input.decode, { validate });
      } else if (typeof input.decode_hex === 'string') {
        msg = srp.decode(hex(input.decode_hex), { validate });
      } else if (typeof input.decode_utf16_hex === 'string') {
        const b = hex(input.decode_utf16_hex);
        let text = '';
        for (let k = 0; k + 1 < b.length; k += 2) text += String.fromCharCode(b.readUInt16BE(k));
        msg = srp.decode(text, { validate });
      } else if ('check' in input) {
        msg = srp.validate(input.check, input.as);
      } else if (input.encode !== undefined) {
        msg = srp.fromObject(withNest(input, input.encode), { validate });
      } else if (input.build !== undefined) {
        msg = srp.fromObject(input.build.fields, { validate, extra: withNest(input, input.build.extra ?? {}) });
      } else {
        throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
      }
      // Every message a step produces is encoded.
      srp.encode(msg);
    } catch (e) {
      if (!(e instanceof srp.RunnerProtocolError)) throw e;
      error = e;
    }
    if (error === undefined && expect.error === undefined) {
      if (expect.type !== undefined) same(i, 'type', msg.type, expect.type);
      if (expect.message !== undefined) same(i, 'message', msg, expect.message);
      if (expect.encoded !== undefined) same(i, 'encoded', srp.encode(msg), expect.encoded);
      // JSON.stringify of a decoded message is a valid frame of the same message.
      same(i, 'JSON.stringify round trip', srp.decode(JSON.stringify(msg)), JSON.parse(JSON.stringify(msg)));
    } else if (error !== undefined && expect.error !== undefined) {
      checkError(i, error, expect.error);
    } else if (error === undefined) {
      throw new Error(`step ${i}: expected error ${JSON.stringify(expect.error)}, decoded ${srp.encode(msg)}`);
    } else {
      throw new Error(`step ${i}: unexpected error ${error.code}: ${error.message}`);
    }
  }
}
