/** One schema violation: where, which rule, and a human-readable message. */
export interface Violation {
    /** Slash-separated path of the offending value (`""` is the frame itself). */
    location: string;
    /** The rule broken: `required`, `type`, `const`, `min_length`, `minimum`, `range`, ... */
    rule: string;
    /** Human-readable explanation (not stable; assert on `location` and `rule`). */
    message: string;
}
/** Base class of every error the core reports; carries the stable `code`. */
export declare class RunnerProtocolError extends Error {
    /** The core's stable snake_case error code. */
    readonly code: string;
    constructor(code: string, message: string);
}
/**
 * A frame or JSON text could not be decoded (`not_json`, `duplicate_key`, `not_object`, …).
 */
export declare class DecodeError extends RunnerProtocolError {
    /** The violations (empty unless `code` is `schema_violation`). */
    readonly violations: Violation[];
    /** The error as human-readable lines, as the core words them. */
    readonly lines: string[];
    constructor(code: string, message: string, violations?: Violation[], lines?: string[]);
}
/** A message broke schema rules (`schema_violation`), with the located violations. */
export declare class SchemaValidationError extends DecodeError {
}
/** A frame's `type` is absent or not one of the seven messages (`unknown_type`). */
export declare class UnknownMessageError extends DecodeError {
}
/**
 * A machine refused an input or a call: the caller broke a rule, or the peer did and the
 * machine reports it as an error (sequencing, session, link, framing, host, local run).
 */
export declare class ProtocolStateError extends RunnerProtocolError {
}
/**
 * A configuration object was refused (`not_an_object`, `unknown_key`, `wrong_type`,
 * `out_of_range`), naming the offending key.
 */
export declare class ConfigError extends ProtocolStateError {
    /** The configuration key the core refused (dotted when nested). */
    readonly key: string;
    constructor(code: string, message: string, key?: string);
}
/**
 * A harness adapter could not open a session or complete a turn, or its data is invalid.
 */
export declare class AdapterError extends RunnerProtocolError {
    /** The core's JSON form of the error (`code` and its fields). */
    readonly details: Record<string, unknown>;
    /** The harness output line the error is about, or `null`. */
    readonly lineNumber: number | null;
    constructor(code: string, message: string, details?: Record<string, unknown>, lineNumber?: number | null);
}
/**
 * The adapter cannot run here (a missing optional dependency or program:
 * `adapter_unavailable`).
 */
export declare class AdapterUnavailableError extends AdapterError {
}
/** The session reducer refused an event. */
export declare class ReducerError extends RunnerProtocolError {
    /** The code of the inner cause (`invalid_event`), or `null`. */
    readonly detailCode: string | null;
    constructor(code: string, message: string, detailCode?: string | null);
}
/** A contract-1.0 document, catalog or gateway input was refused. */
export declare class ContractError extends RunnerProtocolError {
    /** The contract model concerned (empty when none). */
    readonly model: string;
    /** The offending field (empty when none). */
    readonly field: string;
    constructor(code: string, message: string, model?: string, field?: string);
}
/** Profile resolution refused a reference, with its reasons. */
export declare class ResolutionRefused extends RunnerProtocolError {
    /** The refusal reasons, in the core's order. */
    readonly reasons: string[];
    constructor(code: string, message: string, reasons?: string[]);
}
/**
 * A connection failed, as a link reports it (`upgrade_refused`, `connect_failed`,
 * `connect_timeout`, `no_token`, `transport_failed`, `backlog_full`), raised by a host that
 * surfaces the link's error event.
 */
export declare class TransportError extends RunnerProtocolError {
    /** The HTTP status of a refused upgrade (`upgrade_refused`), else `null`. */
    readonly status: number | null;
    constructor(code: string, message: string, status?: number | null);
}
/**
 * A hub store failed or refused (`store_unavailable`, `lease_expired`, `store_limit`,
 * `invalid_rows`): the hub closes the runner's socket and it resumes from the committed
 * rows.
 */
export declare class StoreError extends RunnerProtocolError {
}
/**
 * The database refused a hub's write because another hub took the runner over, or this
 * hub's lease expired (`fenced`).
 */
export declare class FencedError extends StoreError {
}
/**
 * The core panicked inside a binding call (`panic`); the process survives, the object it
 * was called on must not be used again.
 */
export declare class PanicError extends RunnerProtocolError {
}
/** The class names of the core's table, parents first. */
export declare const ERROR_CLASS_NAMES: readonly string[];
