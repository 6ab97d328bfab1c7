// Area `session` through the public HubSession / RunnerSession, and area `store` (the
// rows of a hub session, HubSession.fromRows, a RowTracker's writes and closeFor), which
// runs through the same runner (see tests/conformance/store.mjs).
import * as srp from 'stapel-runner-protocol';
import { attempt, bytesOf, checkConfig, checkError, same, steps, tryConfig } from './common.mjs';

const DEFAULT_HELLO = { schema_version: 1, type: 'hello', protocol_version: 1, project_id: 'p-1', runner_version: '0.1.0' };

function outputForm(o) {
  switch (o.kind) {
    case 'transmit':
      return { transmit: o.frame };
    case 'close':
      return { close: o.reason };
    case 'hello':
      return { event: { hello: srp.encode(o.message) } };
    case 'received':
      return { event: { received: srp.encode(o.message) } };
    case 'inbound_gap':
      return { event: { inbound_gap: o.resync } };
    case 'outbound_resync':
      return { event: { outbound_resync: o.resync } };
    case 'peer_error':
      return { event: { peer_error: o.code } };
    default:
      return { unknown_output: o };
  }
}

export function run(vector) {
  const cfg = { ...(vector.config ?? {}) };
  const side = cfg.side;
  const hello = cfg.hello ?? DEFAULT_HELLO;
  delete cfg.side;
  delete cfg.hello;
  const make = (snapshot) => {
    const options = { config: cfg, snapshot };
    if (side === 'hub') return new srp.HubSession(options);
    if (side === 'runner') return new srp.RunnerSession(hello, options);
    throw new Error('config.side must be "hub" or "runner"');
  };
  const built = tryConfig(() => make(undefined), srp.ConfigError);
  if (checkConfig(vector, built.refused)) return;
  let session = built.value;
  let now = 0;
  let saved;
  // Area `store`: what the store holds of the hub (the rows it was built from, then every
  // committed batch of writes).
  let tracker = new srp.RowTracker();
  let writes;
  const hub = (i, what) => {
    if (!(session instanceof srp.HubSession)) throw new Error(`step ${i}: ${what} on a runner`);
    return session;
  };
  for (const [i, input, expect] of steps(vector)) {
    if (typeof input.now === 'number') now = input.now;
    let outcome = { value: undefined };
    const bytes = bytesOf(input, 'bytes');
    if (input.connected !== undefined) {
      outcome = attempt(() => session.handleInput(now, { type: 'connected' }));
    } else if (input.disconnected !== undefined) {
      outcome = attempt(() => session.handleInput(now, { type: 'disconnected' }));
    } else if (input.tick !== undefined) {
      outcome = attempt(() => session.handleInput(now, { type: 'timeout' }));
    } else if (typeof input.frame === 'string') {
      outcome = attempt(() => session.handleInput(now, { type: 'frame', frame: input.frame }));
    } else if (bytes !== undefined) {
      outcome = attempt(() => session.handleInput(now, { type: 'bytes', bytes }));
    } else if (input.send !== undefined) {
      outcome = attempt(() => session.handleInput(now, { type: 'send', message: input.send }));
    } else if (input.resend !== undefined) {
      outcome = attempt(() => session.resend(now, input.resend));
    } else if (input.save_snapshot !== undefined) {
      saved = session.snapshot();
    } else if (input.confirm !== undefined) {
      const c = input.confirm;
      outcome = attempt(() => session.handleInput(now, { type: 'confirm', task_id: c.task_id, attempt: c.attempt ?? null, seq: c.seq }));
    } else if (input.rows !== undefined) {
      // Nothing: the expectation reads the rows.
    } else if (input.writes !== undefined) {
      // The tracker's writes for the session as it is; then committed, or rolled back
      // ("failed": the next `writes` lists them again).
      writes = tracker.writes(hub(i, 'writes'));
      if (input.writes === 'failed') tracker.failed();
      else tracker.committed();
    } else if (input.close_for !== undefined) {
      // Checked with `expect.close` below.
    } else if (input.from_rows !== undefined) {
      // A takeover: a new hub session over these rows (or, `true`, over the rows of the
      // current one); the store holds them.
      const rows = input.from_rows === true ? hub(i, 'from_rows').rows() : input.from_rows;
      const rebuilt = attempt(() => srp.HubSession.fromRows(rows, cfg));
      if (rebuilt.error !== undefined) {
        if (!(rebuilt.error instanceof srp.StoreError)) throw rebuilt.error;
        checkError(i, rebuilt, expect);
        continue;
      }
      session = rebuilt.value;
      tracker = new srp.RowTracker(rows);
    } else if (typeof input.forget_task === 'string') {
      session.forgetTask(input.forget_task);
    } else if (input.restart !== undefined) {
      if (input.restart === 'fresh') {
        session = make(undefined);
      } else if (input.restart === 'saved') {
        if (saved === undefined) throw new Error(`step ${i}: restart "saved" without save_snapshot`);
        session = make(saved);
      } else {
        session = make(session.snapshot());
      }
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    checkError(i, outcome, expect);
    if (input.poll === false) {
      // Outputs stay queued for a later step; every other expectation is still checked.
      if (expect.outputs !== undefined) throw new Error(`step ${i}: outputs expected on a step with poll: false`);
    } else {
      const outputs = [];
      for (let o = session.pollOutput(); o !== null; o = session.pollOutput()) {
        outputs.push(outputForm(o));
      }
      outputs.push({ timeout: session.pollTimeout() });
      if (expect.outputs !== undefined) same(i, 'outputs', outputs, expect.outputs);
    }
    if (expect.resume_map !== undefined) same(i, 'resume_map', session.resumeMap(), expect.resume_map);
    if (expect.rows !== undefined) same(i, 'rows', hub(i, 'rows').rows(), expect.rows);
    if (expect.writes !== undefined) {
      if (writes === undefined) throw new Error(`step ${i}: writes expected without a writes input`);
      same(i, 'writes', writes, expect.writes);
      writes = undefined;
    }
    if (expect.close !== undefined) {
      if (typeof input.close_for !== 'string') throw new Error(`step ${i}: close without close_for`);
      same(i, 'close', srp.closeFor(input.close_for), expect.close);
    }
    if (expect.outbox_frames !== undefined) same(i, 'outbox_frames', session.outboxFrames(), expect.outbox_frames);
  }
}
