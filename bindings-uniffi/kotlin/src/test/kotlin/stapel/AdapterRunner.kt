package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/**
 * Area `adapter`: RoleSpec, usage mapping, TurnResult, the agent turn, the subprocess
 * machine, all through the typed records; each value is written as its JSON form here
 * (`Forms`) and compared with the vector.
 */
object AdapterRunner {
    private fun checkError(i: Int, e: ProtocolException.Adapter, want: JsonNode) {
        if (!want.isObject) fail(i, "expect.error must be an object")
        val got = Json.parse(e.json)
        want.fields().forEach { (k, w) -> check(i, "error.$k", got.get(k), w) }
    }

    private fun outcome(i: Int, expect: JsonNode, block: () -> JsonNode) {
        val got = try {
            block()
        } catch (e: ProtocolException.Adapter) {
            val want = expect.get("error") ?: fail(i, "unexpected error ${e.code}: ${e.detail}")
            checkError(i, e, want)
            return
        }
        expect.get("error")?.let { fail(i, "expected error ${Json.text(it)}, got value ${Json.text(got)}") }
        check(i, "value", got, expect.get("value") ?: NullNode.instance)
    }

    /** A usage value as a host holding attributes would hand it over: known keys only, no nulls. */
    private fun asObject(value: JsonNode, keys: List<String>): JsonNode {
        if (!value.isObject) return value
        val out = Json.obj()
        for (k in keys) {
            val v = value.get(k) ?: continue
            if (v.isNull) continue
            val inner = usageDetailKeys(k)
            out.set<JsonNode>(k, if (inner != null && v.isObject) asObject(v, inner) else v)
        }
        return out
    }

    private fun spawn(i: Int, v: JsonNode): SubprocessSpawn {
        val command = v.get("command")?.takeIf { it.isArray }?.map { if (it.isTextual) it.asText() else fail(i, "open.command") } ?: fail(i, "open.command")
        val env = (v.get("env") as? ObjectNode)?.fields()?.asSequence()?.map { (k, x) ->
            EnvVar(k, if (x.isTextual) x.asText() else fail(i, "open.env values are strings"))
        }?.toList() ?: emptyList()
        return SubprocessSpawn(command, v.str("path") ?: "", env, v.str("llm_base_url"), v.str("cwd"))
    }

    fun run(vector: JsonNode) {
        val cfg = vector.get("config") ?: Json.obj()
        val session = SubprocessTurnMachine(cfg.ulong("max_line_bytes"), cfg.ulong("grace_ms"), cfg.get("map_usage")?.asBoolean())
        when (val start = cfg.str("start") ?: "attached") {
            "attached" -> session.handleInput(0uL, SubprocessEvent.Spawned(null, cfg.get("process_group")?.asBoolean() ?: false))
            "new" -> {}
            else -> throw VectorFailure("unknown config.start $start")
        }
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            when {
                input.has("agent_options") -> outcome(i, expect) {
                    val r = input.get("agent_options")
                    if (r.get("invocation")?.isObject != true) fail(i, "agent_options.invocation must be an object")
                    val p = r.get("system_prompt")
                    var spec = roleSpecFromInvocation(Json.text(r.get("invocation")), r.str("role"))
                    if (p != null) spec = roleSpecWithSystemPrompt(spec, p.takeIf { it.isTextual }?.asText())
                    Forms.agentOptions(agentOptions(spec))
                }
                input.has("agent_turn") -> outcome(i, expect) {
                    val t = input.get("agent_turn")
                    val blocks = t.get("text_blocks")?.takeIf { it.isArray } ?: fail(i, "agent_turn.text_blocks must be an array")
                    val result = t.get("result")
                    Forms.turnResult(agentTurn(blocks.map { if (it.isTextual) it.asText() else fail(i, "text blocks are strings") },
                        result != null, result?.get("usage")?.let(Json::text)))
                }
                input.has("host_fault") -> outcome(i, expect) {
                    val f = input.get("host_fault")
                    val code = f.str("code") ?: fail(i, "host_fault.code")
                    val e = adapterHostFault(code, f.str("message") ?: fail(i, "host_fault.message"))
                    when (e) {
                        null -> NullNode.instance
                        is ProtocolException.Adapter -> {
                            if (e.code != code) fail(i, "host_fault($code) built ${e.code}")
                            throw e
                        }
                        else -> fail(i, "host_fault built ${e::class.simpleName}")
                    }
                }
                input.has("role_spec") -> outcome(i, expect) {
                    val r = input.get("role_spec")
                    if (r.get("invocation")?.isObject != true) fail(i, "role_spec.invocation must be an object")
                    val spec = roleSpecFromInvocation(Json.text(r.get("invocation")), r.str("role"))
                    expect.get("system_prompt")?.let { check(i, "system_prompt", Json.of(roleSpecSystemPrompt(spec)), it) }
                    Forms.roleSpec(spec)
                }
                input.has("usage") -> outcome(i, expect) {
                    val u = input.get("usage")
                    val shape = when (u.str("shape")) {
                        "anthropic" -> UsageShape.ANTHROPIC
                        "openai" -> UsageShape.OPENAI
                        "mapping" -> UsageShape.MAPPING
                        else -> fail(i, "unknown usage form ${u.get("shape")}")
                    }
                    val thinking = u.ulong("thinking")
                    val asObject = u.get("as_object")?.asBoolean() == true
                    val value = if (asObject) {
                        asObject(u.get("value"), usageKeys(shape) ?: fail(i, "as_object with shape ${u.str("shape")}, which has no attribute keys"))
                    } else {
                        u.get("value") ?: NullNode.instance
                    }
                    val split = usageFrom(shape, Json.text(value), thinking)
                    expect.get("total_tokens")?.let { check(i, "total_tokens", Json.of(usageTotalTokens(split).toLong()), it) }
                    Forms.usage(split)
                }
                input.has("turn_result") -> outcome(i, expect) { Forms.turnResult(turnResultFromJson(Json.text(input.get("turn_result")))) }
                else -> machineStep(i, session, input, expect)
            }
        }
    }

    private fun machineStep(i: Int, session: SubprocessTurnMachine, input: JsonNode, expect: JsonNode) {
        val now = input.ulong("now_ms") ?: 0uL
        val outputs = Json.arr()
        fun drain() {
            while (true) outputs.add(Forms.subprocessOutput(session.pollOutput() ?: return))
        }
        fun text(key: String): String = input.str(key) ?: fail(i, "$key must be a string")
        var error: ProtocolException.Adapter? = null
        fun feed(e: SubprocessEvent): Boolean = try {
            session.handleInput(now, e)
            true
        } catch (ex: ProtocolException.Adapter) {
            error = ex
            false
        }
        val simple: SubprocessEvent? = when {
            input.has("open") -> SubprocessEvent.Open(spawn(i, input.get("open")))
            input.has("spawned") -> input.get("spawned").let { s ->
                SubprocessEvent.Spawned(s.get("pid")?.takeIf { it.isIntegralNumber }?.asLong()?.toUInt(), s.get("process_group")?.asBoolean() ?: false)
            }
            input.has("spawn_failed") -> SubprocessEvent.SpawnFailed(text("spawn_failed"))
            input.has("stdin_write_failed") -> SubprocessEvent.StdinWriteFailed(text("stdin_write_failed"))
            input.has("exited") -> SubprocessEvent.Exited
            input.has("close") -> SubprocessEvent.Close
            input.has("timeout") -> SubprocessEvent.Timeout
            else -> null
        }
        val stdout = bytesOf(input, "stdout")
        when {
            simple != null -> { feed(simple); drain() }
            input.has("start_turn") -> { feed(SubprocessEvent.StartTurn(text("start_turn"))); drain() }
            stdout != null -> {
                val size = input.get("chunk_size")?.asInt() ?: 0
                val chunk = if (size <= 0) maxOf(stdout.size, 1) else size
                var start = 0
                while (start < stdout.size) {
                    val piece = stdout.copyOfRange(start, minOf(start + chunk, stdout.size))
                    start += chunk
                    if (!feed(SubprocessEvent.Stdout(piece))) break
                    drain()
                }
            }
            input.has("eof") -> { feed(SubprocessEvent.Eof); drain() }
            else -> fail(i, "unknown input ${Json.text(input)}")
        }
        val want = expect.get("error")
        val e = error
        when {
            e == null && want != null -> fail(i, "expected error ${Json.text(want)}")
            e != null && want == null -> fail(i, "unexpected error ${e.code}: ${e.detail}")
            e != null -> checkError(i, e, want!!)
        }
        check(i, "outputs", outputs, expect.get("outputs") ?: Json.arr())
        expect.get("state")?.let {
            val got = if (session.isClosed()) "closed" else if (session.inTurn()) "in_turn" else "idle"
            check(i, "state", Json.of(got), it)
        }
        expect.get("lifecycle")?.let { check(i, "lifecycle", Json.of(session.lifecycle()), it) }
        expect.get("result_line")?.let { check(i, "result_line", session.resultLine()?.let { t -> Json.parse(t) } ?: NullNode.instance, it) }
        expect.get("timeout")?.let { check(i, "timeout", session.pollTimeout()?.let { t -> Json.of(t.toLong()) } ?: NullNode.instance, it) }
    }
}
