package stapel

import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import java.io.File
import java.io.InputStream
import java.io.OutputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.net.URI
import java.security.SecureRandom
import java.time.Duration
import java.util.Collections
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import java.util.logging.Handler
import java.util.logging.Level
import java.util.logging.LogManager
import java.util.logging.LogRecord
import java.util.logging.Logger

/**
 * The Kotlin runner client end to end against the Python package's reference hub
 * (`python -m stapel_runner_protocol.hub`), through a TCP proxy the test can cut. Needs
 * the Python package in bindings-python/.venv (or `STAPEL_PYTHON`); scripts/test-all
 * builds it first and sets `STAPEL_KOTLIN_REQUIRE_PYTHON=1`, so there these tests fail
 * instead of being skipped when it is missing.
 */
class RunnerClientTest {
    companion object {
        val python: File = File(
            System.getenv("STAPEL_PYTHON")
                ?: File(System.getProperty("conformance.dir") ?: "../../conformance", "../bindings-python/.venv/bin/python").path,
        )
        val required = System.getenv("STAPEL_KOTLIN_REQUIRE_PYTHON") == "1"
        val hello = Hello(projectId = "p-kotlin", runnerVersion = "0.2.0", capabilities = listOf("subprocess"))
        /** Fast reconnects for the test (the schedule itself is the core's). */
        const val CONFIG = """{"backoff_initial_ms":20,"backoff_max_ms":200}"""

        fun randomToken(prefix: String): String {
            val b = ByteArray(16)
            SecureRandom().nextBytes(b)
            return prefix + b.joinToString("") { "%02x".format(it) }
        }

        fun progress(i: Int) = Message.TaskProgress(
            TaskProgress(taskId = "T-1", attempt = 1uL, kind = "log", payload = """{"text":"line $i"}"""),
        )

        val report = Message.TaskReport(
            TaskReportMessage(
                taskId = "T-1", attempt = 1uL,
                report = """{"schema_version":1,"task_id":"T-1","status":"done","summary_business":"ok","usage":{"fresh_input":1,"output":2,"cache_read":0,"cache_write":0,"thinking":0}}""",
            ),
        )
    }

    /**
     * The Python reference hub as a subprocess, with Python's logging at DEBUG on stderr
     * (the `websockets` library's handshake logs included): its stdout lines (JSON) and its
     * stderr.
     */
    private class Hub(python: File, args: List<String>) : AutoCloseable {
        val process: Process = ProcessBuilder(
            listOf(
                python.path, "-c",
                "import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); " +
                    "from stapel_runner_protocol.hub import main; sys.exit(main(sys.argv[1:]))",
            ) + args,
        ).start()
        val lines = LinkedBlockingQueue<String>()
        val all: MutableList<String> = Collections.synchronizedList(mutableListOf())
        val stderr = StringBuffer()
        val port: Int

        private val readers = listOf(
            Thread { process.inputStream.bufferedReader().forEachLine { lines.put(it); all += it } },
            Thread { process.errorStream.bufferedReader().forEachLine { stderr.append(it).append('\n') } },
        )

        init {
            readers.forEach { it.isDaemon = true; it.start() }
            val first = lines.poll(60, TimeUnit.SECONDS) ?: error("the hub printed nothing; stderr:\n$stderr")
            port = URI(Json.parse(first).str("listening") ?: error("not a listening line: $first")).port
        }

        /** The next stdout line as JSON (fails after 30 s). */
        fun next(): com.fasterxml.jackson.databind.JsonNode =
            Json.parse(lines.poll(30, TimeUnit.SECONDS) ?: error("no line from the hub in 30 s; stderr:\n$stderr"))

        /** Reads lines until one has a `progress` with this seq (or a report); returns what it read. */
        fun untilProgress(seq: Int): List<com.fasterxml.jackson.databind.JsonNode> {
            val read = mutableListOf<com.fasterxml.jackson.databind.JsonNode>()
            while (true) {
                val l = next()
                read.add(l)
                if (l.get("progress")?.get("seq")?.asInt() == seq) return read
            }
        }

        /** Ends the hub (if it still runs) and waits until its output is read to the end. */
        override fun close() {
            process.destroy()
            if (!process.waitFor(5, TimeUnit.SECONDS)) process.destroyForcibly()
            readers.forEach { it.join(5_000) }
        }
    }

    /** A TCP proxy to the hub whose connections the test can drop at once. */
    private class Proxy(target: Int) : AutoCloseable {
        private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
        private val open: MutableList<Socket> = Collections.synchronizedList(mutableListOf())
        val port: Int = server.localPort
        @Volatile var accepted = 0

        init {
            Thread {
                while (!server.isClosed) {
                    val c = try { server.accept() } catch (_: Exception) { break }
                    val u = try { Socket(InetAddress.getLoopbackAddress(), target) } catch (_: Exception) { c.close(); continue }
                    accepted++
                    open += c
                    open += u
                    copy(c.getInputStream(), u.getOutputStream(), c, u)
                    copy(u.getInputStream(), c.getOutputStream(), c, u)
                }
            }.apply { isDaemon = true }.start()
        }

        private fun copy(from: InputStream, to: OutputStream, a: Socket, b: Socket) {
            Thread {
                try {
                    from.copyTo(to, 4096)
                } catch (_: Exception) {
                } finally {
                    a.close()
                    b.close()
                }
            }.apply { isDaemon = true }.start()
        }

        /** Drops every proxied connection (both ends, no close handshake). */
        fun cut() {
            synchronized(open) {
                for (s in open) {
                    try { s.setSoLinger(true, 0) } catch (_: Exception) {}
                    s.close()
                }
                open.clear()
            }
        }

        override fun close() {
            server.close()
            cut()
        }
    }

    /** Every record at every level, from the client's logger and from java.util.logging. */
    private class Captured : System.Logger {
        val records: MutableList<String> = Collections.synchronizedList(mutableListOf())

        /** A copy of the records so far (other threads may still be logging). */
        fun all(): List<String> = synchronized(records) { records.toList() }
        override fun getName() = "captured"
        override fun isLoggable(level: System.Logger.Level) = true
        override fun log(level: System.Logger.Level, bundle: java.util.ResourceBundle?, msg: String?, thrown: Throwable?) {
            records += "$level $msg ${thrown?.toString() ?: ""}"
        }
        override fun log(level: System.Logger.Level, bundle: java.util.ResourceBundle?, format: String?, vararg params: Any?) {
            records += "$level ${java.text.MessageFormat.format(format ?: "", *params)}"
        }

        val jul = object : Handler() {
            override fun publish(r: LogRecord) {
                records += "JUL ${r.level} ${r.loggerName} ${r.message} ${r.parameters?.joinToString() ?: ""} ${r.thrown ?: ""}"
            }
            override fun flush() {}
            override fun close() {}
        }
    }

    private val captured = Captured()
    private val rootLogger: Logger = LogManager.getLogManager().getLogger("")
    private var rootLevel: Level? = null
    private val closing = mutableListOf<AutoCloseable>()

    @BeforeEach
    fun debugLogging() {
        assumeTrue(python.canExecute() || required, "no Python package at $python (set STAPEL_PYTHON)")
        assertTrue(python.canExecute(), "the Python package is required ($python)")
        // Everything at every level, the JDK's own loggers included.
        rootLevel = rootLogger.level
        rootLogger.level = Level.ALL
        rootLogger.addHandler(captured.jul)
    }

    @AfterEach
    fun cleanUp() {
        for (c in closing.reversed()) runCatching { c.close() }
        rootLogger.removeHandler(captured.jul)
        rootLogger.level = rootLevel
    }

    private fun <T : AutoCloseable> closeLater(c: T): T = c.also { closing += it }

    private fun tokenFile(token: String): File =
        File.createTempFile("stapel-token", ".txt").apply { deleteOnExit(); writeText(token) }

    /** Events until one matches (fails after 30 s); returns every event taken on the way. */
    private fun until(client: RunnerClient, what: String, match: (LinkEvent) -> Boolean): List<LinkEvent> {
        val seen = mutableListOf<LinkEvent>()
        val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
        while (System.nanoTime() < deadline) {
            val e = client.poll(Duration.ofMillis(200)) ?: continue
            seen += e
            if (match(e)) return seen
        }
        error("no $what within 30 s; events: $seen")
    }

    @Test
    fun aTaskAssignedProgressAndAReportArriveOnceAcrossACutAndARestartFromASnapshot() {
        val token = randomToken("tok-")
        val hub = closeLater(Hub(python, listOf("--port", "0", "--token-file", tokenFile(token).path, "--assign", "T-1", "--exit-after-reports")))
        val proxy = closeLater(Proxy(hub.port))
        val url = URI("ws://127.0.0.1:${proxy.port}/")
        val client1 = closeLater(RunnerClient(url, hello, { token }, CONFIG, logger = captured))
        client1.start()

        // The hub's task.assign arrives, once.
        val first = until(client1, "task.assign") { it is LinkEvent.Received }
        val assign = (first.last() as LinkEvent.Received).message
        assertTrue(assign is Message.TaskAssign, "$assign")
        assign as Message.TaskAssign
        assertEquals("T-1", assign.v.taskId)
        assertEquals(1uL, assign.v.attempt)
        assertTrue(first.any { it is LinkEvent.Connected })

        val hubSeen = mutableListOf<com.fasterxml.jackson.databind.JsonNode>()
        for (i in 1..20) assertEquals(i.toULong(), client1.send(progress(i)).seq)
        hubSeen.addAll(hub.untilProgress(20))

        // A cut: the proxy drops the connection; frames sent meanwhile are kept and
        // replayed after the link reconnects (its own schedule).
        proxy.cut()
        for (i in 21..40) assertEquals(i.toULong(), client1.send(progress(i)).seq)
        val afterCut = until(client1, "a reconnect") { it is LinkEvent.Connected }
        assertTrue(afterCut.any { it is LinkEvent.Disconnected }, "$afterCut")
        assertTrue(afterCut.any { it is LinkEvent.Reconnecting }, "$afterCut")
        hubSeen.addAll(hub.untilProgress(40))
        assertEquals(2, proxy.accepted)

        // A restart from a snapshot taken while frames were possibly still unacknowledged.
        for (i in 41..45) client1.send(progress(i))
        val snapshot = client1.snapshot()
        client1.close()
        val client2 = closeLater(RunnerClient(url, hello, { token }, CONFIG, snapshot, logger = captured))
        client2.start()
        until(client2, "the connection") { it is LinkEvent.Connected }
        for (i in 46..60) assertEquals(i.toULong(), client2.send(progress(i)).seq)
        hubSeen.addAll(hub.untilProgress(60))
        assertEquals(61uL, client2.send(report).seq)
        while (true) {
            val l = hub.next()
            hubSeen.add(l)
            if (l.has("report")) break
        }
        assertTrue(hub.process.waitFor(30, TimeUnit.SECONDS))
        assertEquals(0, hub.process.exitValue(), "the hub exits 0 once T-1 reported done; stderr:\n${hub.stderr}")
        // The restarted client did not get the task again (its state had received it).
        assertFalse(client2.drainEvents().any { it is LinkEvent.Received }, "task.assign delivered again")
        client2.close()

        // The hub received seqs 1..60 once each, in order, then the report once.
        val progressSeqs = hubSeen.mapNotNull { it.get("progress")?.get("seq")?.asInt() }
        assertEquals((1..60).toList(), progressSeqs)
        assertTrue(hubSeen.mapNotNull { it.get("progress") }.all { it.get("attempt").asInt() == 1 && it.get("task_id").asText() == "T-1" })
        val reports = hubSeen.mapNotNull { it.get("report") }
        assertEquals(1, reports.size)
        assertEquals(61, reports[0].get("seq").asInt())
        assertEquals("done", reports[0].get("report").get("status").asText())
        assertFalse(hubSeen.any { it.has("inbound_gap") || it.has("peer_error") || it.has("error") }, "$hubSeen")

        // DEBUG on both ends, and the token in none of it.
        assertTrue(captured.all().any { it.contains("stapel runner client: socket") }, "the client logged at DEBUG")
        assertTrue(hub.stderr.contains("DEBUG"), "the hub logged at DEBUG")
        noLeak(listOf(token), captured.all(), hub)
    }

    /** No token in the client's records (first: this binding's end), then in the hub's output. */
    private fun noLeak(tokens: List<String>, client: List<String>, hub: Hub) {
        hub.close()
        for (t in tokens) assertEquals(emptyList<String>(), client.filter { it.contains(t) }, "the client's end shows a token")
        val hubText = synchronized(hub.all) { hub.all.toList() } + hub.stderr.lines()
        for (t in tokens) assertEquals(emptyList<String>(), hubText.filter { it.contains(t) }, "the hub's end shows a token")
    }

    @Test
    fun anApplicationThatDoesNotTakeEventsPausesTheSocketAndLosesNothing() {
        val token = randomToken("tok-")
        val tasks = (1..30).map { "T-$it" }
        val hub = closeLater(Hub(python, listOf("--port", "0", "--token-file", tokenFile(token).path) + tasks.flatMap { listOf("--assign", it) }))
        // At 3 untaken events the link pauses the socket: the client stops requesting
        // messages from the JDK's WebSocket until the application takes events again.
        val client = closeLater(
            RunnerClient(URI("ws://127.0.0.1:${hub.port}/"), hello, { token }, """{"max_queued_events":3}""", logger = captured),
        )
        client.start()
        val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
        while (!captured.all().any { it.contains(": pause") } && System.nanoTime() < deadline) Thread.sleep(20)
        assertTrue(captured.all().any { it.contains(": pause") }, "the socket was paused")
        Thread.sleep(300)
        // The rest of the 30 assigns wait in the socket; the application now takes them.
        val assigned = mutableListOf<String>()
        while (assigned.size < tasks.size) {
            when (val e = client.poll(Duration.ofSeconds(30)) ?: error("events stopped after $assigned")) {
                is LinkEvent.Received -> assigned += (e.message as Message.TaskAssign).v.taskId
                is LinkEvent.Error, is LinkEvent.Disconnected -> error("$e after $assigned")
                else -> {}
            }
        }
        assertEquals(tasks, assigned)
        assertTrue(captured.all().any { it.contains(": resume") }, "the socket was resumed")
        assertEquals(0uL, client.stats().backlogOverflows)
        assertEquals(1uL, client.stats().connections)
        client.close()
        noLeak(listOf(token), captured.all(), hub)
    }

    @Test
    fun aWrongTokenIsRefusedWith401AndTheTokenIsNeverShown() {
        val right = randomToken("right-")
        val wrong = randomToken("wrong-")
        val hub = closeLater(Hub(python, listOf("--port", "0", "--token-file", tokenFile(right).path)))
        val client = closeLater(
            RunnerClient(URI("ws://127.0.0.1:${hub.port}/"), hello, { wrong }, """{"reconnect":false}""", logger = captured),
        )
        client.start()
        val seen = until(client, "an error") { it is LinkEvent.Error }
        val e = seen.last() as LinkEvent.Error
        assertEquals("upgrade_refused", e.code)
        assertEquals(401.toUShort(), e.status)
        val error = e.toRunnerProtocolError()
        assertTrue(error is TransportError, "${error.javaClass}")
        assertEquals("upgrade_refused", error.code)
        assertNotNull(error.message)
        assertTrue(error.message!!.contains("401"))
        assertFalse(seen.any { it is LinkEvent.Connected })
        // Reconnects off: the link goes idle.
        val deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos()
        while (client.phase !is LinkPhase.Idle && System.nanoTime() < deadline) Thread.sleep(20)
        assertTrue(client.phase is LinkPhase.Idle, "${client.phase}")
        client.close()
        hub.close()

        // Neither token in any event, exception text or log record (DEBUG, the JDK's
        // loggers included), nor in the hub's output (DEBUG too).
        val texts = seen.map { it.toString() } + listOf(error.toString(), error.stackTraceToString()) + captured.all()
        assertTrue(captured.all().any { it.contains("upgrade_refused") }, "the refusal was logged")
        assertTrue(hub.stderr.contains("DEBUG"), "the hub logged at DEBUG")
        noLeak(listOf(wrong, right), texts, hub)
    }
}
