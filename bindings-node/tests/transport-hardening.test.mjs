// The transport's hardening (issue 26): options are refused when a client or server is
// created, with coded errors; `random: Math.random` (any number-returning function) works;
// a throwing callback becomes an `error` event and the client keeps running; the bearer
// token appears in no output, error or event on either end (NODE_DEBUG=* included, right
// and wrong tokens); peer errors count in the queue bound and pause the socket; durable
// acknowledgements hold the hub's acks until the application confirms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, ProtocolStateError, SchemaValidationError, encode } from 'stapel-runner-protocol';
import { HubServer, RunnerClient, TransportError } from 'stapel-runner-protocol/transport-ws';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const HELLO = { type: 'hello', project_id: 'p-1', runner_version: '0.1.0' };
const FAST = { ping_interval_ms: 50, ack_delay_ms: 10 };
const BACKOFF = { initial_ms: 5, max_ms: 40 };

const until = async (what, check) => {
  for (let i = 0; i < 2000; i += 1) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Uncaught exceptions and unhandled rejections while `body` runs (none may escape a handler). */
async function noEscapes(body) {
  const escaped = [];
  const record = (e) => escaped.push(e);
  process.on('uncaughtException', record);
  process.on('unhandledRejection', record);
  try {
    await body();
  } finally {
    process.off('uncaughtException', record);
    process.off('unhandledRejection', record);
  }
  assert.deepEqual(escaped, [], 'nothing escaped a socket event handler');
}

/** A TCP relay whose connections can be cut. */
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

/** The next event of `side` of this kind (others skipped). */
async function next(side, kind) {
  for (;;) {
    const e = await side.recv();
    if (e.kind === kind) return e;
  }
}

const url = 'ws://127.0.0.1:1/';
const show = (options) => JSON.stringify(options, (_k, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'function' ? String(v) : v));

test('bad options are refused when the client or server is created, with coded errors', () => {
  const configError = (options, code, key) => {
    assert.throws(
      () => new RunnerClient(url, { hello: HELLO, ...options }),
      (e) => e instanceof ConfigError && e.code === code && e.key === key,
      show(options),
    );
  };
  // Values of the link and its session: the core's ConfigError, naming the key.
  configError({ maxQueuedEvents: 0 }, 'out_of_range', 'max_queued_events');
  configError({ maxQueuedEvents: 'many' }, 'wrong_type', 'max_queued_events');
  configError({ maxBacklogBytes: -1 }, 'out_of_range', 'max_backlog_bytes');
  configError({ closeTimeoutMs: 1.5 }, 'wrong_type', 'close_timeout_ms');
  configError({ connectTimeoutMs: -3 }, 'out_of_range', 'connect_timeout_ms');
  configError({ backoff: { initial_ms: -5 } }, 'out_of_range', 'backoff_initial_ms');
  configError({ config: { ping_interval_ms: -1 } }, 'out_of_range', 'session.ping_interval_ms');
  configError({ config: { ping_every: 5 } }, 'unknown_key', 'session.ping_every');
  // The hello: the core's schema rules.
  assert.throws(() => new RunnerClient(url, { hello: { ...HELLO, project_id: '' } }), (e) => e instanceof SchemaValidationError && e.code === 'schema_violation');
  // JS-only values: TypeError / RangeError with Node's codes.
  const jsError = (options, cls, code, urlArg = url) => {
    assert.throws(
      () => new RunnerClient(urlArg, { hello: HELLO, ...options }),
      (e) => e instanceof cls && e.code === code,
      show(options),
    );
  };
  jsError({ onReconnect: 'log it' }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ random: 0.5 }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ random: () => Number.NaN }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ random: () => 'x' }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ seed: -1n }, RangeError, 'ERR_OUT_OF_RANGE');
  jsError({ seed: 2n ** 64n }, RangeError, 'ERR_OUT_OF_RANGE');
  jsError({ seed: 1.5 }, RangeError, 'ERR_OUT_OF_RANGE');
  jsError({ seed: '7' }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ token: 42 }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ snapshot: 'bytes' }, TypeError, 'ERR_INVALID_ARG_TYPE');
  jsError({ maxQueuedEvent: 5 }, TypeError, 'ERR_INVALID_ARG_VALUE');
  jsError({ backoff: { initial: 5 } }, TypeError, 'ERR_INVALID_ARG_VALUE');
  jsError({}, TypeError, 'ERR_INVALID_URL', 'not a url');
  jsError({}, TypeError, 'ERR_INVALID_URL', 'ftp://127.0.0.1/');
  assert.throws(() => new RunnerClient(url), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  // A token a header cannot carry: refused, and the message does not show it.
  assert.throws(
    () => new RunnerClient(url, { hello: HELLO, token: 'sec\nret-77' }),
    (e) => e instanceof TypeError && e.code === 'ERR_INVALID_CHAR' && !e.message.includes('ret-77') && !String(e.stack).includes('ret-77'),
  );
  // The server's options too.
  assert.throws(() => new HubServer({ tokens: { t: 'r' }, maxQueuedEvents: 0 }), (e) => e instanceof ConfigError && e.key === 'max_queued_events');
  assert.throws(() => new HubServer({ tokens: { t: 'r' }, maxIdleRunners: -1 }), (e) => e instanceof ConfigError && e.key === 'max_idle_runners');
  assert.throws(() => new HubServer({ tokens: { t: 7 } }), (e) => e instanceof ConfigError);
  assert.throws(() => new HubServer({ tokens: { t: 'r' }, durableAcks: 'yes' }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  assert.throws(() => new HubServer({ authenticate: 'r' }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_TYPE');
  assert.throws(() => new HubServer({ tokens: { t: 'r' }, authenticate: () => null }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_VALUE');
  assert.throws(() => new HubServer({ tokens: { t: 'r' }, port: 80 }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_VALUE');
  // Good options are accepted (nothing connects until connect()).
  const ok = new RunnerClient(url, { hello: HELLO, random: Math.random, maxQueuedEvents: 5, backoff: { initial_ms: 1 } });
  assert.equal(ok.connected, false);
  assert.equal(ok.link.config().max_queued_events, 5);
});

test('random: Math.random (or any function returning numbers) works, from the first connect through reconnects', async () => {
  await noEscapes(async () => {
    for (const random of [Math.random, () => 12345.678, () => -3, () => 0]) {
      const server = new HubServer({ tokens: { t: 'r-1' }, config: FAST });
      const port = await server.listen(0);
      const link = await lossyLink(port);
      const client = new RunnerClient(`ws://127.0.0.1:${link.port}/`, { hello: HELLO, token: 't', config: FAST, backoff: BACKOFF, random });
      try {
        await client.connect();
        const runner = await server.accept();
        await next(runner, 'hello');
        link.cut();
        await next(runner, 'hello'); // the runner came back after the cut
        client.send({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: { n: 1 } });
        const got = await next(runner, 'received');
        assert.equal(got.message.payload.n, 1);
        assert.ok(client.failures >= 1);
      } finally {
        client.close();
        await server.close();
        await link.close();
      }
    }
  });
});

test('a throwing onReconnect becomes an error event and the client keeps running', async () => {
  await noEscapes(async () => {
    for (const thrown of [new Error('boom'), 'a string', { code: 'custom' }]) {
      const server = new HubServer({ tokens: { t: 'r-1' }, config: FAST });
      const port = await server.listen(0);
      const link = await lossyLink(port);
      let calls = 0;
      const client = new RunnerClient(`ws://127.0.0.1:${link.port}/`, {
        hello: HELLO,
        token: 't',
        config: FAST,
        backoff: BACKOFF,
        onReconnect: () => {
          calls += 1;
          throw thrown;
        },
      });
      try {
        await client.connect();
        const runner = await server.accept();
        await next(runner, 'hello');
        link.cut();
        await next(runner, 'hello');
        const events = [];
        for (;;) {
          const e = await client.recv();
          events.push(e);
          if (e.kind === 'connected' && events.some((x) => x.kind === 'error')) break;
        }
        const error = events.find((e) => e.kind === 'error').error;
        assert.ok(error instanceof Error);
        if (thrown instanceof Error) assert.equal(error, thrown, 'the error event carries what the callback threw');
        else assert.equal(error.message, String(thrown));
        assert.ok(calls >= 1);
        // Still running: a message sent now reaches the hub.
        client.send({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: { after: true } });
        assert.equal((await next(runner, 'received')).message.payload.after, true);
      } finally {
        client.close();
        await server.close();
        await link.close();
      }
    }
  });
});

test('the bearer token is in no output, error or event on either end (NODE_DEBUG=*, right and wrong tokens)', () => {
  const good = 'tok-GOOD-5b9fe1';
  const wrong = 'tok-WRONG-7c1e2d';
  const run = spawnSync(process.execPath, [join(root, 'tests', 'fixtures', 'token_child.mjs'), good, wrong], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NODE_DEBUG: '*' },
    timeout: 60_000,
  });
  const output = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, output.slice(-3000));
  // The run did what it should: the right token served, the wrong ones were refused.
  assert.match(run.stdout, /^done$/m);
  assert.match(run.stdout, /runner event \{\s+kind: 'received'/);
  for (const label of ['wrong-token', 'prefixed-token', 'throwing-authenticator', 'refusing-authenticator']) {
    assert.match(run.stdout, new RegExp(`^${label} error upgrade_refused 401 `, 'm'), label);
  }
  assert.match(run.stderr, /NET \d+:/, 'NODE_DEBUG logging was on');
  for (const secret of [good, wrong, good.slice(4), wrong.slice(4)]) {
    assert.ok(!output.includes(secret), `the token ${secret} appears in the output`);
  }
});

test('peer errors count in the queue bound and pause the socket; none is lost', async () => {
  const { WebSocket } = await import('ws');
  const MAX = 8;
  const TOTAL = 300;
  const server = new HubServer({ tokens: { t: 'r-1' }, config: { ping_interval_ms: 0 }, maxQueuedEvents: MAX });
  const port = await server.listen(0);
  const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Authorization: 'Bearer t' } });
  ws.on('error', () => {});
  try {
    await new Promise((resolve) => ws.on('open', resolve));
    ws._socket.cork();
    ws.send(encode(HELLO));
    for (let i = 0; i < TOTAL; i += 1) ws.send(`not json ${i}`);
    ws._socket.uncork();
    const runner = await server.accept();
    let peak = 0;
    for (let k = 0; k < 40; k += 1) {
      await sleep(5);
      peak = Math.max(peak, runner.queuedEvents);
    }
    assert.ok(peak >= MAX && peak <= MAX + 2, `queued ${peak} with a bound of ${MAX}`);
    let peerErrors = 0;
    while (peerErrors < TOTAL) {
      const e = await runner.recv();
      if (e.kind === 'peer_error') {
        assert.equal(e.code, 'not_json');
        peerErrors += 1;
      }
      peak = Math.max(peak, runner.queuedEvents);
    }
    assert.ok(peak <= MAX + 2, `queued ${peak}`);
    assert.equal(runner.connected, true);
    assert.equal(runner.droppedEvents, 0);
  } finally {
    ws.terminate();
    await server.close();
  }
});

test('durable acks: the hub acknowledges only what the application confirmed; by default it acknowledges at once', async () => {
  for (const durableAcks of [true, false]) {
    const server = new HubServer({ tokens: { t: 'r-1' }, config: FAST, durableAcks });
    const port = await server.listen(0);
    const client = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, token: 't', config: FAST, backoff: BACKOFF });
    try {
      await client.connect();
      const runner = await server.accept();
      for (let i = 1; i <= 5; i += 1) client.send({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: { i } });
      for (let i = 1; i <= 5; i += 1) assert.equal((await next(runner, 'received')).message.seq, i);
      if (!durableAcks) {
        await until('every frame acknowledged', () => client.link.outboxFrames() === 0);
        assert.throws(() => runner.confirm('T', 1, 5), (e) => e instanceof ProtocolStateError && e.code === 'not_durable');
        continue;
      }
      await sleep(150); // acks, pings and pongs went by: nothing unconfirmed is acknowledged
      assert.equal(client.link.outboxFrames(), 5);
      runner.confirm('T', 1, 3);
      await until('seqs 1..3 acknowledged', () => client.link.outboxFrames() === 2);
      await sleep(100);
      assert.equal(client.link.outboxFrames(), 2, 'nothing beyond the confirmed position');
      assert.throws(() => runner.confirm('T', 1, 9), (e) => e instanceof ProtocolStateError && e.code === 'confirm_ahead');
      runner.confirm('T', 1, 5);
      await until('every frame acknowledged', () => client.link.outboxFrames() === 0);
    } finally {
      client.close();
      await server.close();
    }
  }
});

test('a refused upgrade reaches the application as a TransportError with the HTTP status', async () => {
  const server = new HubServer({ tokens: { good: 'r-1' } });
  const port = await server.listen(0);
  const client = new RunnerClient(`ws://127.0.0.1:${port}/`, { hello: HELLO, token: 'bad', backoff: { initial_ms: 10_000, max_ms: 10_000 } });
  try {
    void client.connect();
    const e = await next(client, 'error');
    assert.ok(e.error instanceof TransportError);
    assert.deepEqual([e.error.code, e.error.status], ['upgrade_refused', 401]);
    const r = await next(client, 'reconnecting');
    assert.equal(r.failures, 1);
    client.close();
    assert.equal((await next(client, 'stopped')).kind, 'stopped');
  } finally {
    client.close();
    await server.close();
  }
});
