package dev.stapel.runnerprotocol

/*
 * The core's one error table on the JVM. The exception classes themselves
 * (RunnerProtocolError and its subclasses, in ErrorClasses.kt) are generated from the
 * core's table (`errorClasses()`), and a test fails when they drift from it. The calls of
 * the generated UniFFI API throw `ProtocolException` (its variants carry `code` and the
 * error's `kind`); the class of such an error is `errorClass(kind, code)`, the core's
 * choice, and `toRunnerProtocolError()` builds it. `runnerProtocol { … }` runs a block and
 * rethrows every core error as its table class; RunnerClient does that for its calls.
 */

/** The stable snake_case code of a core error. */
val ProtocolException.code: String
    get() = when (this) {
        is ProtocolException.Decode -> code
        is ProtocolException.State -> code
        is ProtocolException.Config -> code
        is ProtocolException.Contract -> code
        is ProtocolException.Reduce -> code
        is ProtocolException.Adapter -> code
        is ProtocolException.Refusal -> code
    }

/** The error's kind in the core's error table (`decode`, `session`, `link`, `config`, …). */
val ProtocolException.kind: String
    get() = when (this) {
        is ProtocolException.Decode -> kind
        is ProtocolException.State -> kind
        is ProtocolException.Config -> kind
        is ProtocolException.Contract -> kind
        is ProtocolException.Reduce -> kind
        is ProtocolException.Adapter -> kind
        is ProtocolException.Refusal -> kind
    }

/** The core's human-readable text of the error (not stable). */
val ProtocolException.detail: String
    get() = when (this) {
        is ProtocolException.Decode -> detail
        is ProtocolException.State -> detail
        is ProtocolException.Config -> detail
        is ProtocolException.Contract -> detail
        is ProtocolException.Reduce -> detail
        is ProtocolException.Adapter -> detail
        is ProtocolException.Refusal -> detail
    }

/** The name of the table class of this error: the core's `errorClass(kind, code)`. */
val ProtocolException.className: String
    get() = errorClass(kind, code)

/** This error as an instance of its table class (the original is its `cause`). */
fun ProtocolException.toRunnerProtocolError(): RunnerProtocolError =
    runnerProtocolError(className, code, kind, "$code: $detail", this)

/** A panic caught at the boundary as the table's class for kind `panic`. */
fun InternalException.toRunnerProtocolError(): RunnerProtocolError =
    runnerProtocolError(errorClass("panic", "panic"), "panic", "panic", "panic: ${message ?: ""}", this)

/** A link's error event as the table's class for kind `transport` (HTTP status in the message). */
fun LinkEvent.Error.toRunnerProtocolError(): RunnerProtocolError =
    runnerProtocolError(
        errorClass("transport", code), code, "transport",
        "$code" + (status?.let { " (HTTP $it)" } ?: "") + ": $detail", null,
    )

/** Runs [block], rethrowing every core error as its table class. */
inline fun <T> runnerProtocol(block: () -> T): T =
    try {
        block()
    } catch (e: ProtocolException) {
        throw e.toRunnerProtocolError()
    } catch (e: InternalException) {
        throw e.toRunnerProtocolError()
    }
