// The ws transport on 127.0.0.1 over a link that drops the connection mid-task several
// times: every progress frame reaches the hub exactly once and in order, every command
// reaches the runner exactly once; a wrong token is refused before the upgrade.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { HubServer, RunnerClient } from 'stapel-runner-protocol/transport-ws';

/** A TCP relay between the runner and the hub whose connections can be cut at will. */
async function lossyLink(targetPort) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    cut() {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

const until = async (what, check) => {
  for (let i = 0; i < 2000; i += 1) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
};

test('progress and commands survive a link that drops mid-task, each exactly once', async () => {
  const server = new HubServer({ tokens: { 'secret-a': 'runner-a' }, config: { ping_interval_ms: 50, ack_delay_ms: 10 } });
  const port = await server.listen(0);
  const link = await lossyLink(port);
  const client = new RunnerClient(`ws://127.0.0.1:${link.port}/`, {
    hello: { type: 'hello', project_id: 'p-1', runner_version: '0.1.0' },
    token: 'secret-a',
    config: { ping_interval_ms: 50, ack_delay_ms: 10 },
    backoff: { minDelayMs: 5, maxDelayMs: 40 },
  });
  const received = [];
  const commands = [];
  let hubConnects = 0;
  let stop = false;
  try {
    await client.connect();
    const runner = await server.accept();
    assert.equal(runner.runnerId, 'runner-a');
    const hubLoop = (async () => {
      while (!stop) {
        const e = await runner.recv();
        if (e.kind === 'received') received.push(e.message);
        if (e.kind === 'hello') hubConnects += 1;
      }
    })();
    const runnerLoop = (async () => {
      while (!stop) {
        const e = await client.recv();
        if (e.kind === 'received') commands.push(e.message);
      }
    })();
    const TOTAL = 300;
    const COMMANDS = 12;
    for (let i = 1; i <= TOTAL; i += 1) {
      client.send({ type: 'task.progress', task_id: 'T-1', attempt: 1, kind: 'log', payload: { i } });
      if (i % 25 === 0) {
        runner.send({ type: 'task.cancel', task_id: `C-${i / 25}`, reason: `r${i / 25}` });
      }
      if (i % 60 === 0) link.cut(); // five drops mid-task
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 2));
    }
    await until('every progress frame and command', () => received.length >= TOTAL && commands.length >= COMMANDS);
    await new Promise((r) => setTimeout(r, 100)); // anything duplicated would arrive now
    assert.equal(received.length, TOTAL, 'each progress frame applied exactly once');
    assert.deepEqual(received.map((m) => m.payload.i), Array.from({ length: TOTAL }, (_, k) => k + 1));
    assert.deepEqual(received.map((m) => m.seq), Array.from({ length: TOTAL }, (_, k) => k + 1));
    assert.deepEqual(commands.map((m) => m.task_id), Array.from({ length: COMMANDS }, (_, k) => `C-${k + 1}`));
    assert.ok(hubConnects >= 3, `the link dropped and the runner came back (${hubConnects} hellos)`);
    stop = true;
    runner.send({ type: 'task.cancel', task_id: 'wake', reason: 'x' });
    client.send({ type: 'task.progress', task_id: 'wake', kind: 'log', payload: {} });
    void hubLoop;
    void runnerLoop;
  } finally {
    stop = true;
    client.close();
    await server.close();
    await link.close();
  }
});

test('a wrong bearer token is refused with HTTP 401 before the upgrade', async () => {
  const { WebSocket } = await import('ws');
  const server = new HubServer({ tokens: { good: 'r-1' } });
  const port = await server.listen(0);
  try {
    const status = await new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Authorization: 'Bearer bad' } });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode));
      ws.on('open', () => resolve('opened'));
      ws.on('error', () => {});
    });
    assert.equal(status, 401);
  } finally {
    await server.close();
  }
});
