package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/**
 * The JSON forms the vectors are written in, built from the typed records the Kotlin API
 * returns (field by field), so each comparison checks the records' typed fields. Where
 * the core defines a form with rules of its own (a role spec's field order and omissions,
 * a contract model's normalized form), the record goes back through the core's strict
 * reader (`roleSpecToJson`, `contractModelToJson`): that checks the record → core half of
 * the conversion too.
 */
object Forms {
    private fun open(text: String): JsonNode = Json.parse(text)

    private fun strMap(m: Map<String, String>): ObjectNode {
        val o = Json.obj()
        for ((k, v) in m.toSortedMap()) o.put(k, v)
        return o
    }

    fun usage(u: UsageSplit): JsonNode = Json.obj()
        .put("cache_read", u.cacheRead.toLong())
        .put("cache_write", u.cacheWrite.toLong())
        .put("fresh_input", u.freshInput.toLong())
        .put("output", u.output.toLong())
        .put("thinking", u.thinking.toLong())

    fun turnResult(r: TurnResult): JsonNode = Json.obj().put("text", r.text).set("usage", usage(r.usage))

    fun roleSpec(s: RoleSpec): JsonNode = Json.parse(roleSpecToJson(s))

    fun agentOptions(o: AgentOptions): JsonNode {
        val out = Json.obj()
        o.model?.let { out.put("model", it) }
        if (o.allowedTools.isNotEmpty()) out.set<JsonNode>("allowed_tools", Json.of(o.allowedTools))
        o.systemPrompt?.let { out.put("system_prompt", it) }
        if (o.env.isNotEmpty()) {
            val env = Json.obj()
            for (e in o.env) env.put(e.name, e.value)
            out.set<JsonNode>("env", env)
        }
        o.maxTurns?.let { out.set<JsonNode>("max_turns", open(it)) }
        o.maxBudgetUsd?.let { out.set<JsonNode>("max_budget_usd", open(it)) }
        return out
    }

    fun subprocessOutput(o: SubprocessOutput): JsonNode = when (o) {
        is SubprocessOutput.Spawn -> {
            val r = o.request
            val env = Json.obj()
            for (e in r.env) env.put(e.name, e.value)
            val req = Json.obj().put("program", r.program)
            req.set<JsonNode>("args", Json.of(r.args))
            req.set<JsonNode>("env", env)
            req.set<JsonNode>("cwd", r.cwd?.let { Json.of(it) } ?: NullNode.instance)
            req.put("new_process_group", r.newProcessGroup)
            Json.obj().put("type", "spawn").set("request", req)
        }
        is SubprocessOutput.WriteStdin -> Json.obj().put("type", "write_stdin").put("data", o.data)
        is SubprocessOutput.CloseStdin -> Json.obj().put("type", "close_stdin")
        is SubprocessOutput.Signal -> Json.obj().put("type", "signal")
            .put("target", if (o.target == SignalTarget.GROUP) "group" else "process")
            .put("signal", if (o.signal == StopSignal.KILL) "KILL" else "TERM")
        is SubprocessOutput.CloseStdout -> Json.obj().put("type", "close_stdout")
        is SubprocessOutput.Progress -> Json.obj().put("type", "progress").set("event", open(o.event))
        is SubprocessOutput.TurnResult -> {
            val t = Json.obj().put("type", "turn_result").put("text", o.result.text)
            t.set("usage", usage(o.result.usage))
        }
        is SubprocessOutput.Error -> {
            val e = Json.obj().put("type", "error")
            val form = open(o.json) as ObjectNode
            if (form.get("code")?.asText() != o.code) throw VectorFailure("error record code ${o.code} differs from its JSON form ${o.json}")
            e.setAll<JsonNode>(form)
        }
        is SubprocessOutput.Unknown -> throw VectorFailure("unknown subprocess output ${o.json}")
    }

    fun model(m: ContractModel): JsonNode = Json.parse(contractModelToJson(m))

    fun gatewayOutput(o: GatewayOutput): JsonNode = when (o) {
        is GatewayOutput.CreateSandbox -> Json.obj().put("type", "create_sandbox")
            .put("harness_profile_ref", o.harnessProfileRef).put("sandbox_profile", o.sandboxProfile)
            .put("repository", o.repository)
        is GatewayOutput.StartSession -> {
            val s = Json.obj().put("type", "start_session")
            s.set<JsonNode>("profile", model(ContractModel.HarnessProfile(o.profile)))
            s.set<JsonNode>("inputs", strMap(o.inputs))
            s.set<JsonNode>("sandbox", model(ContractModel.SandboxHandle(o.sandbox)))
            s
        }
        is GatewayOutput.DispatchTool -> {
            val s = Json.obj().put("type", "dispatch_tool")
            s.set<JsonNode>("session", strMap(o.session))
            s.set<JsonNode>("call", model(ContractModel.ToolCall(o.call)))
            s
        }
        is GatewayOutput.EndSession -> Json.obj().put("type", "end_session").set("session", strMap(o.session))
        is GatewayOutput.DestroySandbox -> Json.obj().put("type", "destroy_sandbox")
            .set("sandbox", model(ContractModel.SandboxHandle(o.sandbox)))
        is GatewayOutput.DiscardSandbox -> Json.obj().put("type", "discard_sandbox")
        is GatewayOutput.Result -> {
            if (o.result.ok != (o.result.evidence.outcome == Outcome.SUCCEEDED)) throw VectorFailure("result.ok does not follow the outcome")
            Json.obj().put("type", "result").set("result", model(ContractModel.GatewayResult(o.result)))
        }
        is GatewayOutput.Unknown -> throw VectorFailure("unknown gateway output ${o.json}")
    }

    fun stringMap(m: Map<String, String>): JsonNode = strMap(m)
}
