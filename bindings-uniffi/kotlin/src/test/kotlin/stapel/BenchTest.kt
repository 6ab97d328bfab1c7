package stapel

import com.fasterxml.jackson.databind.ObjectMapper
import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Tag
import org.junit.jupiter.api.Test

/**
 * A small benchmark, not a test (tag `bench`, excluded from `mvn test`; run it with
 * `bindings-uniffi/scripts/bench`, which loads a release build). Prints ns per operation
 * and ratios against Jackson parsing the same frame in the same run, and splits a call's
 * time with the library's Rust-side probes (`probe*`, feature `bench-probe`): the core
 * alone, plus the binding's record, plus UniFFI's buffer serialization; the rest of a
 * Kotlin call is the JNA crossing and the Kotlin-side lifting. Asserts nothing about time.
 */
@Tag("bench")
class BenchTest {
    private val usageFrame =
        """{"schema_version":1,"type":"task.progress","task_id":"T-42","seq":7,"kind":"usage","attempt":1,""" +
            """"payload":{"usage":{"fresh_input":1200,"output":20480,"cache_read":4096,"cache_write":512,"thinking":512},"model":"claude-sonnet-4-5"}}"""
    private val hello = """{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p-1","runner_version":"0.1.0"}"""

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

    /** Best of `rounds` Rust-side timings of `n` iterations, in ns per iteration. */
    private fun probe(n: Int, rounds: Int = 7, body: (UInt) -> ULong): Double =
        (0 until rounds).minOf { body(n.toUInt()).toDouble() / n }

    private fun frames(from: Int, count: Int): List<String> =
        List(count) { usageFrame.replace("\"seq\":7", "\"seq\":${from + it}") }

    private fun connectedHub(): HubSession {
        val hub = HubSession()
        hub.handleInput(0uL, SessionInput.Connected)
        hub.handleInput(0uL, SessionInput.Frame(hello))
        hub.drain()
        return hub
    }

    @Test
    fun decodeValidateAndHubIngestAgainstJackson() {
        val bytes = usageFrame.toByteArray()
        val mapper = ObjectMapper()
        val n = 20_000
        // Warm-up (JIT, JNA's first-call linking).
        measure(n, 3) { sink += mapper.readTree(bytes).size() }
        measure(n, 3) { sink += (decode(bytes, true) as Message.TaskProgress).v.seq.toLong() }
        probe(n, 2) { probeDecodeLowered(bytes, true, it) }

        val jackson = measure(n) { sink += mapper.readTree(bytes).size() }
        val jacksonFields = measure(n) {
            val t = mapper.readTree(bytes)
            sink += t.get("seq").asLong() + t.get("payload").toString().length
        }
        val emptyCall = measure(n) { sink += schemaVersion().toLong() }
        val check = measure(n) { checkFrame(bytes, true) }
        val decodeValidate = measure(n) { sink += (decode(bytes, true) as Message.TaskProgress).v.seq.toLong() }
        val direct = java.nio.ByteBuffer.allocateDirect(bytes.size).put(bytes).flip()
        val checkDirectNs = measure(n) { checkFrameDirect(direct, true) }
        val decodeDirectNs = measure(n) { sink += (decodeDirect(direct, true) as Message.TaskProgress).v.seq.toLong() }
        val decodeText = measure(n) { sink += (decodeText(usageFrame, true) as Message.TaskProgress).v.seq.toLong() }
        val msg = decode(bytes, true)
        val encodeOne = measure(n) { sink += encode(msg).length }
        val coreDecode = probe(n) { probeCoreDecode(bytes, true, it) }
        val coreRecord = probe(n) { probeDecodeRecord(bytes, true, it) }
        val coreLowered = probe(n) { probeDecodeLowered(bytes, true, it) }

        // Hub ingest: a connected hub that has the runner's hello takes usage frames with
        // rising seqs; each frame is handed over and every output drained.
        var hub = connectedHub()
        var seq = 1
        val perFrame = run {
            val all = frames(1, 7 * 5_000 + 5_000)
            measure(5_000, 8) {
                hub.handleInput(1uL, SessionInput.Frame(all[seq++ - 1]))
                while (true) sink += (hub.pollOutput() ?: break).hashCode()
            }
        }
        hub = connectedHub()
        seq = 1
        val batch = 100
        val batched = run {
            val all = frames(1, 8 * 5_000)
            val batches = all.chunked(batch)
            var b = 0
            measure(5_000 / batch, 8) {
                hub.handleFrames(1uL, batches[b++])
                sink += hub.drain().size
            } / batch
        }
        val coreIngest = (0 until 5).minOf {
            val fs = frames(1, 10_000)
            probeCoreHubIngest(hello, fs).toDouble() / fs.size
        }

        fun row(name: String, ns: Double) =
            println("bench[kotlin] %-52s %9.0f ns/op   %6.2f× Jackson readTree".format(name, ns, ns / jackson))
        println("bench[kotlin] frame: ${bytes.size} bytes (task.progress kind usage)")
        row("Jackson ObjectMapper.readTree(bytes)", jackson)
        row("Jackson readTree + seq + payload text", jacksonFields)
        row("UniFFI empty call (schemaVersion())", emptyCall)
        row("checkFrame(bytes, validate=true)", check)
        row("decode(bytes, validate=true) -> record", decodeValidate)
        row("checkFrameDirect(direct ByteBuffer, validate=true)", checkDirectNs)
        row("decodeDirect(direct ByteBuffer, validate=true) -> record", decodeDirectNs)
        row("decodeText(string, validate=true) -> record", decodeText)
        row("encode(record)", encodeOne)
        row("  in Rust: core decode_view(validate) only", coreDecode)
        row("  in Rust: + Message record", coreRecord)
        row("  in Rust: + RustBuffer serialization", coreLowered)
        row("hub ingest: handleInput(Frame) + pollOutput*", perFrame)
        row("hub ingest: handleFrames($batch) + drain(), per frame", batched)
        row("  in Rust: core hub ingest only, per frame", coreIngest)
        val crossing = decodeValidate - coreLowered
        println(
            "bench[kotlin] decode split: core %.0f ns, record %.0f ns, serialization %.0f ns, JNA call + ByteArray in + Kotlin lifting %.0f ns (empty call %.0f ns)".format(
                coreDecode, coreRecord - coreDecode, coreLowered - coreRecord, crossing, emptyCall,
            ),
        )
        println("bench[kotlin] sink $sink")
    }
}
