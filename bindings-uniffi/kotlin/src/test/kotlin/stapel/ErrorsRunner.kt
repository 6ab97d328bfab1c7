package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/**
 * Area `errors`: the core's one error table through the Kotlin API (`errorClass`,
 * `errorClasses`). `ErrorsTest` checks that the Kotlin exception classes are built from
 * it and that real errors get the class it names.
 */
object ErrorsRunner {
    fun run(vector: JsonNode) {
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            when {
                input.has("class_of") -> {
                    val q = input.get("class_of")
                    val got = errorClass(q.str("kind") ?: fail(i, "class_of.kind"), q.str("code") ?: fail(i, "class_of.code"))
                    check(i, "class", Json.of(got), expect.get("class") ?: fail(i, "expect.class"))
                }
                input.has("classes") -> {
                    val got = Json.arr()
                    for (c in errorClasses()) {
                        got.add(Json.obj().put("name", c.name).set<JsonNode>("parent", c.parent?.let { Json.of(it) } ?: NullNode.instance))
                    }
                    check(i, "classes", got, expect.get("classes") ?: fail(i, "expect.classes"))
                }
                else -> fail(i, "unknown input ${Json.text(input)}")
            }
        }
    }
}
