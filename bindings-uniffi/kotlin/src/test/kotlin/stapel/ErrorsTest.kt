package stapel

import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File

/**
 * The one error table on the JVM: the Kotlin exception classes are generated from the
 * core's table (`ErrorClasses.kt`, checked here against `errorClasses()`; with
 * `STAPEL_REGENERATE=1` this test rewrites it), and real core errors raised through the
 * public API get the class `errorClass(kind, code)` names, with their code.
 */
class ErrorsTest {
    companion object {
        const val PACKAGE = "dev.stapel.runnerprotocol"

        /** The Kotlin source of the table's classes (what ErrorClasses.kt must hold). */
        fun render(classes: List<ErrorClassInfo>): String {
            fun doc(text: String, indent: String = "") =
                "$indent/** ${text.replace("*/", "*&#47;")} */\n"
            val root = classes.single { it.parent == null }
            val b = StringBuilder()
            b.append("// Generated from the core's error table (errorClasses(), core/src/errors.rs) by\n")
            b.append("// ErrorsTest in bindings-uniffi/kotlin/src/test; do not edit. Regenerate with\n")
            b.append("// STAPEL_REGENERATE=1 bindings-uniffi/scripts/test.\n")
            b.append("package $PACKAGE\n\n")
            b.append("/**\n * ${root.doc.replace("*/", "*&#47;")}\n *\n")
            b.append(" * @property code the core's stable snake_case code.\n")
            b.append(" * @property kind the error's kind in the core's error table (`decode`, `session`, `link`, …).\n */\n")
            b.append("open class ${root.name}(val code: String, val kind: String, message: String, cause: Throwable? = null) :\n")
            b.append("    RuntimeException(message, cause)\n")
            for (c in classes) {
                if (c.parent == null) continue
                b.append("\n").append(doc(c.doc))
                b.append("open class ${c.name}(code: String, kind: String, message: String, cause: Throwable? = null) :\n")
                b.append("    ${c.parent}(code, kind, message, cause)\n")
            }
            b.append("\n/** An instance of the table's class named [className] (the root class for a name the table does not have). */\n")
            b.append("fun runnerProtocolError(className: String, code: String, kind: String, message: String, cause: Throwable? = null): ${root.name} =\n")
            b.append("    when (className) {\n")
            for (c in classes) {
                if (c.parent == null) continue
                b.append("        \"${c.name}\" -> ${c.name}(code, kind, message, cause)\n")
            }
            b.append("        else -> ${root.name}(code, kind, message, cause)\n")
            b.append("    }\n")
            b.append("\n/** The names of the table's classes, parents before children. */\n")
            b.append("val RUNNER_PROTOCOL_ERROR_CLASSES: List<String> = listOf(\n")
            for (c in classes) b.append("    \"${c.name}\",\n")
            b.append(")\n")
            return b.toString()
        }

        /** The class's chain of table classes, itself first (up to the root). */
        fun chain(c: Class<*>): List<String> {
            val out = mutableListOf<String>()
            var k: Class<*>? = c
            while (k != null && k != RuntimeException::class.java) {
                out += k.simpleName
                k = k.superclass
            }
            return out
        }

        fun tableChain(name: String): List<String> {
            val byName = errorClasses().associateBy { it.name }
            val out = mutableListOf<String>()
            var n: String? = name
            while (n != null) {
                out += n
                n = byName[n]?.parent
            }
            return out
        }
    }

    @Test
    fun theKotlinClassesAreGeneratedFromTheCoreTable() {
        val file = File(System.getProperty("kotlin.main.dir") ?: "src/main/kotlin", "dev/stapel/runnerprotocol/ErrorClasses.kt")
        val want = render(errorClasses())
        if (System.getenv("STAPEL_REGENERATE") == "1") file.writeText(want)
        assertEquals(want, file.readText(), "ErrorClasses.kt drifted from the core's table: run STAPEL_REGENERATE=1 bindings-uniffi/scripts/test")
        // The compiled classes are the table's: names, order and parents.
        assertEquals(errorClasses().map { it.name }, RUNNER_PROTOCOL_ERROR_CLASSES)
        for (c in errorClasses()) {
            val k = Class.forName("$PACKAGE.${c.name}")
            assertEquals(tableChain(c.name), chain(k), c.name)
            val e = runnerProtocolError(c.name, "x", "k", "m")
            assertSame(k, e.javaClass, c.name)
        }
    }

    /** [e]'s table class is [want], the core's choice for its kind and code, and so is its conversion. */
    private fun same(want: String, code: String, e: ProtocolException) {
        assertEquals(code, e.code)
        assertEquals(want, errorClass(e.kind, e.code), "errorClass(${e.kind}, ${e.code})")
        assertEquals(want, e.className)
        val t = e.toRunnerProtocolError()
        assertEquals(want, t.javaClass.simpleName)
        assertEquals(tableChain(want), chain(t.javaClass))
        assertEquals(code, t.code)
        assertEquals(e.kind, t.kind)
        assertSame(e, t.cause)
    }

    /** Through `runnerProtocol { }` too: the table class is what a caller catches. */
    private inline fun <reified T : RunnerProtocolError> raised(want: String, code: String, crossinline call: () -> Unit) {
        val e = assertThrows<ProtocolException> { call() }
        same(want, code, e)
        val t = assertThrows<T> { runnerProtocol { call() } }
        assertEquals(want, t.javaClass.simpleName)
        assertEquals(code, t.code)
    }

    @Test
    fun representativeCoreErrorsGetTheTableClassAndCode() {
        val hello = Hello(projectId = "p-1", runnerVersion = "0.1.0")
        // decode: unknown_type and schema_violation (both DecodeErrors).
        raised<UnknownMessageError>("UnknownMessageError", "unknown_type") {
            decode("""{"schema_version":1,"type":"task.nope"}""".toByteArray(), true)
        }
        raised<SchemaValidationError>("SchemaValidationError", "schema_violation") {
            decode("""{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1}""".toByteArray(), true)
        }
        raised<DecodeError>("DecodeError", "not_json") { decode("{".toByteArray(), true) }
        // config: the same ConfigError from every configuration reader.
        raised<ConfigError>("ConfigError", "unknown_key") { RunnerLink(hello, """{"nope":1}""") }
        raised<ConfigError>("ConfigError", "unknown_key") { HubSession("""{"nope":1}""") }
        raised<ConfigError>("ConfigError", "unknown_key") { SessionReducer("""{"nope":1}""") }
        raised<ConfigError>("ConfigError", "wrong_type") { LocalRun("""{"max_line_bytes":"64k"}""") }
        val cfg = assertThrows<ProtocolException.Config> { RunnerLink(hello, """{"session":{"nope":1}}""") }
        assertEquals("session.nope", cfg.key)
        same("ConfigError", "unknown_key", cfg)
        // session / sequencing: backpressure when the kept log is full.
        val link = RunnerLink(hello, """{"session":{"sequencing":{"max_outbox_frames":1}}}""")
        val progress = Message.TaskProgress(TaskProgress(taskId = "T-1", attempt = 1uL, kind = "log", payload = "{}"))
        link.send(0uL, progress)
        raised<ProtocolStateError>("ProtocolStateError", "backpressure") { link.send(0uL, progress) }
        val state = ConnectionState(Role.RUNNER, """{"max_outbox_frames":1}""")
        state.emit(progress)
        raised<ProtocolStateError>("ProtocolStateError", "backpressure") { state.emit(progress) }
        // link: a hub input fed to the runner's link.
        raised<ProtocolStateError>("ProtocolStateError", "wrong_side") { link.handleInput(0uL, LinkInput.Attach(1uL)) }
        raised<ProtocolStateError>("ProtocolStateError", "invalid_close_code") { link.handleInput(0uL, LinkInput.Stop(1005u, "")) }
        // reducer: an invalid canonical event.
        raised<ReducerError>("ReducerError", "invalid_event") { SessionReducer().applyJson("{}") }
        // adapter: a thinking count for a shape that has none.
        raised<AdapterError>("AdapterError", "invalid_usage") { usageFrom(UsageShape.MAPPING, "{}", 1uL) }
        // store: rows that are not a hub's (kind `store`, code `invalid_rows`).
        val badRows = RunnerRows(tasks = listOf(TaskRow(taskId = "T-1", nextSeq = 0uL, assignedAttempt = 0uL, forgotten = false)))
        raised<StoreError>("StoreError", "invalid_rows") { HubSession.fromRows(badRows) }
        raised<StoreError>("StoreError", "invalid_rows") { HubLink.fromRows(badRows) }
        // A store host's `fenced` (raised by the host, not by a core call) is the table's
        // FencedError, a StoreError.
        val fenced = runnerProtocolError(errorClass("store", "fenced"), "fenced", "store", "fenced")
        assertTrue(fenced is FencedError && fenced is StoreError)
        assertEquals(tableChain("FencedError"), chain(fenced.javaClass))
        // panic: caught by UniFFI, the table's class for kind `panic`.
        val p = assertThrows<InternalException> { panicProbe("boom") }.toRunnerProtocolError()
        assertEquals(errorClass("panic", "panic"), p.javaClass.simpleName)
        assertEquals("PanicError", p.javaClass.simpleName)
        assertThrows<PanicError> { runnerProtocol { panicProbe("again") } }
        // transport: a link's error event.
        val t = LinkEvent.Error("upgrade_refused", "HTTP 401", 401u).toRunnerProtocolError()
        assertEquals("TransportError", t.javaClass.simpleName)
        assertEquals(errorClass("transport", "upgrade_refused"), t.javaClass.simpleName)
        assertEquals("upgrade_refused", t.code)
        assertTrue(t.message!!.contains("401"))
    }
}
