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

    /**
     * The link machines on the JVM: what a pump pays per frame. Runner: `send` of a
     * progress frame + `drainOutputs()` (the client's send path) on a connected link.
     * Hub: a frame in through `step` and the event reported taken, against
     * `handleFrames(100)` + `drainOutputs()` + one `EventsTaken`, per frame.
     */
    @Test
    fun linkCallsPerFrame() {
        val n = 5_000
        val big = """{"session":{"sequencing":{"max_outbox_frames":1000000,"max_outbox_bytes":4000000000}}}"""
        val runner = RunnerLink(Hello(projectId = "p-1", runnerVersion = "0.1.0"), big)
        runner.step(0uL, LinkInput.Start)
        runner.step(0uL, LinkInput.Opened(1uL))
        val progress = decode(usageFrame.toByteArray(), true) as Message.TaskProgress
        val send = measure(n, 8) {
            sink += runner.send(1uL, progress).seq.toLong()
            sink += runner.drainOutputs().size
        }

        fun connectedHubLink(): HubLink {
            val hub = HubLink()
            hub.step(0uL, LinkInput.Attach(1uL))
            val out = hub.step(0uL, LinkInput.FrameText(1uL, hello)).outputs
            hub.step(0uL, LinkInput.EventsTaken(out.count { it is LinkOutput.Event }.toULong() + 1uL))
            return hub
        }
        var hub = connectedHubLink()
        var seq = 1
        val all = frames(1, 9 * n)
        val perFrame = measure(n, 8) {
            val out = hub.step(1uL, LinkInput.FrameText(1uL, all[seq++ - 1])).outputs
            sink += out.size
            hub.step(1uL, LinkInput.EventsTaken(out.count { it is LinkOutput.Event }.toULong()))
        }
        hub = connectedHubLink()
        val batch = 100
        val batches = all.chunked(batch)
        var b = 0
        val batched = measure(n / batch, 8) {
            hub.handleFrames(1uL, 1uL, batches[b++])
            val out = hub.drainOutputs()
            sink += out.size
            hub.handleInput(1uL, LinkInput.EventsTaken(out.count { it is LinkOutput.Event }.toULong()))
        } / batch
        val emptyCall = measure(n) { sink += schemaVersion().toLong() }
        fun row(name: String, ns: Double) =
            println("bench[kotlin] %-52s %9.0f ns/op   %6.2f× empty call".format(name, ns, ns / emptyCall))
        row("UniFFI empty call (schemaVersion())", emptyCall)
        row("runner link: send(progress) + drainOutputs()", send)
        row("hub link: step(FrameText) + step(EventsTaken)", perFrame)
        row("hub link: handleFrames($batch) + drainOutputs(), per frame", batched)
        println("bench[kotlin] link stats ${hub.stats()} sink $sink")
    }
}
