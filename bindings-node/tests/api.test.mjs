// The public API from ESM: codec forms, typed errors, panics as thrown errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as srp from 'stapel-runner-protocol';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const PROGRESS =
  '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":10,"output":5,"cache_read":0,"cache_write":0,"thinking":2}}}';

test('decode takes a string, a Buffer and a Uint8Array alike', () => {
  const fromString = srp.decode(PROGRESS, { validate: true });
  const fromBuffer = srp.decode(Buffer.from(PROGRESS), { validate: true });
  const fromU8 = srp.decode(new TextEncoder().encode(PROGRESS), { validate: true });
  assert.deepEqual(fromBuffer, fromString);
  assert.deepEqual(fromU8, fromString);
  assert.equal(fromString.type, 'task.progress');
  assert.equal(fromString.payload.usage.thinking, 2);
  // A Uint8Array view into a larger buffer decodes only its own bytes.
  const padded = Buffer.from(`xx${PROGRESS}yy`);
  assert.deepEqual(srp.decode(padded.subarray(2, padded.length - 2)), fromString);
});

test('the fast path and the full path build the same message', () => {
  // Same frame with an unknown field: the fast path declines it, the full decode runs.
  const slow = srp.decode(PROGRESS.replace('"kind"', '"zz":1,"kind"'), { validate: true });
  const fast = srp.decode(PROGRESS, { validate: true });
  delete slow.zz;
  assert.deepEqual(fast, slow);
  assert.equal(srp.encode(fast), PROGRESS);
});

test('unknown fields survive decode/encode and JSON.stringify of a message is a frame', () => {
  const frame = '{"schema_version":1,"type":"ping","nonce":"n","x_future":{"a":[1,2]}}';
  const msg = srp.decode(frame, { validate: true });
  assert.deepEqual(msg.x_future, { a: [1, 2] });
  assert.equal(srp.encode(msg), frame);
  assert.deepEqual(srp.decode(JSON.stringify(msg), { validate: true }), msg);
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
});

test('machine misuse throws ProtocolStateError with the core code', () => {
  const hub = new srp.HubSession();
  assert.throws(() => hub.handleInput(0, { type: 'frame', frame: '{}' }), (e) => e instanceof srp.ProtocolStateError && e.code === 'not_connected');
  assert.throws(() => new srp.HubSession({ config: { ping_interval_ms: 'x' } }), (e) => e instanceof srp.ConfigError && e.key === 'ping_interval_ms');
});

test('a panic in the native core is a thrown PanicError, and the process lives on', () => {
  const script = `
    const srp = require('stapel-runner-protocol');
    try { srp.__native.__panicProbe(); console.log('no panic'); }
    catch (e) {
      const t = require('stapel-runner-protocol').PanicError;
      const typed = (() => { try { srp.__native.__panicProbe(); } catch (x) { return x; } })();
      console.log(String(e.message.includes('panic probe')), typeof e.message);
    }
    // The same through the public error mapping:
    const { call } = srp;
    try { call(() => srp.__native.__panicProbe()); }
    catch (e) { console.log(e instanceof srp.PanicError, e.code, e.message); }
    // ... and the module still works afterwards.
    console.log(srp.encode({ type: 'ping' }));
  `;
  const run = spawnSync(process.execPath, ['-e', script], {
    cwd: root,
    env: { ...process.env, STAPEL_NODE_PANIC_PROBE: '1' },
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  const lines = run.stdout.trim().split('\n');
  assert.equal(lines[0], 'true string');
  assert.match(lines[1], /^true panic the native core panicked: panic probe$/);
  assert.equal(lines[2], '{"schema_version":1,"type":"ping"}');
  // Without the environment variable the probe does not panic.
  assert.equal(srp.__native.__panicProbe(), false);
});

test('handleFrames feeds a batch and returns the outputs handleInput would give', () => {
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
  for (const f of [...frames, frames[1]]) {
    one.handleInput(1, { type: 'frame', frame: f });
    expected.push(...one.drainOutputs());
  }
  const got = batch.handleFrames(1, [...frames, frames[1]]);
  assert.deepEqual(got, expected);
  assert.deepEqual(
    got.filter((o) => o.kind === 'received').map((o) => o.message.seq),
    [1, 2, 3],
  );
  assert.throws(() => new srp.HubSession().handleFrames(0, frames), (e) => e.code === 'not_connected');
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
  assert.deepEqual([log.lastSeq, log.nextSeq, log.firstAvailable, log.keptBytes], [1, 2, 2, 0]);
  assert.equal(log.emit(progress).seq, 2);
  assert.deepEqual(log.since(1).map((m) => m.seq), [2]);

  const inbox = new srp.InboxTracker({ window: 2 });
  assert.equal(inbox.hasReceived, false);
  assert.equal(inbox.receive(2), 'ahead');
  assert.throws(() => inbox.receive(5), (e) => e instanceof srp.ProtocolStateError && e.code === 'beyond_window');
  assert.throws(() => inbox.receive(0), (e) => e instanceof srp.ProtocolStateError && e.code === 'invalid_seq');
  assert.deepEqual([inbox.lastSeq, inbox.ahead, inbox.window], [0, [2], 2]);
  assert.equal(inbox.receive(1), 'in_order');
  assert.equal(inbox.receive(2), 'duplicate');
  assert.equal(inbox.lastSeq, 2);
});

test('runnerTaskCall returns the policy result and throws invalid_call', () => {
  const r = srp.runnerTaskCall({ backoff: { failures: 0, random: 0 } });
  assert.equal(typeof r.delay_ms, 'number');
  assert.throws(() => srp.runnerTaskCall({ nope: {} }), (e) => e instanceof srp.ProtocolStateError && e.code === 'invalid_call');
});
