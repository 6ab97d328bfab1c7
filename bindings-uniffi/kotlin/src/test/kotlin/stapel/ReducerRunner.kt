package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/**
 * Area `reducer`: the session reducer through the Kotlin API. An event the core reads as
 * a canonical event goes in as the typed `CanonicalEvent`; one it refuses goes in as JSON
 * text (`applyJson`), so the reducer itself refuses and counts it, as the vector expects.
 */
object ReducerRunner {
    private fun typed(text: String): CanonicalEvent? = try {
        canonicalEventFromJson(text)
    } catch (e: ProtocolException.State) {
        null
    }

    private fun apply(r: SessionReducer, text: String): String {
        val ev = typed(text) ?: return r.applyJson(text)
        // The record's JSON form is the event as the core reads it.
        if (!Json.same(Json.parse(canonicalEventToJson(ev)), Json.parse(text).let { stripNulls(it) })) {
            throw VectorFailure("typed event differs from its JSON: ${canonicalEventToJson(ev)} vs $text")
        }
        return r.apply(ev)
    }

    /** An optional `null` field is read as absent (the typed form omits it). */
    private fun stripNulls(v: JsonNode): JsonNode {
        if (!v.isObject) return v
        val o = (v as com.fasterxml.jackson.databind.node.ObjectNode).deepCopy()
        for (k in listOf("normalizedSessionId", "turnId", "itemId")) if (o.get(k)?.isNull == true) o.remove(k)
        return o
    }

    fun run(vector: JsonNode) {
        val cfg = Json.text(vector.get("config") ?: Json.obj())
        val wantConfigError = vector.get("steps").get(0)?.get("expect")?.get("config_error")
        val reducer = try {
            SessionReducer(cfg)
        } catch (e: ProtocolException.Config) {
            if (wantConfigError == null) throw VectorFailure("config refused: ${e.code} (key ${e.key})")
            check(0, "config_error", Json.obj().put("code", e.code).put("key", e.key), wantConfigError)
            return
        }
        if (wantConfigError != null) throw VectorFailure("config accepted, expected config_error ${Json.text(wantConfigError)}")
        val recorded = mutableListOf<String>()
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            var outcome: JsonNode = NullNode.instance
            var error: JsonNode = NullNode.instance
            var errorDetail: JsonNode = NullNode.instance
            var equalsLive: JsonNode = NullNode.instance
            fun record(block: () -> String) {
                try {
                    outcome = Json.of(block())
                } catch (e: ProtocolException.Reduce) {
                    error = Json.of(e.code)
                    errorDetail = Json.of(e.detailCode)
                }
            }
            when {
                input.has("event") -> {
                    val ev = Json.text(input.get("event"))
                    recorded += ev
                    record { apply(reducer, ev) }
                }
                input.has("line") -> {
                    val line = input.str("line") ?: fail(i, "line must be a string")
                    runCatching { Json.parse(line) }.getOrNull()?.let { recorded += Json.text(it) }
                    record { reducer.applyLine(line) }
                }
                input.has("replay") -> {
                    val r = input.get("replay")
                    val list = when {
                        r.isTextual && r.asText() == "recorded" -> recorded.toList()
                        r.isArray -> r.map(Json::text)
                        else -> fail(i, "replay must be an array or \"recorded\"")
                    }
                    val fresh = SessionReducer(cfg)
                    var failed = false
                    for (e in list) {
                        try {
                            apply(fresh, e)
                        } catch (ex: ProtocolException.Reduce) {
                            error = Json.of(ex.code)
                            errorDetail = Json.of(ex.detailCode)
                            failed = true
                            break
                        }
                    }
                    if (!failed) {
                        val replayed = Json.parse(reducerReplay(list.map { typed(it) ?: fail(i, "replayed event is not canonical") }, cfg))
                        if (!Json.same(replayed, Json.parse(fresh.snapshot()))) fail(i, "replay() differs from a strict fold")
                        equalsLive = Json.of(Json.same(replayed, Json.parse(reducer.snapshot())))
                    }
                }
                else -> fail(i, "unknown input ${Json.text(input)}")
            }
            check(i, "error", error, expect.get("error") ?: NullNode.instance)
            expect.get("error_detail")?.let { check(i, "error_detail", errorDetail, it) }
            expect.get("outcome")?.let { check(i, "outcome", outcome, it) }
            expect.get("equals_live")?.let { check(i, "equals_live", equalsLive, it) }
            val snapshot = Json.parse(reducer.snapshot())
            expect.get("snapshot")?.let { check(i, "snapshot", snapshot, it) }
            expect.get("at")?.fields()?.forEach { (ptr, want) ->
                val got = snapshot.at(ptr)
                if (got.isMissingNode) fail(i, "snapshot has no $ptr")
                check(i, "snapshot $ptr", got, want)
            }
            expect.get("delivery")?.let { check(i, "delivery", Json.parse(reducer.delivery()), it) }
        }
    }
}
