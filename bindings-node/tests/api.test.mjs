// The public API from ESM: codec forms, the lazy progress message, typed errors, the
// Python-parity surface, and that internals stay internal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as srp from 'stapel-runner-protocol';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const PROGRESS =
  '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":10,"output":5,"cache_read":0,"cache_write":0,"thinking":2}}}';
const plain = (m) => JSON.parse(JSON.stringify(m));

test('decode takes a string, a Buffer and a Uint8Array alike', () => {
  const fromString = srp.decode(PROGRESS, { validate: true });
  const fromBuffer = srp.decode(Buffer.from(PROGRESS), { validate: true });
  const fromU8 = srp.decode(new TextEncoder().encode(PROGRESS), { validate: true });
  assert.deepEqual(plain(fromBuffer), plain(fromString));
  assert.deepEqual(plain(fromU8), plain(fromString));
  assert.equal(fromString.type, 'task.progress');
  assert.equal(fromString.payload.usage.thinking, 2);
  // A Uint8Array view into a larger buffer decodes only its own bytes.
  const padded = Buffer.from(`xx${PROGRESS}yy`);
  assert.deepEqual(plain(srp.decode(padded.subarray(2, padded.length - 2))), plain(fromString));
  // Non-ASCII text before the payload: the offsets are the JS string's.
  const wide = PROGRESS.replace('"T-1"', '"T-é😀"');
  for (const m of [srp.decode(wide), srp.decode(Buffer.from(wide))]) {
    assert.equal(m.task_id, 'T-é😀');
    assert.equal(m.kind, 'usage');
    assert.equal(m.payload.usage.output, 5);
  }
});

test('the fast path and the full path build the same message, attempt included', () => {
  for (const frame of [PROGRESS, PROGRESS.replace('"attempt":1,', '')]) {
    // Same frame with an unknown field: the fast path declines it, the full decode runs.
    const full = srp.decode(frame.replace('"kind"', '"zz":1,"kind"'), { validate: true });
    delete full.zz;
    const lazy = srp.decode(frame, { validate: true });
    const eager = srp.decode(frame, { validate: true, lazy: false });
    assert.ok(lazy instanceof srp.DecodedProgress);
    assert.ok(!(eager instanceof srp.DecodedProgress));
    assert.deepStrictEqual(plain(lazy), full);
    assert.deepStrictEqual(eager, full);
    assert.equal(typeof lazy.attempt, 'number', 'attempt is always present');
    for (const k of Object.keys(full)) assert.deepStrictEqual(lazy[k], full[k], k);
    assert.equal(srp.encode(lazy), srp.encode(full));
    assert.equal(srp.encode(eager), srp.encode(full));
  }
  // The session delivers the same message the codec decodes.
  const hub = new srp.HubSession({ config: { ping_interval_ms: 0 } });
  hub.handleInput(0, { type: 'connected' });
  hub.handleInput(0, { type: 'frame', frame: srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' }) });
  hub.drainOutputs();
  const noAttempt = PROGRESS.replace('"attempt":1,', '').replace('"seq":3', '"seq":1');
  hub.handleInput(1, { type: 'frame', frame: noAttempt });
  const received = hub.drainOutputs().find((o) => o.kind === 'received');
  assert.deepStrictEqual(plain(received.message), plain(srp.decode(noAttempt)));
  assert.equal(received.message.attempt, 0);
});

test('a lazy progress parses its payload once, behaves as a plain message and says what it is not', () => {
  const m = srp.decode(PROGRESS);
  assert.deepEqual(Object.keys(m), ['schema_version', 'type', 'task_id', 'seq', 'kind', 'attempt']);
  const p = m.payload;
  assert.equal(m.payload, p, 'parsed once, then kept');
  assert.ok(!Object.keys(m).includes('payload'), 'an accessor: not an own property');
  assert.deepEqual(Object.keys(m.toJSON()).at(-1), 'payload');
  assert.equal(JSON.stringify(m), srp.encode(m));
  m.payload = { other: true };
  m.seq = 9;
  assert.equal(srp.encode(m), PROGRESS.replace('"seq":3', '"seq":9').replace(/"payload":.*$/, '"payload":{"other":true}}'));
  // encode of an unread payload writes the frame's payload text.
  const unread = srp.decode(PROGRESS);
  unread.extra_field = 'x';
  assert.equal(srp.encode(unread), PROGRESS.replace(/}$/, ',"extra_field":"x"}'));
  // Numbers a JS number cannot hold survive an unchanged payload, read or not.
  const lossy = PROGRESS.replace(/"payload":.*$/, '"payload":{"a":1.0,"b":9007199254740993,"c":0.5}}').replace('"kind":"usage"', '"kind":"x"');
  const l1 = srp.decode(lossy);
  assert.equal(srp.encode(l1), lossy);
  assert.equal(l1.payload.b, 9007199254740992);
  assert.equal(srp.encode(l1), lossy, 'read but unchanged');
  l1.payload.c = 1;
  assert.match(srp.encode(l1), /"c":1[,}]/);
  const eager = srp.decode(lossy, { lazy: false });
  assert.equal(srp.encode(eager), lossy);
});

test('unknown fields survive decode/encode and JSON.stringify of a message is a frame', () => {
  const frame = '{"schema_version":1,"type":"ping","nonce":"n","x_future":{"a":[1,2]}}';
  const msg = srp.decode(frame, { validate: true });
  assert.deepEqual(msg.x_future, { a: [1, 2] });
  assert.equal(srp.encode(msg), frame);
  assert.deepEqual(srp.decode(JSON.stringify(msg), { validate: true }), msg);
  assert.equal(srp.toFrame(msg), frame);
});

test('schema errors are SchemaValidationError with located violations', () => {
  const bad = '{"schema_version":1,"type":"task.cancel","task_id":"","seq":-1}';
  assert.throws(
    () => srp.decode(bad, { validate: true }),
    (e) => {
      assert.ok(e instanceof srp.SchemaValidationError);
      assert.ok(e instanceof srp.DecodeError);
      assert.ok(e instanceof srp.RunnerProtocolError);
      assert.ok(e instanceof Error);
      assert.equal(e.code, 'schema_violation');
      assert.deepEqual(
        e.violations.map((v) => [v.location, v.rule]),
        [
          ['reason', 'required'],
          ['seq', 'minimum'],
          ['task_id', 'min_length'],
        ],
      );
      assert.equal(e.lines[1], 'seq: -1 is below the minimum 0 (minimum)');
      return true;
    },
  );
  assert.throws(() => srp.decode('{"type":"nope"}'), (e) => e instanceof srp.UnknownMessageError && e.code === 'unknown_type');
  assert.throws(() => srp.decode('{'), (e) => e instanceof srp.DecodeError && e.code === 'not_json');
  assert.throws(() => srp.decode('\ud800'), (e) => e.code === 'not_json' && /not valid Unicode/.test(e.message));
  assert.deepEqual(srp.iterErrors({ type: 'ping' }, 'ping'), ['schema_version: required field is missing (required)']);
  assert.equal(srp.isValid({ schema_version: 1, type: 'ping' }, 'ping'), true);
  // A value nested deeper than the decoder reads: the core's own error.
  let deep = [];
  for (let i = 0; i < 200; i += 1) deep = [deep];
  assert.throws(() => srp.encode({ type: 'ping', x: deep }), (e) => e instanceof srp.DecodeError && e.code === 'not_json');
});

test('machine misuse throws ProtocolStateError with the core code; configs are the core readers', () => {
  const hub = new srp.HubSession();
  assert.throws(() => hub.handleInput(0, { type: 'frame', frame: '{}' }), (e) => e instanceof srp.ProtocolStateError && e.code === 'not_connected');
  assert.throws(() => new srp.HubSession({ config: { ping_interval_ms: 'x' } }), (e) => e instanceof srp.ConfigError && e.key === 'ping_interval_ms');
  for (const make of [
    () => new srp.SubprocessTurnMachine({ grace: 1 }),
    () => new srp.LineFramer({ max_lines: 1 }),
    () => new srp.GatewayMachine({ catalog: {}, max_calls: 1 }),
  ]) {
    assert.throws(make, (e) => e instanceof srp.ConfigError && e.code === 'unknown_key');
  }
  assert.throws(() => new srp.SubprocessTurnMachine({ grace_ms: -1 }), (e) => e instanceof srp.ConfigError && e.code === 'out_of_range' && e.key === 'grace_ms');
});

test('handleFrames feeds a batch and returns the outputs handleInput would give; outputs wait in the machine', () => {
  const hello = srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' });
  const frames = [1, 2, 3].map((seq) => srp.encode({ type: 'task.progress', task_id: 'T', seq, kind: 'log', payload: { seq } }));
  const one = new srp.HubSession({ config: { ping_interval_ms: 0 } });
  const batch = new srp.HubSession({ config: { ping_interval_ms: 0 } });
  for (const h of [one, batch]) {
    h.handleInput(0, { type: 'connected' });
    h.handleInput(0, { type: 'frame', frame: hello });
    h.drainOutputs();
  }
  const expected = [];
  for (const f of [frames[0], frames[2], frames[1], frames[1]]) {
    one.handleInput(1, { type: 'frame', frame: f });
    for (let o = one.pollOutput(); o !== null; o = one.pollOutput()) expected.push(o);
  }
  const got = batch.handleFrames(1, [frames[0], frames[2], frames[1], frames[1]]);
  assert.deepEqual(plain(got), plain(expected));
  assert.deepEqual(
    got.filter((o) => o.kind === 'received').map((o) => o.message.seq),
    [1, 2, 3],
    'the held frame 3 is delivered after 2',
  );
  assert.throws(() => new srp.HubSession().handleFrames(0, frames), (e) => e.code === 'not_connected');
  // Outputs not polled before a disconnect are the machine's to drop (stale transmits).
  const runner = new srp.RunnerSession({ type: 'hello', project_id: 'p', runner_version: '1' }, { config: { ping_interval_ms: 0 } });
  runner.handleInput(0, { type: 'connected' });
  runner.handleInput(0, { type: 'disconnected' });
  assert.deepEqual(runner.drainOutputs(), []);
});

test('ConnectionState: the whole Python surface, by the core', () => {
  const hub = new srp.ConnectionState('hub', { max_outbox_frames: 8 });
  const runner = new srp.ConnectionState('runner');
  assert.equal(hub.config.max_outbox_frames, 8);
  assert.equal(typeof hub.config.inbound_window, 'number');
  const c1 = hub.emit({ type: 'task.cancel', task_id: 'T-1', reason: 'a' });
  const [c2, f2] = hub.emitEncoded({ type: 'task.cancel', task_id: 'T-1', reason: 'b' });
  assert.deepEqual([c1.seq, c2.seq], [1, 2]);
  assert.equal(f2, srp.encode(c2));
  assert.equal(runner.receive(c1), true);
  assert.equal(runner.receive(c1), false);
  assert.equal(runner.receiveArrival(c1), 'duplicate');
  assert.equal(runner.acceptInOrder({ ...c2, seq: 3 }), 'ahead');
  assert.equal(runner.acceptInOrder(c2), 'in_order');
  assert.deepEqual(runner.resumeMap(), { 'T-1': 2 });
  const replay = hub.replayFor({ 'T-1': 1 });
  assert.deepEqual(Object.keys(replay), ['T-1']);
  assert.deepEqual(replay['T-1'].map((m) => m.reason), ['b']);
  const report = hub.replayReport({ 'T-1': 1 });
  assert.deepEqual(report.streams[0].frames, [f2]);
  assert.equal(hub.isAhead('T-1', null, 5), true);
  assert.equal(hub.isAhead('T-1', null, 2), false);
  const ch = hub.channel('T-1');
  assert.ok(ch instanceof srp.TaskChannel);
  assert.equal(ch.taskId, 'T-1');
  assert.equal(ch.outbox.last_seq, 2);
  assert.deepEqual(Object.keys(hub.channels()), ['T-1']);
  assert.ok(hub.memoryFootprint() > 0);
  assert.deepEqual(hub.unacked().map((u) => [u.task_id, u.attempt, u.seq]), [['T-1', null, 2]]);
  assert.equal(hub.trimThrough('T-1', null, 2), 1);
  assert.equal(hub.isFullyAcknowledged('T-1'), true);
  assert.equal(hub.forgetTask('T-1'), true);
  assert.equal(hub.forgottenCount, 1);
  assert.throws(() => hub.channel(''), (e) => e instanceof srp.ProtocolStateError && e.code === 'missing_task_id');
  const restored = srp.ConnectionState.restore(hub.snapshot());
  assert.ok(restored.equals(hub));
  // A session's state is a copy.
  const session = new srp.HubSession();
  assert.ok(session.state() instanceof srp.ConnectionState);
  assert.equal(session.state().role, 'hub');
  assert.equal(session.isForgotten('x'), false);
});

test('standalone OutboxLog and InboxTracker keep state and throw the core codes', () => {
  const log = new srp.OutboxLog({ max_frames: 1 });
  assert.deepEqual(log.bounds, { max_frames: 1, max_bytes: 16 * 1024 * 1024 });
  const progress = { type: 'task.progress', task_id: 'T-1', attempt: 1, seq: 0, kind: 'state', payload: { state: 'running' } };
  assert.equal(log.emit(progress).seq, 1);
  assert.equal(progress.seq, 0, 'emit returns a stamped copy');
  assert.throws(() => log.emit(progress), (e) => e instanceof srp.ProtocolStateError && e.code === 'backpressure');
  assert.throws(() => log.emit({ type: 'ping', nonce: 'n' }), (e) => e instanceof srp.ProtocolStateError && e.code === 'not_sequenced');
  assert.deepEqual(log.frames().map(([seq]) => seq), [1]);
  assert.equal(log.ack(1), 1);
  assert.deepEqual([log.lastSeq, log.nextSeq, log.firstAvailable, log.keptBytes, log.unconfirmedFrom, log.isConfirmed], [1, 2, 2, 0, 2, true]);
  assert.equal(log.emit(progress).seq, 2);
  assert.deepEqual(log.since(1).map((m) => m.seq), [2]);

  const inbox = new srp.InboxTracker({ window: 2 });
  assert.equal(inbox.hasReceived, false);
  assert.equal(inbox.receiveArrival(2), 'ahead');
  assert.throws(() => inbox.receive(5), (e) => e instanceof srp.ProtocolStateError && e.code === 'beyond_window');
  assert.throws(() => inbox.receive(0), (e) => e instanceof srp.ProtocolStateError && e.code === 'invalid_seq');
  // A value that is not a seq at all is an argument error, not a protocol code.
  assert.throws(() => inbox.receive(-1), (e) => e instanceof srp.RunnerProtocolError && e.code === 'invalid_argument');
  assert.deepEqual([inbox.lastSeq, inbox.ahead, inbox.window], [0, [2], 2]);
  assert.equal(inbox.receive(1), true);
  assert.equal(inbox.receive(2), false);
  assert.equal(inbox.lastSeq, 2);
});

test('LineFramer reports its bounds and state', () => {
  const f = new srp.LineFramer({ max_line_bytes: 8, max_ready_lines: 2 });
  assert.deepEqual(f.bounds, { max_line_bytes: 8, max_ready_lines: 2, max_ready_bytes: 1024 * 1024 });
  assert.equal(f.push('a\nb\nc\n'), 4);
  assert.deepEqual([f.readyLen, f.readyBytes, f.full, f.finished], [2, 2, true, false]);
  assert.deepEqual(f.drain(), [{ line: 'a' }, { line: 'b' }]);
  f.finish();
  assert.equal(f.finished, true);
  assert.equal(srp.DEFAULT_MAX_LINE_BYTES, 65536);
  assert.equal(new srp.LineFramer().config.max_line_bytes, srp.DEFAULT_MAX_LINE_BYTES);
});

test('the wire constants, schemas and builders are the core\'s', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  assert.equal(srp.VERSION, pkg.version);
  assert.deepEqual(srp.messageTypes(), ['hello', 'task.assign', 'task.progress', 'task.report', 'task.cancel', 'ping', 'pong']);
  assert.deepEqual([...srp.SEQUENCED_TYPES], ['task.assign', 'task.progress', 'task.report', 'task.cancel']);
  assert.deepEqual(Object.keys(srp.MESSAGES), srp.messageTypes());
  for (const t of srp.messageTypes()) {
    const schema = srp.loadSchema(t);
    assert.equal(schema.title, t === 'task.report' ? schema.title : t);
    assert.equal(srp.SCHEMA_FILES[t], srp.MESSAGES[t].schemaFile);
    assert.equal(srp.MESSAGES[t].sequenced, srp.isSequenced(t));
    // The shipped copy is the conformance schema byte for byte.
    assert.equal(
      readFileSync(join(root, 'schemas', srp.SCHEMA_FILES[t]), 'utf8'),
      readFileSync(join(root, '..', 'conformance', 'schema', srp.SCHEMA_FILES[t]), 'utf8'),
    );
  }
  assert.throws(() => srp.loadSchema('nope'), (e) => e instanceof srp.UnknownMessageError && e.code === 'unknown_type');
  const ping = srp.MESSAGES.ping.create({ nonce: 7 });
  assert.deepEqual(ping, { schema_version: 1, type: 'ping', nonce: 7 });
  assert.deepEqual(srp.answerPing(ping), { schema_version: 1, type: 'pong', nonce: 7 });
  assert.throws(() => srp.MESSAGES['task.cancel'].validate({ task_id: '' }), (e) => e instanceof srp.SchemaValidationError);
});

test('the machines drain their outputs; the host machines say what the core says', () => {
  const local = new srp.LocalRun();
  local.handleInput(0, { type: 'controller_eof' });
  assert.ok(Array.isArray(local.drainOutputs()));
  const socket = new srp.SocketHost();
  assert.equal(socket.isOpen, false);
  socket.handleInput(0, { type: 'opened' });
  assert.deepEqual(socket.drainOutputs(), [{ kind: 'attach' }]);
  assert.equal(socket.isOpen, true);
  assert.equal(new srp.HubHost({ tokens: { t: 'r' } }).hasTokenTable, true);
  const hub = new srp.HubHost();
  assert.equal(hub.hasTokenTable, false);
  hub.handleInput(0, { type: 'request', conn: 1, headers: [['Authorization', 'Bearer tok']] });
  assert.deepEqual(hub.drainOutputs(), [{ kind: 'authenticate', conn: 1, token: 'tok' }]);
  const ids = new srp.SessionIds();
  assert.equal(ids.nextNumber, 1);
  ids.open({ sandbox_id: 'sb-1' });
  assert.equal(ids.nextNumber, 2);
  const gw = new srp.GatewayMachine({ catalog: {} });
  assert.deepEqual(gw.drainOutputs(), []);
  const sub = new srp.SubprocessTurnMachine();
  assert.equal(sub.lifecycle, 'new');
  assert.deepEqual(sub.drainOutputs(), []);
});

test('runnerTaskCall returns the typed policy results; the reconnect delay is the core backoff', () => {
  const r = srp.runnerTaskCall({ backoff: { failures: 0, random: 0 } });
  assert.equal(typeof r.delay_ms, 'number');
  assert.equal(srp.runnerTaskCall({ admit: { running: 1, max_tasks: 1, already_running: false } }), 'busy');
  // Jitter in the upper half of the capped delay, as the core's unit tests pin it.
  const policy = { initial_ms: 100, max_ms: 1000 };
  assert.equal(srp.reconnectDelay(0, policy, 0), 50);
  assert.equal(srp.reconnectDelay(0, policy, 50), 100);
  for (let n = 0; n < 8; n += 1) {
    const d = srp.reconnectDelay(n, policy);
    const cap = Math.min(1000, 100 * 2 ** n);
    assert.ok(d >= cap / 2 && d <= cap, `${n}: ${d}`);
  }
  assert.throws(() => srp.runnerTaskCall({ nope: {} }), (e) => e instanceof srp.ProtocolStateError && e.code === 'invalid_call');
});

test('Reconnect is the core\'s counter: a lost connection that delivered a frame starts the count again', () => {
  // The events of conformance/vectors/runner_task/reconnect_counter.json, through the class.
  const r = new srp.Reconnect({ initial_ms: 100, max_ms: 1000 });
  const got = [
    r.connectFailed(0),
    r.connectFailed(0),
    r.connectFailed(0),
    r.connectionLost(false, 0),
    r.connectionLost(true, 0),
    r.connectFailed(1000),
    r.connectionLost(false, 0),
  ];
  assert.deepEqual(got, [50, 100, 200, 400, 50, 191, 200]);
  assert.equal(r.failures, 3);
  const d = new srp.Reconnect();
  assert.equal(d.failures, 0);
  const first = d.connectionLost(false);
  assert.ok(first >= 125 && first <= 250, `the core's default backoff: ${first}`);
  assert.throws(() => d.connectFailed(-1), (e) => e instanceof srp.RunnerProtocolError && e.code === 'invalid_argument');
  // The backlog bound of the transports is the core's host config key.
  assert.equal(srp.HOST_CONSTANTS.max_backlog_bytes, 1024 * 1024);
  assert.equal(srp.hostConfig().max_backlog_bytes, srp.HOST_CONSTANTS.max_backlog_bytes);
  assert.equal(srp.hostConfig({ max_backlog_bytes: 7 }).max_backlog_bytes, 7);
  assert.throws(() => srp.hostConfig({ max_backlog_bytes: 0 }), (e) => e instanceof srp.ConfigError && e.code === 'out_of_range' && e.key === 'max_backlog_bytes');
});

test('internal helpers are not exported', () => {
  for (const name of ['__native', 'call', 'checkedText', 'translate', 'native', 'SCRATCH', 'messageText', 'fromDecoded']) {
    assert.ok(!(name in srp), `${name} is exported`);
  }
  const types = readFileSync(join(root, 'types', 'index.d.ts'), 'utf8');
  assert.doesNotMatch(types, /native|internal/);
});
