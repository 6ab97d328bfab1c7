import { RunnerProtocolError } from './errors';
/** One exception class of the core's error table. */
export interface ErrorClassEntry {
    /** The class name (the same in every binding). */
    name: string;
    /** The parent class (`null` for the root, `RunnerProtocolError`). */
    parent: string | null;
    /** What the class means. */
    doc: string;
}
/** One rule of the core's error table: errors of `kind` (and `code`, when given) are `class`. */
export interface ErrorRule {
    kind: string;
    code: string | null;
    class: string;
}
/**
 * The core's one error table (`errors::table_value()`): every exception class (parents
 * first) and the rules that map an error's kind and code to its class. This package's
 * error classes are generated from it (`scripts/gen-types.mjs`).
 */
export interface ErrorTable {
    classes: ErrorClassEntry[];
    rules: ErrorRule[];
}
/** The core's error table. */
export declare function errorTable(): ErrorTable;
/**
 * The class name the core's table gives an error of `kind` (`config`, `decode`,
 * `session`, `link`, `transport`, …) with `code` (the kind's class for a code without a
 * rule of its own, the root class for an unknown kind).
 */
export declare function errorClass(kind: string, code: string): string;
/**
 * An error of the class the core's table gives `kind` and `code` (e.g. a link's `error`
 * event as a `TransportError`: `coreError('transport', event.code, event.detail,
 * {status: event.status})`).
 */
export declare function coreError(kind: string, code: string, message: string, fields?: Record<string, unknown>): RunnerProtocolError;
