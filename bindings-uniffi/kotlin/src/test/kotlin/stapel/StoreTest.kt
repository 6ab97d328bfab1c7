package stapel

import dev.stapel.runnerprotocol.*
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.util.TreeMap

/**
 * The core's `store` module through the Kotlin API beyond the vectors: a real
 * `invalid_rows` refusal is a `StoreError` with its code; the rows of a hub session that
 * went through a reconnect round-trip through `HubSession.fromRows` (and `HubLink.fromRows`),
 * and the rebuilt hub serves the runner on: every command and progress frame arrives
 * exactly once across the takeover; a store kept by applying a `RowTracker`'s writes
 * holds exactly the session's rows.
 */
class StoreTest {
    private val config = """{"durable_acks":true}"""

    @Test
    fun invalidRowsIsAStoreErrorWithItsCode() {
        val rows = listOf(
            // next_seq 0
            RunnerRows(tasks = listOf(TaskRow(taskId = "T-1", nextSeq = 0uL, assignedAttempt = 0uL, forgotten = false))),
            // a command of a task with no row
            RunnerRows(commands = listOf(CommandRow(taskId = "T-2", seq = 1uL, frame = """{"schema_version":1,"type":"task.cancel","task_id":"T-2","seq":1}"""))),
        )
        for (bad in rows) {
            val e = assertThrows<ProtocolException.State> { HubSession.fromRows(bad, config) }
            assertEquals("invalid_rows", e.code)
            assertEquals("store", e.kind)
            assertEquals("StoreError", e.className)
            val t = assertThrows<StoreError> { runnerProtocol { HubSession.fromRows(bad) } }
            assertEquals("invalid_rows", t.code)
            assertEquals("store", t.kind)
            assertFalse(t is FencedError)
            val l = assertThrows<StoreError> { runnerProtocol { HubLink.fromRows(bad, """{"session":$config}""") } }
            assertEquals("invalid_rows", l.code)
        }
        // A bad configuration is still the config reader's error.
        val c = assertThrows<ProtocolException.Config> { HubSession.fromRows(RunnerRows(), """{"nope":1}""") }
        assertEquals("unknown_key", c.code)
    }

    @Test
    fun leaseConfigAndMachineThroughTheApi() {
        val e = assertThrows<ProtocolException.Config> { leaseConfigParse("""{"lease_ms":5000,"renew_every_ms":3000,"margin_ms":2000}""") }
        assertEquals("out_of_range", e.code)
        assertEquals("renew_every_ms", e.key)
        assertThrows<ConfigError> { runnerProtocol { Lease.withConfig(LeaseConfig(leaseMs = 0uL, renewEveryMs = 1uL, marginMs = 0uL, retryMs = 1uL)) } }
        val defaults = leaseConfigParse(leaseConfigDefaults())
        val lease = Lease.withConfig(defaults)
        assertEquals(defaults, lease.config())
        assertEquals(Json.parse(leaseConfigDefaults()), Json.parse(lease.configJson()))
        // The first poll asks for a renewal; a renewal that began at 100 holds the lease
        // until 100 + lease_ms - margin_ms.
        assertEquals(LeaseOutput.Renew, lease.pollOutput())
        assertEquals(null, lease.pollOutput())
        lease.handleInput(150uL, LeaseInput.Renewed(100uL))
        val until = 100uL + defaults.leaseMs - defaults.marginMs
        assertTrue(lease.isHeld(until - 1uL))
        assertFalse(lease.isHeld(until))
        assertEquals("renew", leaseOutputName(LeaseOutput.Renew))
        assertEquals(StoreClose(1012u, "fenced"), closeFor("fenced"))
    }

    /** A hub session (swappable: a takeover) and a runner session over a clean in-memory link. */
    private class Pair(var hub: HubSession) {
        val runner = RunnerSession(Hello(projectId = "p-1", runnerVersion = "0.1.0"))
        var now = 0uL
        var up = false
        /** Progress payloads the hub applied (and confirmed), cancels the runner got. */
        val applied = mutableListOf<String>()
        val cancels = mutableListOf<String>()
        /** Apply (and confirm) only while this is true; else received frames stay unconfirmed. */
        var confirm = true
        val toHub = ArrayDeque<String>()
        val toRunner = ArrayDeque<String>()

        fun connect() {
            hub.handleInput(now, SessionInput.Connected)
            runner.handleInput(now, SessionInput.Connected)
            up = true
            pump()
        }

        fun disconnect() {
            toHub.clear(); toRunner.clear()
            hub.handleInput(now, SessionInput.Disconnected)
            runner.handleInput(now, SessionInput.Disconnected)
            up = false
        }

        fun pump() {
            var moved = true
            while (moved && up) {
                moved = false
                while (true) {
                    val o = hub.pollOutput() ?: break
                    moved = true
                    when (o) {
                        is SessionOutput.Transmit -> toRunner.addLast(o.frame)
                        is SessionOutput.Received -> {
                            val m = o.message as Message.TaskProgress
                            if (confirm) {
                                applied += m.v.payload
                                hub.handleInput(now, SessionInput.Confirm(m.v.taskId, m.v.attempt, m.v.seq))
                            }
                        }
                        is SessionOutput.Close -> throw AssertionError("hub closed: ${o.reason}")
                        else -> {}
                    }
                }
                while (true) {
                    val o = runner.pollOutput() ?: break
                    moved = true
                    when (o) {
                        is SessionOutput.Transmit -> toHub.addLast(o.frame)
                        is SessionOutput.Received -> cancels += (o.message as Message.TaskCancel).v.reason
                        is SessionOutput.Close -> throw AssertionError("runner closed: ${o.reason}")
                        else -> {}
                    }
                }
                toHub.removeFirstOrNull()?.let { hub.handleInput(now, SessionInput.Frame(it)); moved = true }
                toRunner.removeFirstOrNull()?.let { runner.handleInput(now, SessionInput.Frame(it)); moved = true }
            }
        }

        fun tick(ms: ULong) {
            now += ms
            if (up) {
                if (hub.pollTimeout()?.let { it <= now } == true) hub.handleInput(now, SessionInput.Timeout)
                if (runner.pollTimeout()?.let { it <= now } == true) runner.handleInput(now, SessionInput.Timeout)
            }
            pump()
        }

        fun cancel(reason: String) = hub.handleInput(now, SessionInput.Send(Message.TaskCancel(TaskCancel(taskId = "T-1", reason = reason))))
        fun progress(n: Int) = runner.handleInput(
            now,
            SessionInput.Send(Message.TaskProgress(TaskProgress(taskId = "T-1", kind = "log", attempt = 1uL, payload = """{"n":$n}"""))),
        )
    }

    /** What a store holds after applying writes (the host's SQL, here maps). */
    private class StoreModel {
        val tasks = TreeMap<String, TaskRow>()
        val commands = TreeMap<String, TreeMap<ULong, String>>()

        fun apply(ws: List<RowWrite>) {
            for (w in ws) when (w) {
                is RowWrite.PutTask -> tasks[w.row.taskId] = w.row
                is RowWrite.PutCommand -> commands.getOrPut(w.row.taskId) { TreeMap() }[w.row.seq] = w.row.frame
                is RowWrite.DeleteCommands -> commands[w.taskId]?.headMap(w.through, true)?.clear()
                is RowWrite.DeleteTask -> { tasks.remove(w.taskId); commands.remove(w.taskId) }
            }
        }

        fun taskRows(): List<TaskRow> = tasks.values.toList()
        fun commandRows(): List<CommandRow> = commands.flatMap { (t, m) -> m.map { (s, f) -> CommandRow(t, s, f) } }
    }

    @Test
    fun rowsOfASessionThatReconnectedRoundTripThroughFromRows() {
        val p = Pair(HubSession(config))
        val tracker = RowTracker(RunnerRows())
        val store = StoreModel()
        fun commit() { store.apply(tracker.writes(p.hub)); tracker.committed() }
        p.connect()
        p.cancel("a"); commit(); p.pump()
        for (n in 1..3) { p.progress(n); p.pump() }
        repeat(5) { p.tick(1000uL) }
        commit()
        // Lost connection: both sides keep sending.
        p.disconnect()
        p.cancel("b"); commit()
        for (n in 4..5) p.progress(n)
        // Reconnect: the resume/replay exchange.
        p.connect()
        repeat(5) { p.tick(1000uL) }
        commit()
        assertEquals(listOf("a", "b"), p.cancels)
        // Progress frames received but not applied when the connection drops, and a
        // command sent while down: none is acknowledged.
        p.disconnect()
        p.progress(6)
        p.confirm = false
        p.connect()
        p.progress(7); p.pump()
        p.disconnect()
        p.confirm = true
        p.cancel("c"); commit()
        assertEquals((1..5).map { """{"n":$it}""" }, p.applied)
        assertEquals(listOf("a", "b"), p.cancels)

        val rows = p.hub.rows()
        assertEquals(listOf(InboundRow(taskId = "T-1", attempt = 1uL, through = 5uL)), rows.inbound)
        assertEquals(1, rows.tasks.size)
        assertEquals(4uL, rows.tasks[0].nextSeq)
        assertEquals(listOf(3uL), rows.commands.map { it.seq })
        assertTrue(rows.commands[0].frame.contains("\"reason\":\"c\""))
        // The store kept by applying the tracker's writes holds the session's rows.
        assertEquals(rows.tasks, store.taskRows())
        assertEquals(rows.commands, store.commandRows())

        // The takeover: a hub session from the rows has the same rows, and a tracker
        // over them has nothing to write.
        val rebuilt = HubSession.fromRows(rows, config)
        assertEquals(rows, rebuilt.rows())
        val rebuiltTracker = RowTracker(rows)
        assertEquals(emptyList<RowWrite>(), rebuiltTracker.writes(rebuilt))
        val link = HubLink.fromRows(rows, """{"session":$config}""")
        assertEquals(rows, link.rows())
        assertEquals(emptyList<RowWrite>(), RowTracker(rows).linkWrites(link))
        // A different session's rows are different (the comparison can fail).
        assertNotEquals(rows, HubSession(config).rows())

        // The runner reconnects to the rebuilt hub: the kept command arrives once, the
        // unapplied progress frames 6 and 7 are applied once, and nothing before them again.
        p.hub = rebuilt
        p.connect()
        p.progress(8)
        repeat(5) { p.tick(1000uL) }
        assertEquals(listOf("a", "b", "c"), p.cancels)
        assertEquals((1..8).map { """{"n":$it}""" }, p.applied)
        // Acknowledged commands are pruned by the next writes.
        val after = rebuiltTracker.writes(rebuilt)
        rebuiltTracker.committed()
        assertTrue(after.any { it is RowWrite.DeleteCommands && it.through == 3uL }, "writes $after")
        assertEquals(emptyList<CommandRow>(), rebuilt.rows().commands)
        assertEquals(listOf(InboundRow(taskId = "T-1", attempt = 1uL, through = 8uL)), rebuilt.rows().inbound)
    }
}
