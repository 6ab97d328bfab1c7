package stapel

import dev.stapel.runnerprotocol.Hello
import dev.stapel.runnerprotocol.LinkEvent
import dev.stapel.runnerprotocol.Message
import dev.stapel.runnerprotocol.RunnerClient
import dev.stapel.runnerprotocol.RunnerProtocolError
import dev.stapel.runnerprotocol.TaskAssign
import dev.stapel.runnerprotocol.TaskProgress
import dev.stapel.runnerprotocol.TaskReportMessage
import dev.stapel.runnerprotocol.closeCodeNormal
import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import java.nio.file.StandardOpenOption
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executors
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock
import kotlin.system.exitProcess

/**
 * The Kotlin RunnerClient under `stapel-conformance runner` (launched by
 * conformance/scenarios/targets/kotlin-runner-client.sh; a test source, so not in the
 * published jar). The twin of python-runner-client.py and node-runner-client.mjs: it
 * connects to `STAPEL_HUB_URL` with the token in `STAPEL_TOKEN_FILE` (read at every
 * connect), keeps its session snapshot in `STAPEL_STATE_DIR/session.snapshot` (written when
 * a command arrives, before it is acted on, and after every frame sent; tmp + rename), and
 * plays the conformance workload the task's goal names (`conformance quick N`: N `state`
 * progress frames and a `done` report; `conformance hold`: one, then wait for the cancel
 * and report `failed`, failure_type `cancelled`). At most two tasks at once; a further
 * assignment gets a `failed` report with failure_type `runner_busy` at once. A cancel of a
 * task that already reported changes nothing.
 *
 * Everything the protocol decides (hello and resume, replay, duplicates, ordering,
 * acknowledgements, keepalive, reconnects) is the client's, i.e. the core's. The short
 * keepalive and reconnect timings are this target's settings, not the protocol's.
 */
object ConformanceRunnerMain {
    @JvmStatic
    fun main(args: Array<String>) {
        if (args.firstOrNull() == "--train") {
            TrainingHub.train()
            return
        }
        fun env(name: String): String = System.getenv(name)?.takeIf { it.isNotEmpty() }
            ?: run {
                System.err.println("kotlin-runner-client: $name is not set (run under `stapel-conformance runner`)")
                exitProcess(2)
            }
        val runner = ConformanceRunner(URI(env("STAPEL_HUB_URL")), File(env("STAPEL_TOKEN_FILE")), File(env("STAPEL_STATE_DIR")))
        runner.run()
    }
}

/** One runner process: the client, the snapshot file, the tasks it runs. */
private class ConformanceRunner(url: URI, tokenFile: File, stateDir: File) {
    companion object {
        const val MAX_TASKS = 2
        /** The session's keepalive under `session`, the reconnect schedule at the top (LinkConfig keys). */
        const val CONFIG =
            """{"session":{"ping_interval_ms":500,"peer_timeout_ms":1500},"backoff_initial_ms":50,"backoff_max_ms":300}"""
        val QUICK = Regex("conformance quick (\\d+)")
    }

    /** A running task: cancelled by a `task.cancel`, which also wakes a holding task. */
    private class Work {
        @Volatile var cancelled = false
        val wake = CountDownLatch(1)
    }

    private val snapshotPath: Path
    private val tmpPath: Path
    val client: RunnerClient

    /** Guards [running], [finished] and [unstalls]; [unstalled] is signalled when [unstalls] grows. */
    private val lock = ReentrantLock()
    private val unstalled = lock.newCondition()
    private val running = HashMap<String, Work>()
    private val finished = HashSet<String>()
    /** `unstalled` and `connected` events seen: a send refused with `backpressure` waits for the next. */
    private var unstalls = 0L
    private val persistLock = ReentrantLock()
    private val workers = Executors.newCachedThreadPool { r -> Thread(r, "conformance-task").apply { isDaemon = true } }
    @Volatile private var stopping = false

    init {
        stateDir.mkdirs()
        snapshotPath = stateDir.toPath().resolve("session.snapshot")
        tmpPath = stateDir.toPath().resolve("session.snapshot.tmp")
        val snapshot = if (Files.exists(snapshotPath)) Files.readAllBytes(snapshotPath) else null
        // Start-up: the JDK's HttpClient (its TLS context) is built on another thread
        // while this one loads the native library (the first call into it).
        val http = CompletableFuture.supplyAsync { HttpClient.newHttpClient() }
        closeCodeNormal()
        client = RunnerClient(
            url,
            Hello(projectId = "conformance-kotlin", runnerVersion = "0.2.0", capabilities = listOf("conformance")),
            token = { tokenFile.readText().trim() },
            configJson = CONFIG,
            snapshot = snapshot,
            httpClient = http.get(),
        )
    }

    /** The snapshot to the state dir: tmp, fsync, rename (one writer at a time, so the file only moves forward). */
    fun persist() = persistLock.withLock {
        val bytes = client.snapshot()
        FileChannel.open(tmpPath, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING).use { ch ->
            val buf = ByteBuffer.wrap(bytes)
            while (buf.hasRemaining()) ch.write(buf)
            ch.force(true)
        }
        Files.move(tmpPath, snapshotPath, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING)
    }

    /** Sends (waiting while the kept log is full: the core's `backpressure`, until `unstalled`), then persists. */
    private fun send(message: Message) {
        while (true) {
            val seen = lock.withLock { unstalls }
            try {
                client.send(message)
                persist()
                return
            } catch (e: RunnerProtocolError) {
                if (e.code != "backpressure") throw e
                lock.withLock {
                    while (unstalls == seen) unstalled.await()
                }
            }
        }
    }

    private fun report(taskId: String, attempt: ULong, status: String, summary: String, failureType: String? = null) {
        val r = Json.obj()
            .put("schema_version", 1)
            .put("task_id", taskId)
            .put("status", status)
            .put("summary_business", summary)
        val usage = r.putObject("usage")
        for (k in listOf("cache_read", "cache_write", "fresh_input", "output", "thinking")) usage.put(k, 0)
        if (failureType != null) r.put("failure_type", failureType)
        send(Message.TaskReport(TaskReportMessage(taskId = taskId, attempt = attempt, report = Json.text(r))))
    }

    private fun work(a: TaskAssign, w: Work) {
        try {
            val goal = Json.parse(a.task).get("goal")?.let { if (it.isTextual) it.asText() else it.toString() } ?: ""
            val hold = goal.contains("conformance hold")
            val steps = if (hold) 1 else QUICK.find(goal)?.groupValues?.get(1)?.toInt() ?: 3
            for (i in 0 until steps) {
                if (w.cancelled) break
                val payload = Json.obj().put("state", if (hold) "holding" else "step $i")
                send(Message.TaskProgress(TaskProgress(taskId = a.taskId, attempt = a.attempt, kind = "state", payload = Json.text(payload))))
            }
            if (hold && !w.cancelled) w.wake.await()
            if (w.cancelled) {
                report(a.taskId, a.attempt, "failed", "cancelled by the hub", "cancelled")
            } else {
                report(a.taskId, a.attempt, "done", "the conformance workload finished")
            }
        } catch (e: Exception) {
            if (!stopping) System.err.println("kotlin-runner-client: task ${a.taskId}: $e")
        } finally {
            lock.withLock {
                running.remove(a.taskId)
                finished.add(a.taskId)
            }
        }
    }

    private fun onMessage(m: Message) {
        when (m) {
            is Message.TaskAssign -> {
                val a = m.v
                var busy = false
                val w = Work()
                lock.withLock {
                    if (a.taskId in running || a.taskId in finished) return
                    if (running.size >= MAX_TASKS) {
                        finished.add(a.taskId)
                        busy = true
                    } else {
                        running[a.taskId] = w
                    }
                }
                // Sends run off the event loop: one that waits for `unstalled` must not
                // block the loop that takes it.
                if (busy) {
                    workers.execute {
                        try {
                            report(a.taskId, a.attempt, "failed", "the runner already runs $MAX_TASKS tasks", "runner_busy")
                        } catch (e: Exception) {
                            if (!stopping) System.err.println("kotlin-runner-client: task ${a.taskId}: $e")
                        }
                    }
                } else {
                    workers.execute { work(a, w) }
                }
            }
            is Message.TaskCancel -> {
                val w = lock.withLock { running[m.v.taskId] }
                if (w != null) {
                    w.cancelled = true
                    w.wake.countDown()
                }
            }
            else -> {}
        }
    }

    /**
     * The event loop. [training]: no signal handling, a `task.assign` of `conformance quick
     * 2` played once connected, and a return at the first disconnect.
     */
    fun run(training: Boolean = false) {
        // SIGTERM / SIGINT: persist, close (a normal close, bounded by the link's close
        // deadline), exit 0.
        if (!training) Runtime.getRuntime().addShutdownHook(Thread {
            stopping = true
            try {
                persist()
                client.close()
            } catch (e: Exception) {
                System.err.println("kotlin-runner-client: on stop: $e")
            }
            Runtime.getRuntime().halt(0)
        })
        client.start()
        while (true) {
            when (val e = client.take()) {
                is LinkEvent.Received -> {
                    // The command's receipt is kept before any work it starts can send (a
                    // runner killed right after must still declare it in its next hello.resume).
                    persist()
                    onMessage(e.message)
                    persist()
                }
                is LinkEvent.Unstalled, is LinkEvent.Connected -> {
                    lock.withLock {
                        unstalls++
                        unstalled.signalAll()
                    }
                    if (training && e is LinkEvent.Connected) {
                        onMessage(Message.TaskAssign(TaskAssign(taskId = "train", task = "{\"goal\":\"conformance quick 2\"}", role = "train", attempt = 1uL)))
                    }
                }
                is LinkEvent.Error -> System.err.println("kotlin-runner-client: error ${e.code}" + (e.status?.let { " (HTTP $it)" } ?: "") + ": ${e.detail}")
                is LinkEvent.Disconnected -> {
                    if (training) return
                    System.err.println("kotlin-runner-client: disconnected: ${e.reason}")
                }
                is LinkEvent.PeerError -> System.err.println("kotlin-runner-client: peer_error ${e.code}: ${e.detail}")
                is LinkEvent.Stopped -> if (stopping) return
                else -> {}
            }
        }
    }
}

/**
 * `--train`: one conversation of the runner with a scripted hub on loopback (handshake,
 * the runner's hello, a ping each way, the frames of a `conformance quick 2` task up to
 * its report, a close; it fails when the report does not come), so that a JVM run with `-XX:ArchiveClassesAtExit` archives the classes a
 * conformance run loads (bindings-uniffi/scripts/test; the launcher then starts faster).
 * Not a hub: it checks nothing; the kit judges the runner.
 */
private object TrainingHub {
    /** The runner's frames as the hub read them (and how the conversation ended). */
    private val seen: MutableList<String> = java.util.Collections.synchronizedList(mutableListOf())
    private val PING = Regex(""""type":"ping","nonce":(\d+)""")

    fun train() {
        val server = java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())
        val dir = Files.createTempDirectory("kotlin-runner-train")
        try {
            val token = dir.resolve("token").also { Files.writeString(it, "training") }
            val hub = Thread {
                try {
                    server.accept().use { play(it) }
                } catch (e: java.io.IOException) {
                    seen += "hub: $e"
                }
            }.apply { isDaemon = true }
            hub.start()
            val runner = ConformanceRunner(URI("ws://127.0.0.1:${server.localPort}/"), token.toFile(), dir.resolve("state").toFile())
            runner.run(training = true)
            runner.client.close()
            hub.join(5_000)
            if (!seen.any { it.contains("task.report") }) {
                System.err.println("kotlin-runner-client --train: the conversation did not reach the task's report; frames: $seen")
                exitProcess(1)
            }
        } finally {
            server.close()
            dir.toFile().deleteRecursively()
        }
    }

    private fun play(sock: java.net.Socket) {
        val input = java.io.DataInputStream(java.io.BufferedInputStream(sock.getInputStream()))
        val out = sock.getOutputStream()
        val head = StringBuilder()
        while (!head.endsWith("\r\n\r\n")) head.append(input.readUnsignedByte().toChar())
        val key = head.lines().first { it.lowercase().startsWith("sec-websocket-key:") }.substringAfter(':').trim()
        val accept = java.util.Base64.getEncoder().encodeToString(
            java.security.MessageDigest.getInstance("SHA-1").digest((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").toByteArray()),
        )
        out.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: $accept\r\n\r\n".toByteArray())
        seen += String(readFrame(input).second) // the hello
        writeFrame(out, 0x1, """{"schema_version":1,"type":"ping","nonce":1}""".toByteArray())
        while (true) {
            val (op, payload) = readFrame(input)
            val text = String(payload)
            seen += "$op $text"
            if (op == 0x8 || text.contains("task.report")) break
            // The runner's pings (the first one a barrier its sends wait for) are answered.
            PING.find(text)?.let { writeFrame(out, 0x1, """{"schema_version":1,"type":"pong","nonce":${it.groupValues[1]}}""".toByteArray()) }
        }
        writeFrame(out, 0x8, byteArrayOf(0x03, 0xE8.toByte()))
        try {
            while (readFrame(input).first != 0x8) Unit
        } catch (_: java.io.IOException) {
        }
    }

    /** A client frame (masked, unfragmented): its opcode and payload. */
    private fun readFrame(input: java.io.DataInputStream): Pair<Int, ByteArray> {
        val b0 = input.readUnsignedByte()
        val b1 = input.readUnsignedByte()
        val len = when (val l = b1 and 0x7F) {
            126 -> input.readUnsignedShort().toLong()
            127 -> input.readLong()
            else -> l.toLong()
        }
        val mask = ByteArray(4).also { if (b1 and 0x80 != 0) input.readFully(it) }
        val payload = ByteArray(len.toInt()).also { input.readFully(it) }
        for (i in payload.indices) payload[i] = (payload[i].toInt() xor mask[i % 4].toInt()).toByte()
        return (b0 and 0x0F) to payload
    }

    /** A server frame (unmasked, unfragmented, under 126 bytes). */
    private fun writeFrame(out: java.io.OutputStream, opcode: Int, payload: ByteArray) {
        out.write(byteArrayOf((0x80 or opcode).toByte(), payload.size.toByte()) + payload)
        out.flush()
    }
}
