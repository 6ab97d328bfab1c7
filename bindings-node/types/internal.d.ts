/** The typed error for an error thrown by the native module (others pass through). */
export declare function translate(error: unknown): unknown;
/** Run a native call, turning its thrown error into this package's typed error. */
export declare function call<T>(f: () => T): T;
/** The text of a string argument, refusing one the core could not receive intact. */
export declare function checkedText(text: string): string;
/** JSON text of a JS value for the core (`TypeError` for a value JSON cannot carry). */
export declare function jsonText(value: unknown, what: string): string;
/** The parsed JSON text a native call returned. */
export declare function parsed<T>(text: string): T;
