// The ws transport (a pump around the core's links) on 127.0.0.1: a link that drops the
// connection mid-task five times (every progress frame reaches the hub exactly once and in
// order, every command reaches the runner exactly once), the reconnect schedule is the
// core's RunnerLink's (the same delays as a RunnerLink with the same seed driven through
// the same socket events in virtual time: a hub that accepts and drops every connection
// before saying anything gets growing delays, one that says something first does not),
// the backlog bound (the core's max_backlog_bytes), the token check before the upgrade
// (wrong, missing, an async authenticator answering per connection), one session per
// runner (a newer socket replaces the older one), and the bounded queues.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { HOST_CONSTANTS, LINK_CONSTANTS, RunnerLink, encode } from 'stapel-runner-protocol';
import { HubServer, RunnerClient, TransportError } from 'stapel-runner-protocol/transport-ws';

const HELLO = { type: 'hello', project_id: 'p-1', runner_version: '0.1.0' };
const FAST = { ping_interval_ms: 50, ack_delay_ms: 10 };
const BACKOFF = { initial_ms: 5, max_ms: 40 };

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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The HTTP answer to an upgrade with these headers: `{status, reason, body}` or 'opened'. */
async function upgrade(port, headers) {
  const { WebSocket } = await import('ws');
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, reason: res.statusMessage, body }));
    });
    ws.on('open', () => {
      ws.terminate();
      resolve('opened');
    });
    ws.on('error', () => {});
  });
}

test('progress and commands survive a link that drops mid-task, each exactly once', async () => {
  const server = new HubServer({ tokens: { 'secret-a': 'runner-a' }, config: FAST });
  const port = await server.listen(0);
  const link = await lossyLink(port);
  const client = new RunnerClient(`ws://127.0.0.1:${link.port}/`, { hello: HELLO, token: 'secret-a', config: FAST, backoff: BACKOFF });
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
    const TOTAL = 360;
    const COMMANDS = 14;
    const CUTS = 5;
    let cuts = 0;
    for (let i = 1; i <= TOTAL; i += 1) {
      client.send({ type: 'task.progress', task_id: 'T-1', attempt: 1, kind: 'log', payload: { i } });
      if (i % 25 === 0) {
        runner.send({ type: 'task.cancel', task_id: `C-${i / 25}`, reason: `r${i / 25}` });
      }
      if (i % 60 === 0 && cuts < CUTS) {
        // A drop mid-task (frames sent before it and after it), then the runner's reconnect.
        link.cut();
        cuts += 1;
        await until(`reconnect ${cuts}`, () => hubConnects === cuts + 1);
      }
      if (i % 10 === 0) await sleep(2);
    }
    assert.equal(cuts, CUTS);
    await until('every progress frame and command', () => received.length >= TOTAL && commands.length >= COMMANDS);
    await sleep(100); // anything duplicated would arrive now
    assert.equal(received.length, TOTAL, 'each progress frame applied exactly once');
    assert.deepEqual(received.map((m) => m.payload.i), Array.from({ length: TOTAL }, (_, k) => k + 1));
    assert.deepEqual(received.map((m) => m.seq), Array.from({ length: TOTAL }, (_, k) => k + 1));
    assert.deepEqual(commands.map((m) => m.task_id), Array.from({ length: COMMANDS }, (_, k) => `C-${k + 1}`));
    assert.equal(hubConnects, CUTS + 1, `the link dropped ${CUTS} times and the runner came back after each`);
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

/** A bare `ws` server: on each connection, `onConnection(ws)`; counts the connections. */
async function bareServer(onConnection) {
  const { WebSocketServer } = await import('ws');
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => wss.on('listening', resolve));
  const state = { connections: 0, port: wss.address().port };
  wss.on('connection', (ws) => {
    state.connections += 1;
    ws.on('error', () => {});
    onConnection(ws);
  });
  state.close = () => new Promise((resolve) => wss.close(resolve));
  return state;
}

/**
 * The reconnect schedule a RunnerLink with `seed` gives in virtual time when each socket
 * opens and is closed by the peer (after one frame when `saysSomething`): `n` pairs
 * [delay_ms, failures] — what the client must report, since the link decides them.
 */
function virtualSchedule(seed, backoff, saysSomething, n) {
  const link = new RunnerLink(HELLO, { config: { backoff_initial_ms: backoff.initial_ms, backoff_max_ms: backoff.max_ms }, seed });
  const out = [];
  let now = 0;
  link.handleInput(now, { type: 'start' });
  while (out.length < n) {
    let socket;
    for (const o of link.drainOutputs()) {
      if (o.kind === 'connect') socket = o.socket;
      if (o.kind === 'reconnecting') out.push([o.delay_ms, o.failures]);
    }
    if (socket !== undefined) {
      link.handleInput(now, { type: 'opened', socket });
      if (saysSomething) link.handleInput(now, { type: 'frame', socket, frame: JSON.stringify({ type: 'ping', nonce: 'n' }) });
      link.handleInput(now, { type: 'socket_closed', socket });
    } else {
      now = link.pollTimeout();
      link.handleInput(now, { type: 'timeout' });
    }
  }
  return out;
}

test('a hub that accepts the upgrade and drops every connection at once gets growing delays (the link\'s schedule)', async () => {
  const server = await bareServer((ws) => ws.close());
  const scheduled = [];
  const backoff = { initial_ms: 20, max_ms: 100_000 };
  const client = new RunnerClient(`ws://127.0.0.1:${server.port}/`, {
    hello: HELLO,
    backoff,
    seed: 7n,
    onReconnect: (delayMs, failures) => scheduled.push([delayMs, failures]),
  });
  try {
    await client.connect();
    await until('five reconnects', () => scheduled.length >= 5);
    client.close();
    const want = virtualSchedule(7n, backoff, false, 5);
    assert.deepEqual(scheduled.slice(0, 5), want);
    assert.deepEqual(want.map(([, f]) => f), [1, 2, 3, 4, 5], 'each lost connection counts one more failure');
    for (const [[d], k] of want.map((w, k) => [w, k])) {
      const capped = Math.min(20 * 2 ** k, 100_000);
      assert.ok(d >= capped / 2 && d <= capped, `delay ${d} in the upper half of ${capped}`);
    }
    assert.ok(server.connections >= 5, `every attempt was upgraded (${server.connections})`);
    assert.ok(client.failures >= 5);
  } finally {
    client.close();
    await server.close();
  }
});

test('a connection that delivered a frame before it was lost starts the link\'s count again', async () => {
  const server = await bareServer((ws) => {
    ws.send(JSON.stringify({ type: 'ping', nonce: 'n' }));
    ws.close();
  });
  const scheduled = [];
  const backoff = { initial_ms: 20, max_ms: 100_000 };
  const client = new RunnerClient(`ws://127.0.0.1:${server.port}/`, {
    hello: HELLO,
    backoff,
    seed: 11n,
    onReconnect: (delayMs, failures) => scheduled.push([delayMs, failures]),
  });
  try {
    await client.connect();
    await until('four reconnects', () => scheduled.length >= 4);
    client.close();
    const want = virtualSchedule(11n, backoff, true, 4);
    assert.deepEqual(scheduled.slice(0, 4), want);
    assert.deepEqual(want.map(([, f]) => f), [1, 1, 1, 1]);
  } finally {
    client.close();
    await server.close();
  }
});

test('a wrong or missing bearer token is refused with the core\'s HTTP 401 before the upgrade', async () => {
  const server = new HubServer({ tokens: { good: 'r-1' } });
  const port = await server.listen(0);
  try {
    for (const headers of [{ Authorization: 'Bearer bad' }, {}, { Authorization: 'Basic Z29vZA==' }]) {
      const r = await upgrade(port, headers);
      assert.equal(r.status, HOST_CONSTANTS.status_unauthorized, JSON.stringify(headers));
      assert.equal(r.reason, 'Unauthorized');
      assert.equal(r.body, 'a valid bearer token is required\n');
    }
    assert.equal(await upgrade(port, { Authorization: 'Bearer good' }), 'opened');
    assert.equal(server.pendingConnections, 0);
  } finally {
    await server.close();
  }
});

test('an async authenticator answers each connection, in any order, by its connection id', async () => {
  const asked = [];
  const server = new HubServer({
    authenticate: (token) =>
      new Promise((resolve) => {
        asked.push(token);
        // The first asked answers last.
        setTimeout(() => resolve(token === 'tok-a' ? 'runner-a' : null), token === 'tok-a' ? 80 : 10);
      }),
  });
  const port = await server.listen(0);
  try {
    const [a, b] = await Promise.all([upgrade(port, { Authorization: 'Bearer tok-a' }), upgrade(port, { Authorization: 'Bearer tok-b' })]);
    assert.equal(a, 'opened');
    assert.equal(b.status, 401);
    assert.deepEqual(asked.sort(), ['tok-a', 'tok-b']);
    const runner = await server.accept();
    assert.equal(runner.runnerId, 'runner-a');
    assert.equal(await server.runnerIdFor('Bearer tok-a'), 'runner-a');
    assert.equal(await server.runnerIdFor('Bearer tok-b'), null);
  } finally {
    await server.close();
  }
  assert.throws(() => new HubServer({}), TypeError);
});

test('one session per runner: a newer socket replaces the older one and the session goes on', async () => {
  const server = new HubServer({ tokens: { t: 'r-1' }, config: FAST });
  const port = await server.listen(0);
  const first = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, token: 't', config: FAST, backoff: { initial_ms: 60_000, max_ms: 60_000 } });
  const second = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, token: 't', config: FAST, backoff: BACKOFF });
  try {
    await first.connect();
    const runner = await server.accept();
    runner.send({ type: 'task.cancel', task_id: 'C-1', reason: 'a' });
    const got = async (client) => {
      for (;;) {
        const e = await client.recv();
        if (e.kind === 'received') return e.message;
      }
    };
    assert.equal((await got(first)).task_id, 'C-1');
    await second.connect();
    await until('the first socket replaced', () => !first.connected);
    assert.equal(server.runners.size, 1, 'still one runner');
    assert.equal(server.runners.get('r-1'), runner, 'and one session');
    runner.send({ type: 'task.cancel', task_id: 'C-1', reason: 'b' });
    // The second client is a fresh runner session: the hub's one session goes on with the
    // same command stream (a first command it still kept may be replayed first).
    let m = await got(second);
    if (m.reason === 'a') m = await got(second);
    assert.deepEqual([m.seq, m.reason], [2, 'b']);
  } finally {
    first.close();
    second.close();
    await server.close();
  }
});

test('a full event queue pauses the socket; nothing is lost, nothing queued beyond the bound', async () => {
  const MAX = 8;
  const server = new HubServer({ tokens: { t: 'r-1' }, config: { ...FAST, ping_interval_ms: 0 }, maxQueuedEvents: MAX });
  const port = await server.listen(0);
  const client = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, token: 't', config: { ...FAST, ping_interval_ms: 0 }, backoff: BACKOFF });
  try {
    await client.connect();
    const runner = await server.accept();
    const TOTAL = 500;
    for (let i = 1; i <= TOTAL; i += 1) client.send({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: { i } });
    let peak = 0;
    for (let k = 0; k < 40; k += 1) {
      await sleep(5);
      peak = Math.max(peak, runner.queuedEvents);
    }
    // One frame can produce a few events (the hello, a received message) past the bound.
    assert.ok(peak >= MAX && peak <= MAX + 2, `queued ${peak} with a bound of ${MAX}`);
    const seen = [];
    while (seen.length < TOTAL) {
      const e = await runner.recv();
      if (e.kind === 'received') seen.push(e.message.payload.i);
      peak = Math.max(peak, runner.queuedEvents);
    }
    assert.deepEqual(seen, Array.from({ length: TOTAL }, (_, k) => k + 1));
    assert.ok(peak <= MAX + 2, `queued ${peak}`);
    assert.equal(runner.droppedEvents, 0, 'no event of the session is dropped');
  } finally {
    client.close();
    await server.close();
  }
});

test('a backlog beyond the core\'s max_backlog_bytes fails the socket; within the bound it waits', async () => {
  const { WebSocket } = await import('ws');
  const quiet = { ...FAST, ping_interval_ms: 0 };
  const TOTAL = 100;
  // A bare runner that writes its hello and TOTAL progress frames in one TCP write: the hub
  // reads them in one go, far more than its 8-event queue holds while nobody reads it.
  const burst = async (port) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Authorization: 'Bearer t' } });
    const state = { ws, closed: false };
    ws.on('close', () => (state.closed = true));
    ws.on('error', () => {});
    await new Promise((resolve) => ws.on('open', resolve));
    ws._socket.cork();
    ws.send(encode(HELLO));
    for (let i = 1; i <= TOTAL; i += 1) ws.send(encode({ type: 'task.progress', task_id: 'T', seq: i, attempt: 1, kind: 'log', payload: { i } }));
    ws._socket.uncork();
    return state;
  };
  for (const maxBacklogBytes of [2000, undefined]) {
    const options = { tokens: { t: 'r-1' }, config: quiet, maxQueuedEvents: 8 };
    if (maxBacklogBytes !== undefined) options.maxBacklogBytes = maxBacklogBytes;
    const server = new HubServer(options);
    const port = await server.listen(0);
    try {
      const peer = await burst(port);
      const runner = await server.accept();
      if (maxBacklogBytes !== undefined) {
        // The frames beyond the queue overflow 2000 bytes of backlog: the link fails the
        // socket (aborted) with a backlog_full error, which reaches the application (news
        // is admitted up to the link's allowance beyond the full queue).
        await until('the overflowing socket is aborted', () => peer.closed);
        assert.equal(runner.connected, false);
        assert.equal(runner.stats().backlog_overflows, 1);
        const kinds = [];
        let error;
        while (runner.queuedEvents > 0) {
          const e = await runner.recv();
          kinds.push(e.kind);
          if (e.kind === 'error') error = e.error;
        }
        assert.ok(error instanceof TransportError, `events ${kinds.join(',')}`);
        assert.equal(error.code, 'backlog_full');
        assert.equal(kinds.at(-1), 'disconnected');
      } else {
        // Within the core's default bound (1 MiB) every frame waits and reaches the session.
        const seen = [];
        while (seen.length < TOTAL) {
          const e = await runner.recv();
          if (e.kind === 'received') seen.push(e.message.payload.i);
        }
        assert.deepEqual(seen, Array.from({ length: TOTAL }, (_, k) => k + 1));
        assert.equal(peer.closed, false);
        assert.equal(runner.connected, true);
        assert.equal(runner.droppedEvents, 0);
      }
      peer.ws.terminate();
    } finally {
      await server.close();
    }
  }
});

test('failed connects back off by the link and never grow the queue past its bound', async () => {
  const blocker = net.createServer();
  await new Promise((r) => blocker.listen(0, '127.0.0.1', r));
  const port = blocker.address().port;
  await new Promise((r) => blocker.close(r)); // nothing listens there now
  const MAX = 3;
  const client = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, backoff: { initial_ms: 2, max_ms: 4 }, maxQueuedEvents: MAX });
  try {
    void client.connect();
    // Each failed connect is news (an error, a reconnecting): admitted up to the link's
    // allowance beyond the bound, then dropped and counted.
    await until('many failed connects', () => client.droppedEvents >= 10);
    const bound = MAX + LINK_CONSTANTS.news_allowance;
    assert.equal(client.queuedEvents, bound, 'the queue holds the link\'s bound');
    await until('more failed connects', () => client.droppedEvents >= 20);
    assert.equal(client.queuedEvents, bound, 'and does not grow');
    const e = await client.recv();
    assert.equal(e.kind, 'error');
    assert.ok(e.error instanceof TransportError);
    assert.equal(e.error.code, 'connect_failed');
    const r = await client.recv();
    assert.equal(r.kind, 'reconnecting');
    assert.deepEqual([r.failures, r.delay_ms >= 1 && r.delay_ms <= 2], [1, true]);
  } finally {
    client.close();
  }
});
