// Helpers shared by the area runners of the Node conformance suite.
import { isDeepStrictEqual } from 'node:util';

/** JSON values compare as JSON values: key order does not matter, arrays in order. */
export function same(step, what, got, want) {
  const g = JSON.parse(JSON.stringify(got === undefined ? null : got));
  if (!isDeepStrictEqual(g, want)) {
    throw new Error(`step ${step}: ${what} mismatch\n  got:  ${JSON.stringify(g)}\n  want: ${JSON.stringify(want)}`);
  }
}

/** The bytes of lower-case hex. */
export function hex(s) {
  if (s.length % 2 !== 0) throw new Error(`odd-length hex ${s}`);
  return Buffer.from(s, 'hex');
}

/** The bytes of an input with `key` (UTF-8 text) or `key_hex`; `undefined` without either. */
export function bytesOf(input, key) {
  if (typeof input[key] === 'string') return Buffer.from(input[key], 'utf8');
  if (typeof input[`${key}_hex`] === 'string') return hex(input[`${key}_hex`]);
  return undefined;
}

/** The steps of a vector. */
export function* steps(vector) {
  let i = 0;
  for (const s of vector.steps) {
    yield [i, s.input, s.expect];
    i += 1;
  }
}

/**
 * The configuration outcome every area checks first: `refused` is the thrown ConfigError
 * (or undefined). Returns true when the vector is done (an expected refusal).
 */
export function checkConfig(vector, refused) {
  const want = vector.steps[0]?.expect?.config_error;
  if (refused === undefined && want === undefined) return false;
  if (refused !== undefined && want !== undefined) {
    same(0, 'config_error', { code: refused.code, key: refused.key }, want);
    return true;
  }
  if (refused !== undefined) throw new Error(`config refused: ${refused.code} (key ${refused.key})`);
  throw new Error(`config accepted, expected config_error ${JSON.stringify(want)}`);
}

/** Run `f`; the ConfigError it throws (rethrowing anything else), or its value. */
export function tryConfig(f, ConfigError) {
  try {
    return { value: f() };
  } catch (e) {
    if (e instanceof ConfigError) return { refused: e };
    throw e;
  }
}

/** Check an outcome `{ok, value} | {error}` against `expect.error` (by `.code`). */
export function checkError(step, outcome, expect) {
  const want = expect.error;
  if (outcome.error !== undefined) {
    if (typeof outcome.error?.code !== 'string') throw outcome.error;
    if (want === undefined) throw new Error(`step ${step}: unexpected error ${outcome.error.code}: ${outcome.error.message}`);
    same(step, 'error', outcome.error.code, typeof want === 'object' && want !== null ? want.code : want);
    return false;
  }
  if (want !== undefined) throw new Error(`step ${step}: expected error ${JSON.stringify(want)}, got success`);
  return true;
}

/** `{value}` or `{error}` of a call. */
export function attempt(f) {
  try {
    return { value: f() };
  } catch (error) {
    return { error };
  }
}
