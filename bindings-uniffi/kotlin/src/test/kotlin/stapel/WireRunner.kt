package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/** Area `wire`: decode, validate, encode through the Kotlin API. */
object WireRunner {
    private fun nested(depth: Int): JsonNode {
        var v: JsonNode = Json.arr()
        for (i in 1 until depth) v = Json.arr().add(v)
        return v
    }

    private fun withNest(input: JsonNode, obj: JsonNode): JsonNode {
        val nest = input.get("nest") ?: return obj
        val copy = obj.deepCopy<JsonNode>()
        if (copy is ObjectNode) copy.set<JsonNode>(nest.str("key") ?: "", nested(nest.get("depth").asInt()))
        return copy
    }

    private fun errorJson(e: ProtocolException.Decode): ObjectNode {
        val o = Json.obj()
        o.put("code", e.code)
        val vs = Json.arr()
        for (v in e.violations) vs.add(Json.obj().put("location", v.location).put("rule", v.rule))
        o.set<JsonNode>("violations", vs)
        o.set<JsonNode>("lines", Json.of(e.lines))
        o.put("text", e.detail)
        return o
    }

    fun run(vector: JsonNode) {
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            val validate = input.get("validate")?.asBoolean() ?: false
            val result: Result<Message> = runCatching {
                val bytes = bytesOf(input, "decode")
                val msg = when {
                    bytes != null -> decode(bytes, validate)
                    input.has("decode_utf16_hex") -> {
                        val b = hex(input.str("decode_utf16_hex")!!)
                        val units = List(b.size / 2) { (((b[2 * it].toInt() and 0xff) shl 8) or (b[2 * it + 1].toInt() and 0xff)).toUShort() }
                        decodeUtf16(units, validate)
                    }
                    input.has("check") -> checkAs(Json.text(input.get("check")), input.str("as") ?: "")
                    input.has("encode") -> messageFromJson(Json.text(withNest(input, input.get("encode"))), validate)
                    input.has("build") -> {
                        val build = input.get("build")
                        val m = messageFromJson(Json.text(build.get("fields")), validate)
                        withExtra(m, Json.text(withNest(input, build.get("extra") ?: Json.obj())))
                    }
                    else -> fail(i, "unknown input ${Json.text(input)}")
                }
                // Every message a step produces is encoded: one the core will not encode
                // fails the step with the core's error.
                encode(msg)
                msg
            }
            val want = expect.get("error")
            result.fold(
                onSuccess = { msg ->
                    if (want != null) fail(i, "expected error ${Json.text(want)}, decoded ${encode(msg)}")
                    expect.get("type")?.let { check(i, "type", Json.of(messageTypeName(msg)), it) }
                    expect.get("message")?.let { check(i, "message", Json.parse(messageToJson(msg)), it) }
                    expect.get("encoded")?.let { check(i, "encoded", Json.of(encode(msg)), it) }
                },
                onFailure = { e ->
                    if (e is VectorFailure) throw e
                    if (e !is ProtocolException.Decode) throw e
                    if (want == null) fail(i, "unexpected error ${e.code}: ${e.detail}")
                    val got = errorJson(e)
                    check(i, "error code", got.get("code"), want.get("code"))
                    want.get("violations")?.let { check(i, "violations", got.get("violations"), it) }
                    want.get("lines")?.let { check(i, "lines", got.get("lines"), it) }
                    want.get("text")?.let { check(i, "text", got.get("text"), it) }
                },
            )
        }
    }

    /** The message with its unknown fields (`extra`) extended by these members. */
    private fun withExtra(m: Message, extraJson: String): Message {
        fun merged(old: String): String {
            val o = Json.parse(old) as ObjectNode
            val add = Json.parse(extraJson)
            if (add is ObjectNode) add.fields().forEach { (k, v) -> o.set<JsonNode>(k, v) }
            return Json.text(o)
        }
        return when (m) {
            is Message.Hello -> Message.Hello(m.v.copy(extra = merged(m.v.extra)))
            is Message.TaskAssign -> Message.TaskAssign(m.v.copy(extra = merged(m.v.extra)))
            is Message.TaskProgress -> Message.TaskProgress(m.v.copy(extra = merged(m.v.extra)))
            is Message.TaskReport -> Message.TaskReport(m.v.copy(extra = merged(m.v.extra)))
            is Message.TaskCancel -> Message.TaskCancel(m.v.copy(extra = merged(m.v.extra)))
            is Message.Ping -> Message.Ping(m.v.copy(extra = merged(m.v.extra)))
            is Message.Pong -> Message.Pong(m.v.copy(extra = merged(m.v.extra)))
        }
    }
}
