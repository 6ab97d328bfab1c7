package stapel

import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.ValueSource
import kotlin.random.Random

/**
 * A hub and a runner session exchanging frames over an in-memory link that drops and
 * duplicates frames, with reconnects: every application message sent on either side is
 * received on the other side exactly once (the oracle counts deliveries by message id).
 */
class SessionLinkTest {
    /** One direction of the link: frames in flight, some lost, some doubled. */
    private class Wire(val rng: Random, var dropRate: Double, var dupRate: Double) {
        val inFlight = ArrayDeque<String>()
        var dropped = 0
        var doubled = 0
        fun offer(frame: String) {
            if (rng.nextDouble() < dropRate) { dropped++; return }
            inFlight.addLast(frame)
            if (rng.nextDouble() < dupRate) { inFlight.addLast(frame); doubled++ }
        }
    }

    private class Harness(seed: Int) {
        val rng = Random(seed)
        val hub = HubSession()
        val runner = RunnerSession(Hello(projectId = "p-1", runnerVersion = "0.1.0", capabilities = listOf("subprocess")))
        val toHub = Wire(rng, 0.0, 0.0)
        val toRunner = Wire(rng, 0.0, 0.0)
        var now = 0uL
        var up = false
        val hubGot = mutableMapOf<String, Int>()
        val runnerGot = mutableMapOf<String, Int>()
        var reconnects = 0

        fun connect() {
            toHub.inFlight.clear(); toRunner.inFlight.clear()
            hub.handleInput(now, SessionInput.Connected)
            runner.handleInput(now, SessionInput.Connected)
            up = true
        }

        fun disconnect() {
            hub.handleInput(now, SessionInput.Disconnected)
            runner.handleInput(now, SessionInput.Disconnected)
            up = false
            reconnects++
        }

        private fun id(m: Message): String = when (m) {
            is Message.TaskCancel -> "cancel:" + m.v.reason
            is Message.TaskProgress -> "progress:" + m.v.payload
            else -> "other:" + messageTypeName(m)
        }

        /** Drains both machines, moving frames, until nothing moves. */
        fun pump() {
            var moved = true
            var rounds = 0
            while (moved && up && rounds++ < 10_000) {
                moved = false
                while (true) {
                    val o = hub.pollOutput() ?: break
                    moved = true
                    when (o) {
                        is SessionOutput.Transmit -> toRunner.offer(o.frame)
                        is SessionOutput.Received -> hubGot.merge(id(o.message), 1, Int::plus)
                        is SessionOutput.Close -> { disconnect(); return }
                        else -> {}
                    }
                }
                while (true) {
                    val o = runner.pollOutput() ?: break
                    moved = true
                    when (o) {
                        is SessionOutput.Transmit -> toHub.offer(o.frame)
                        is SessionOutput.Received -> runnerGot.merge(id(o.message), 1, Int::plus)
                        is SessionOutput.Close -> { disconnect(); return }
                        else -> {}
                    }
                }
                toHub.inFlight.removeFirstOrNull()?.let { hub.handleInput(now, SessionInput.Frame(it)); moved = true }
                toRunner.inFlight.removeFirstOrNull()?.let { runner.handleInput(now, SessionInput.Frame(it)); moved = true }
            }
        }

        fun tick(ms: ULong) {
            now += ms
            for (deadline in listOfNotNull(hub.pollTimeout(), runner.pollTimeout())) {
                if (deadline <= now && up) {
                    if (hub.pollTimeout()?.let { it <= now } == true) hub.handleInput(now, SessionInput.Timeout)
                    if (runner.pollTimeout()?.let { it <= now } == true) runner.handleInput(now, SessionInput.Timeout)
                }
            }
            pump()
        }
    }

    @ParameterizedTest
    @ValueSource(ints = [1, 2, 3, 4, 5])
    fun everyMessageArrivesExactlyOnceDespiteDropsDuplicatesAndReconnects(seed: Int) {
        val h = Harness(seed)
        h.connect()
        h.pump()
        val sentByHub = mutableListOf<String>()
        val sentByRunner = mutableListOf<String>()
        for (round in 0 until 6) {
            // Lossy phase: frames are dropped and doubled while both sides keep sending.
            h.toHub.dropRate = 0.25; h.toHub.dupRate = 0.25
            h.toRunner.dropRate = 0.25; h.toRunner.dupRate = 0.25
            if (!h.up) { h.connect(); h.pump() }
            repeat(5) { k ->
                val reason = "r$round-$k"
                if (h.up) {
                    h.hub.handleInput(h.now, SessionInput.Send(Message.TaskCancel(TaskCancel(taskId = "T-$k", reason = reason))))
                    sentByHub += "cancel:$reason"
                    val payload = """{"round":$round,"k":$k}"""
                    h.runner.handleInput(h.now, SessionInput.Send(Message.TaskProgress(TaskProgress(taskId = "T-$k", kind = "state", attempt = 1uL, payload = payload))))
                    sentByRunner += "progress:$payload"
                }
                h.tick(7uL)
            }
            // Reconnect over a clean link: the resume/replay exchange repairs every loss.
            if (h.up) h.disconnect()
            h.toHub.dropRate = 0.0; h.toHub.dupRate = 0.0
            h.toRunner.dropRate = 0.0; h.toRunner.dupRate = 0.0
            h.connect()
            h.pump()
            repeat(20) { h.tick(1000uL) }
        }
        for (m in sentByHub) assertEquals(1, h.runnerGot[m], "runner received $m ${h.runnerGot[m]} times")
        for (m in sentByRunner) assertEquals(1, h.hubGot[m], "hub received $m ${h.hubGot[m]} times")
        assertEquals(sentByHub.toSet(), h.runnerGot.keys.filter { it.startsWith("cancel:") }.toSet())
        assertEquals(sentByRunner.toSet(), h.hubGot.keys.filter { it.startsWith("progress:") }.toSet())
        assertTrue(h.reconnects >= 6)
        // The link really was lossy in both directions.
        assertTrue(h.toHub.dropped > 0 && h.toRunner.dropped > 0, "no frame was dropped")
        assertTrue(h.toHub.doubled > 0 && h.toRunner.doubled > 0, "no frame was duplicated")
        assertTrue(sentByHub.size == 30 && sentByRunner.size == 30)
    }
}
