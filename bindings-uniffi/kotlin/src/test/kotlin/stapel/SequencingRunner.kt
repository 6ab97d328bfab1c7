package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/** Area `sequencing`: `ConnectionState` through the Kotlin API. */
object SequencingRunner {
    fun message(v: JsonNode): Message = messageFromJson(Json.text(v), false)

    fun position(v: JsonNode): Position =
        Position(v.str("task_id") ?: "", v.ulong("attempt"), v.ulong("seq") ?: 0uL)

    fun positionJson(p: Position): JsonNode {
        val o = Json.obj().put("task_id", p.taskId)
        p.attempt?.let { o.put("attempt", it.toLong()) }
        return o.put("seq", p.seq.toLong())
    }

    fun positionsJson(ps: List<Position>): JsonNode = Json.arr().addAll(ps.map(::positionJson))

    fun resyncJson(r: Resync): JsonNode {
        val o = Json.obj().put("task_id", r.taskId)
        r.attempt?.let { o.put("attempt", it.toLong()) }
        return o.put("declared", r.declared.toLong()).put("missing_from", r.missingFrom.toLong())
            .put("missing_to", r.missingTo.toLong())
    }

    fun resumeJson(entries: List<ResumeEntry>): JsonNode {
        val o = Json.obj()
        for (e in entries) o.put(e.taskId, e.seq.toLong())
        return o
    }

    private fun replayJson(r: Replay): JsonNode {
        val streams = Json.arr()
        for (s in r.streams) {
            val o = Json.obj().put("task_id", s.taskId)
            s.attempt?.let { o.put("attempt", it.toLong()) }
            o.set<JsonNode>("frames", Json.of(s.frames))
            streams.add(o)
        }
        val o = Json.obj()
        o.set<JsonNode>("streams", streams)
        o.set<JsonNode>("resync", Json.arr().addAll(r.resync.map(::resyncJson)))
        o.set<JsonNode>("peer_ahead", positionsJson(r.peerAhead))
        o.set<JsonNode>("unknown", Json.of(r.unknown))
        return o
    }

    private fun role(cfg: JsonNode): Role = when (cfg.str("role")) {
        "hub" -> Role.HUB
        "runner" -> Role.RUNNER
        else -> throw VectorFailure("config.role must be \"hub\" or \"runner\"")
    }

    /** `{"outbox_log": {"max_frames"?, "max_bytes"?, "ops": [...]}}`: one fresh standalone log. */
    private fun standaloneOutbox(i: Int, v: JsonNode): JsonNode {
        val log = OutboxLog(v.ulong("max_frames"), v.ulong("max_bytes"))
        val results = Json.arr()
        val ops = v.get("ops")
        if (ops == null || !ops.isArray) fail(i, "outbox_log.ops must be a list")
        for (op in ops) {
            val r = when {
                op.has("emit") -> {
                    val msg = message(op.get("emit"))
                    try {
                        Json.obj().put("frame", log.emit(msg).frame)
                    } catch (e: ProtocolException.State) {
                        // The caller's record is handed back unchanged (equal to a fresh decode).
                        if (msg != message(op.get("emit"))) fail(i, "emit error changed the message")
                        Json.obj().put("error", e.code)
                    }
                }
                op.has("ack") -> Json.obj().put("dropped", log.ack(op.ulong("ack") ?: fail(i, "ack needs a seq")).toLong())
                op.has("since") -> try {
                    Json.obj().set<JsonNode>("frames", Json.of(log.since(op.ulong("since") ?: fail(i, "since needs a seq"))))
                } catch (e: ProtocolException.State) {
                    Json.obj().put("error", e.code)
                }
                op.has("last_seq") -> Json.obj().put("value", log.lastSeq().toLong())
                else -> fail(i, "unknown outbox_log op ${Json.text(op)}")
            }
            results.add(r)
        }
        return results
    }

    fun run(vector: JsonNode) {
        val cfg = (vector.get("config") ?: Json.obj()).deepCopy<JsonNode>() as ObjectNode
        val r = role(cfg)
        cfg.remove("role")
        var state = ConnectionState(r, Json.text(cfg))
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            val wantError = expect.get("error")
            // Runs `block`; a ProtocolException.State must be the expected error.
            fun <T> guarded(block: () -> T, onOk: (T) -> Unit) {
                val got = try {
                    block()
                } catch (e: ProtocolException.State) {
                    if (wantError == null) fail(i, "unexpected error ${e.code}")
                    check(i, "error", Json.of(e.code), wantError)
                    return
                }
                if (wantError != null) fail(i, "expected error ${Json.text(wantError)}, got success")
                onOk(got)
            }
            when {
                input.has("emit") -> {
                    val msg = message(input.get("emit"))
                    val copy = msg
                    guarded({ state.emit(msg) }) { e ->
                        expect.get("frame")?.let { check(i, "frame", Json.of(e.frame), it) }
                    }
                    // Records are immutable: the caller's message is unchanged either way.
                    if (msg != copy) fail(i, "emit changed the caller's message")
                }
                input.has("receive") -> guarded({ state.receive(message(input.get("receive"))) }) { a ->
                    expect.get("arrival")?.let { check(i, "arrival", Json.of(a.name.lowercase()), it) }
                }
                input.has("classify") -> guarded({ state.classify(message(input.get("classify"))) }) { a ->
                    expect.get("arrival")?.let { check(i, "arrival", Json.of(a.name.lowercase()), it) }
                }
                input.has("resume_map") -> check(i, "resume_map", resumeJson(state.resumeMap()), expect.get("resume_map"))
                input.has("replay_for") -> {
                    val entries = input.get("replay_for").fields().asSequence()
                        .map { (k, v) -> ResumeEntry(k, v.asLong().toULong()) }.toList()
                    check(i, "replay", replayJson(state.replayFor(entries)), expect.get("replay"))
                }
                input.has("replay_positions") -> {
                    val list = input.get("replay_positions").map(::position)
                    check(i, "replay", replayJson(state.replayPositions(list)), expect.get("replay"))
                }
                input.has("ack") -> {
                    val p = position(input.get("ack"))
                    guarded({ state.ack(p.taskId, p.attempt, p.seq) }) { n ->
                        check(i, "dropped", Json.of(n.toLong()), expect.get("dropped"))
                    }
                }
                input.has("last_received") ->
                    check(i, "value", Json.of(state.lastReceived(input.str("last_received")!!).toLong()), expect.get("value"))
                input.has("skip_to") -> {
                    val p = position(input.get("skip_to"))
                    guarded({ state.skipTo(p.taskId, p.attempt, p.seq) }) { g ->
                        val got = g?.let { Json.arr().add(it.from.toLong()).add(it.to.toLong()) } ?: NullNode.instance
                        check(i, "gap", got, expect.get("gap") ?: NullNode.instance)
                    }
                }
                input.has("ack_positions") -> check(i, "positions", positionsJson(state.ackPositions()), expect.get("positions"))
                input.has("replay_from") -> check(i, "positions", positionsJson(state.replayFrom()), expect.get("positions"))
                input.has("unacked") -> check(i, "frames", Json.of(state.unacked()), expect.get("frames"))
                input.has("forget_task") -> check(i, "known", Json.of(state.forgetTask(input.str("forget_task")!!)), expect.get("known"))
                input.has("mark_unconfirmed") -> state.markUnconfirmed()
                input.has("confirm_all") -> state.confirmAll()
                input.has("trim_through") -> {
                    val p = position(input.get("trim_through"))
                    check(i, "dropped", Json.of(state.trimThrough(p.taskId, p.attempt, p.seq).toLong()), expect.get("dropped"))
                }
                input.has("is_fully_acknowledged") ->
                    check(i, "value", Json.of(state.isFullyAcknowledged(input.str("is_fully_acknowledged")!!)), expect.get("value"))
                input.has("is_forgotten") ->
                    check(i, "value", Json.of(state.isForgotten(input.str("is_forgotten")!!)), expect.get("value"))
                input.has("channel") -> guarded({ state.channel(input.str("channel")!!) }) { c ->
                    val got = Json.obj().put("outbound", c.outbound.toLong()).put("inbound", c.inbound.toLong())
                        .put("last_received", c.lastReceived.toLong())
                    check(i, "channel", got, expect.get("channel"))
                }
                input.has("outbox_since") -> {
                    val p = position(input.get("outbox_since"))
                    guarded({ state.outboxSince(p.taskId, p.attempt, p.seq) }) { frames ->
                        if (frames == null) fail(i, "no outbound stream ${Json.text(input.get("outbox_since"))}")
                        check(i, "frames", Json.of(frames), expect.get("frames"))
                    }
                }
                input.has("outbox_log") -> check(i, "results", standaloneOutbox(i, input.get("outbox_log")), expect.get("results"))
                input.has("inbox_tracker") -> {
                    val v = input.get("inbox_tracker")
                    val tracker = v.ulong("window")?.let { InboxTracker(it) } ?: InboxTracker()
                    val arrivals = Json.arr()
                    for (s in v.get("receive") ?: fail(i, "inbox_tracker.receive is missing")) {
                        if (!s.isIntegralNumber) fail(i, "inbox_tracker seqs must be integers")
                        try {
                            arrivals.add(Json.of(tracker.receive(s.bigIntegerValue().toLong().toULong()).name.lowercase()))
                        } catch (e: ProtocolException.State) {
                            arrivals.add(Json.obj().put("error", e.code))
                        }
                    }
                    check(i, "arrivals", arrivals, expect.get("arrivals"))
                    check(i, "last_seq", Json.of(tracker.lastSeq().toLong()), expect.get("last_seq"))
                }
                input.has("snapshot_roundtrip") -> {
                    val bytes = state.snapshot()
                    val restored = ConnectionState.restore(bytes)
                    if (!restored.sameAs(state) || !restored.snapshot().contentEquals(bytes)) {
                        fail(i, "snapshot round trip changed the state")
                    }
                    state = restored
                }
                bytesOf(input, "restore") != null -> guarded({ ConnectionState.restore(bytesOf(input, "restore")!!) }) { state = it }
                else -> fail(i, "unknown input ${Json.text(input)}")
            }
            expect.get("outbox")?.let {
                check(i, "outbox", Json.obj().put("frames", state.outboxFrames().toLong()).put("bytes", state.outboxBytes().toLong()), it)
            }
            expect.get("streams")?.let {
                check(i, "streams", Json.obj().put("outbound", state.outboundStreams().toLong()).put("inbound", state.inboundStreams().toLong()), it)
            }
            expect.get("confirmed")?.let { check(i, "confirmed", Json.of(state.isConfirmed()), it) }
        }
    }
}
