package stapel

import com.fasterxml.jackson.databind.DeserializationFeature
import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.ObjectMapper
import com.fasterxml.jackson.databind.node.ArrayNode
import com.fasterxml.jackson.databind.node.JsonNodeFactory
import com.fasterxml.jackson.databind.node.NullNode
import com.fasterxml.jackson.databind.node.ObjectNode

/** JSON helpers of the tests (Jackson): vectors in, comparisons as JSON values. */
object Json {
    val mapper: ObjectMapper = ObjectMapper()
        .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
        .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true))

    fun parse(text: String): JsonNode = mapper.readTree(text) ?: NullNode.instance
    fun text(node: JsonNode): String = mapper.writeValueAsString(node)
    fun obj(): ObjectNode = mapper.createObjectNode()
    fun arr(): ArrayNode = mapper.createArrayNode()
    fun of(value: Any?): JsonNode = mapper.valueToTree(value) ?: NullNode.instance

    /** JSON value equality: key order ignored, numbers by value, arrays in order. */
    fun same(a: JsonNode?, b: JsonNode?): Boolean {
        val x = a ?: NullNode.instance
        val y = b ?: NullNode.instance
        if (x.isNumber && y.isNumber) return x.decimalValue().compareTo(y.decimalValue()) == 0
        if (x.isObject && y.isObject) {
            if (x.size() != y.size()) return false
            return x.fieldNames().asSequence().all { y.has(it) && same(x.get(it), y.get(it)) }
        }
        if (x.isArray && y.isArray) {
            if (x.size() != y.size()) return false
            return (0 until x.size()).all { same(x.get(it), y.get(it)) }
        }
        return x == y
    }
}

/** A failed check of one step. */
class VectorFailure(message: String) : Exception(message)

fun check(step: Int, what: String, got: JsonNode?, want: JsonNode?) {
    if (!Json.same(got, want)) {
        throw VectorFailure("step $step: $what mismatch\n  got:  ${got?.let(Json::text)}\n  want: ${want?.let(Json::text)}")
    }
}

fun fail(step: Int, why: String): Nothing = throw VectorFailure("step $step: $why")

fun hex(s: String): ByteArray {
    require(s.length % 2 == 0) { "odd-length hex" }
    return ByteArray(s.length / 2) { s.substring(2 * it, 2 * it + 2).toInt(16).toByte() }
}

/** The bytes of `key` (UTF-8 text) or `key_hex` (hex), or null. */
fun bytesOf(input: JsonNode, key: String): ByteArray? {
    input.get(key)?.takeIf { it.isTextual }?.let { return it.asText().toByteArray(Charsets.UTF_8) }
    input.get("${key}_hex")?.takeIf { it.isTextual }?.let { return hex(it.asText()) }
    return null
}

fun JsonNode.str(key: String): String? = get(key)?.takeIf { it.isTextual }?.asText()
fun JsonNode.ulong(key: String): ULong? = get(key)?.takeIf { it.isIntegralNumber }?.asLong()?.toULong()
