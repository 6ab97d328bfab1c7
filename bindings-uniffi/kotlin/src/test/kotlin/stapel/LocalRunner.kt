package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/**
 * Area `local`: the local-run machine of seed 002 through the Kotlin API; every step
 * compares the full output list and the timer. (The Rust runner's extra lifecycle oracle
 * is not repeated here: the expectations are the same vectors.)
 */
object LocalRunner {
    /** `<key>` (JSON value → compact text plus `\n`), `<key>_text` (as is) or `<key>_hex`. */
    private fun bytes(input: JsonNode, key: String): ByteArray? {
        input.get(key)?.let { return (Json.text(it) + "\n").toByteArray(Charsets.UTF_8) }
        input.get("${key}_text")?.let { return (if (it.isTextual) it.asText() else throw VectorFailure("${key}_text must be a string")).toByteArray(Charsets.UTF_8) }
        input.get("${key}_hex")?.let { return hex(it.asText()) }
        return null
    }

    private fun optInt(v: JsonNode, key: String): Int? {
        val n = v.get(key) ?: return null
        if (n.isNull) return null
        if (!n.canConvertToInt()) throw VectorFailure("$key must be an integer or null")
        return n.asInt()
    }

    private fun parseInput(input: JsonNode): LocalInput {
        bytes(input, "controller")?.let { return LocalInput.ControllerBytes(it) }
        if (input.has("controller_eof")) return LocalInput.ControllerEof
        bytes(input, "harness")?.let { return LocalInput.HarnessStdout(it) }
        bytes(input, "stderr")?.let { return LocalInput.HarnessStderr(it) }
        input.get("harness_spawned")?.let { s ->
            val pid = s.get("pid")?.takeIf { it.canConvertToLong() }?.asLong() ?: throw VectorFailure("harness_spawned needs a u32 pid")
            if (pid < 0 || pid > 0xffffffffL) throw VectorFailure("harness_spawned needs a u32 pid")
            return LocalInput.HarnessSpawned(pid.toUInt())
        }
        input.get("harness_spawn_failed")?.let { return LocalInput.HarnessSpawnFailed(it.str("message") ?: throw VectorFailure("harness_spawn_failed needs a message")) }
        input.get("harness_exited")?.let { return LocalInput.HarnessExited(optInt(it, "code"), optInt(it, "signal")) }
        if (input.has("timeout")) return LocalInput.Timeout
        throw VectorFailure("unknown input ${Json.text(input)}")
    }

    private fun outputJson(o: LocalOutput): JsonNode = when (o) {
        is LocalOutput.ToController -> {
            val line = Json.parse(o.line)
            checkTyped(line, o.message ?: throw VectorFailure("controller line without a typed message: ${o.line}"))
            Json.obj().set("to_controller", line)
        }
        is LocalOutput.ToHarness -> Json.obj().set("to_harness", Json.parse(o.line))
        is LocalOutput.Spawn -> {
            val s = Json.obj().put("program", o.program)
            s.set<JsonNode>("args", Json.of(o.args))
            s.set<JsonNode>("env", Json.arr().addAll(o.env.map { Json.arr().add(it.name).add(it.value) }))
            s.put("new_process_group", o.newProcessGroup)
            Json.obj().set("spawn", s)
        }
        is LocalOutput.CloseHarnessStdin -> Json.obj().put("close_harness_stdin", true)
        is LocalOutput.Signal -> Json.obj().set("signal", Json.obj().put("group", o.group.toLong()).put("signal", o.signal.name))
        is LocalOutput.Exit -> Json.obj().put("exit", o.code)
        is LocalOutput.Unknown -> throw VectorFailure("unknown output ${o.debug}")
    }

    /** The typed stream message says what the line says. */
    private fun checkTyped(line: JsonNode, m: StreamItem) {
        val msg = line.get("message") ?: throw VectorFailure("controller line has no message")
        val typed: JsonNode = when (m) {
            is StreamItem.Event -> Json.obj().put("kind", "event").set("event", Json.parse(canonicalEventToJson(m.event)))
            is StreamItem.CommandReceipt -> Json.obj().put("kind", "command_receipt").put("commandId", m.commandId)
                .put("controllerSeq", m.controllerSeq.toLong()).put("status", m.status.name.lowercase()).put("detail", m.detail)
            is StreamItem.Diagnostic -> Json.obj().put("kind", "diagnostic").put("level", m.level.name.lowercase()).put("message", m.message)
        }
        if (!Json.same(typed, msg)) throw VectorFailure("typed stream message differs from the line\n  typed: ${Json.text(typed)}\n  line:  ${Json.text(msg)}")
        val again = streamItemFromLine(Json.text(line))
        if (again != m) throw VectorFailure("streamItemFromLine disagrees with the machine's typed message")
    }

    fun run(vector: JsonNode) {
        val cfg = Json.text(vector.get("config") ?: Json.obj())
        val wantConfigError = vector.get("steps").get(0)?.get("expect")?.get("config_error")
        val machine = try {
            LocalRun(cfg)
        } catch (e: ProtocolException.Config) {
            if (wantConfigError == null) throw VectorFailure("config refused: ${e.code} (key ${e.key})")
            check(0, "config_error", Json.obj().put("code", e.code).put("key", e.key), wantConfigError)
            return
        }
        if (wantConfigError != null) throw VectorFailure("config accepted, expected config_error ${Json.text(wantConfigError)}")
        var now = 0uL
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            input.get("now_ms")?.let { now = it.asLong().toULong() }
            val parsed = parseInput(input)
            val error: JsonNode = try {
                machine.handleInput(now, parsed)
                NullNode.instance
            } catch (e: ProtocolException.State) {
                Json.of(e.code)
            }
            val outputs = Json.arr()
            while (true) outputs.add(outputJson(machine.pollOutput() ?: break))
            val timeout = machine.pollTimeout()?.let { Json.of(it.toLong()) } ?: NullNode.instance
            for (key in listOf("outputs", "timeout")) if (!expect.has(key)) fail(i, "expect has no \"$key\"")
            check(i, "error", error, expect.get("error") ?: NullNode.instance)
            check(i, "outputs", outputs, expect.get("outputs"))
            check(i, "timeout", timeout, expect.get("timeout"))
        }
    }
}
