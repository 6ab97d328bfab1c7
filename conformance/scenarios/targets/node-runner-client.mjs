// The Node package's RunnerClient under `stapel-conformance runner`:
//
//   stapel-conformance runner --report DIR -- node conformance/scenarios/targets/node-runner-client.mjs
//
// A minimal runner on `stapel-runner-protocol/transport-ws`'s RunnerClient, the twin of
// python-runner-client.py: it connects to STAPEL_HUB_URL with the token in
// STAPEL_TOKEN_FILE, keeps its session snapshot in STAPEL_STATE_DIR/session.snapshot
// (written when a command arrives, before it is acted on, and after every frame sent),
// and plays the conformance workload the task's goal names (`conformance quick N`: N state progress frames and a
// `done` report; `conformance hold`: one, then wait for the cancel and report `failed`,
// failure_type `cancelled`). At most two tasks at once; a further assignment gets a
// `failed` report with failure_type `runner_busy` at once. Everything the protocol decides
// is the client's (the core's). The package is taken from STAPEL_NODE_PACKAGE (default:
// bindings-node of this tree); the short keepalive and reconnect timings are this
// target's settings, not the protocol's.
import { createRequire } from 'node:module';
import { existsSync, readFileSync, renameSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = process.env.STAPEL_NODE_PACKAGE ?? join(here, '..', '..', '..', 'bindings-node');
const require = createRequire(join(pkg, 'package.json'));
const { RunnerClient } = require('./dist/transport-ws.js');

const MAX_TASKS = 2;
const USAGE = { cache_read: 0, cache_write: 0, fresh_input: 0, output: 0, thinking: 0 };

const stateDir = process.env.STAPEL_STATE_DIR;
mkdirSync(stateDir, { recursive: true });
const snapshotPath = join(stateDir, 'session.snapshot');
const snapshot = existsSync(snapshotPath) ? new Uint8Array(readFileSync(snapshotPath)) : undefined;
const token = readFileSync(process.env.STAPEL_TOKEN_FILE, 'utf8').trim();

const client = new RunnerClient(process.env.STAPEL_HUB_URL, {
  hello: { type: 'hello', project_id: 'conformance-node', runner_version: '0.2.0', capabilities: ['conformance'] },
  token,
  snapshot,
  config: { ping_interval_ms: 500, peer_timeout_ms: 1500 },
  backoff: { initial_ms: 50, max_ms: 300 },
});

function persist() {
  const tmp = `${snapshotPath}.tmp`;
  writeFileSync(tmp, client.snapshot());
  renameSync(tmp, snapshotPath);
}

// Sends wait while the kept log is full (the core's `backpressure`) until `unstalled`.
let unstalled = [];
async function send(message) {
  for (;;) {
    try {
      client.send(message);
      persist();
      return;
    } catch (e) {
      if (e?.code !== 'backpressure') throw e;
      await new Promise((resolve) => unstalled.push(resolve));
    }
  }
}

function report(taskId, attempt, status, summary, failureType) {
  const r = { schema_version: 1, task_id: taskId, status, summary_business: summary, usage: { ...USAGE } };
  if (failureType !== undefined) r.failure_type = failureType;
  return send({ type: 'task.report', task_id: taskId, attempt, report: r });
}

const running = new Map(); // task_id -> { cancelled, wake }
const finished = new Set();

async function work(m, entry) {
  const goal = String(m.task?.goal ?? '');
  const hold = goal.includes('conformance hold');
  const quick = /conformance quick (\d+)/.exec(goal);
  const steps = hold ? 1 : quick ? Number(quick[1]) : 3;
  try {
    for (let i = 0; i < steps && !entry.cancelled; i++) {
      await send({ type: 'task.progress', task_id: m.task_id, attempt: m.attempt, kind: 'state', payload: { state: hold ? 'holding' : `step ${i}` } });
    }
    if (hold && !entry.cancelled) await new Promise((resolve) => (entry.wake = resolve));
    if (entry.cancelled) await report(m.task_id, m.attempt, 'failed', 'cancelled by the hub', 'cancelled');
    else await report(m.task_id, m.attempt, 'done', 'the conformance workload finished');
  } finally {
    running.delete(m.task_id);
    finished.add(m.task_id);
  }
}

async function onMessage(m) {
  if (m.type === 'task.assign') {
    if (running.has(m.task_id) || finished.has(m.task_id)) return;
    if (running.size >= MAX_TASKS) {
      finished.add(m.task_id);
      await report(m.task_id, m.attempt, 'failed', `the runner already runs ${MAX_TASKS} tasks`, 'runner_busy');
      return;
    }
    const entry = { cancelled: false, wake: null };
    running.set(m.task_id, entry);
    work(m, entry).catch((e) => console.error('node-runner-client: task', m.task_id, e));
  } else if (m.type === 'task.cancel') {
    const entry = running.get(m.task_id);
    if (entry !== undefined) {
      entry.cancelled = true;
      entry.wake?.();
    }
  }
}

let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    stopping = true;
    persist();
    client.close();
  });
}

client.connect();
for (;;) {
  const e = await client.recv();
  if (e.kind === 'received') {
    // The command's receipt is kept before any work it starts can send (a runner killed
    // right after must still declare it in its next hello.resume).
    persist();
    await onMessage(e.message);
    persist();
  } else if (e.kind === 'unstalled' || e.kind === 'connected') {
    const waiting = unstalled;
    unstalled = [];
    for (const w of waiting) w();
  } else if (e.kind === 'error' || e.kind === 'disconnected' || e.kind === 'peer_error') {
    console.error('node-runner-client:', e.kind, e.code ?? e.reason ?? e.error?.message ?? '');
  } else if (e.kind === 'stopped') {
    if (stopping) process.exit(0);
  }
}
