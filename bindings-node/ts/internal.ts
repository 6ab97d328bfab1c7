/* Internal helpers of the TypeScript layer (not part of the public API). */
import { BUILDERS, type Carried } from './error-builders';
import { RunnerProtocolError } from './errors';
import { native } from './native';

const MARKER = '\u0001stapel:';

/**
 * The typed error for an error thrown by the native module (others pass through): the
 * class the core's error table named for it (`error_class(kind, code)`, chosen in the
 * native layer), built by the generated {@link BUILDERS}.
 */
export function translate(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.startsWith(MARKER)) {
    return error;
  }
  let c: Carried;
  try {
    c = JSON.parse(error.message.slice(MARKER.length)) as Carried;
  } catch {
    return error;
  }
  const build = BUILDERS[c.class];
  return build === undefined ? new RunnerProtocolError(c.code, c.message) : build(c);
}

/** Run a native call, turning its thrown error into this package's typed error. */
export function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw translate(e);
  }
}

interface WellFormed {
  isWellFormed(): boolean;
}

/** The text of a string argument, refusing one the core could not receive intact. */
export function checkedText(text: string): string {
  if (!(text as unknown as WellFormed).isWellFormed()) {
    call(() => native.notUnicodeError());
  }
  return text;
}

/** JSON text of a JS value for the core (`TypeError` for a value JSON cannot carry). */
export function jsonText(value: unknown, what: string): string {
  const text = JSON.stringify(value) as string | undefined;
  if (text === undefined) throw new TypeError(`${what} is not a JSON value`);
  return checkedText(text);
}

/** The parsed JSON text a native call returned. */
export function parsed<T>(text: string): T {
  return JSON.parse(text) as T;
}

/** A `TypeError` with Node's code for an argument of the wrong type (not a core error). */
export function typeError(message: string): TypeError {
  return Object.assign(new TypeError(message), { code: 'ERR_INVALID_ARG_TYPE' });
}

/** A `RangeError` with Node's code for an argument out of range (not a core error). */
export function rangeError(message: string): RangeError {
  return Object.assign(new RangeError(message), { code: 'ERR_OUT_OF_RANGE' });
}

const U64_MAX = (1n << 64n) - 1n;

/** A seed as a BigInt in `0..2^64`: a `bigint`, or a safe non-negative integer `number`. */
export function seedOf(seed: unknown): bigint {
  if (seed === undefined) return 0n;
  if (typeof seed === 'number') {
    if (!Number.isSafeInteger(seed) || seed < 0) throw rangeError(`seed: ${seed} is not a safe non-negative integer`);
    return BigInt(seed);
  }
  if (typeof seed !== 'bigint') throw typeError(`seed: a bigint or a number is required, got ${typeof seed}`);
  if (seed < 0n || seed > U64_MAX) throw rangeError('seed: not in 0..2^64');
  return seed;
}
