import { BUILDERS } from './error-builders';
import { RunnerProtocolError } from './errors';
import { call, parsed } from './internal';
import { native } from './native';

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
export function errorTable(): ErrorTable {
  return parsed<ErrorTable>(call(() => native.errorTable()));
}

/**
 * The class name the core's table gives an error of `kind` (`config`, `decode`,
 * `session`, `link`, `transport`, …) with `code` (the kind's class for a code without a
 * rule of its own, the root class for an unknown kind).
 */
export function errorClass(kind: string, code: string): string {
  return call(() => native.errorClassOf(kind, code));
}

/**
 * An error of the class the core's table gives `kind` and `code` (e.g. a link's `error`
 * event as a `TransportError`: `coreError('transport', event.code, event.detail,
 * {status: event.status})`).
 */
export function coreError(kind: string, code: string, message: string, fields: Record<string, unknown> = {}): RunnerProtocolError {
  const name = errorClass(kind, code);
  const build = BUILDERS[name];
  const carried = { ...fields, class: name, code, message };
  return build === undefined ? new RunnerProtocolError(code, message) : build(carried);
}
