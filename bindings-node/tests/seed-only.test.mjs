// Issue 26, seed-only peers: the Node hub (HubServer) serves a runner written with
// stapel-runner-protocol 0.1.1's public names only (conformance/peers/seed_only_runner.py)
// running under the PUBLISHED 0.1.1 package (bindings-python/.pip-cache/ref-0.1.1/unpacked
// first on PYTHONPATH; bindings-python/scripts/diff-011-api fetches it, scripts/test-all
// runs that before the Node tests). Such a runner sends no `attempt`, never acknowledges
// and answers pings with plain pongs. The hub must serve it to the end: every report
// arrives once, as the attempt the hub assigned (the core's mapping), the hub's kept log
// is trimmed by the runner's plain pongs (so it stays within a bound far below the number
// of commands sent), and the runner exits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HubServer } from 'stapel-runner-protocol/transport-ws';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = join(root, '..');
const python = process.env.STAPEL_PYTHON ?? join(repo, 'bindings-python', '.venv', 'bin', 'python');
const published = join(repo, 'bindings-python', '.pip-cache', 'ref-0.1.1', 'unpacked');
const available = existsSync(python) && existsSync(join(published, 'stapel_runner_protocol'));
const required = process.env.STAPEL_NODE_REQUIRE_PYTHON === '1';

const TASKS = 100;
const PROGRESS = 2;
/** The hub's kept-log bound: TASKS commands are more than ten times it. */
const KEPT = 8;
const ATTEMPT = 2;

test(
  'the Node hub serves a 0.1.1 runner (published package) to the end: reports as the assigned attempt, kept log trimmed by plain pongs',
  { skip: !available && !required ? `no Python or no published 0.1.1 package (${published})` : false, timeout: 180_000 },
  async () => {
    assert.ok(available, `the Python venv and the published 0.1.1 package are required (${python}, ${published}; run bindings-python/scripts/diff-011-api)`);
    const dir = mkdtempSync(join(tmpdir(), 'srp-seed-only-'));
    const token = 'seed-only-token-4d1c';
    writeFileSync(join(dir, 'token'), `${token}\n`);
    const server = new HubServer({
      tokens: { [token]: 'seed-runner' },
      // Pings often, so the runner's plain pongs trim the kept log; a small kept log.
      config: { ping_interval_ms: 100, sequencing: { max_outbox_frames: KEPT } },
    });
    const port = await server.listen(0);
    const child = spawn(
      python,
      [join(repo, 'conformance', 'peers', 'seed_only_runner.py'), '--url', `ws://127.0.0.1:${port}/`, '--token-file', join(dir, 'token'), '--progress', String(PROGRESS), '--exit-after', String(TASKS)],
      { cwd: dir, env: { ...process.env, PYTHONPATH: published }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    const lines = createInterface({ input: child.stdout });
    const said = [];
    lines.on('line', (l) => said.push(JSON.parse(l)));
    try {
      const runner = await server.accept();
      const got = new Map(); // task -> [[type, seq, attempt]...]
      const reports = [];
      let stalls = 0;
      let peak = 0;
      let assigned = 0;
      let waiting = null; // resolves on `unstalled`
      let done = null;
      const allReported = new Promise((resolve) => (done = resolve));
      const loop = (async () => {
        for (;;) {
          const e = await runner.recv();
          if (e.kind === 'received') {
            const m = e.message;
            if (!got.has(m.task_id)) got.set(m.task_id, []);
            got.get(m.task_id).push([m.type, m.seq, m.attempt]);
            if (m.type === 'task.report') {
              reports.push(m.task_id);
              if (reports.length === TASKS) done();
            }
          } else if (e.kind === 'stalled') {
            stalls += 1;
          } else if (e.kind === 'unstalled') {
            waiting?.();
          } else if (e.kind === 'disconnected' && reports.length === TASKS) {
            return;
          }
        }
      })();
      // Assign every task as attempt ATTEMPT, holding on backpressure until the kept log has room.
      while (assigned < TASKS) {
        const task_id = `S-${assigned + 1}`;
        try {
          runner.send({ type: 'task.assign', task_id, attempt: ATTEMPT, spec: spec(task_id) });
          assigned += 1;
          peak = Math.max(peak, runner.link.outboxFrames());
        } catch (e) {
          if (e.code !== 'backpressure') throw e;
          await new Promise((resolve) => (waiting = resolve));
          waiting = null;
        }
        await new Promise((r) => setImmediate(r));
      }
      await allReported;
      assert.equal(await exited, 0, `the 0.1.1 runner exits 0 after its ${TASKS} reports\n${stderr}`);
      void loop;
      // Every report once, every frame as the assigned attempt, seqs 1..n once and in order.
      assert.deepEqual([...reports].sort(), Array.from({ length: TASKS }, (_, k) => `S-${k + 1}`).sort());
      for (const [task, frames] of got) {
        assert.deepEqual(
          frames,
          [...Array.from({ length: PROGRESS }, (_, k) => ['task.progress', k + 1, ATTEMPT]), ['task.report', PROGRESS + 1, ATTEMPT]],
          task,
        );
      }
      assert.equal(got.size, TASKS);
      // The kept log stayed bounded and was trimmed by the plain pongs alone (the runner
      // never acknowledges): TASKS commands went through a log of KEPT.
      assert.ok(peak <= KEPT, `kept ${peak} > ${KEPT}`);
      const stats = runner.link.sessionStats();
      assert.ok(stats.implied_acked >= TASKS - KEPT, `implied acknowledgements: ${stats.implied_acked}`);
      assert.ok(stalls === 0 || stats.probes >= 1, 'a refused send sends a probe ping');
      assert.ok(said.some((s) => s.connected === 1));
      assert.equal(said.filter((s) => s.assigned !== undefined).length, TASKS);
      console.log(`seed-only runner: ${TASKS} tasks through a kept log of ${KEPT}; peak ${peak}; stalls ${stalls}; implied acks ${stats.implied_acked}; probes ${stats.probes}`);
    } finally {
      child.kill();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

function spec(id) {
  return { schema_version: 1, id, type: 'code', goal: 'run the task', criteria: [{ id: 'c1', text: 'run the task' }], budget: { iterations: 1 } };
}
