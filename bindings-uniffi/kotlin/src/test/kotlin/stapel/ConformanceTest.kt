package stapel

import com.fasterxml.jackson.databind.JsonNode
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.io.File

/**
 * Runs every vector of `conformance/vectors/` through the Kotlin API and prints
 * `conformance[kotlin]: N vectors passed`. A vector the runner cannot run (an area with
 * no runner yet, an unknown input form) is a failure, never a skip; the test fails on any
 * failure.
 */
class ConformanceTest {
    companion object {
        val RUNNERS: Map<String, (JsonNode) -> Unit> = mapOf(
            "wire" to WireRunner::run,
            "framing" to FramingRunner::run,
            "sequencing" to SequencingRunner::run,
            "session" to SessionRunner::run,
            "store" to SessionRunner::run,
            "lease" to StoreRunner::runLease,
            "host" to HostRunner::run,
            "local" to LocalRunner::run,
            "reducer" to ReducerRunner::run,
            "contract" to ContractRunner::run,
            "adapter" to AdapterRunner::run,
            "runner_task" to RunnerTaskRunner::run,
            "admission" to AdmissionRunner::run,
            "link" to LinkRunner::run,
            "errors" to ErrorsRunner::run,
        )

        /**
         * The `expect` keys each area's runner checks: a step with any other key fails
         * (a new expectation, or a typo, never passes unchecked). The same table as the
         * Rust runner's.
         */
        val EXPECT_KEYS: Map<String, Set<String>> = mapOf(
            "adapter" to setOf("error", "lifecycle", "outputs", "result_line", "state", "system_prompt", "timeout", "total_tokens", "value"),
            "admission" to setOf("config", "config_error", "error", "outputs", "pending", "runs", "timeout", "value"),
            "contract" to setOf("error", "finished", "outputs", "refusal", "resolved", "stage", "tool_calls", "usage", "value"),
            "errors" to setOf("class", "classes"),
            "framing" to setOf("accepted", "buffered_bytes", "error", "output", "ready"),
            "host" to setOf("config", "config_error", "error", "outputs", "pending", "runners", "state", "timeout", "value"),
            "link" to setOf("config", "config_error", "error", "outbox_frames", "outputs", "phase", "queued_events", "stats"),
            "local" to setOf("config_error", "error", "outputs", "timeout"),
            "reducer" to setOf("at", "config_error", "delivery", "equals_live", "error", "error_detail", "outcome", "snapshot"),
            "runner_task" to setOf("error", "result"),
            "sequencing" to setOf(
                "arrival", "arrivals", "channel", "confirmed", "dropped", "error", "frame", "frames", "gap", "known",
                "last_seq", "outbox", "positions", "replay", "results", "resume_map", "streams", "value",
            ),
            "session" to setOf("config_error", "error", "outbox_frames", "outputs", "resume_map"),
            "store" to setOf("close", "config_error", "error", "outbox_frames", "outputs", "resume_map", "rows", "writes"),
            "lease" to setOf("config", "config_error", "held", "outputs"),
            "wire" to setOf("encoded", "error", "message", "type"),
        )
    }

    @Test
    fun everyVector() {
        val root = File(System.getProperty("conformance.dir") ?: "../../conformance", "vectors")
        val files = root.walkTopDown().filter { it.isFile && it.name.endsWith(".json") }
            .sortedBy { it.relativeTo(root).path }.toList()
        assertTrue(files.isNotEmpty(), "no vectors under $root")
        var passed = 0
        val failures = mutableListOf<Pair<String, String>>()
        val perArea = sortedMapOf<String, IntArray>()
        for (file in files) {
            val rel = file.relativeTo(root).path
            val folder = rel.substringBefore('/')
            val counts = perArea.getOrPut(folder) { IntArray(2) }
            try {
                val v = Json.parse(file.readText())
                val area = v.str("area") ?: throw VectorFailure("vector has no \"area\"")
                if (area != folder) throw VectorFailure("area $area does not match folder $folder")
                val steps = v.get("steps")
                if (steps == null || !steps.isArray || steps.isEmpty) throw VectorFailure("vector has no steps")
                val known = EXPECT_KEYS[area] ?: throw VectorFailure("no expect keys known for area $area")
                steps.forEachIndexed { i, s ->
                    val e = s.get("expect")
                    if (e == null || !e.isObject || e.isEmpty) throw VectorFailure("step $i: `expect` is missing or empty")
                    e.fieldNames().forEach { k -> if (k !in known) throw VectorFailure("step $i: unknown expect key \"$k\"") }
                }
                val runner = RUNNERS[area] ?: throw VectorFailure("no Kotlin runner for area $area")
                runner(v)
                passed++
                counts[0]++
            } catch (e: VectorFailure) {
                failures += folder to "$rel: ${e.message}"
                counts[1]++
            } catch (e: Exception) {
                failures += folder to "$rel: ${e::class.simpleName}: ${e.message}"
                counts[1]++
            }
        }
        for ((area, c) in perArea) println("conformance[kotlin] $area: ${c[0]} passed, ${c[1]} failed")
        for ((_, f) in failures) System.err.println("FAILED $f")
        println("conformance[kotlin]: $passed vectors passed")
        if (failures.isNotEmpty()) println("conformance[kotlin]: ${failures.size} vectors FAILED")
        assertTrue(failures.isEmpty(), "${failures.size} vectors failed:\n" + failures.joinToString("\n") { it.second })
    }
}
