// Cross-language: the Node runner client against the Python package's hub server
// (bindings-python/python/stapel_runner_protocol/transport_ws.py). Needs the Python package
// built into bindings-python/.venv (scripts/test-all builds it first and sets
// STAPEL_NODE_REQUIRE_PYTHON=1, so there it cannot be skipped).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RunnerClient } from 'stapel-runner-protocol/transport-ws';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const python = process.env.STAPEL_PYTHON ?? join(root, '..', 'bindings-python', '.venv', 'bin', 'python');
const available = existsSync(python);
const required = process.env.STAPEL_NODE_REQUIRE_PYTHON === '1';

test('a Node runner and the Python hub server interoperate on the wire', { skip: !available && !required ? `no Python package at ${python}` : false }, async () => {
  assert.ok(available, `the Python package is required (${python})`);
  const hub = spawn(python, [join(root, 'tests', 'fixtures', 'python_hub.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: hub.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((resolve) => hub.on('exit', resolve));
  let client;
  try {
    const { port } = JSON.parse((await lines.next()).value);
    client = new RunnerClient(`ws://127.0.0.1:${port}/`, {
      hello: { type: 'hello', project_id: 'p-node', runner_version: '0.1.0', capabilities: ['subprocess'] },
      token: 'tok-node',
    });
    await client.connect();
    // The Python hub's command arrives at the Node runner.
    let command;
    while (command === undefined) {
      const e = await client.recv();
      if (e.kind === 'received') command = e.message;
    }
    assert.deepEqual(command, { schema_version: 1, type: 'task.cancel', task_id: 'T-9', reason: 'stop', seq: 1 });
    // The Node runner's progress and report arrive at the Python hub, stamped and in order.
    client.send({ type: 'task.progress', task_id: 'T-9', attempt: 1, kind: 'state', payload: { state: 'running' } });
    client.send({ type: 'task.progress', task_id: 'T-9', attempt: 1, kind: 'log', payload: { text: 'é 😀' } });
    client.send({ type: 'task.report', task_id: 'T-9', attempt: 1, report: { schema_version: 1, task_id: 'T-9', status: 'done', summary: 'ok', usage: { fresh_input: 1, output: 2, cache_read: 0, cache_write: 0, thinking: 0 } } });
    const result = JSON.parse((await lines.next()).value);
    assert.equal(result.runner, 'runner-node');
    assert.deepEqual(
      result.received.map((m) => [m.type, m.seq, m.attempt]),
      [
        ['task.progress', 1, 1],
        ['task.progress', 2, 1],
        ['task.report', 3, 1],
      ],
    );
    assert.equal(result.received[1].payload.text, 'é 😀');
    assert.equal(await exited, 0);
  } finally {
    client?.close();
    hub.kill();
  }
});
