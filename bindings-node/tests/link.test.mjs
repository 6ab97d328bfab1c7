// RunnerLink and HubLink through the public API, beyond the vectors: the two links wired
// back to back in virtual time (what a pump does, without sockets), the batch fast path
// against the per-input path, the seed forms, the state access a host needs (snapshot,
// resume, forgetTask), and the link constants.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as srp from 'stapel-runner-protocol';

const HELLO = { type: 'hello', project_id: 'p-1', runner_version: '0.1.0' };
const progress = (i) => ({ type: 'task.progress', task_id: 'T-1', attempt: 1, kind: 'log', payload: { i } });

/**
 * A runner link and a hub link joined by a virtual wire: the runner's socket `s` is the
 * hub's socket `s`; `step(now)` moves every frame either way and returns the events each
 * side's application got (reported taken at once).
 */
function wire(runner, hub, { batch }) {
  let open = null;
  const events = { runner: [], hub: [] };
  const perform = (side, outputs, to) => {
    const sends = [];
    for (const o of outputs) {
      if (srp.isLinkEvent(o)) events[side].push(o);
      else if (o.kind === 'connect') open = o.socket;
      else if (o.kind === 'send') sends.push([o.socket, o.frame]);
    }
    const taken = outputs.filter(srp.isLinkEvent).length;
    if (taken > 0) (side === 'runner' ? runner : hub).handleInput(0, { type: 'events_taken', n: taken });
    to.push(...sends);
  };
  return {
    events,
    step(now) {
      for (let round = 0; round < 50; round += 1) {
        const toHub = [];
        const toRunner = [];
        perform('runner', runner.drainOutputs(), toHub);
        if (open !== null) {
          runner.handleInput(now, { type: 'opened', socket: open });
          hub.handleInput(now, { type: 'attach', socket: open });
          open = null;
          continue;
        }
        perform('hub', hub.drainOutputs(), toRunner);
        if (toHub.length === 0 && toRunner.length === 0) return;
        if (batch && toHub.length > 0) {
          perform('hub', hub.handleFrames(now, toHub[0][0], toHub.map(([, f]) => f)), toRunner);
        } else {
          for (const [socket, frame] of toHub) hub.handleInput(now, { type: 'frame', socket, frame });
        }
        for (const [socket, frame] of toRunner) runner.handleInput(now, { type: 'frame', socket, frame });
      }
      throw new Error('the links did not settle');
    },
  };
}

for (const batch of [false, true]) {
  test(`a runner link and a hub link back to back (${batch ? 'handleFrames' : 'handleInput'}): progress once, in order, acknowledged`, () => {
    const config = { session: { ack_delay_ms: 10, ping_interval_ms: 0 } };
    const runner = new srp.RunnerLink(HELLO, { config, seed: 1n });
    const hub = new srp.HubLink({ config });
    const w = wire(runner, hub, { batch });
    runner.handleInput(0, { type: 'start' });
    w.step(0);
    assert.equal(runner.phase, 'open');
    assert.equal(hub.socket, 1);
    assert.equal(hub.sockets, 1);
    for (let i = 1; i <= 20; i += 1) runner.send(1, progress(i));
    w.step(1);
    const received = w.events.hub.filter((e) => e.kind === 'received').map((e) => e.message);
    assert.deepEqual(received.map((m) => [m.seq, m.attempt, m.payload.i]), Array.from({ length: 20 }, (_, k) => [k + 1, 1, k + 1]));
    if (batch) assert.ok(received.every((m) => m instanceof srp.DecodedProgress), 'the batch path hands fast-path progress over as DecodedProgress');
    assert.equal(runner.outboxFrames(), 20);
    // The hub's ack timer fires; the runner drops what was acknowledged.
    hub.handleInput(hub.pollTimeout(), { type: 'timeout' });
    w.step(20);
    assert.equal(runner.outboxFrames(), 0);
    assert.ok(runner.isFullyAcknowledged('T-1'));
    assert.deepEqual(hub.resumeMap(), { 'T-1': 20 });
    assert.equal(hub.stats().connections, 1);
    assert.equal(hub.sessionStats().delivered, 20);
    assert.equal(runner.queuedEvents, 0);
    assert.equal(hub.queuedEvents, 0);
    // Commands the other way.
    const stamped = hub.send(21, { type: 'task.cancel', task_id: 'T-1', reason: 'stop' });
    assert.equal(stamped.seq, 1);
    w.step(21);
    assert.deepEqual(w.events.runner.filter((e) => e.kind === 'received').map((e) => e.message.reason), ['stop']);
    assert.deepEqual(runner.resumeMap(), { 'T-1': 1 });
    // A snapshot resumes the runner's streams in a new link.
    const again = new srp.RunnerLink(HELLO, { config, snapshot: runner.snapshot() });
    assert.deepEqual(again.resumeMap(), { 'T-1': 1 });
    assert.ok(runner.forgetTask('T-1'));
    assert.deepEqual(runner.resumeMap(), {});
    assert.equal(runner.state().resumeMap()['T-1'], undefined);
  });
}

test('pollOutput and drainOutputs hand out the same outputs; outputs wait in the link until taken', () => {
  const make = () => {
    const l = new srp.RunnerLink(HELLO, { seed: 3 });
    l.handleInput(0, { type: 'start' });
    return l;
  };
  const a = make();
  const b = make();
  const polled = [];
  for (let o = a.pollOutput(); o !== null; o = a.pollOutput()) polled.push(o);
  assert.deepEqual(polled, [{ kind: 'connect', socket: 1 }]);
  assert.deepEqual(b.drainOutputs(), polled);
  // A socket that closes before its queued sends were taken: the link drops them.
  a.handleInput(1, { type: 'opened', socket: 1 });
  a.handleInput(2, { type: 'socket_closed', socket: 1 });
  const kinds = a.drainOutputs().map((o) => o.kind);
  assert.ok(!kinds.includes('send'), `no send for the gone socket: ${kinds}`);
  assert.deepEqual(kinds, ['connected', 'disconnected', 'abort', 'reconnecting']);
});

test('the seed: a bigint or a safe integer, the same schedule for the same seed', () => {
  const schedule = (seed) => {
    const l = new srp.RunnerLink(HELLO, { seed, config: { backoff_initial_ms: 100, backoff_max_ms: 100_000 } });
    l.handleInput(0, { type: 'start' });
    const delays = [];
    let now = 0;
    for (let k = 0; k < 6; k += 1) {
      const connect = l.drainOutputs().find((o) => o.kind === 'connect');
      l.handleInput(now, { type: 'connect_failed', socket: connect.socket, failure: 'failed', detail: '' });
      const r = l.drainOutputs().find((o) => o.kind === 'reconnecting');
      delays.push(r.delay_ms);
      now = l.pollTimeout();
      l.handleInput(now, { type: 'timeout' });
    }
    return delays;
  };
  assert.deepEqual(schedule(5n), schedule(5));
  assert.deepEqual(schedule(2n ** 64n - 1n), schedule(2n ** 64n - 1n));
  assert.notDeepEqual(schedule(5n), schedule(6n));
  assert.throws(() => new srp.RunnerLink(HELLO, { seed: -1n }), RangeError);
  assert.throws(() => new srp.RunnerLink(HELLO, { seed: 2n ** 64n }), RangeError);
});

test('config and constants come from the core', () => {
  const c = srp.linkConfig();
  assert.deepEqual(c, {
    close_timeout_ms: 2000,
    connect_timeout_ms: srp.LINK_CONSTANTS.connect_timeout_ms,
    max_queued_events: srp.HOST_CONSTANTS.max_queued_events,
    max_backlog_bytes: srp.HOST_CONSTANTS.max_backlog_bytes,
    max_closing_sockets: srp.LINK_CONSTANTS.max_closing_sockets,
    reconnect: true,
    backoff_initial_ms: 250,
    backoff_max_ms: 30000,
  });
  assert.equal(srp.linkConfig({ max_queued_events: 3 }).max_queued_events, 3);
  assert.deepEqual(new srp.HubLink({ config: { close_timeout_ms: 9 } }).config().close_timeout_ms, 9);
  assert.equal(srp.LINK_CONSTANTS.errors.backlog_full, 'backlog_full');
  assert.equal(srp.LINK_CONSTANTS.reasons.replaced, srp.HOST_CONSTANTS.replaced_reason);
  assert.ok(srp.LINK_CONSTANTS.news_allowance > 0);
  assert.ok(Object.isFrozen(srp.LINK_CONSTANTS));
});
