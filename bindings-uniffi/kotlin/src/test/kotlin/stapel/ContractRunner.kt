package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/** Area `contract`: models, resolution, the gateway machine and the rein helpers. */
object ContractRunner {
    private fun checkError(i: Int, got: JsonNode, want: JsonNode) {
        if (!want.isObject) fail(i, "expect.error must be an object")
        want.fields().forEach { (k, w) -> check(i, "error.$k", got.get(k), w) }
    }

    private fun contractError(e: ProtocolException.Contract): JsonNode =
        Json.obj().put("code", e.code).put("model", e.model).put("field", e.field)

    /** Compares a value or a `Contract` error with the step's `value` / `error`. */
    private fun outcome(i: Int, expect: JsonNode, block: () -> JsonNode) {
        val got = try {
            block()
        } catch (e: ProtocolException.Contract) {
            val want = expect.get("error") ?: fail(i, "unexpected error ${Json.text(contractError(e))}")
            checkError(i, contractError(e), want)
            return
        } catch (e: ProtocolException.Adapter) {
            val want = expect.get("error") ?: fail(i, "unexpected error ${e.code}")
            checkError(i, Json.obj().put("code", e.code), want)
            return
        }
        expect.get("error")?.let { fail(i, "expected error ${Json.text(it)}, got value ${Json.text(got)}") }
        check(i, "value", got, expect.get("value") ?: NullNode.instance)
    }

    private inline fun <reified T : ContractModel> model(i: Int, name: String, v: JsonNode?): T =
        contractParseModel(name, Json.text(v ?: NullNode.instance)) as? T ?: fail(i, "$name parsed as another model")

    private fun profile(i: Int, v: JsonNode?) = model<ContractModel.HarnessProfile>(i, "HarnessProfile", v).v
    private fun sandbox(i: Int, v: JsonNode?) = model<ContractModel.SandboxHandle>(i, "SandboxHandle", v).v
    private fun toolCall(i: Int, v: JsonNode?) = model<ContractModel.ToolCall>(i, "ToolCall", v).v

    fun run(vector: JsonNode) {
        val cfg = vector.get("config") ?: Json.obj()
        val catalogText = Json.text(cfg.get("catalog") ?: Json.obj())
        // The catalog as a record, read by the core's strict reader (a refusal is the
        // step's error where a step uses it).
        val catalog: Result<Catalog> = runCatching { contractParseCatalog(catalogText) }
        var gateway: GatewayMachine? = null
        var rein: ReinExecution? = null
        val sessionIds = ReinSessionIds()
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            when {
                input.has("parse") -> {
                    val p = input.get("parse")
                    outcome(i, expect) { Forms.model(contractParseModel(p.str("model") ?: fail(i, "parse.model"), Json.text(p.get("value")))) }
                }
                input.has("model_names") -> outcome(i, expect) { Json.of(contractModelNames()) }
                input.has("parse_catalog") -> outcome(i, expect) {
                    val c = contractParseCatalog(Json.text(input.get("parse_catalog")))
                    Json.obj().put("profiles", c.profiles.size).put("reins", c.reins.size)
                }
                input.has("resolve") -> {
                    val r = input.str("resolve") ?: fail(i, "resolve must be a string")
                    val got = try {
                        val ok = contractResolve(r, catalog.getOrThrow())
                        Json.obj().put("profile_id", ok.profile.profileId).put("rein_id", ok.rein.reinId)
                    } catch (e: ProtocolException.Refusal) {
                        val want = expect.get("refusal") ?: fail(i, "unexpected refusal ${e.code} ${e.reasons}")
                        val refusal = Json.obj().put("code", e.code)
                        refusal.set<JsonNode>("reasons", Json.of(e.reasons))
                        checkError(i, refusal, want)
                        null
                    }
                    if (got != null) {
                        expect.get("refusal")?.let { fail(i, "expected refusal ${Json.text(it)}, got ${Json.text(got)}") }
                        check(i, "resolved", got, expect.get("resolved"))
                    }
                }
                input.has("safe_identifier") -> outcome(i, expect) {
                    val s = input.str("safe_identifier") ?: fail(i, "safe_identifier")
                    val kind = input.get("kind")?.let { it.asText() }
                    val r = contractSafeIdentifier(s, kind) ?: fail(i, "unknown identifier kind $kind")
                    Json.obj().put("text", r.text).put("redacted", r.redacted)
                }
                input.has("looks_like_credential") -> outcome(i, expect) { Json.of(contractLooksLikeCredential(input.str("looks_like_credential")!!)) }
                input.has("is_sensitive_key") -> outcome(i, expect) { Json.of(contractIsSensitiveKey(input.str("is_sensitive_key")!!)) }
                input.has("is_credential_reference") -> outcome(i, expect) { Json.of(contractIsCredentialReference(input.str("is_credential_reference")!!)) }
                input.has("gateway") -> {
                    val gw = gateway ?: GatewayMachine(
                        catalog.getOrThrow(),
                        GatewayBounds(cfg.ulong("max_tool_calls"), cfg.ulong("max_evidence_refs"), cfg.ulong("max_evidence_artifacts")),
                    ).also { gateway = it }
                    val now = input.ulong("now_ms") ?: 0uL
                    val error: String? = try {
                        // The JSON form read by the core into the typed input, which is fed.
                        gw.handleInput(now, gatewayInputFromJson(Json.text(input.get("gateway"))))
                        null
                    } catch (e: ProtocolException.Contract) {
                        e.code
                    }
                    val outputs = Json.arr()
                    while (true) {
                        outputs.add(Forms.gatewayOutput(gw.pollOutput() ?: break))
                        if (outputs.size() > 64) fail(i, "gateway does not settle")
                    }
                    val want = expect.get("error")
                    when {
                        error == null && want != null -> fail(i, "expected error ${Json.text(want)}")
                        error != null && want == null -> fail(i, "unexpected error $error")
                        error != null -> checkError(i, Json.obj().put("code", error), want!!)
                    }
                    check(i, "outputs", outputs, expect.get("outputs") ?: Json.arr())
                    expect.get("finished")?.let { check(i, "finished", Json.of(gw.isFinished()), it) }
                    expect.get("stage")?.let { check(i, "stage", Json.of(gw.stage()), it) }
                    check(i, "poll_timeout", gw.pollTimeout()?.let { Json.of(it.toLong()) } ?: NullNode.instance, NullNode.instance)
                }
                input.has("rein_role_spec") -> outcome(i, expect) { Forms.roleSpec(reinRoleSpec(profile(i, input.get("rein_role_spec")))) }
                input.has("rein_session_map") -> outcome(i, expect) {
                    val m = input.get("rein_session_map")
                    Forms.stringMap(reinSessionMap(m.ulong("n") ?: fail(i, "rein_session_map.n"), sandbox(i, m.get("sandbox"))))
                }
                input.has("rein_initial_prompt") -> outcome(i, expect) {
                    val inputs = input.get("rein_initial_prompt").fields().asSequence().associate { (k, v) ->
                        k to (if (v.isTextual) v.asText() else fail(i, "rein inputs are strings"))
                    }
                    Json.of(reinInitialPrompt(inputs))
                }
                input.has("rein_start") -> outcome(i, expect) {
                    rein = ReinExecution(profile(i, input.get("rein_start")), input.ulong("now_ms") ?: 0uL)
                    NullNode.instance
                }
                input.has("rein_tool_call_prompt") -> outcome(i, expect) {
                    val r = rein ?: fail(i, "no rein_start")
                    Json.of(r.toolCallPrompt(toolCall(i, input.get("rein_tool_call_prompt"))))
                }
                input.has("rein_turn") -> outcome(i, expect) {
                    val r = rein ?: fail(i, "no rein_start")
                    r.recordTurn(Json.text(input.get("rein_turn")))
                    NullNode.instance
                }
                input.has("rein_open_session") -> outcome(i, expect) { Forms.stringMap(sessionIds.open(sandbox(i, input.get("rein_open_session")))) }
                input.has("rein_tool_result") -> outcome(i, expect) {
                    Forms.model(ContractModel.ToolResult(reinToolResult(input.str("rein_tool_result") ?: fail(i, "rein_tool_result"))))
                }
                input.has("rein_turn_error") -> outcome(i, expect) {
                    val e = input.get("rein_turn_error")
                    reinTurnErrorResult(e.str("code") ?: fail(i, "code"), e.str("message") ?: fail(i, "message"))
                        ?.let { Forms.model(ContractModel.ToolResult(it)) } ?: NullNode.instance
                }
                input.has("rein_summary") -> outcome(i, expect) {
                    val r = rein ?: fail(i, "no rein_start")
                    Forms.model(ContractModel.ExecutionSummary(r.summary(input.ulong("now_ms") ?: 0uL)))
                }
                else -> fail(i, "unknown input ${Json.text(input)}")
            }
            if (expect.has("usage") || expect.has("tool_calls")) {
                val r = rein ?: fail(i, "usage and tool_calls need a rein_start")
                expect.get("usage")?.let { check(i, "usage", Forms.usage(r.usage()), it) }
                expect.get("tool_calls")?.let { check(i, "tool_calls", Json.of(r.toolCalls().toLong()), it) }
            }
        }
    }
}
