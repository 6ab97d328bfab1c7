package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode
import dev.stapel.runnerprotocol.*

/**
 * Area `admission`: the live server's admission machine through the Kotlin API
 * (`Admission`, `admissionConfig`, `admissionErrorBody`, `admissionResponseHeaders`).
 * Inputs cross in their JSON form; a well-formed `body` input goes through `body()` as
 * bytes.
 */
object AdmissionRunner {
    private val QUERIES = mapOf(
        "parse_config" to setOf("config", "config_error"),
        "error_body" to setOf("value"),
        "response_headers" to setOf("value"),
    )
    private val HEX = Regex("^(?:[0-9a-f]{2})*$")

    /** The bytes of a well-formed `body` input, else null (then fed as JSON). */
    private fun bodyBytes(form: JsonNode): ByteArray? {
        if (!form.isObject || form.get("id")?.isIntegralNumber != true) return null
        val keys = form.fieldNames().asSequence().toSortedSet()
        if (keys == sortedSetOf("data", "id") && form.get("data").isTextual) return form.get("data").asText().toByteArray(Charsets.UTF_8)
        if (keys == sortedSetOf("data_hex", "id") && form.get("data_hex").isTextual && HEX.matches(form.get("data_hex").asText())) {
            return hex(form.get("data_hex").asText())
        }
        return null
    }

    private fun query(i: Int, key: String, arg: JsonNode, expect: JsonNode) {
        expect.fieldNames().forEach { if (it !in QUERIES.getValue(key)) fail(i, "$it is not a $key expectation") }
        when (key) {
            "parse_config" -> try {
                val c = admissionConfig(Json.text(arg))
                check(i, "config", Json.parse(c), expect.get("config") ?: fail(i, "config accepted, expected ${Json.text(expect)}"))
            } catch (e: ProtocolException.Config) {
                val want = expect.get("config_error") ?: fail(i, "unexpected config error ${e.code} (key ${e.key})")
                check(i, "config_error", Json.obj().put("code", e.code).put("key", e.key), want)
            }
            "error_body" -> check(i, "value", admissionErrorBody(arg.asText())?.let { Json.of(it) } ?: NullNode.instance, expect.get("value"))
            else -> check(i, "value", Json.parse(admissionResponseHeaders()), expect.get("value"))
        }
    }

    fun run(vector: JsonNode) {
        val machine = Admission(Json.text(vector.get("config") ?: Json.obj()))
        var now = 0uL
        vector.get("steps").forEachIndexed { i, step ->
            val input = (step.get("input").deepCopy<JsonNode>() as ObjectNode)
            val expect = step.get("expect")
            input.remove("now")?.let { now = it.asLong().toULong() }
            val q = QUERIES.keys.find { input.has(it) }
            if (q != null) {
                query(i, q, input.get(q), expect)
                return@forEachIndexed
            }
            for (k in listOf("config", "config_error", "value")) if (expect.has(k)) fail(i, "$k is a query expectation")
            val data = if (input.size() == 1 && input.has("body")) bodyBytes(input.get("body")) else null
            val error: String? = try {
                if (data != null) machine.body(now, input.get("body").get("id").asLong().toULong(), data)
                else machine.handleInput(now, Json.text(input))
                null
            } catch (e: ProtocolException.State) {
                e.code
            }
            val outputs = Json.arr()
            while (true) outputs.add(machine.pollOutput()?.let(Json::parse) ?: break)
            check(i, "error", error?.let { Json.of(it) } ?: NullNode.instance, expect.get("error") ?: NullNode.instance)
            check(i, "outputs", outputs, expect.get("outputs") ?: Json.arr())
            expect.get("timeout")?.let { check(i, "timeout", machine.pollTimeout()?.let { v -> Json.of(v.toLong()) } ?: NullNode.instance, it) }
            expect.get("runs")?.let { check(i, "runs", Json.parse(machine.runs()), it) }
            expect.get("pending")?.let { check(i, "pending", Json.of(machine.pendingBodies().toLong()), it) }
        }
    }
}
