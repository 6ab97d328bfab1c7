package stapel

import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File

/** The codec, the records, the exceptions and the panic boundary, idiomatically. */
class CodecTest {
    private val frame =
        """{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"usage","attempt":1,""" +
            """"payload":{"usage":{"fresh_input":10,"output":20,"cache_read":0,"cache_write":0,"thinking":5}},"trace":"x1","z":[1,{"a":null}]}"""

    @Test
    fun decodeKeepsUnknownFieldsAndReencodesByteForByte() {
        val m = decode(frame.toByteArray(), validate = true)
        val p = (m as Message.TaskProgress).v
        assertEquals("T-1", p.taskId)
        assertEquals(3uL, p.seq)
        assertEquals("usage", p.kind)
        assertEquals("""{"trace":"x1","z":[1,{"a":null}]}""", p.extra)
        assertEquals(frame, encode(m))
        assertEquals("task.progress", messageTypeName(m))
    }

    @Test
    fun recordsBuildMessagesWithTheCoresDefaults() {
        val cancel = Message.TaskCancel(TaskCancel(taskId = "T-9", reason = "stop"))
        assertEquals("""{"schema_version":1,"type":"task.cancel","task_id":"T-9","reason":"stop","seq":0}""", encode(cancel))
        val hello = Message.Hello(Hello(projectId = "p", runnerVersion = "1", resume = listOf(ResumeEntry("b", 2uL), ResumeEntry("a", 1uL))))
        assertEquals(
            """{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1","resume":{"b":2,"a":1}}""",
            encode(hello),
        )
    }

    @Test
    fun schemaViolationsAreLocatedAndCoded() {
        val bad = """{"schema_version":2,"type":"task.progress","task_id":"","seq":"x","kind":"k","payload":{}}"""
        val e = assertThrows<ProtocolException.Decode> { decodeText(bad, validate = true) }
        assertEquals("schema_violation", e.code)
        val located = e.violations.map { it.location to it.rule }
        assertTrue(("schema_version" to "const") in located, located.toString())
        assertTrue(("seq" to "type") in located, located.toString())
        assertEquals(e.violations.map { it.location }, e.violations.map { it.location }.sorted())
        assertEquals(e.violations.size, e.lines.size)
    }

    @Test
    fun everyDecodeErrorHasItsStableCode() {
        fun code(text: String) = assertThrows<ProtocolException.Decode> { decodeText(text, validate = false) }.code
        assertEquals("not_json", code("{"))
        assertEquals("duplicate_key", code("""{"type":"ping","type":"ping"}"""))
        assertEquals("not_object", code("[]"))
        assertEquals("unknown_type", code("""{"type":"nope"}"""))
        assertEquals("not_json", assertThrows<ProtocolException.Decode> { decode(byteArrayOf(0xff.toByte()), false) }.code)
    }

    @Test
    fun anExtraThatIsNotAnObjectIsRefusedByTheCore() {
        val e = assertThrows<ProtocolException.Decode> { encode(Message.Ping(Ping(extra = "[1]"))) }
        assertEquals("not_object", e.code)
    }

    @Test
    fun machineAndConfigErrorsCarryCodes() {
        val state = ConnectionState(Role.RUNNER, null)
        val err = assertThrows<ProtocolException.State> { state.emit(Message.Hello(Hello(projectId = "p", runnerVersion = "1"))) }
        assertTrue(err.code.isNotEmpty())
        val cfg = assertThrows<ProtocolException.Config> { ConnectionState(Role.HUB, """{"nope":1}""") }
        assertEquals("unknown_key", cfg.code)
        assertEquals("nope", cfg.key)
    }

    @Test
    fun aPanicInRustIsAnExceptionNotACrash() {
        val e = assertThrows<InternalException> { panicProbe("boom") }
        assertTrue(e.message!!.contains("boom"), e.message)
        // The library and the JVM are still fine afterwards.
        assertEquals(frame, encode(decodeText(frame, true)))
        assertThrows<InternalException> { panicProbe("again") }
    }

    @Test
    fun snapshotsRoundTrip() {
        val s = ConnectionState(Role.HUB, "{}")
        val emitted = s.emit(Message.TaskCancel(TaskCancel(taskId = "T-1", reason = "r")))
        assertEquals(1uL, (emitted.message as Message.TaskCancel).v.seq)
        val bytes = s.snapshot()
        val r = ConnectionState.restore(bytes)
        assertTrue(r.sameAs(s))
        assertArrayEquals(bytes, r.snapshot())
    }

    @Test
    fun swiftSourcesWereGeneratedFromTheSameLibrary() {
        val dir = File(System.getProperty("uniffi.generated.dir") ?: "target/generated", "swift")
        val swift = File(dir, "StapelRunnerProtocol.swift")
        val header = File(dir, "StapelRunnerProtocolFFI.h")
        val modulemap = File(dir, "StapelRunnerProtocolFFI.modulemap")
        for (f in listOf(swift, header, modulemap)) assertTrue(f.isFile, "missing ${f.path}")
        val text = swift.readText()
        for (name in listOf("func decode(", "func encode(", "class HubSession", "class RunnerSession", "enum ProtocolError", "class LocalRun", "class GatewayMachine")) {
            assertTrue(text.contains(name), "Swift sources lack $name")
        }
    }
}
