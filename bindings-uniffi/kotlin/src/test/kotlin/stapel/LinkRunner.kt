package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/**
 * Area `link`: `RunnerLink` and `HubLink` through the Kotlin API (conformance/README.md,
 * "Area `link`"). Inputs go through `step` (one call: the input, every output, the next
 * deadline); when `step` throws, the outputs the input produced are drained with
 * `drainOutputs` and the deadline read with `pollTimeout`, so both paths are run.
 */
object LinkRunner {
    /** Either link behind one shape. */
    private class Side(val runner: RunnerLink?, val hub: HubLink?) {
        fun step(now: ULong, input: LinkInput): LinkStep = runner?.step(now, input) ?: hub!!.step(now, input)
        fun send(now: ULong, m: Message, resend: Boolean) {
            when {
                runner != null && resend -> runner.resend(now, m)
                runner != null -> runner.send(now, m)
                else -> hub!!.send(now, m)
            }
        }
        fun drain(): List<LinkOutput> = runner?.drainOutputs() ?: hub!!.drainOutputs()
        fun timeout(): ULong? = if (runner != null) runner.pollTimeout() else hub!!.pollTimeout()
        fun forget(task: String) { if (runner != null) runner.forgetTask(task) else hub!!.forgetTask(task) }
        fun configJson(): String = runner?.configJson() ?: hub!!.configJson()
        fun queued(): ULong = runner?.queuedEvents() ?: hub!!.queuedEvents()
        fun outboxFrames(): ULong = runner?.outboxFrames() ?: hub!!.outboxFrames()
        fun stats(): LinkStats = runner?.stats() ?: hub!!.stats()
        fun connected(): Boolean = runner?.isConnected() ?: hub!!.isConnected()
    }

    fun eventJson(e: LinkEvent): JsonNode = when (e) {
        is LinkEvent.Hello -> Json.obj().put("hello", encode(Message.Hello(e.hello)))
        is LinkEvent.Received -> Json.obj().put("received", encode(e.message))
        is LinkEvent.InboundGap -> Json.obj().set("inbound_gap", SequencingRunner.resyncJson(e.resync))
        is LinkEvent.OutboundResync -> Json.obj().set("outbound_resync", SequencingRunner.resyncJson(e.resync))
        is LinkEvent.PeerError -> Json.obj().put("peer_error", e.code)
        is LinkEvent.Connected -> Json.obj().put("connected", true)
        is LinkEvent.Disconnected -> Json.obj().put("disconnected", e.reason)
        is LinkEvent.Reconnecting -> Json.obj().set(
            "reconnecting",
            Json.obj().put("delay_ms", e.delayMs.toLong()).put("failures", e.failures.toLong()),
        )
        is LinkEvent.Error -> {
            val o = Json.obj().put("code", e.code)
            e.status?.let { o.put("status", it.toInt()) }
            Json.obj().set("error", o)
        }
        is LinkEvent.Stalled -> Json.obj().set(
            "stalled",
            Json.obj().put("bound", e.bound).put("kept_frames", e.keptFrames.toLong()).put("kept_bytes", e.keptBytes.toLong()),
        )
        is LinkEvent.Unstalled -> Json.obj().put("unstalled", true)
        is LinkEvent.Stopped -> Json.obj().put("stopped", true)
        is LinkEvent.Unknown -> Json.obj().put("unknown_event", e.debug)
    }

    private fun outputJson(o: LinkOutput): JsonNode = when (o) {
        is LinkOutput.Connect -> Json.obj().put("connect", o.socket.toLong())
        is LinkOutput.Send -> Json.obj().set("send", Json.obj().put("socket", o.socket.toLong()).put("frame", o.frame))
        is LinkOutput.Pause -> Json.obj().put("pause", o.socket.toLong())
        is LinkOutput.Resume -> Json.obj().put("resume", o.socket.toLong())
        is LinkOutput.Close -> Json.obj().set(
            "close",
            Json.obj().put("socket", o.socket.toLong()).put("code", o.code.toInt()).put("reason", o.reason),
        )
        is LinkOutput.Abort -> Json.obj().put("abort", o.socket.toLong())
        is LinkOutput.Event -> Json.obj().set("event", eventJson(o.event))
        is LinkOutput.Unknown -> Json.obj().put("unknown", o.debug)
    }

    private fun socketOf(v: JsonNode, i: Int): ULong = v.ulong("socket") ?: fail(i, "no socket in ${Json.text(v)}")

    private fun closeArgs(v: JsonNode): Pair<UShort, String> =
        (v.get("code")?.asInt() ?: 1000).toUShort() to (v.str("reason") ?: "")

    /** The link input of a step, or null for the inputs that are calls of their own. */
    private fun inputOf(input: JsonNode, i: Int): LinkInput? = when {
        input.has("start") -> LinkInput.Start
        input.has("stop") -> closeArgs(input.get("stop")).let { (c, r) -> LinkInput.Stop(c, r) }
        input.has("opened") -> LinkInput.Opened(input.ulong("opened") ?: fail(i, "opened needs a socket"))
        input.has("connect_failed") -> {
            val v = input.get("connect_failed")
            val failure = when (v.str("failure")) {
                "refused" -> ConnectFailure.Refused((v.get("status")?.asInt() ?: fail(i, "refused needs a status")).toUShort())
                "no_token" -> ConnectFailure.NoToken
                "failed" -> ConnectFailure.Failed
                else -> fail(i, "unknown failure ${v.get("failure")}")
            }
            LinkInput.ConnectFailed(socketOf(v, i), failure, v.str("detail") ?: "")
        }
        input.has("attach") -> LinkInput.Attach(input.ulong("attach") ?: fail(i, "attach needs a socket"))
        input.has("close") -> closeArgs(input.get("close")).let { (c, r) -> LinkInput.Close(c, r) }
        input.has("frame") -> {
            val v = input.get("frame")
            val socket = socketOf(v, i)
            val text = v.str("text")
            val bytes = bytesOf(v, "binary")
            when {
                text != null -> LinkInput.FrameText(socket, text)
                bytes != null -> LinkInput.FrameBinary(socket, bytes)
                else -> fail(i, "frame needs text, binary or binary_hex")
            }
        }
        input.has("socket_closed") -> LinkInput.SocketClosed(input.ulong("socket_closed") ?: fail(i, "socket_closed needs a socket"))
        input.has("failed") -> input.get("failed").let { LinkInput.Failed(socketOf(it, i), it.str("detail") ?: "") }
        input.has("events_taken") -> LinkInput.EventsTaken(input.ulong("events_taken") ?: fail(i, "events_taken needs a count"))
        input.has("confirm") -> input.get("confirm").let {
            LinkInput.Confirm(it.str("task_id") ?: fail(i, "confirm.task_id"), it.ulong("attempt"), it.ulong("seq") ?: fail(i, "confirm.seq"))
        }
        input.has("tick") -> LinkInput.Timeout
        else -> null
    }

    fun run(vector: JsonNode) {
        val cfg = vector.get("config") ?: Json.obj()
        val linkCfg = cfg.deepCopy<JsonNode>() as ObjectNode
        for (k in listOf("side", "hello", "seed")) linkCfg.remove(k)
        val config = Json.text(linkCfg)
        val seed = cfg.ulong("seed") ?: 0uL
        val wantConfigError = vector.get("steps").get(0)?.get("expect")?.get("config_error")
        val side = try {
            when (cfg.str("side")) {
                "runner" -> {
                    val hello = cfg.get("hello")?.let {
                        (messageFromJson(Json.text(it), false) as? Message.Hello)?.v
                            ?: throw VectorFailure("config.hello must be a hello message")
                    } ?: Hello(projectId = "p-1", runnerVersion = "0.1.0")
                    Side(RunnerLink(hello, config, null, seed), null)
                }
                "hub" -> Side(null, HubLink(config, null))
                else -> throw VectorFailure("config.side must be \"hub\" or \"runner\"")
            }
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
            input.ulong("now")?.let { now = it }
            var stepped: LinkStep? = null
            val error: String? = try {
                when {
                    input.has("configure") -> {}
                    input.has("send") -> side.send(now, SequencingRunner.message(input.get("send")), false)
                    input.has("resend") -> side.send(now, SequencingRunner.message(input.get("resend")), true)
                    input.has("forget_task") -> side.forget(input.str("forget_task") ?: fail(i, "forget_task needs a task id"))
                    else -> stepped = side.step(now, inputOf(input, i) ?: fail(i, "unknown input ${Json.text(input)}"))
                }
                null
            } catch (e: ProtocolException.State) {
                e.code
            }
            val want = expect.get("error")
            when {
                error == null && want != null -> fail(i, "expected error ${Json.text(want)}, got success")
                error != null && want == null -> fail(i, "unexpected error $error")
                error != null -> check(i, "error", Json.of(error), want)
            }
            val outputs = Json.arr()
            val got = stepped?.outputs ?: side.drain()
            got.forEach { outputs.add(outputJson(it)) }
            val timeout = if (stepped != null) stepped!!.timeout else side.timeout()
            outputs.add(Json.obj().set<JsonNode>("timeout", timeout?.let { Json.of(it.toLong()) } ?: NullNode.instance))
            expect.get("outputs")?.let { check(i, "outputs", outputs, it) }
            expect.get("config")?.let { check(i, "config", Json.parse(side.configJson()), it) }
            expect.get("phase")?.let {
                val l = side.runner ?: fail(i, "phase is a runner expectation")
                val phase = when (l.phase()) {
                    is LinkPhase.Idle -> "idle"
                    is LinkPhase.Waiting -> "waiting"
                    is LinkPhase.Connecting -> "connecting"
                    is LinkPhase.Open -> "open"
                }
                check(i, "phase", Json.of(phase), it)
            }
            expect.get("queued_events")?.let { check(i, "queued_events", Json.of(side.queued().toLong()), it) }
            expect.get("outbox_frames")?.let { check(i, "outbox_frames", Json.of(side.outboxFrames().toLong()), it) }
            expect.get("stats")?.let {
                val s = side.stats()
                val gotStats = Json.obj().put("dropped_events", s.droppedEvents.toLong()).put("connections", s.connections.toLong())
                    .put("backlog_overflows", s.backlogOverflows.toLong()).put("connected", side.connected())
                check(i, "stats", gotStats, it)
            }
        }
    }
}
