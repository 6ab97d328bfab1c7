#!/usr/bin/env node
// Hub ingest through the new link against today's session-only path, in one run (a
// script, not a test: no assertions on time). Run after a release build (npm run build):
//
//   node bench/link.mjs [--rounds N] [--frames N] [--e2e]
//
// 1. Machines: a HubLink and a HubSession, each connected and past the runner's hello,
//    fed the same 200,000 plain task.progress frames in three shapes — batches of 256
//    (handleFrames), one frame per handleFrames call (the pump's shape when a socket read
//    holds one frame), and handleInput per frame with drainOutputs every 64. The link also
//    reports the events its application took, as a host must (with the next handleFrames
//    call, or an events_taken input per drain). Rounds alternate link and session; the
//    best round of each counts. Rates are frames per second of the process's CPU time
//    (process.cpuUsage: a busy neighbour on a shared machine takes wall time, not CPU
//    time). Prints link / session ratios (issue 26's target: no regression beyond 5%).
// 2. --e2e: the whole transport over a WebSocket on 127.0.0.1: a raw `ws` runner writes
//    hello and N progress frames, the HubServer's application takes every `received`
//    event. Today's transport (transport-ws at commit a127780, the session driven by the
//    socket host machine, compiled here into node_modules/.bench-old/ against the current
//    addon) and the new pump, alternating, best of N rounds.
// The load average is printed before and after (other jobs share the machine).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as srp from 'stapel-runner-protocol';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROUNDS = arg('--rounds', 7);
const INGEST = arg('--frames', 200_000);
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
console.log(`node ${process.version}; load average ${load()} (before)`);

const FRAME =
  '{"schema_version":1,"type":"task.progress","task_id":"T-0042","seq":17,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":1200,"output":340,"cache_read":5000,"cache_write":0,"thinking":120}}}';
const HELLO = srp.encode({ type: 'hello', project_id: 'p', runner_version: '1' });
const frames = Array.from({ length: INGEST }, (_, i) => FRAME.replace('"seq":17', `"seq":${i + 1}`));
const QUIET = { ping_interval_ms: 0, peer_timeout_ms: 0 };

function session() {
  const hub = new srp.HubSession({ config: QUIET });
  hub.handleInput(0, { type: 'connected' });
  hub.handleInput(0, { type: 'frame', frame: HELLO });
  hub.drainOutputs();
  return hub;
}

function link() {
  taken = 0;
  const hub = new srp.HubLink({ config: { session: QUIET } });
  hub.handleInput(0, { type: 'attach', socket: 1 });
  const n = hub.handleFrames(0, 1, [HELLO]).filter(srp.isLinkEvent).length;
  hub.handleInput(0, { type: 'events_taken', n });
  return hub;
}

/**
 * Count `received` outputs; for a link, the events taken (reported with the next
 * handleFrames call, or here with events_taken when `report`, as a host must).
 */
let taken = 0;
function take(hub, outputs, isLink, report) {
  let received = 0;
  for (const o of outputs) {
    if (o.kind === 'received') received += 1;
    if (isLink && srp.isLinkEvent(o)) taken += 1;
  }
  if (report && taken > 0) {
    hub.handleInput(1, { type: 'events_taken', n: taken });
    taken = 0;
  }
  return received;
}

/** handleFrames of either machine (a link also reports the events taken since the last call). */
function frames_(hub, isLink, batch) {
  if (!isLink) return hub.handleFrames(1, batch);
  const n = taken;
  taken = 0;
  return hub.handleFrames(1, 1, batch, n);
}

const SHAPES = {
  'handleFrames, 256 per call': (hub, isLink) => {
    let delivered = 0;
    for (let i = 0; i < INGEST; i += 256) delivered += take(hub, frames_(hub, isLink, frames.slice(i, i + 256)), isLink, false);
    return delivered;
  },
  'handleFrames, 1 per call': (hub, isLink) => {
    let delivered = 0;
    for (let i = 0; i < INGEST; i += 1) delivered += take(hub, frames_(hub, isLink, [frames[i]]), isLink, false);
    return delivered;
  },
  'handleInput per frame, drainOutputs every 64': (hub, isLink) => {
    let delivered = 0;
    for (let i = 0; i < INGEST; i += 1) {
      if (isLink) hub.handleInput(1, { type: 'frame', socket: 1, frame: frames[i] });
      else hub.handleInput(1, { type: 'frame', frame: frames[i] });
      if ((i & 63) === 63) delivered += take(hub, hub.drainOutputs(), isLink, true);
    }
    return delivered + take(hub, hub.drainOutputs(), isLink, true);
  },
};

/**
 * Frames per second of the process's CPU time (user + system), not of wall time: on a
 * shared machine a busy neighbour takes wall time, not this process's CPU time.
 */
function timed(f) {
  const t0 = process.cpuUsage();
  const delivered = f();
  const used = process.cpuUsage(t0);
  const s = (used.user + used.system) / 1e6;
  if (delivered !== INGEST) throw new Error(`delivered ${delivered} of ${INGEST}`);
  return INGEST / s;
}

console.log(`\n1. hub ingest, ${INGEST} frames, best of ${ROUNDS} rounds (link and session alternating), frames per CPU second`);
const ratios = [];
for (const [name, run] of Object.entries(SHAPES)) {
  let bestLink = 0;
  let bestSession = 0;
  timed(() => run(link(), true)); // warm up both
  timed(() => run(session(), false));
  for (let r = 0; r < ROUNDS; r += 1) {
    if (r % 2 === 0) {
      bestLink = Math.max(bestLink, timed(() => run(link(), true)));
      bestSession = Math.max(bestSession, timed(() => run(session(), false)));
    } else {
      bestSession = Math.max(bestSession, timed(() => run(session(), false)));
      bestLink = Math.max(bestLink, timed(() => run(link(), true)));
    }
  }
  const ratio = bestLink / bestSession;
  ratios.push(ratio);
  console.log(
    `${name.padEnd(46)} session ${bestSession.toFixed(0).padStart(9)}  link ${bestLink.toFixed(0).padStart(9)} frames/s  link/session ${ratio.toFixed(3)}`,
  );
}
console.log(`link / session (target >= 0.95): ${ratios.map((x) => x.toFixed(3)).join(', ')}`);

if (process.argv.includes('--e2e')) await e2e();
console.log(`\nload average ${load()} (after)`);

/** The transport at commit a127780, compiled against the current addon (see the header). */
function oldTransport() {
  const dir = join(root, 'node_modules', '.bench-old');
  const dist = join(dir, 'dist', 'transport-ws.js');
  if (!existsSync(dist)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, 'ts'), { recursive: true });
    const files = execFileSync('git', ['ls-tree', '--name-only', 'a127780', 'ts/'], { cwd: root, encoding: 'utf8' }).trim().split('\n');
    for (const f of files) {
      writeFileSync(join(dir, f), execFileSync('git', ['show', `a127780:./${f}`], { cwd: root }));
    }
    cpSync(join(root, 'native.d.ts'), join(dir, 'native.d.ts'));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'commonjs', moduleResolution: 'node10', lib: ['ES2022'], types: ['node'], strict: true, outDir: 'dist', rootDir: 'ts', esModuleInterop: true, skipLibCheck: true, typeRoots: [join(root, 'node_modules', '@types')] },
        include: ['ts/**/*.ts'],
      }),
    );
    execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(dir, 'tsconfig.json')], { stdio: 'inherit' });
  }
  cpSync(join(root, 'stapel-runner-protocol.node'), join(dir, 'stapel-runner-protocol.node'));
  return createRequire(import.meta.url)(dist);
}

/** Frames/s from a raw runner's writes until the hub application took every `received`. */
async function once(transport, n) {
  const { WebSocket } = await import('ws');
  const server = new transport.HubServer({ tokens: { t: 'r' }, config: QUIET });
  const port = await server.listen(0);
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Authorization: 'Bearer t' } });
  ws.on('error', () => {});
  await new Promise((resolve) => ws.on('open', resolve));
  const runner = await new Promise((resolve) => {
    ws.send(HELLO);
    resolve(server.accept());
  });
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const CHUNK = 512;
  let sent = 0;
  const pump = () => {
    ws._socket.cork();
    for (let k = 0; k < CHUNK && sent < n; k += 1, sent += 1) ws.send(frames[sent]);
    ws._socket.uncork();
    if (sent < n) setImmediate(pump);
  };
  pump();
  let received = 0;
  while (received < n) {
    const e = await runner.recv();
    if (e.kind === 'received') received += 1;
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const used = process.cpuUsage(c0);
  ws.terminate();
  await server.close();
  return { wall: n / s, cpu: n / ((used.user + used.system) / 1e6) };
}

async function e2e() {
  const N = Math.min(INGEST, 100_000);
  const transports = { today: oldTransport(), link: await import('stapel-runner-protocol/transport-ws') };
  console.log(`\n2. hub ingest over a WebSocket on 127.0.0.1, ${N} frames, best of ${ROUNDS} rounds (alternating)`);
  const best = { today: { wall: 0, cpu: 0 }, link: { wall: 0, cpu: 0 } };
  await once(transports.today, 20_000);
  await once(transports.link, 20_000);
  for (let r = 0; r < ROUNDS; r += 1) {
    const order = r % 2 === 0 ? ['today', 'link'] : ['link', 'today'];
    for (const k of order) {
      const got = await once(transports[k], N);
      best[k] = { wall: Math.max(best[k].wall, got.wall), cpu: Math.max(best[k].cpu, got.cpu) };
    }
  }
  for (const m of ['wall', 'cpu']) {
    const what = m === 'wall' ? 'frames/s (wall)' : 'frames per CPU second (both ends in this process)';
    console.log(`today's transport ${best.today[m].toFixed(0).padStart(9)}  link pump ${best.link[m].toFixed(0).padStart(9)}  link/today ${(best.link[m] / best.today[m]).toFixed(3)}  ${what}`);
  }
}
