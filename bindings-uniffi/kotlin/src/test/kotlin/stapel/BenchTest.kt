package stapel

import com.fasterxml.jackson.databind.ObjectMapper
import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Tag
import org.junit.jupiter.api.Test

/**
 * A small benchmark, not a test (tag `bench`, excluded from `mvn test`; run it with
 * `bindings-uniffi/scripts/bench`, which loads a release build). Prints ns per operation
 * and ratios against Jackson parsing the same frame in the same run; asserts nothing
 * about time.
 */
@Tag("bench")
class BenchTest {
    private val usageFrame =
        """{"schema_version":1,"type":"task.progress","task_id":"T-42","seq":7,"kind":"usage","attempt":1,""" +
            """"payload":{"usage":{"fresh_input":1200,"output":20480,"cache_read":4096,"cache_write":512,"thinking":512},"model":"claude-sonnet-4-5"}}"""

    private var sink = 0L

    /** Best of `rounds` runs of `n` iterations, in ns per iteration. */
    private fun measure(n: Int, rounds: Int = 7, body: (Int) -> Unit): Double {
        var best = Double.MAX_VALUE
        repeat(rounds) {
            val t0 = System.nanoTime()
            for (i in 0 until n) body(i)
            val dt = (System.nanoTime() - t0).toDouble() / n
            if (dt < best) best = dt
        }
        return best
    }

    @Test
    fun decodeValidateAndHubIngestAgainstJackson() {
        val bytes = usageFrame.toByteArray()
        val mapper = ObjectMapper()
        val n = 20_000
        // Warm-up (JIT, JNA's first-call linking).
        measure(n, 3) { sink += mapper.readTree(bytes).size() }
        measure(n, 3) { sink += (decode(bytes, true) as Message.TaskProgress).v.seq.toLong() }

        val jackson = measure(n) { sink += mapper.readTree(bytes).size() }
        val emptyCall = measure(n) { sink += schemaVersion().toLong() }
        val check = measure(n) { checkFrame(bytes, true) }
        val decodeValidate = measure(n) { sink += (decode(bytes, true) as Message.TaskProgress).v.seq.toLong() }
        val decodeText = measure(n) { sink += (decodeText(usageFrame, true) as Message.TaskProgress).v.seq.toLong() }
        val msg = decode(bytes, true)
        val encodeOne = measure(n) { sink += encode(msg).length }

        // Hub ingest: a connected hub that has the runner's hello takes usage frames with
        // rising seqs; each frame is handed over and every output drained.
        val hub = HubSession()
        hub.handleInput(0uL, SessionInput.Connected)
        hub.handleInput(0uL, SessionInput.Frame(encode(Message.Hello(Hello(projectId = "p-1", runnerVersion = "0.1.0")))))
        hub.drain()
        var seq = 0
        val frames = List(60_000) { usageFrame.replace("\"seq\":7", "\"seq\":${it + 1}") }
        fun ingest() {
            hub.handleInput(1uL, SessionInput.Frame(frames[seq++]))
            while (true) sink += (hub.pollOutput() ?: break).hashCode()
        }
        // Per-batch cost as the stream grows (one task, rising seqs).
        for (batch in 0 until 8) {
            val t0 = System.nanoTime()
            repeat(2_000) { ingest() }
            println("bench[kotlin] hub ingest batch $batch (seq ${seq - 2000 + 1}..$seq): %.0f ns/frame".format((System.nanoTime() - t0).toDouble() / 2_000))
        }
        val hubIngest = measure(5_000, 3) { ingest() }
        val hubIngestDrain = run {
            val t0 = System.nanoTime()
            repeat(5_000) {
                hub.handleInput(1uL, SessionInput.Frame(frames[seq++]))
                sink += hub.drain().size
            }
            (System.nanoTime() - t0).toDouble() / 5_000
        }

        fun row(name: String, ns: Double) =
            println("bench[kotlin] %-44s %9.0f ns/op   %5.2f× Jackson readTree".format(name, ns, ns / jackson))
        println("bench[kotlin] frame: ${bytes.size} bytes (task.progress kind usage)")
        row("Jackson ObjectMapper.readTree(bytes)", jackson)
        row("UniFFI empty call (schemaVersion())", emptyCall)
        row("checkFrame(bytes, validate=true)", check)
        row("decode(bytes, validate=true) -> record", decodeValidate)
        row("decodeText(string, validate=true) -> record", decodeText)
        row("encode(record)", encodeOne)
        row("hub ingest: handleInput(Frame) + pollOutput*", hubIngest)
        row("hub ingest: handleInput(Frame) + drain()", hubIngestDrain)
        println("bench[kotlin] sink $sink")
    }
}
