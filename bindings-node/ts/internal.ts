/* Internal helpers of the TypeScript layer (not part of the public API). */
import {
  AdapterError,
  AdapterUnavailableError,
  ConfigError,
  ContractError,
  DecodeError,
  PanicError,
  ProtocolStateError,
  ReducerError,
  ResolutionRefused,
  RunnerProtocolError,
  SchemaValidationError,
  UnknownMessageError,
  type Violation,
} from './errors';
import { native } from './native';

const MARKER = '\u0001stapel:';

interface Carried {
  class: string;
  code: string;
  message: string;
  violations?: Violation[];
  lines?: string[];
  key?: string;
  detail_code?: string | null;
  model?: string;
  field?: string;
  reasons?: string[];
  details?: Record<string, unknown>;
  line_number?: number | null;
}

/** The typed error for an error thrown by the native module (others pass through). */
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
  switch (c.class) {
    case 'SchemaValidationError':
      return new SchemaValidationError(c.code, c.message, c.violations ?? [], c.lines ?? []);
    case 'UnknownMessageError':
      return new UnknownMessageError(c.code, c.message, c.violations ?? [], c.lines ?? []);
    case 'DecodeError':
      return new DecodeError(c.code, c.message, c.violations ?? [], c.lines ?? []);
    case 'ProtocolStateError':
      return new ProtocolStateError(c.code, c.message);
    case 'ConfigError':
      return new ConfigError(c.code, c.message, c.key ?? '');
    case 'AdapterError':
      return new AdapterError(c.code, c.message, c.details ?? {}, c.line_number ?? null);
    case 'AdapterUnavailableError':
      return new AdapterUnavailableError(c.code, c.message, c.details ?? {}, c.line_number ?? null);
    case 'ReducerError':
      return new ReducerError(c.code, c.message, c.detail_code ?? null);
    case 'ContractError':
      return new ContractError(c.code, c.message, c.model ?? '', c.field ?? '');
    case 'ResolutionRefused':
      return new ResolutionRefused(c.code, c.message, c.reasons ?? []);
    case 'PanicError':
      return new PanicError(c.code, c.message);
    default:
      return new RunnerProtocolError(c.code, c.message);
  }
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
