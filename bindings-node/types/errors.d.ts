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
export declare class RunnerProtocolError extends Error {
    /** The core's stable snake_case error code. */
    readonly code: string;
    constructor(code: string, message: string);
}
/** A frame could not be decoded: `not_json`, `duplicate_key`, `not_object`. */
export declare class DecodeError extends RunnerProtocolError {
    /** The violations (empty unless `code` is `schema_violation`). */
    readonly violations: Violation[];
    /** The error as human-readable lines, as the core words them. */
    readonly lines: string[];
    constructor(code: string, message: string, violations?: Violation[], lines?: string[]);
}
/** A message breaks schema rules (`schema_violation`), with the located violations. */
export declare class SchemaValidationError extends DecodeError {
}
/** The frame's `type` is absent or not one of the seven messages (`unknown_type`). */
export declare class UnknownMessageError extends DecodeError {
}
/** A machine was used against its rules (not connected, backpressure, ...). */
export declare class ProtocolStateError extends RunnerProtocolError {
}
/** A configuration the core refused; `key` names the offending key. */
export declare class ConfigError extends RunnerProtocolError {
    /** The configuration key the core refused. */
    readonly key: string;
    constructor(code: string, message: string, key: string);
}
/** A harness adapter failed (a turn, a role spec, a usage shape). */
export declare class AdapterError extends RunnerProtocolError {
    /** The core's JSON form of the error (`code` and its fields). */
    readonly details: Record<string, unknown>;
    /** The harness output line the error is about, or `null`. */
    readonly lineNumber: number | null;
    constructor(code: string, message: string, details?: Record<string, unknown>, lineNumber?: number | null);
}
/** The harness adapter cannot run here (a missing SDK or program). */
export declare class AdapterUnavailableError extends AdapterError {
}
/** The reducer refused an event; `detailCode` names the inner cause (`invalid_event`). */
export declare class ReducerError extends RunnerProtocolError {
    /** The code of the inner cause, or `null`. */
    readonly detailCode: string | null;
    constructor(code: string, message: string, detailCode?: string | null);
}
/** A contract-1.0 document or gateway step was refused; `model` and `field` locate it. */
export declare class ContractError extends RunnerProtocolError {
    /** The contract model concerned (empty when none). */
    readonly model: string;
    /** The offending field (empty when none). */
    readonly field: string;
    constructor(code: string, message: string, model?: string, field?: string);
}
/** Profile resolution refused the reference; `reasons` lists why. */
export declare class ResolutionRefused extends RunnerProtocolError {
    /** The refusal reasons, in the core's order. */
    readonly reasons: string[];
    constructor(code: string, message: string, reasons?: string[]);
}
/** The native core panicked; the process survives and the call throws this (`panic`). */
export declare class PanicError extends RunnerProtocolError {
}
