/** One schema violation: where, which rule, and a human-readable message. */
export interface Violation {
  /** Slash-separated path of the offending value (`""` is the frame itself). */
  location: string;
  /** The rule broken: `required`, `type`, `const`, `min_length`, `minimum`, `range`, ... */
  rule: string;
  /** Human-readable explanation (not stable; assert on `location` and `rule`). */
  message: string;
}

/** Base class of every error this package throws; `code` is the core's stable code. */
export class RunnerProtocolError extends Error {
  /** The core's stable snake_case error code. */
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A frame could not be decoded: `not_json`, `duplicate_key`, `not_object`. */
export class DecodeError extends RunnerProtocolError {
  /** The violations (empty unless `code` is `schema_violation`). */
  readonly violations: Violation[];
  /** The error as human-readable lines, as the core words them. */
  readonly lines: string[];
  constructor(code: string, message: string, violations: Violation[] = [], lines: string[] = []) {
    super(code, message);
    this.violations = violations;
    this.lines = lines;
  }
}

/** A message breaks schema rules (`schema_violation`), with the located violations. */
export class SchemaValidationError extends DecodeError {}

/** The frame's `type` is absent or not one of the seven messages (`unknown_type`). */
export class UnknownMessageError extends DecodeError {}

/** A machine was used against its rules (not connected, backpressure, ...). */
export class ProtocolStateError extends RunnerProtocolError {}

/** A configuration the core refused; `key` names the offending key. */
export class ConfigError extends RunnerProtocolError {
  /** The configuration key the core refused. */
  readonly key: string;
  constructor(code: string, message: string, key: string) {
    super(code, message);
    this.key = key;
  }
}

/** A harness adapter failed (a turn, a role spec, a usage shape). */
export class AdapterError extends RunnerProtocolError {
  /** The core's JSON form of the error (`code` and its fields). */
  readonly details: Record<string, unknown>;
  /** The harness output line the error is about, or `null`. */
  readonly lineNumber: number | null;
  constructor(code: string, message: string, details: Record<string, unknown> = {}, lineNumber: number | null = null) {
    super(code, message);
    this.details = details;
    this.lineNumber = lineNumber;
  }
}

/** The harness adapter cannot run here (a missing SDK or program). */
export class AdapterUnavailableError extends AdapterError {}

/** The reducer refused an event; `detailCode` names the inner cause (`invalid_event`). */
export class ReducerError extends RunnerProtocolError {
  /** The code of the inner cause, or `null`. */
  readonly detailCode: string | null;
  constructor(code: string, message: string, detailCode: string | null = null) {
    super(code, message);
    this.detailCode = detailCode;
  }
}

/** A contract-1.0 document or gateway step was refused; `model` and `field` locate it. */
export class ContractError extends RunnerProtocolError {
  /** The contract model concerned (empty when none). */
  readonly model: string;
  /** The offending field (empty when none). */
  readonly field: string;
  constructor(code: string, message: string, model = '', field = '') {
    super(code, message);
    this.model = model;
    this.field = field;
  }
}

/** Profile resolution refused the reference; `reasons` lists why. */
export class ResolutionRefused extends RunnerProtocolError {
  /** The refusal reasons, in the core's order. */
  readonly reasons: string[];
  constructor(code: string, message: string, reasons: string[] = []) {
    super(code, message);
    this.reasons = reasons;
  }
}

/** The native core panicked; the process survives and the call throws this (`panic`). */
export class PanicError extends RunnerProtocolError {}
