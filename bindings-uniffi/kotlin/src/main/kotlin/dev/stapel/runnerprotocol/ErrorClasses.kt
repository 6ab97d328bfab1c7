// Generated from the core's error table (errorClasses(), core/src/errors.rs) by
// ErrorsTest in bindings-uniffi/kotlin/src/test; do not edit. Regenerate with
// STAPEL_REGENERATE=1 bindings-uniffi/scripts/test.
package dev.stapel.runnerprotocol

/**
 * Base class of every error the core reports; carries the stable `code`.
 *
 * @property code the core's stable snake_case code.
 * @property kind the error's kind in the core's error table (`decode`, `session`, `link`, …).
 */
open class RunnerProtocolError(val code: String, val kind: String, message: String, cause: Throwable? = null) :
    RuntimeException(message, cause)

/** A frame or JSON text could not be decoded (`not_json`, `duplicate_key`, `not_object`, …). */
open class DecodeError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** A message broke schema rules (`schema_violation`), with the located violations. */
open class SchemaValidationError(code: String, kind: String, message: String, cause: Throwable? = null) :
    DecodeError(code, kind, message, cause)

/** A frame's `type` is absent or not one of the seven messages (`unknown_type`). */
open class UnknownMessageError(code: String, kind: String, message: String, cause: Throwable? = null) :
    DecodeError(code, kind, message, cause)

/** A machine refused an input or a call: the caller broke a rule, or the peer did and the machine reports it as an error (sequencing, session, link, framing, host, local run). */
open class ProtocolStateError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** A configuration object was refused (`not_an_object`, `unknown_key`, `wrong_type`, `out_of_range`), naming the offending key. */
open class ConfigError(code: String, kind: String, message: String, cause: Throwable? = null) :
    ProtocolStateError(code, kind, message, cause)

/** A harness adapter could not open a session or complete a turn, or its data is invalid. */
open class AdapterError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** The adapter cannot run here (a missing optional dependency or program: `adapter_unavailable`). */
open class AdapterUnavailableError(code: String, kind: String, message: String, cause: Throwable? = null) :
    AdapterError(code, kind, message, cause)

/** The session reducer refused an event. */
open class ReducerError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** A contract-1.0 document, catalog or gateway input was refused. */
open class ContractError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** Profile resolution refused a reference, with its reasons. */
open class ResolutionRefused(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** A connection failed, as a link reports it (`upgrade_refused`, `connect_failed`, `connect_timeout`, `no_token`, `transport_failed`, `backlog_full`), raised by a host that surfaces the link's error event. */
open class TransportError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** A hub store failed or refused (`store_unavailable`, `lease_expired`, `store_limit`, `invalid_rows`): the hub closes the runner's socket and it resumes from the committed rows. */
open class StoreError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** The database refused a hub's write because another hub took the runner over, or this hub's lease expired (`fenced`). */
open class FencedError(code: String, kind: String, message: String, cause: Throwable? = null) :
    StoreError(code, kind, message, cause)

/** The core panicked inside a binding call (`panic`); the process survives, the object it was called on must not be used again. */
open class PanicError(code: String, kind: String, message: String, cause: Throwable? = null) :
    RunnerProtocolError(code, kind, message, cause)

/** An instance of the table's class named [className] (the root class for a name the table does not have). */
fun runnerProtocolError(className: String, code: String, kind: String, message: String, cause: Throwable? = null): RunnerProtocolError =
    when (className) {
        "DecodeError" -> DecodeError(code, kind, message, cause)
        "SchemaValidationError" -> SchemaValidationError(code, kind, message, cause)
        "UnknownMessageError" -> UnknownMessageError(code, kind, message, cause)
        "ProtocolStateError" -> ProtocolStateError(code, kind, message, cause)
        "ConfigError" -> ConfigError(code, kind, message, cause)
        "AdapterError" -> AdapterError(code, kind, message, cause)
        "AdapterUnavailableError" -> AdapterUnavailableError(code, kind, message, cause)
        "ReducerError" -> ReducerError(code, kind, message, cause)
        "ContractError" -> ContractError(code, kind, message, cause)
        "ResolutionRefused" -> ResolutionRefused(code, kind, message, cause)
        "TransportError" -> TransportError(code, kind, message, cause)
        "StoreError" -> StoreError(code, kind, message, cause)
        "FencedError" -> FencedError(code, kind, message, cause)
        "PanicError" -> PanicError(code, kind, message, cause)
        else -> RunnerProtocolError(code, kind, message, cause)
    }

/** The names of the table's classes, parents before children. */
val RUNNER_PROTOCOL_ERROR_CLASSES: List<String> = listOf(
    "RunnerProtocolError",
    "DecodeError",
    "SchemaValidationError",
    "UnknownMessageError",
    "ProtocolStateError",
    "ConfigError",
    "AdapterError",
    "AdapterUnavailableError",
    "ReducerError",
    "ContractError",
    "ResolutionRefused",
    "TransportError",
    "StoreError",
    "FencedError",
    "PanicError",
)
