package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/** Area `host`: `SocketHost` and `HubHost` through the Kotlin API. */
object HostRunner {
    private val INPUT_KEYS = setOf(
        "opened", "text", "binary", "binary_hex", "transmit", "session_close", "close", "failed",
        "socket_closed", "timeout", "request", "upgraded", "authenticated", "runner_added",
        "parse_config", "authorization_for",
    )
    private val EXPECT_KEYS = setOf("outputs", "error", "timeout", "state", "runners", "pending", "value", "config", "config_error")

    private fun socketJson(a: SocketAction): JsonNode = when (a) {
        is SocketAction.Attach -> Json.obj().put("attach", true)
        is SocketAction.Deliver -> Json.obj().put("deliver", a.text)
        is SocketAction.PeerError -> Json.obj().put("peer_error", a.code)
        is SocketAction.Send -> Json.obj().put("send", a.frame)
        is SocketAction.Detach -> Json.obj().put("detach", true)
        is SocketAction.Close -> Json.obj().set("close", Json.obj().put("code", a.code.toInt()).put("reason", a.reason).put("deadline", a.deadlineMs.toLong()))
        is SocketAction.Abort -> Json.obj().put("abort", true)
        is SocketAction.Unknown -> Json.obj().put("unknown", a.debug)
    }

    private fun hubJson(a: HubAction): JsonNode = when (a) {
        is HubAction.Authenticate -> Json.obj().set("authenticate", Json.obj().put("conn", a.conn.toLong()).put("token", a.token))
        is HubAction.Accept -> Json.obj().set("accept", Json.obj().put("conn", a.conn.toLong()).put("runner_id", a.runnerId))
        is HubAction.Reject -> Json.obj().set("reject", Json.obj().put("conn", a.conn.toLong()).put("status", a.status.toInt()).put("body", a.body).put("refusal", a.refusal))
        is HubAction.Refuse -> Json.obj().set("refuse", Json.obj().put("conn", a.conn.toLong()).put("code", a.code.toInt()).put("reason", a.reason).put("refusal", a.refusal))
        is HubAction.Attach -> Json.obj().set("attach", Json.obj().put("conn", a.conn.toLong()).put("runner_id", a.runnerId).put("announce", a.announce))
        is HubAction.Evict -> Json.obj().put("evict", a.runnerId)
        is HubAction.Unknown -> Json.obj().put("unknown", a.debug)
    }

    private fun headers(v: JsonNode): List<Header> =
        (v.get("headers") ?: Json.arr()).map { p ->
            if (!p.isArray || p.size() != 2 || !p[0].isTextual || !p[1].isTextual) throw VectorFailure("bad header pair ${Json.text(p)}")
            Header(p[0].asText(), p[1].asText())
        }

    private fun conn(v: JsonNode): ULong = v.ulong("conn") ?: throw VectorFailure("no conn in ${Json.text(v)}")

    private fun socketEvent(input: JsonNode): SocketEvent {
        val binary = bytesOf(input, "binary")
        return when {
            input.has("opened") -> SocketEvent.Opened
            input.get("text")?.isTextual == true -> SocketEvent.Text(input.str("text")!!)
            binary != null -> SocketEvent.Binary(binary)
            input.get("transmit")?.isTextual == true -> SocketEvent.Transmit(input.str("transmit")!!)
            input.get("session_close")?.isTextual == true -> SocketEvent.SessionClose(input.str("session_close")!!)
            input.has("close") -> {
                val c = input.get("close")
                val code = c.get("code")?.asInt() ?: 1000
                if (code < 0 || code > 65535) throw VectorFailure("close code $code is not a u16")
                SocketEvent.Close(code.toUShort(), c.str("reason") ?: "")
            }
            input.has("failed") -> SocketEvent.Failed
            input.has("socket_closed") -> SocketEvent.SocketClosed
            input.has("timeout") -> SocketEvent.Timeout
            else -> throw VectorFailure("unknown socket input ${Json.text(input)}")
        }
    }

    private fun hubEvent(input: JsonNode): HubEvent = when {
        input.has("request") -> input.get("request").let { HubEvent.Request(conn(it), headers(it)) }
        input.has("upgraded") -> input.get("upgraded").let { HubEvent.Upgraded(conn(it), headers(it)) }
        input.has("authenticated") -> input.get("authenticated").let { r ->
            val id = r.get("runner_id")
            HubEvent.Authenticated(conn(r), when {
                id == null || id.isNull -> null
                id.isTextual -> id.asText()
                else -> throw VectorFailure("bad runner_id ${Json.text(id)}")
            })
        }
        input.has("runner_added") -> input.get("runner_added").let { r ->
            HubEvent.RunnerAdded(
                r.str("runner_id") ?: throw VectorFailure("runner_added needs runner_id"),
                (r.get("activity") ?: throw VectorFailure("runner_added needs activity")).map { a ->
                    RunnerActivity(
                        a.str("runner_id") ?: throw VectorFailure("no runner_id in ${Json.text(a)}"),
                        a.ulong("sockets") ?: 0uL, a.ulong("kept_frames") ?: 0uL, a.ulong("queued_events") ?: 0uL,
                        a.ulong("waiting_readers") ?: 0uL, a.get("awaiting_accept")?.asBoolean() ?: false,
                    )
                },
            )
        }
        input.has("timeout") -> HubEvent.Timeout
        else -> throw VectorFailure("unknown hub input ${Json.text(input)}")
    }

    fun run(vector: JsonNode) {
        val cfg = (vector.get("config") ?: Json.obj()).deepCopy<JsonNode>() as ObjectNode
        val machine = cfg.remove("machine")?.asText() ?: throw VectorFailure("config.machine must be \"socket\" or \"hub\"")
        val configText = Json.text(cfg)
        var socket: SocketHost? = null
        var hub: HubHost? = null
        try {
            when (machine) {
                "socket" -> socket = SocketHost(configText)
                "hub" -> hub = HubHost(configText)
                else -> throw VectorFailure("unknown machine $machine")
            }
        } catch (e: ProtocolException.Config) {
            throw VectorFailure("config refused: ${e.code} (key ${e.key})")
        }
        var now = 0uL
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            input.fieldNames().forEach { if (it != "now" && it != "poll" && it !in INPUT_KEYS) fail(i, "unknown input key $it") }
            expect.fieldNames().forEach { if (it !in EXPECT_KEYS) fail(i, "unknown expect key $it") }
            input.ulong("now")?.let { now = it }
            val poll = input.get("poll")?.asBoolean() ?: true
            if (input.has("authorization_for")) {
                val want = expect.get("value") ?: fail(i, "authorization_for needs expect.value")
                check(i, "value", Json.of(bearerAuthorization(input.str("authorization_for") ?: fail(i, "authorization_for takes a string"))), want)
                return@forEachIndexed
            }
            if (expect.has("value")) fail(i, "value is an authorization_for expectation")
            if (input.has("parse_config")) {
                try {
                    val c = hostConfig(Json.text(input.get("parse_config")))
                    check(i, "config", Json.parse(c), expect.get("config") ?: fail(i, "parse_config succeeded, expected ${Json.text(expect)}"))
                } catch (e: ProtocolException.Config) {
                    val want = expect.get("config_error") ?: fail(i, "unexpected config error ${e.code} (key ${e.key})")
                    check(i, "config_error", Json.obj().put("code", e.code).put("key", e.key), want)
                }
                expect.fieldNames().asSequence().find { it != "config" && it != "config_error" }?.let { fail(i, "$it is not a parse_config expectation") }
                return@forEachIndexed
            }
            for (k in listOf("config", "config_error")) if (expect.has(k)) fail(i, "$k is a parse_config expectation")
            val outputs = Json.arr()
            val error: String? = try {
                if (socket != null) socket!!.handleInput(now, socketEvent(input)) else hub!!.handleInput(now, hubEvent(input))
                null
            } catch (e: ProtocolException.State) {
                e.code
            }
            if (poll) {
                while (true) {
                    val o = if (socket != null) socket!!.pollOutput()?.let(::socketJson) else hub!!.pollOutput()?.let(::hubJson)
                    outputs.add(o ?: break)
                }
            }
            check(i, "error", error?.let { Json.of(it) } ?: NullNode.instance, expect.get("error") ?: NullNode.instance)
            if (poll) {
                check(i, "outputs", outputs, expect.get("outputs") ?: Json.arr())
            } else if (expect.has("outputs")) {
                fail(i, "outputs expected on a step with poll: false")
            }
            expect.get("timeout")?.let {
                val t = if (socket != null) socket!!.pollTimeout() else hub!!.pollTimeout()
                check(i, "timeout", t?.let { v -> Json.of(v.toLong()) } ?: NullNode.instance, it)
            }
            expect.get("state")?.let { check(i, "state", Json.of((socket ?: fail(i, "state is a socket expectation")).state()), it) }
            expect.get("runners")?.let { check(i, "runners", Json.of((hub ?: fail(i, "runners is a hub expectation")).runners()), it) }
            expect.get("pending")?.let { check(i, "pending", Json.of((hub ?: fail(i, "pending is a hub expectation")).pendingConnections().toLong()), it) }
        }
    }
}
