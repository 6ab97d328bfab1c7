package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/**
 * Area `lease`: the `Lease` timing machine through the Kotlin API; and the JSON forms of
 * area `store` (rows and writes, built field by field from the typed records), whose steps
 * run in [SessionRunner].
 */
object StoreRunner {
    /** A store's rows as JSON: `{"tasks": [...], "inbound": [...], "commands": [...]}`. */
    fun rowsJson(rows: RunnerRows): JsonNode {
        val tasks = Json.arr()
        for (t in rows.tasks) tasks.add(taskJson(t))
        val inbound = Json.arr()
        for (r in rows.inbound) {
            inbound.add(Json.obj().put("task_id", r.taskId).put("attempt", r.attempt.toLong()).put("through", r.through.toLong()))
        }
        val commands = Json.arr()
        for (c in rows.commands) commands.add(commandJson(c))
        val out = Json.obj()
        out.set<JsonNode>("tasks", tasks)
        out.set<JsonNode>("inbound", inbound)
        out.set<JsonNode>("commands", commands)
        return out
    }

    private fun taskJson(t: TaskRow) = Json.obj()
        .put("task_id", t.taskId).put("next_seq", t.nextSeq.toLong())
        .put("assigned_attempt", t.assignedAttempt.toLong()).put("forgotten", t.forgotten)

    private fun commandJson(c: CommandRow) = Json.obj()
        .put("task_id", c.taskId).put("seq", c.seq.toLong()).put("frame", c.frame)

    /** One write as JSON: `{"op", ...its columns}`, the op named by the core. */
    fun writeJson(w: RowWrite): JsonNode {
        val body = when (w) {
            is RowWrite.PutTask -> taskJson(w.row)
            is RowWrite.PutCommand -> commandJson(w.row)
            is RowWrite.DeleteCommands -> Json.obj().put("task_id", w.taskId).put("through", w.through.toLong())
            is RowWrite.DeleteTask -> Json.obj().put("task_id", w.taskId)
        }
        return Json.obj().put("op", rowWriteOp(w)).setAll<JsonNode>(body)
    }

    fun writesJson(ws: List<RowWrite>): JsonNode {
        val out = Json.arr()
        for (w in ws) out.add(writeJson(w))
        return out
    }

    private fun s(o: JsonNode, k: String): String = o.str(k) ?: throw VectorFailure("rows: $k must be a string")

    private fun n(o: JsonNode, k: String): ULong {
        val v = o.get(k)
        if (v == null || !v.isIntegralNumber || v.bigIntegerValue().signum() < 0 || v.bigIntegerValue().bitLength() > 64) {
            throw VectorFailure("rows: $k must be an integer")
        }
        return v.bigIntegerValue().toString().toULong()
    }

    /** Rows from their JSON form (every table optional). */
    fun rowsOf(v: JsonNode): RunnerRows {
        fun list(k: String): List<JsonNode> = v.get(k)?.takeIf { it.isArray }?.toList() ?: emptyList()
        return RunnerRows(
            tasks = list("tasks").map {
                val f = it.get("forgotten")
                if (f == null || !f.isBoolean) throw VectorFailure("rows: forgotten must be a boolean")
                TaskRow(taskId = s(it, "task_id"), nextSeq = n(it, "next_seq"), assignedAttempt = n(it, "assigned_attempt"), forgotten = f.booleanValue())
            },
            inbound = list("inbound").map { InboundRow(taskId = s(it, "task_id"), attempt = n(it, "attempt"), through = n(it, "through")) },
            commands = list("commands").map { CommandRow(taskId = s(it, "task_id"), seq = n(it, "seq"), frame = s(it, "frame")) },
        )
    }

    fun configJson(c: LeaseConfig): JsonNode = Json.obj()
        .put("lease_ms", c.leaseMs.toLong()).put("renew_every_ms", c.renewEveryMs.toLong())
        .put("margin_ms", c.marginMs.toLong()).put("retry_ms", c.retryMs.toLong())

    /** Area `lease`: the machine is created before the first step (a refused config is `config_error`). */
    fun runLease(vector: JsonNode) {
        val wantConfigError = vector.get("steps").get(0)?.get("expect")?.get("config_error")
        val lease = try {
            Lease(Json.text(vector.get("config") ?: NullNode.instance))
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
            val renewed = input.ulong("renewed")
            when {
                renewed != null -> lease.handleInput(now, LeaseInput.Renewed(renewed))
                input.has("renew_failed") -> lease.handleInput(now, LeaseInput.RenewFailed)
                input.has("tick") -> lease.handleInput(now, LeaseInput.Timeout)
                !input.has("config") && !input.has("start") -> fail(i, "unknown input ${Json.text(input)}")
            }
            // Every output until null, then the timer as the last entry.
            val outputs = Json.arr()
            while (true) {
                val o = lease.pollOutput() ?: break
                outputs.add(leaseOutputName(o))
            }
            outputs.add(Json.obj().set<JsonNode>("timeout", lease.pollTimeout()?.let { Json.of(it.toLong()) } ?: NullNode.instance))
            expect.get("outputs")?.let { check(i, "outputs", outputs, it) }
            expect.get("held")?.let { check(i, "held", Json.of(lease.isHeld(now)), it) }
            expect.get("config")?.let { check(i, "config", configJson(lease.config()), it) }
        }
    }
}
