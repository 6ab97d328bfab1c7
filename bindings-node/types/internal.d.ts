/**
 * The typed error for an error thrown by the native module (others pass through): the
 * class the core's error table named for it (`error_class(kind, code)`, chosen in the
 * native layer), built by the generated {@link BUILDERS}.
 */
export declare function translate(error: unknown): unknown;
/** Run a native call, turning its thrown error into this package's typed error. */
export declare function call<T>(f: () => T): T;
/** The text of a string argument, refusing one the core could not receive intact. */
export declare function checkedText(text: string): string;
/** JSON text of a JS value for the core (`TypeError` for a value JSON cannot carry). */
export declare function jsonText(value: unknown, what: string): string;
/** The parsed JSON text a native call returned. */
export declare function parsed<T>(text: string): T;
/** A `TypeError` with Node's code for an argument of the wrong type (not a core error). */
export declare function typeError(message: string): TypeError;
/** A `RangeError` with Node's code for an argument out of range (not a core error). */
export declare function rangeError(message: string): RangeError;
/** A seed as a BigInt in `0..2^64`: a `bigint`, or a safe non-negative integer `number`. */
export declare function seedOf(seed: unknown): bigint;
