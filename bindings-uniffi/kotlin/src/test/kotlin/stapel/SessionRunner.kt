package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/**
 * Area `session`: `HubSession` and `RunnerSession` through the Kotlin API. Area `store`
 * runs here too (hub side): the session's `rows()`, a `RowTracker`'s writes,
 * `HubSession.fromRows` and `closeFor` (the forms are in [StoreRunner]).
 */
object SessionRunner {
    /** Either session machine behind one shape. */
    private class Side(val config: String, val hello: Hello?, val hub: HubSession?, val runner: RunnerSession?) {
        constructor(config: String, hello: Hello?, snapshot: ByteArray?) : this(
            config, hello,
            if (hello == null) HubSession(config, snapshot) else null,
            hello?.let { RunnerSession(it, config, snapshot) },
        )
        fun handle(now: ULong, input: SessionInput) = if (hub != null) hub.handleInput(now, input) else runner!!.handleInput(now, input)
        fun resend(now: ULong, message: Message) { if (hub != null) hub.resend(now, message) else runner!!.resend(now, message) }
        fun poll(): SessionOutput? = if (hub != null) hub.pollOutput() else runner!!.pollOutput()
        fun timeout(): ULong? = if (hub != null) hub.pollTimeout() else runner!!.pollTimeout()
        fun snapshot(): ByteArray = if (hub != null) hub.snapshot() else runner!!.snapshot()
        fun resumeMap(): List<ResumeEntry> = if (hub != null) hub.resumeMap() else runner!!.resumeMap()
        fun outboxFrames(): ULong = if (hub != null) hub.outboxFrames() else runner!!.outboxFrames()
        fun forget(task: String): Boolean = if (hub != null) hub.forgetTask(task) else runner!!.forgetTask(task)
    }

    private fun outputJson(o: SessionOutput): JsonNode {
        fun event(name: String, v: JsonNode): JsonNode = Json.obj().set(name, v)
        return when (o) {
            is SessionOutput.Transmit -> Json.obj().put("transmit", o.frame)
            is SessionOutput.Close -> Json.obj().put("close", o.reason)
            is SessionOutput.Hello -> Json.obj().set("event", event("hello", Json.of(encode(Message.Hello(o.hello)))))
            is SessionOutput.Received -> Json.obj().set("event", event("received", Json.of(encode(o.message))))
            is SessionOutput.InboundGap -> Json.obj().set("event", event("inbound_gap", SequencingRunner.resyncJson(o.resync)))
            is SessionOutput.OutboundResync -> Json.obj().set("event", event("outbound_resync", SequencingRunner.resyncJson(o.resync)))
            is SessionOutput.PeerError -> Json.obj().set("event", Json.obj().put("peer_error", o.code))
            is SessionOutput.Unknown -> Json.obj().set("event", Json.obj().put("unknown_event", o.debug))
        }
    }

    fun run(vector: JsonNode) {
        val cfg = vector.get("config") ?: Json.obj()
        val sessionCfg = cfg.deepCopy<JsonNode>() as ObjectNode
        sessionCfg.remove("side")
        sessionCfg.remove("hello")
        val config = Json.text(sessionCfg)
        val wantConfigError = vector.get("steps").get(0)?.get("expect")?.get("config_error")
        val hello: Hello? = when (cfg.str("side")) {
            "hub" -> null
            "runner" -> cfg.get("hello")?.let {
                (messageFromJson(Json.text(it), false) as? Message.Hello)?.v
                    ?: throw VectorFailure("config.hello must be a hello message")
            } ?: Hello(projectId = "p-1", runnerVersion = "0.1.0")
            else -> throw VectorFailure("config.side must be \"hub\" or \"runner\"")
        }
        var side = try {
            Side(config, hello, null)
        } catch (e: ProtocolException.Config) {
            if (wantConfigError == null) throw VectorFailure("config refused: ${e.code} (key ${e.key})")
            check(0, "config_error", Json.obj().put("code", e.code).put("key", e.key), wantConfigError)
            return
        }
        if (wantConfigError != null) throw VectorFailure("config accepted, expected config_error ${Json.text(wantConfigError)}")
        var now = 0uL
        var saved: ByteArray? = null
        // Area `store`: what the store holds of the hub (the rows it was built from, then
        // every committed batch of writes).
        var tracker = RowTracker(RunnerRows())
        var writes: JsonNode? = null
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            input.ulong("now")?.let { now = it }
            val bytes = bytesOf(input, "bytes")
            var refusedRows = false
            val error: String? = try {
                when {
                    input.has("connected") -> side.handle(now, SessionInput.Connected)
                    input.has("disconnected") -> side.handle(now, SessionInput.Disconnected)
                    input.has("tick") -> side.handle(now, SessionInput.Timeout)
                    input.get("frame")?.isTextual == true -> side.handle(now, SessionInput.Frame(input.str("frame")!!))
                    bytes != null -> side.handle(now, SessionInput.Bytes(bytes))
                    input.has("send") -> side.handle(now, SessionInput.Send(SequencingRunner.message(input.get("send"))))
                    input.has("resend") -> side.resend(now, SequencingRunner.message(input.get("resend")))
                    input.has("confirm") -> input.get("confirm").let {
                        side.handle(now, SessionInput.Confirm(it.str("task_id") ?: fail(i, "confirm.task_id"), it.ulong("attempt"), it.ulong("seq") ?: fail(i, "confirm.seq")))
                    }
                    input.has("rows") -> Unit
                    input.has("writes") -> {
                        // The tracker's writes for the session as it is; then committed, or
                        // rolled back ("failed": the next `writes` lists them again).
                        val hub = side.hub ?: fail(i, "writes on a runner")
                        writes = StoreRunner.writesJson(tracker.writes(hub))
                        if (input.get("writes").let { it.isTextual && it.asText() == "failed" }) tracker.failed() else tracker.committed()
                    }
                    input.has("close_for") -> Unit // checked with `expect.close` below
                    input.has("from_rows") -> {
                        // A takeover: a new hub session over these rows (or, `true`, over the
                        // rows of the current one); the store holds them.
                        val r = input.get("from_rows")
                        try {
                            val rows = if (r.isBoolean && r.booleanValue()) (side.hub ?: fail(i, "from_rows on a runner")).rows()
                            else StoreRunner.rowsOf(r)
                            val h = HubSession.fromRows(rows, config)
                            tracker = RowTracker(rows)
                            side = Side(config, null, h, null)
                        } catch (e: ProtocolException.State) {
                            check(i, "error", Json.of(e.code), expect.get("error") ?: NullNode.instance)
                            refusedRows = true
                        }
                    }
                    input.has("save_snapshot") -> saved = side.snapshot()
                    input.has("forget_task") -> side.forget(input.str("forget_task")!!)
                    input.has("restart") -> {
                        val snap = when (input.get("restart").asText()) {
                            "fresh" -> null
                            "saved" -> saved ?: fail(i, "restart \"saved\" without save_snapshot")
                            else -> side.snapshot()
                        }
                        side = Side(config, side.hello, snap)
                    }
                    else -> fail(i, "unknown input ${Json.text(input)}")
                }
                null
            } catch (e: ProtocolException.State) {
                e.code
            }
            if (refusedRows) return@forEachIndexed
            val want = expect.get("error")
            when {
                error == null && want != null -> fail(i, "expected error ${Json.text(want)}, got success")
                error != null && want == null -> fail(i, "unexpected error $error")
                error != null -> check(i, "error", Json.of(error), want)
            }
            if (input.get("poll")?.asBoolean() == false) {
                // Outputs stay queued for a later step; every other expectation is checked.
                if (expect.has("outputs")) fail(i, "outputs expected on a step with poll: false")
            } else {
                val outputs = Json.arr()
                while (true) {
                    val o = side.poll() ?: break
                    outputs.add(outputJson(o))
                    if (outputs.size() > 10_000) break
                }
                outputs.add(Json.obj().set<JsonNode>("timeout", side.timeout()?.let { Json.of(it.toLong()) } ?: NullNode.instance))
                expect.get("outputs")?.let { check(i, "outputs", outputs, it) }
            }
            expect.get("resume_map")?.let { check(i, "resume_map", SequencingRunner.resumeJson(side.resumeMap()), it) }
            expect.get("rows")?.let { check(i, "rows", StoreRunner.rowsJson((side.hub ?: fail(i, "rows on a runner")).rows()), it) }
            expect.get("writes")?.let {
                val got = writes ?: fail(i, "writes expected without a writes input")
                writes = null
                check(i, "writes", got, it)
            }
            expect.get("close")?.let {
                val c = closeFor(input.str("close_for") ?: fail(i, "close without close_for"))
                check(i, "close", Json.arr().add(c.code.toInt()).add(c.reason), it)
            }
            expect.get("outbox_frames")?.let { check(i, "outbox_frames", Json.of(side.outboxFrames().toLong()), it) }
        }
    }
}
