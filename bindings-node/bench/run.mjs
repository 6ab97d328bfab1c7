#!/usr/bin/env node
// Benchmarks of the Node package, in one run (a script, not a test: no assertions on time).
//
//   node bench/run.mjs            (after a release build: npm run build)
//
// 1. The usage progress frame: decode+validate vs bare JSON.parse vs JSON.parse + zod
//    with the same schema (task.progress with a closed UsageSplit payload).
// 2. Hub ingest: HubSession.handleInput(frame) for a stream of progress frames, the
//    `received` events drained (decode + sequencing receive + event out).
// 3. The session reducer over 100,000 canonical events.
import { readFileSync } from 'node:fs';
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
  console.log(`${name.padEnd(44)} ${best.toFixed(0).padStart(6)} ns/op  ${(1e9 / best).toFixed(0).padStart(10)} ops/s`);
  return best;
}

const FRAME =
  '{"schema_version":1,"type":"task.progress","task_id":"T-0042","seq":17,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":1200,"output":340,"cache_read":5000,"cache_write":0,"thinking":120}}}';
const int = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const progressSchema = z.object({
  schema_version: z.literal(1),
  type: z.literal('task.progress'),
  task_id: z.string().min(1),
  seq: int,
  kind: z.string(),
  attempt: int.optional(),
  payload: z
    .object({
      usage: z.strictObject({ fresh_input: int, output: int, cache_read: int, cache_write: int, thinking: int }),
    })
    .passthrough(),
});

console.log(`node ${process.version}, zod ${JSON.parse(readFileSync(join(root, 'node_modules', 'zod', 'package.json'), 'utf8')).version}`);
console.log(`\n1. usage progress frame (${FRAME.length} bytes)`);
const N = 300_000;
let sink = 0;
const tParse = bench('JSON.parse', N, () => {
  sink += JSON.parse(FRAME).seq;
});
const tDecode = bench('decode(frame, {validate: true})', N, () => {
  sink += srp.decode(FRAME, { validate: true }).seq;
});
const buf = Buffer.from(FRAME);
const tDecodeBuf = bench('decode(Buffer, {validate: true})', N, () => {
  sink += srp.decode(buf, { validate: true }).seq;
});
const tZod = bench('JSON.parse + zod parse', N, () => {
  sink += progressSchema.parse(JSON.parse(FRAME)).seq;
});
const slow = FRAME.replace('"kind"', '"x":1,"kind"'); // an unknown field: the full decode
const tFull = bench('decode, full path (unknown field)', N, () => {
  sink += srp.decode(slow, { validate: true }).seq;
});
console.log(`decode+validate / JSON.parse: ${(tDecode / tParse).toFixed(2)}x (target <= 1.5x)`);
console.log(`JSON.parse+zod / decode+validate: ${(tZod / tDecode).toFixed(2)}x (target >= 3x)`);
console.log(`full path / fast path: ${(tFull / tDecode).toFixed(2)}x; Buffer / string: ${(tDecodeBuf / tDecode).toFixed(2)}x`);

console.log('\n2. hub ingest (HubSession: decode + sequencing receive + received event)');
const hub = new srp.HubSession({ config: { ping_interval_ms: 0, peer_timeout_ms: 0 } });
hub.handleInput(0, { type: 'connected' });
hub.handleInput(0, { type: 'frame', frame: srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' }) });
hub.drainOutputs();
const INGEST = 200_000;
const frames = Array.from({ length: INGEST }, (_, i) => FRAME.replace('"seq":17', `"seq":${i + 1}`));
let delivered = 0;
const t0 = process.hrtime.bigint();
for (let i = 0; i < INGEST; i += 1) {
  hub.handleInput(1, { type: 'frame', frame: frames[i] });
  if ((i & 63) === 63) delivered += hub.drainOutputs().filter((o) => o.kind === 'received').length;
}
delivered += hub.drainOutputs().filter((o) => o.kind === 'received').length;
const ingestS = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`handleInput per frame: ${INGEST} frames in ${(ingestS * 1000).toFixed(0)} ms: ${(INGEST / ingestS).toFixed(0)} frames/s (target >= 500000), ${delivered} delivered`);
const hub2 = new srp.HubSession({ config: { ping_interval_ms: 0, peer_timeout_ms: 0 } });
hub2.handleInput(0, { type: 'connected' });
hub2.handleInput(0, { type: 'frame', frame: srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' }) });
hub2.drainOutputs();
let delivered2 = 0;
const t1 = process.hrtime.bigint();
for (let i = 0; i < INGEST; i += 256) {
  for (const o of hub2.handleFrames(1, frames.slice(i, i + 256))) if (o.kind === 'received') delivered2 += 1;
}
const batchS = Number(process.hrtime.bigint() - t1) / 1e9;
console.log(`handleFrames, 256 per call: ${INGEST} frames in ${(batchS * 1000).toFixed(0)} ms: ${(INGEST / batchS).toFixed(0)} frames/s, ${delivered2} delivered`);

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
time('replayEvents(config, events)', () => srp.replayEvents({ run_id: 'run_local' }, events));
if (sink === 0) console.log('');
