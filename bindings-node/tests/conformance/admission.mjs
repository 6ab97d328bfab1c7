// Area `admission`: the live server's admission machine through the public Admission
// class and admissionConfig / admissionErrorBody / admissionResponseHeaders.
import * as srp from 'stapel-runner-protocol';
import { attempt, checkError, same, steps } from './common.mjs';

const QUERIES = { parse_config: ['config', 'config_error'], error_body: ['value'], response_headers: ['value'] };

/** The bytes of a well-formed `body` input (fed through `body()`), else undefined. */
function bodyBytes(form) {
  if (typeof form !== 'object' || form === null || !Number.isInteger(form.id)) return undefined;
  const keys = Object.keys(form).sort().join(',');
  if (keys === 'data,id' && typeof form.data === 'string') return Buffer.from(form.data, 'utf8');
  if (keys === 'data_hex,id' && typeof form.data_hex === 'string' && /^(?:[0-9a-f]{2})*$/.test(form.data_hex)) {
    return Buffer.from(form.data_hex, 'hex');
  }
  return undefined;
}

function query(i, key, arg, expect) {
  for (const k of Object.keys(expect)) {
    if (!QUERIES[key].includes(k)) throw new Error(`step ${i}: ${k} is not a ${key} expectation`);
  }
  if (key === 'parse_config') {
    const o = attempt(() => srp.admissionConfig(arg));
    if (o.error !== undefined) {
      if (!(o.error instanceof srp.ConfigError)) throw o.error;
      if (expect.config_error === undefined) throw new Error(`step ${i}: unexpected config error ${o.error.code}`);
      same(i, 'config_error', { code: o.error.code, key: o.error.key }, expect.config_error);
    } else {
      if (expect.config === undefined) throw new Error(`step ${i}: config accepted, expected ${JSON.stringify(expect)}`);
      same(i, 'config', o.value, expect.config);
    }
  } else if (key === 'error_body') {
    same(i, 'value', srp.admissionErrorBody(arg), expect.value);
  } else {
    same(i, 'value', srp.admissionResponseHeaders(), expect.value);
  }
}

export function run(vector) {
  const m = new srp.Admission(vector.config ?? {});
  let now = 0;
  for (const [i, raw, expect] of steps(vector)) {
    const input = { ...raw };
    if (input.now !== undefined) now = input.now;
    delete input.now;
    const q = Object.keys(QUERIES).find((k) => k in input);
    if (q !== undefined) {
      query(i, q, input[q], expect);
      continue;
    }
    for (const k of ['config', 'config_error', 'value']) {
      if (k in expect) throw new Error(`step ${i}: ${k} is a query expectation`);
    }
    const keys = Object.keys(input);
    const data = keys.length === 1 && keys[0] === 'body' ? bodyBytes(input.body) : undefined;
    const o = attempt(() => (data !== undefined ? m.body(now, input.body.id, data) : m.handleInput(now, input)));
    const outputs = m.drainOutputs();
    checkError(i, o, expect);
    same(i, 'outputs', outputs, expect.outputs ?? []);
    if ('timeout' in expect) same(i, 'timeout', m.pollTimeout(), expect.timeout);
    if ('runs' in expect) same(i, 'runs', m.runs, expect.runs);
    if ('pending' in expect) same(i, 'pending', m.pendingBodies, expect.pending);
  }
}
