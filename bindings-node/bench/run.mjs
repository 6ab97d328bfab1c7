#!/usr/bin/env node
// Benchmarks of the Node package, in one run (a script, not a test: no assertions on time).
//
//   node bench/run.mjs            (after a release build: npm run build)
//
// 1. The usage progress frame: decode+validate, its alternatives (eager plain object,
//    Buffer input, payload read), against bare JSON.parse and JSON.parse + zod with the
//    same rules (task.progress, and a closed UsageSplit payload when kind is usage).
// 2. Hub ingest: HubSession fed frames one by one (handleInput, outputs drained) and in
//    batches (handleFrames), and decode + ConnectionState.receiveArrival per frame.
// 3. The session reducer over 100,000 canonical events.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import * as srp from 'stapel-runner-protocol';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function bench(name, n, f) {
  for (let i = 0; i < Math.min(n, 20_000); i += 1) f(i); // warm up
  let best = Infinity;
  for (let round = 0; round < 5; round += 1) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i += 1) f(i);
    const ns = Number(process.hrtime.bigint() - t0) / n;
    best = Math.min(best, ns);
  }
  console.log(`${name.padEnd(52)} ${best.toFixed(0).padStart(6)} ns/op  ${(1e9 / best).toFixed(0).padStart(10)} ops/s`);
  return best;
}

const FRAME =
  '{"schema_version":1,"type":"task.progress","task_id":"T-0042","seq":17,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":1200,"output":340,"cache_read":5000,"cache_write":0,"thinking":120}}}';
// The rules of task.progress with validate (conformance/schema/task_progress.v1.json):
// unknown top-level fields allowed, payload an open object, and when kind is `usage`
// payload.usage a UsageSplit (exactly the five non-negative integers, 0..2^53-1).
const int = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const usageSplit = z.strictObject({ fresh_input: int, output: int, cache_read: int, cache_write: int, thinking: int });
const progressSchema = z
  .looseObject({
    schema_version: z.literal(1),
    type: z.literal('task.progress'),
    task_id: z.string().min(1),
    seq: int,
    kind: z.string(),
    attempt: int.optional(),
    payload: z.looseObject({}),
  })
  .superRefine((v, ctx) => {
    if (v.kind !== 'usage') return;
    const r = usageSplit.safeParse(v.payload.usage);
    if (!r.success) for (const issue of r.error.issues) ctx.addIssue({ ...issue, path: ['payload', 'usage', ...issue.path] });
  });
if (!progressSchema.safeParse(JSON.parse(FRAME)).success) throw new Error('the zod schema refuses the frame');
if (progressSchema.safeParse(JSON.parse(FRAME.replace('"thinking":120', '"thinking":-1'))).success) throw new Error('the zod schema misses a rule');

const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`node ${process.version}, zod ${JSON.parse(readFileSync(join(root, 'node_modules', 'zod', 'package.json'), 'utf8')).version}, load average ${load()}`);
console.log(`\n1. usage progress frame (${FRAME.length} bytes)`);
const N = 300_000;
let sink = 0;
const tParse = bench('JSON.parse', N, () => {
  sink += JSON.parse(FRAME).seq;
});
const tDecode = bench('decode(frame, {validate}) (lazy payload, default)', N, () => {
  sink += srp.decode(FRAME, { validate: true }).seq;
});
const tRead = bench('decode(frame, {validate}) + read payload', N, () => {
  sink += srp.decode(FRAME, { validate: true }).payload.usage.output;
});
const tEager = bench('decode(frame, {validate, lazy: false}) (JSON.parse)', N, () => {
  sink += srp.decode(FRAME, { validate: true, lazy: false }).payload.usage.output;
});
const buf = Buffer.from(FRAME);
const tDecodeBuf = bench('decode(Buffer, {validate}) (lazy payload)', N, () => {
  sink += srp.decode(buf, { validate: true }).seq;
});
const tZod = bench('JSON.parse + zod parse', N, () => {
  sink += progressSchema.parse(JSON.parse(FRAME)).seq;
});
const slow = FRAME.replace('"kind"', '"x":1,"kind"'); // an unknown field: the full decode
const tFull = bench('decode, full path (unknown field)', N, () => {
  sink += srp.decode(slow, { validate: true }).seq;
});
const r = (a, b) => (a / b).toFixed(2);
console.log(`decode+validate / JSON.parse: ${r(tDecode, tParse)}x (target <= 1.5x); with the payload read ${r(tRead, tParse)}x; lazy: false ${r(tEager, tParse)}x`);
console.log(`JSON.parse+zod / decode+validate: ${r(tZod, tDecode)}x (target >= 3x); with the payload read ${r(tZod, tRead)}x; lazy: false ${r(tZod, tEager)}x`);
console.log(`full path / fast path: ${r(tFull, tDecode)}x; Buffer / string: ${r(tDecodeBuf, tDecode)}x`);

console.log('\n2. hub ingest (decode + sequencing receive + received event)');
const connectedHub = () => {
  const hub = new srp.HubSession({ config: { ping_interval_ms: 0, peer_timeout_ms: 0 } });
  hub.handleInput(0, { type: 'connected' });
  hub.handleInput(0, { type: 'frame', frame: srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' }) });
  hub.drainOutputs();
  return hub;
};
const INGEST = 200_000;
const frames = Array.from({ length: INGEST }, (_, i) => FRAME.replace('"seq":17', `"seq":${i + 1}`));
const ingest = (name, run) => {
  const t0 = process.hrtime.bigint();
  const delivered = run();
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`${name.padEnd(52)} ${(s * 1000).toFixed(0).padStart(6)} ms  ${(INGEST / s).toFixed(0).padStart(10)} frames/s  (${delivered} delivered)`);
  return INGEST / s;
};
const perFrame = ingest('handleInput per frame, drainOutputs every 64', () => {
  const hub = connectedHub();
  let delivered = 0;
  for (let i = 0; i < INGEST; i += 1) {
    hub.handleInput(1, { type: 'frame', frame: frames[i] });
    if ((i & 63) === 63) for (const o of hub.drainOutputs()) if (o.kind === 'received') delivered += 1;
  }
  for (const o of hub.drainOutputs()) if (o.kind === 'received') delivered += 1;
  return delivered;
});
const perPoll = ingest('handleInput per frame, pollOutput until null', () => {
  const hub = connectedHub();
  let delivered = 0;
  for (let i = 0; i < INGEST; i += 1) {
    hub.handleInput(1, { type: 'frame', frame: frames[i] });
    for (let o = hub.pollOutput(); o !== null; o = hub.pollOutput()) if (o.kind === 'received') delivered += 1;
  }
  return delivered;
});
const batched = ingest('handleFrames, 256 per call', () => {
  const hub = connectedHub();
  let delivered = 0;
  for (let i = 0; i < INGEST; i += 256) {
    for (const o of hub.handleFrames(1, frames.slice(i, i + 256))) if (o.kind === 'received') delivered += 1;
  }
  return delivered;
});
const stateWise = ingest('decode + ConnectionState.receiveArrival per frame', () => {
  const state = new srp.ConnectionState('hub');
  let delivered = 0;
  for (let i = 0; i < INGEST; i += 1) if (state.receiveArrival(srp.decode(frames[i], { validate: true })) !== 'duplicate') delivered += 1;
  return delivered;
});
console.log(`hub ingest target >= 500000 frames/s: per frame ${perFrame.toFixed(0)}, polled ${perPoll.toFixed(0)}, batched ${batched.toFixed(0)}, decode+receive ${stateWise.toFixed(0)}`);

console.log('\n3. session reducer over 100,000 canonical events');
const base = {
  schema: 'paperclip.prp.event.v1',
  sourceInstanceId: 'runner_local',
  sourceKind: 'runner',
  runId: 'run_local',
  normalizedSessionId: 'session_local',
  schemaVersion: 1,
};
const prefix = [
  ['runtime.phase.changed', { phase: 'executing' }, 1],
  ['turn.started', {}, 1],
  ['item.started', { kind: 'command', text: 'pnpm test' }, 1],
];
const EVENTS = 100_000;
const events = [];
for (let i = 0; i < EVENTS; i += 1) {
  const [eventType, payload, priority] = prefix[i] ?? ['item.delta', { text: `line ${i}\n` }, 2];
  const seq = i + 1;
  events.push({
    ...base,
    sourceEventId: `event_run_local_${String(seq).padStart(6, '0')}`,
    sourceSeq: seq,
    eventType,
    priority,
    emittedAt: new Date(Date.UTC(2026, 0, 1) + seq).toISOString(),
    payload,
  });
}
const lines = events.map((e) => JSON.stringify(e));
const time = (name, f) => {
  const t = process.hrtime.bigint();
  const r = f();
  const s = Number(process.hrtime.bigint() - t) / 1e9;
  console.log(`${name.padEnd(44)} ${(s * 1000).toFixed(0).padStart(6)} ms  ${(EVENTS / s).toFixed(0).padStart(10)} events/s`);
  return r;
};
time('apply(event) per event', () => {
  const r = new srp.SessionReducer({ run_id: 'run_local' });
  for (const e of events) r.apply(e);
  return r.snapshot();
});
time('applyLine(line) per JSONL line', () => {
  const r = new srp.SessionReducer({ run_id: 'run_local' });
  for (const l of lines) r.applyLine(l);
  return r.snapshot();
});
time('applyAll(events) in one call', () => {
  const r = new srp.SessionReducer({ run_id: 'run_local' });
  r.applyAll(events);
  return r.snapshot();
});
const jsonl = lines.join('\n');
time('applyLines(jsonl) in one call', () => {
  const r = new srp.SessionReducer({ run_id: 'run_local' });
  r.applyLines(jsonl);
  return r.snapshot();
});
time('replayEvents(config, events)', () => srp.replayEvents({ run_id: 'run_local' }, events));
console.log(`\nload average after: ${load()}`);
if (sink === 0) console.log('');
