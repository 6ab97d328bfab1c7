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
    fun aDirectByteBufferDecodesInPlaceLikeBytes() {
        val bytes = frame.toByteArray()
        val direct = java.nio.ByteBuffer.allocateDirect(bytes.size + 4)
        direct.put(byteArrayOf(1, 2)).put(bytes).put(byteArrayOf(3, 4)).flip()
        // UniFFI 0.32.2 passes the buffer's base address with `remaining()` as the length,
        // so the frame must start at the buffer's position 0: hand over a `slice()`.
        direct.position(2).limit(2 + bytes.size)
        val frameView = direct.slice()
        assertEquals(decode(bytes, true), decodeDirect(frameView, true))
        checkFrameDirect(frameView, true)
        assertEquals("not_json", assertThrows<ProtocolException.Decode> { decodeDirect(frameView.limit(bytes.size - 1), false) }.code)
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
    fun aTaskDeclaredTwiceInAResumeIsRefusedLikeADuplicateKey() {
        val twice = listOf(ResumeEntry("T-1", 1uL), ResumeEntry("T-1", 2uL))
        val e = assertThrows<ProtocolException.Decode> { encode(Message.Hello(Hello(projectId = "p", runnerVersion = "1", resume = twice))) }
        assertEquals("duplicate_key", e.code)
        // The same frame as text is refused by the decoder with the same code.
        assertEquals("duplicate_key", assertThrows<ProtocolException.Decode> {
            decodeText("""{"type":"hello","project_id":"p","runner_version":"1","resume":{"T-1":1,"T-1":2}}""", false)
        }.code)
        assertEquals("duplicate_key", assertThrows<ProtocolException.Decode> { ConnectionState(Role.HUB, null).replayFor(twice) }.code)
    }

    @Test
    fun usageRulesAreTheCores() {
        val openai = """{"input_tokens":10,"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3}}"""
        assertEquals(UsageSplit(0uL, 0uL, 10uL, 4uL, 3uL), usageFrom(UsageShape.OPENAI, openai))
        // A separate thinking count only applies to Anthropic usage: refused, not ignored.
        val e = assertThrows<ProtocolException.Adapter> { usageFrom(UsageShape.OPENAI, openai, 2uL) }
        assertEquals("invalid_usage", e.code)
        assertEquals(null, e.lineNumber)
        assertEquals("invalid_usage", assertThrows<ProtocolException.Adapter> { usageFrom(UsageShape.MAPPING, "{}", 1uL) }.code)
        assertEquals(null, usageKeys(UsageShape.MAPPING))
        assertTrue(usageKeys(UsageShape.ANTHROPIC)!!.contains("cache_read_input_tokens"))
        assertEquals(17uL, usageTotalTokens(usageFrom(UsageShape.OPENAI, openai)))
        assertEquals("invalid_usage", assertThrows<ProtocolException.Adapter> {
            turnResultValidate(TurnResult("x", UsageSplit(0uL, 0uL, 0uL, 1uL shl 53, 0uL)))
        }.code)
    }

    @Test
    fun roleSpecsAndAgentOptionsAreRecords() {
        val spec = roleSpecFromInvocation("""{"model":"m-1","allowed_tools":["Read"],"budget":{"max_turns":3},"x":[1]}""", "reviewer")
        assertEquals("reviewer", spec.role)
        assertEquals("m-1", spec.model)
        assertEquals(listOf("Read"), spec.allowedTools)
        assertEquals("""{"max_turns":3}""", spec.budget)
        assertEquals("""{"x":[1]}""", spec.extra)
        val withPrompt = roleSpecWithSystemPrompt(spec, "be brief")
        assertEquals("be brief", roleSpecSystemPrompt(withPrompt))
        val options = agentOptions(withPrompt)
        assertEquals("m-1", options.model)
        assertEquals("be brief", options.systemPrompt)
        assertEquals("3", options.maxTurns)
        // A record the host breaks (an open key that is a declared field of the wrong
        // type) is refused by the core's reader; an empty session is kept as given.
        val broken = assertThrows<ProtocolException.Adapter> { agentOptions(spec.copy(model = null, extra = """{"model":5}""")) }
        assertEquals("invalid_invocation", broken.code)
        assertEquals("", roleSpecFromInvocation("""{"session":""}""", "reviewer").session)
    }

    @Test
    fun contractErrorsMirrorTheCore() {
        val unknown = assertThrows<ProtocolException.Contract> { contractParseModel("Nope", "{}") }
        assertEquals("unknown_model", unknown.code)
        assertEquals("", unknown.model)
        assertEquals("", unknown.field)
        val gw = GatewayMachine()
        val bad = assertThrows<ProtocolException.Contract> {
            gw.handleInput(0uL, GatewayInput.Execute(ExecutionRequest(harnessProfileRef = "", repository = "r", title = "t", description = "d"), emptyMap(), emptyList()))
        }
        assertEquals("ExecutionRequest", bad.model, bad.toString())
        assertTrue(bad.field!!.endsWith("harness_profile_ref"), bad.field)
        val order = assertThrows<ProtocolException.Contract> { gw.handleInput(0uL, GatewayInput.SandboxDestroyed) }
        assertEquals("unexpected_input", order.code)
        assertEquals(null, order.model)
        assertEquals(null, order.field)
    }

    @Test
    fun aGatewayRunsOnTypedInputsAndOutputs() {
        val profile = HarnessProfile(
            contractVersion = "1.0", profileId = "p-1", rein = "r-1", enabled = true, model = "m", sandboxProfile = "sb",
            allowedTools = listOf("echo"), credentialRefs = emptyList(), metadata = "{}",
        )
        val catalog = Catalog(listOf(profile), listOf(ReinDescriptor("r-1", "1.0", ToolEventVisibility.COMPLETE, "{}")))
        assertEquals("p-1", contractResolve("p-1", catalog).profile.profileId)
        val gw = GatewayMachine(catalog)
        val call = ToolCall(callId = "c-1", name = "echo", arguments = """{"text":"hi"}""")
        gw.handleInput(0uL, GatewayInput.Execute(ExecutionRequest(harnessProfileRef = "p-1", repository = "repo", title = "t", description = "d"), mapOf("prompt" to "go"), listOf(call)))
        val create = gw.pollOutput() as GatewayOutput.CreateSandbox
        assertEquals("sb", create.sandboxProfile)
        gw.handleInput(1uL, GatewayInput.SandboxCreated(SandboxHandle("sb-1")))
        val start = gw.pollOutput() as GatewayOutput.StartSession
        assertEquals("sb-1", start.sandbox.sandboxId)
        assertEquals(mapOf("prompt" to "go"), start.inputs)
        gw.handleInput(2uL, GatewayInput.SessionStarted(reinSessionMap(1uL, start.sandbox)))
        val dispatch = gw.pollOutput() as GatewayOutput.DispatchTool
        assertEquals(call, dispatch.call)
        gw.handleInput(3uL, GatewayInput.ToolDispatched(ToolResult(ok = true, output = "\"hi\"")))
        assertTrue(gw.pollOutput() is GatewayOutput.EndSession)
        gw.handleInput(4uL, GatewayInput.SessionEnded(ExecutionSummary(tokens = UsageSplit(1uL, 0uL, 2uL, 3uL, 0uL), toolEventVisibility = ToolEventVisibility.COMPLETE, toolEventCount = 1uL)))
        assertTrue(gw.pollOutput() is GatewayOutput.DestroySandbox)
        gw.handleInput(5uL, GatewayInput.SandboxDestroyed)
        val result = (gw.pollOutput() as GatewayOutput.Result).result
        assertTrue(result.ok)
        assertEquals(Outcome.SUCCEEDED, result.evidence.outcome)
        assertEquals(TeardownStatus.DESTROYED, result.evidence.teardown)
        assertEquals(1uL, result.evidence.toolCalls.succeeded)
        assertEquals("\"hi\"", result.toolOutput)
        assertEquals(null, gw.pollOutput())
    }

    @Test
    fun canonicalEventsAreRecordsTheReducerTakes() {
        val ev = CanonicalEvent(
            sourceEventId = "event_run_1_001", sourceSeq = 1uL, sourceInstanceId = "runner_1", sourceKind = SourceKind.RUNNER,
            runId = "run_1", normalizedSessionId = "sess_1", eventType = "workspace.ready", priority = 1u.toUByte(),
            emittedAt = "2026-01-01T00:00:00.000Z", payload = "{}",
        )
        assertEquals(ev, canonicalEventFromJson(canonicalEventToJson(ev)))
        val r = SessionReducer("""{"run_id":"run_1"}""")
        assertEquals("applied", r.apply(ev))
        assertEquals("duplicate", r.apply(ev))
        assertEquals("applied_after_gap", r.apply(ev.copy(sourceEventId = "event_run_1_003", sourceSeq = 3uL)))
        // Bound to another run: refused by the reducer with its code.
        assertThrows<ProtocolException.Reduce> { r.apply(ev.copy(sourceEventId = "event_x_001", runId = "run_x")) }
        assertEquals("missing_field", assertThrows<ProtocolException.State> { canonicalEventFromJson("""{"schema":"paperclip.prp.event.v1"}""") }.code)
    }

    @Test
    fun framingErrorsNameTheirLine() {
        val f = LineFramer(LineFramerConfig(maxLineBytes = 4uL))
        val items = f.pushAll("ok\ntoo long\nok\n".toByteArray())
        val err = items[1] as FramedLine.Error
        assertEquals("line_too_long", err.code)
        assertEquals(2uL, err.lineNumber)
    }

    @Test
    fun swiftSourcesWereGeneratedFromTheSameLibrary() {
        val dir = File(System.getProperty("uniffi.generated.dir") ?: "target/generated", "swift")
        val swift = File(dir, "StapelRunnerProtocol.swift")
        val header = File(dir, "StapelRunnerProtocolFFI.h")
        val modulemap = File(dir, "StapelRunnerProtocolFFI.modulemap")
        for (f in listOf(swift, header, modulemap)) assertTrue(f.isFile, "missing ${f.path}")
        val text = swift.readText()
        for (name in listOf("func decode(", "func encode(", "class HubSession", "class RunnerSession", "enum ProtocolError", "class LocalRun", "class GatewayMachine",
            "class RunnerLink", "class HubLink", "enum LinkEvent", "func errorClass(", "func errorClasses(",
            "class RowTracker", "class Lease", "struct RunnerRows", "enum RowWrite", "func closeFor(", "func rows()")) {
            assertTrue(text.contains(name), "Swift sources lack $name")
        }
    }
}
