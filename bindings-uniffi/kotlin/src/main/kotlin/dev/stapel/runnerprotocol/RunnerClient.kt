package dev.stapel.runnerprotocol

import java.net.URI
import java.net.http.HttpClient
import java.net.http.WebSocket
import java.net.http.WebSocketHandshakeException
import java.nio.ByteBuffer
import java.security.SecureRandom
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import java.util.concurrent.CompletionStage
import java.util.concurrent.CountDownLatch
import java.util.concurrent.ExecutionException
import java.util.concurrent.Executors
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.ScheduledExecutorService
import java.util.concurrent.ScheduledFuture
import java.util.concurrent.TimeUnit

/**
 * A runner's reconnecting connection to its hub over the JDK's `java.net.http.WebSocket`,
 * driven by the core's [RunnerLink]. The client is a pump: it opens, writes, pauses,
 * resumes, closes and aborts sockets when the link says so, arms one timer at the link's
 * deadline, and queues the link's events for the application. Every decision — when to
 * connect and reconnect (the core's backoff, jittered from [seed]), the connect and close
 * deadlines, what a frame is, the event and backlog bounds, the error codes — is the
 * link's (see the core's `link` module).
 *
 * ```kotlin
 * val client = RunnerClient(URI("ws://127.0.0.1:8765/"), Hello(projectId = "p-1", runnerVersion = "1.0"),
 *     token = { File("token").readText().trim() })
 * client.start()
 * while (true) {
 *     when (val e = client.take()) {
 *         is LinkEvent.Received -> handle(e.message)            // task.assign, task.cancel
 *         is LinkEvent.Error -> log(e.code, e.status)           // upgrade_refused (401), connect_failed, …
 *         else -> {}
 *     }
 * }
 * client.send(Message.TaskProgress(TaskProgress(taskId = "T-1", attempt = 1uL, kind = "log", payload = "{}")))
 * File("state").writeBytes(client.snapshot())                   // resume: RunnerClient(…, snapshot = bytes)
 * client.close()
 * ```
 *
 * Threads: one pump thread owns the sockets and feeds the link; the JDK's listener
 * threads only hand it what they read. [send], [resend] and [stop] run on the pump and
 * wait for it; [take], [poll] and [drainEvents] may be called from any thread. The
 * event queue holds at most what the link's accounting allows (`max_queued_events`, then
 * the socket is paused; news beyond the core's allowance is dropped and counted in
 * [stats]).
 *
 * The token is read from [token] at every connect, sent only in the `Authorization`
 * header, and never logged or put into an error detail.
 *
 * @param url the hub's WebSocket URL.
 * @param hello the runner's identity (its `resume` comes from the link's state).
 * @param token the bearer token source (`null` or empty: the link's `no_token`).
 * @param configJson the core's link configuration (`LinkConfig` keys, the session's under
 *   `session`); `null`: the core's defaults.
 * @param snapshot sequencing state saved with [snapshot], to resume.
 * @param seed the reconnect jitter's seed (taken once from a random source by default).
 * @param httpClient the JDK client the WebSockets are built with.
 * @param logger where the client logs (DEBUG: socket actions and events; never a token).
 * @throws RunnerProtocolError the table class of a refused configuration ([ConfigError]),
 *   hello or snapshot.
 */
class RunnerClient(
    private val url: URI,
    hello: Hello,
    private val token: () -> String?,
    configJson: String? = null,
    snapshot: ByteArray? = null,
    seed: Long = SecureRandom().nextLong(),
    private val httpClient: HttpClient = HttpClient.newHttpClient(),
    private val logger: System.Logger = System.getLogger(RunnerClient::class.java.name),
) : AutoCloseable {
    private val link: RunnerLink = runnerProtocol { RunnerLink(hello, configJson, snapshot, seed.toULong()) }
    private val pump: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor { r ->
        Thread(r, "stapel-runner-client").apply { isDaemon = true }
    }
    private val events = LinkedBlockingQueue<LinkEvent>()
    private val t0 = System.nanoTime()

    // Pump-thread state.
    private val sockets = HashMap<ULong, Sock>()
    private var timer: ScheduledFuture<*>? = null
    private var timerAt: ULong? = null
    /** Closers waiting for the next `Stopped`. */
    private val stopWaiters = ArrayList<CountDownLatch>()

    /** One socket the link asked for, as the pump tracks it. */
    private class Sock(val id: ULong) {
        var ws: WebSocket? = null
        var connecting: CompletableFuture<WebSocket>? = null
        var sending: CompletableFuture<*> = CompletableFuture.completedFuture(null)
        var paused = false
        /** Receive invocations used up while paused, requested again on resume. */
        var owed = 0L
        var failed = false
    }

    init {
        // The JDK's own HTTP client logging, when a user turns it on, prints every request
        // header — the Authorization header included. Say so once (the header is not ours
        // to hide from the JDK).
        val jdkLog = System.getProperty("jdk.httpclient.HttpClient.log") ?: ""
        if (jdkLog.contains("headers") || jdkLog.contains("all")) {
            log(System.Logger.Level.WARNING,
                "stapel runner client: -Djdk.httpclient.HttpClient.log=$jdkLog makes the JDK log request headers, the bearer token included",
            )
        }
    }

    /** One record through the (message, thrown) form, the one every System.Logger implements. */
    private fun log(level: System.Logger.Level, message: String) {
        if (logger.isLoggable(level)) logger.log(level, null as java.util.ResourceBundle?, message, null as Throwable?)
    }

    private fun now(): ULong = ((System.nanoTime() - t0) / 1_000_000).toULong()

    /** Starts connecting (again after [stop]). */
    fun start() = onPump { feed(LinkInput.Start) }

    /**
     * Sends `task.progress` / `task.report`: stamped, kept for replay, transmitted when
     * connected. Returns what was stamped.
     *
     * @throws ProtocolStateError `backpressure` when the kept log is full (a
     *   [LinkEvent.Stalled] is queued once; send again after [LinkEvent.Unstalled]), or
     *   the session's code for a message it refuses.
     */
    fun send(message: Message): Stamped = onPump { sendOn { link.send(now(), message) } }

    /** [send] of a message that may have been sent before (a seq already emitted is not sent again). */
    fun resend(message: Message): Stamped = onPump { sendOn { link.resend(now(), message) } }

    /**
     * Closes the socket with [code] and [reason] and stops reconnecting;
     * [LinkEvent.Stopped] is queued once every socket is gone.
     *
     * @throws ProtocolStateError `invalid_close_code`.
     */
    fun stop(code: Int = closeCodeNormal().toInt(), reason: String = "") =
        onPump { feed(LinkInput.Stop(code.toUShort(), reason)) }

    /** The next event, waiting for one. */
    fun take(): LinkEvent = events.take().also { taken(1) }

    /** The next event, or `null` after [timeout]. */
    fun poll(timeout: Duration): LinkEvent? =
        events.poll(timeout.toNanos(), TimeUnit.NANOSECONDS)?.also { taken(1) }

    /** Up to [max] events that are queued now (none: an empty list), in order. */
    fun drainEvents(max: Int = Int.MAX_VALUE): List<LinkEvent> {
        val out = ArrayList<LinkEvent>()
        events.drainTo(out, max)
        if (out.isNotEmpty()) taken(out.size)
        return out
    }

    /** The sequencing state as bytes (persist it; pass it to a new client to resume). */
    fun snapshot(): ByteArray = link.snapshot()

    /** Forgets a task in the sequencing state (once its report was acknowledged). */
    fun forgetTask(taskId: String): Boolean = link.forgetTask(taskId)

    /** `true` when every frame of [taskId] was acknowledged by the hub. */
    fun isFullyAcknowledged(taskId: String): Boolean = link.isFullyAcknowledged(taskId)

    /** `true` while a socket serves the session. */
    val isConnected: Boolean get() = link.isConnected()

    /** The link's phase. */
    val phase: LinkPhase get() = link.phase()

    /** The link's counters. */
    fun stats(): LinkStats = link.stats()

    /** The session's counters. */
    fun sessionStats(): SessionStats = link.sessionStats()

    /** Frames kept for replay. */
    fun outboxFrames(): Long = link.outboxFrames().toLong()

    /**
     * [stop] (a plain close) and waits for [LinkEvent.Stopped] — bounded by the link's close
     * deadline, after which it aborts the socket — then releases the pump and the link.
     */
    override fun close() {
        if (!pump.isShutdown) {
            try {
                val stopped = CountDownLatch(1)
                onPump {
                    stopWaiters += stopped
                    feed(LinkInput.Stop(closeCodeNormal(), ""))
                }
                stopped.await()
            } finally {
                pump.shutdownNow()
                link.close()
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // The pump.

    private fun taken(n: Int) = post { feed(LinkInput.EventsTaken(n.toULong())) }

    private fun post(task: () -> Unit) {
        try {
            pump.execute {
                try {
                    task()
                } catch (e: Exception) {
                    log(System.Logger.Level.ERROR, "stapel runner client: pump task failed: ${e.javaClass.name}: ${e.message}")
                }
            }
        } catch (_: java.util.concurrent.RejectedExecutionException) {
            // Closed: nothing more to do.
        }
    }

    /** Runs [block] on the pump and waits for it; core errors become the table's classes. */
    private fun <T> onPump(block: () -> T): T {
        val f = try {
            pump.submit<T> { runnerProtocol(block) }
        } catch (_: java.util.concurrent.RejectedExecutionException) {
            throw IllegalStateException("the client is closed")
        }
        try {
            return f.get()
        } catch (e: ExecutionException) {
            throw e.cause ?: e
        }
    }

    private fun sendOn(send: () -> Stamped): Stamped {
        try {
            return send()
        } finally {
            // A refused send may still have queued outputs (the `stalled` event).
            perform(link.drainOutputs())
            rearm(link.pollTimeout())
        }
    }

    private fun feed(input: LinkInput) {
        val step = link.step(now(), input)
        perform(step.outputs)
        rearm(step.timeout)
    }

    private fun rearm(at: ULong?) {
        if (at == timerAt && (at == null || timer != null)) return
        timer?.cancel(false)
        timer = null
        timerAt = at
        if (at != null) {
            val delay = (at.toLong() - now().toLong()).coerceAtLeast(0)
            timer = pump.schedule({
                timer = null
                timerAt = null
                try {
                    feed(LinkInput.Timeout)
                } catch (e: Exception) {
                    log(System.Logger.Level.ERROR, "stapel runner client: timer failed: ${e.javaClass.name}")
                }
            }, delay, TimeUnit.MILLISECONDS)
        }
    }

    private fun perform(outputs: List<LinkOutput>) {
        for (o in outputs) {
            when (o) {
                is LinkOutput.Connect -> connect(o.socket)
                is LinkOutput.Send -> write(o.socket, o.frame)
                is LinkOutput.Pause -> sockets[o.socket]?.let { s ->
                    log(System.Logger.Level.DEBUG, "stapel runner client: socket ${s.id}: pause")
                    s.paused = true
                }
                is LinkOutput.Resume -> sockets[o.socket]?.let { s ->
                    log(System.Logger.Level.DEBUG, "stapel runner client: socket ${s.id}: resume")
                    s.paused = false
                    if (s.owed > 0) {
                        s.ws?.request(s.owed)
                        s.owed = 0
                    }
                }
                is LinkOutput.Close -> closeSocket(o.socket, o.code.toInt(), o.reason)
                is LinkOutput.Abort -> sockets.remove(o.socket)?.let { s ->
                    log(System.Logger.Level.DEBUG, "stapel runner client: socket ${s.id}: abort")
                    s.connecting?.cancel(false)
                    s.ws?.abort()
                }
                is LinkOutput.Event -> {
                    logEvent(o.event)
                    events.put(o.event)
                    if (o.event is LinkEvent.Stopped) {
                        stopWaiters.forEach { it.countDown() }
                        stopWaiters.clear()
                    }
                }
                is LinkOutput.Unknown -> log(System.Logger.Level.WARNING, "stapel runner client: unknown link output ${o.debug}")
            }
        }
    }

    private fun logEvent(e: LinkEvent) {
        if (!logger.isLoggable(System.Logger.Level.DEBUG)) return
        val what = when (e) {
            is LinkEvent.Error -> "error ${e.code}" + (e.status?.let { " (HTTP $it)" } ?: "") + ": ${e.detail}"
            is LinkEvent.Disconnected -> "disconnected: ${e.reason}"
            is LinkEvent.Reconnecting -> "reconnecting in ${e.delayMs} ms (${e.failures} failures)"
            is LinkEvent.Stalled -> "stalled: ${e.detail}"
            is LinkEvent.PeerError -> "peer error ${e.code}: ${e.detail}"
            is LinkEvent.Received -> "received ${e.message.javaClass.simpleName}"
            else -> e.javaClass.simpleName.lowercase()
        }
        log(System.Logger.Level.DEBUG, "stapel runner client: $what")
    }

    /** Where the client connects, without user info or query (for logs). */
    private val where: String =
        runCatching { URI(url.scheme, null, url.host, url.port, url.path, null, null).toString() }.getOrDefault("the hub")

    private fun connect(id: ULong) {
        val s = Sock(id)
        sockets[id] = s
        log(System.Logger.Level.DEBUG, "stapel runner client: socket $id: connect to $where")
        val tok = try {
            token()
        } catch (e: Exception) {
            null
        }
        val auth = if (tok.isNullOrEmpty()) null else bearerAuthorization(tok)
        if (auth == null) {
            post { feed(LinkInput.ConnectFailed(id, ConnectFailure.NoToken, "no token to present")) }
            return
        }
        val f = try {
            httpClient.newWebSocketBuilder().header("Authorization", auth).buildAsync(url, Listener(id))
        } catch (e: Exception) {
            val detail = describe(e, tok)
            post { feed(LinkInput.ConnectFailed(id, ConnectFailure.Failed, detail)) }
            return
        }
        s.connecting = f
        f.whenComplete { _, err ->
            if (err != null) {
                val cause = if (err is CompletionException && err.cause != null) err.cause!! else err
                val failure = if (cause is WebSocketHandshakeException) {
                    ConnectFailure.Refused(cause.response.statusCode().toUShort())
                } else {
                    ConnectFailure.Failed
                }
                val detail = if (failure is ConnectFailure.Refused) "HTTP ${failure.status}" else describe(cause, tok)
                post { feed(LinkInput.ConnectFailed(id, failure, detail)) }
            }
        }
    }

    /** An exception as error-event detail: its class and message, never the token. */
    private fun describe(e: Throwable, tok: String?): String {
        val text = "${e.javaClass.simpleName}: ${e.message ?: ""}"
        return if (tok.isNullOrEmpty()) text else text.replace(tok, "<token>")
    }

    private fun write(id: ULong, frame: String) {
        val s = sockets[id] ?: return
        val ws = s.ws ?: return
        s.sending = s.sending.thenCompose { ws.sendText(frame, true) }.whenComplete { _, err ->
            if (err != null) fail(s, err)
        }
    }

    private fun closeSocket(id: ULong, code: Int, reason: String) {
        val s = sockets[id] ?: return
        val ws = s.ws ?: return
        log(System.Logger.Level.DEBUG, "stapel runner client: socket $id: close $code $reason")
        s.sending = s.sending.thenCompose { ws.sendClose(code, reason) }.whenComplete { _, err ->
            if (err != null) fail(s, err)
        }
        // Read on until the peer's close (its frames are no longer the session's).
        s.paused = false
        ws.request(Long.MAX_VALUE)
    }

    private fun fail(s: Sock, err: Throwable) {
        post {
            if (!s.failed && sockets[s.id] === s) {
                s.failed = true
                val cause = if (err is CompletionException && err.cause != null) err.cause!! else err
                feed(LinkInput.Failed(s.id, describe(cause, null)))
            }
        }
    }

    /** One receive invocation was used: request the next one, or owe it while paused. */
    private fun received(s: Sock) {
        if (sockets[s.id] !== s) return
        if (s.paused) s.owed++ else s.ws?.request(1)
    }

    private inner class Listener(private val id: ULong) : WebSocket.Listener {
        private val text = StringBuilder()
        private val binary = java.io.ByteArrayOutputStream()

        override fun onOpen(webSocket: WebSocket) {
            post {
                val s = sockets[id]
                if (s == null) {
                    // Aborted while connecting: the link no longer drives it.
                    webSocket.abort()
                } else {
                    s.ws = webSocket
                    log(System.Logger.Level.DEBUG, "stapel runner client: socket $id: open")
                    feed(LinkInput.Opened(id))
                    received(s)
                }
            }
        }

        override fun onText(webSocket: WebSocket, data: CharSequence, last: Boolean): CompletionStage<*>? {
            text.append(data)
            if (!last) {
                webSocket.request(1)
                return null
            }
            val frame = text.toString()
            text.setLength(0)
            post {
                val s = sockets[id] ?: return@post
                feed(LinkInput.FrameText(id, frame))
                received(s)
            }
            return null
        }

        override fun onBinary(webSocket: WebSocket, data: ByteBuffer, last: Boolean): CompletionStage<*>? {
            val part = ByteArray(data.remaining())
            data.get(part)
            binary.write(part)
            if (!last) {
                webSocket.request(1)
                return null
            }
            val frame = binary.toByteArray()
            binary.reset()
            post {
                val s = sockets[id] ?: return@post
                feed(LinkInput.FrameBinary(id, frame))
                received(s)
            }
            return null
        }

        override fun onPing(webSocket: WebSocket, message: ByteBuffer): CompletionStage<*>? {
            post { sockets[id]?.let { received(it) } }
            return null
        }

        override fun onPong(webSocket: WebSocket, message: ByteBuffer): CompletionStage<*>? {
            post { sockets[id]?.let { received(it) } }
            return null
        }

        override fun onClose(webSocket: WebSocket, statusCode: Int, reason: String): CompletionStage<*>? {
            post {
                if (sockets.containsKey(id)) {
                    log(System.Logger.Level.DEBUG, "stapel runner client: socket $id: closed ($statusCode)")
                    feed(LinkInput.SocketClosed(id))
                    // Gone: nothing more is reported about it (the link asked for an abort
                    // already if it was the session's).
                    sockets.remove(id)?.ws?.abort()
                }
            }
            return null
        }

        override fun onError(webSocket: WebSocket, error: Throwable) {
            post {
                val s = sockets[id] ?: return@post
                if (!s.failed) {
                    s.failed = true
                    feed(LinkInput.Failed(id, describe(error, null)))
                }
                sockets.remove(id)?.ws?.abort()
            }
        }
    }
}
