package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/**
 * Area `lease`: the `Lease` timing machine through the Kotlin API; and the JSON forms of
 * area `store` (rows and writes, the core's own JSON form through `runnerRowsToJson`,
 * `runnerRowsFromJson` and `rowWriteToJson`), whose steps run in [SessionRunner].
 */
object StoreRunner {
    /** A store's rows as JSON, in the core's form (`runnerRowsToJson`). */
    fun rowsJson(rows: RunnerRows): JsonNode = Json.parse(runnerRowsToJson(rows))

    /** One write as JSON, in the core's form (`rowWriteToJson`: op first, then its columns). */
    fun writeJson(w: RowWrite): JsonNode = Json.parse(rowWriteToJson(w))

    fun writesJson(ws: List<RowWrite>): JsonNode {
        val out = Json.arr()
        for (w in ws) out.add(writeJson(w))
        return out
    }

    /** Rows from their JSON form, read by the core (`runnerRowsFromJson`; malformed rows
     * throw `ProtocolException.State` `invalid_rows`). */
    fun rowsOf(v: JsonNode): RunnerRows = runnerRowsFromJson(Json.text(v))

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
