// Hub stores through the public API beyond the vectors: a hub session that went through a
// reconnect hands rows that rebuild it (HubSession.fromRows, HubLink.fromRows), the
// rebuilt session serves a takeover without repeating anything, a RowTracker lists the
// writes of either, refused rows are StoreError `invalid_rows`, and the lease machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as srp from 'stapel-runner-protocol';

const HELLO = { type: 'hello', project_id: 'p-1', runner_version: '0.1.0' };
// The hub acknowledges what its store committed (durable acks); the runner acknowledges
// commands in its pongs (both ping every second).
const CONFIG = { durable_acks: true, ack_every_frames: 1, ping_interval_ms: 1000, peer_timeout_ms: 0 };
const RUNNER_CONFIG = { ping_interval_ms: 1000, peer_timeout_ms: 0 };

const progress = (taskId, state) => ({ type: 'task.progress', task_id: taskId, attempt: 1, kind: 'state', payload: { state } });
const cancel = (taskId) => ({ type: 'task.cancel', task_id: taskId, reason: 'r' });

/**
 * A hub session and a runner session back to back: `flush` carries transmits while both
 * are connected, fires due timers, and has the hub's store "commit" every delivered
 * sequenced frame (`confirm`), recording what each side received.
 */
class Pair {
  constructor(hub, runner) {
    this.hub = hub;
    this.runner = runner;
    this.up = false;
    this.hubGot = [];
    this.runnerGot = [];
  }

  connect(now) {
    this.hub.handleInput(now, { type: 'connected' });
    this.runner.handleInput(now, { type: 'connected' });
    this.up = true;
    this.flush(now);
  }

  disconnect(now) {
    this.hub.handleInput(now, { type: 'disconnected' });
    this.runner.handleInput(now, { type: 'disconnected' });
    this.up = false;
    this.flush(now);
  }

  flush(now) {
    for (let round = 0; round < 50; round += 1) {
      for (const side of [this.hub, this.runner]) {
        const t = side.pollTimeout();
        if (t !== null && t <= now) side.handleInput(now, { type: 'timeout' });
      }
      let moved = false;
      for (const o of this.runner.drainOutputs()) {
        if (o.kind === 'transmit' && this.up) {
          this.hub.handleInput(now, { type: 'frame', frame: o.frame });
          moved = true;
        } else if (o.kind === 'received') {
          this.runnerGot.push(`${o.message.task_id}:${o.message.seq}`);
        }
      }
      for (const o of this.hub.drainOutputs()) {
        if (o.kind === 'transmit' && this.up) {
          this.runner.handleInput(now, { type: 'frame', frame: o.frame });
          moved = true;
        } else if (o.kind === 'received' && o.message.seq !== undefined) {
          const m = o.message;
          this.hubGot.push(`${m.task_id}/${m.attempt}:${m.seq}`);
          this.hub.confirm(now, m.task_id, m.attempt, m.seq);
          moved = true;
        }
      }
      if (!moved) return;
    }
    throw new Error('the pair did not settle');
  }
}

/** A hub that served a runner across a reconnect, and commands/progress left in flight. */
function servedHub() {
  const pair = new Pair(new srp.HubSession({ config: CONFIG }), new srp.RunnerSession(HELLO, { config: RUNNER_CONFIG }));
  pair.connect(0);
  pair.runner.send(1, progress('T-1', 'a'));
  pair.runner.send(1, progress('T-1', 'b'));
  pair.hub.send(1, cancel('T-1'));
  pair.flush(1);
  pair.disconnect(2);
  // Sent while the socket is down: replayed after the reconnect.
  pair.runner.send(3, progress('T-1', 'c'));
  pair.hub.send(3, cancel('T-2'));
  pair.connect(10);
  pair.flush(10_000);
  assert.deepEqual(pair.hubGot, ['T-1/1:1', 'T-1/1:2', 'T-1/1:3']);
  assert.deepEqual(pair.runnerGot, ['T-1:1', 'T-2:1']);
  // Down again: a command kept unacknowledged, a progress frame the hub never saw.
  pair.disconnect(10_001);
  pair.hub.send(10_002, cancel('T-3'));
  pair.runner.send(10_002, progress('T-1', 'd'));
  return pair;
}

test('the rows of a hub session that went through a reconnect rebuild it: same rows, no repeats on the takeover', () => {
  const pair = servedHub();
  const rows = pair.hub.rows();
  assert.deepEqual(rows.inbound, [{ task_id: 'T-1', attempt: 1, through: 3 }]);
  assert.deepEqual(
    rows.tasks.map((t) => [t.task_id, t.next_seq, t.forgotten]),
    [
      ['T-1', 2, false],
      ['T-2', 2, false],
      ['T-3', 2, false],
    ],
  );
  assert.deepEqual(
    rows.commands.map((c) => [c.task_id, c.seq]),
    [['T-3', 1]],
    'only the unacknowledged command is kept',
  );
  assert.equal(srp.decode(rows.commands[0].frame).task_id, 'T-3');

  // Round trip: the rebuilt session holds exactly the rows (whatever their order), and
  // through JSON (what a store keeps).
  const rebuilt = srp.HubSession.fromRows(JSON.parse(JSON.stringify(rows)), CONFIG);
  assert.ok(rebuilt instanceof srp.HubSession);
  assert.deepEqual(rebuilt.rows(), rows);
  const reversed = { tasks: [...rows.tasks].reverse(), inbound: rows.inbound, commands: rows.commands };
  assert.deepEqual(srp.HubSession.fromRows(reversed, CONFIG).rows(), rows);

  // The takeover: the runner reconnects to the rebuilt hub. It hands on only what is new
  // (seq 4), and the runner gets the kept command once.
  const tracker = new srp.RowTracker(rows);
  assert.deepEqual(tracker.writes(rebuilt), [], 'the store already holds the rebuilt session');
  tracker.committed();
  const takeover = new Pair(rebuilt, pair.runner);
  takeover.connect(20_000);
  takeover.flush(30_000);
  assert.deepEqual(takeover.hubGot, ['T-1/1:4']);
  assert.deepEqual(takeover.runnerGot, ['T-3:1']);
  assert.deepEqual(rebuilt.rows().inbound, [{ task_id: 'T-1', attempt: 1, through: 4 }]);
  assert.deepEqual(rebuilt.rows().commands, [], 'acknowledged: pruned');
  // The store follows: the acknowledged command is deleted, then nothing is pending.
  assert.deepEqual(tracker.writes(rebuilt), [{ op: 'delete_commands', task_id: 'T-3', through: 1 }]);
  tracker.committed();
  assert.deepEqual(tracker.writes(rebuilt), []);
});

test('a HubLink over rows: the same rows, the same writes, and a send is a write before it goes out', () => {
  const rows = servedHub().hub.rows();
  const link = srp.HubLink.fromRows(rows, { session: CONFIG });
  assert.ok(link instanceof srp.HubLink);
  assert.deepEqual(link.rows(), rows);
  const tracker = new srp.RowTracker(rows);
  assert.deepEqual(tracker.writes(link), []);
  tracker.committed();
  const sent = link.send(1, cancel('T-4'));
  const writes = tracker.writes(link);
  assert.deepEqual(writes, [
    { op: 'put_task', task_id: 'T-4', next_seq: 2, assigned_attempt: 0, forgotten: false },
    { op: 'put_command', task_id: 'T-4', seq: 1, frame: srp.encode(sent) },
  ]);
  // Rolled back: listed again; committed: nothing more.
  tracker.failed();
  assert.deepEqual(tracker.writes(link), writes);
  tracker.committed();
  assert.deepEqual(tracker.writes(link), []);
});

test('refused rows are StoreError invalid_rows; a runner has no rows', () => {
  const task = { task_id: 'T-1', next_seq: 2, assigned_attempt: 0, forgotten: false };
  const refusals = [
    // The core's checks.
    { tasks: [task, task] },
    { tasks: [task], commands: [{ task_id: 'T-1', seq: 2, frame: srp.encode({ ...cancel('T-1'), seq: 2 }) }] },
    { inbound: [{ task_id: 'T-9', attempt: 1, through: 1 }] },
    // Rows whose shape is not the rows'.
    { tasks: [{ ...task, next_seq: '2' }] },
    { tasks: [{ ...task, next_seq: -1 }] },
    { tasks: [{ task_id: 'T-1', next_seq: 2, assigned_attempt: 0 }] },
    { commands: {} },
  ];
  for (const rows of refusals) {
    for (const build of [() => srp.HubSession.fromRows(rows), () => srp.HubLink.fromRows(rows)]) {
      assert.throws(build, (e) => {
        assert.ok(e instanceof srp.StoreError, `${e?.name}: ${e?.message}`);
        assert.ok(!(e instanceof srp.FencedError));
        assert.equal(e.code, 'invalid_rows');
        return true;
      }, JSON.stringify(rows));
    }
  }
  assert.deepEqual(srp.HubSession.fromRows({}).rows(), { tasks: [], inbound: [], commands: [] });
  const runner = new srp.RunnerSession(HELLO);
  assert.equal(runner.rows, undefined);
  assert.throws(() => new srp.RowTracker().writes(runner), TypeError);
  assert.throws(() => new srp.RowTracker({ tasks: 'no' }), (e) => e instanceof srp.StoreError && e.code === 'invalid_rows');
});

test('Lease: the core timing through handleInput/pollOutput; closeFor and CLOSE_STORE', () => {
  const lease = new srp.Lease({ lease_ms: 1000, renew_every_ms: 300, margin_ms: 200 });
  assert.deepEqual(lease.config, { lease_ms: 1000, renew_every_ms: 300, margin_ms: 200, retry_ms: 500 });
  assert.deepEqual(srp.leaseConfig({ lease_ms: 1000, renew_every_ms: 300, margin_ms: 200 }), lease.config);
  assert.deepEqual(srp.leaseConfig(), { lease_ms: 10000, renew_every_ms: 3000, margin_ms: 2000, retry_ms: 500 });
  assert.deepEqual(lease.drainOutputs(), ['renew']);
  assert.equal(lease.isHeld(0), false);
  lease.handleInput(10, { type: 'renewed', started_at: 5 });
  assert.equal(lease.pollOutput(), null);
  assert.equal(lease.isHeld(804), true);
  assert.equal(lease.isHeld(805), false);
  assert.equal(lease.pollTimeout(), 305);
  lease.handleInput(305, { type: 'timeout' });
  assert.deepEqual(lease.drainOutputs(), ['renew']);
  lease.handleInput(306, { type: 'renew_failed' });
  // Held until 5 + 1000 - 200; the retry after the failure is due at 306 + 500.
  assert.equal(lease.pollTimeout(), 805);
  lease.handleInput(805, { type: 'timeout' });
  assert.deepEqual(lease.drainOutputs(), ['expiring']);
  assert.equal(lease.isHeld(805), false);
  lease.handleInput(806, { type: 'timeout' });
  assert.deepEqual(lease.drainOutputs(), ['renew']);
  lease.handleInput(900, { type: 'renewed', started_at: 850 });
  assert.deepEqual(lease.drainOutputs(), ['held']);
  assert.throws(() => new srp.Lease({ renew_every_ms: 8000 }), (e) => e instanceof srp.ConfigError && e.key === 'renew_every_ms');

  assert.equal(srp.CLOSE_STORE, 1012);
  assert.deepEqual(srp.closeFor('fenced'), [1012, 'fenced']);
  assert.deepEqual(srp.closeFor('anything else'), [srp.CLOSE_STORE, 'store_unavailable']);
});
