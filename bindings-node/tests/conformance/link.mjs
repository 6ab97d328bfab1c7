// Area `link` through the public RunnerLink / HubLink. Each vector runs twice: once
// feeding every input with handleInput and taking outputs with pollOutput, once feeding
// text frames with handleFrames (the batch fast path, which returns the outputs) and
// taking the others' outputs with drainOutputs; both must give the vector's outputs.
import * as srp from 'stapel-runner-protocol';
import { attempt, bytesOf, checkConfig, checkError, same, steps, tryConfig } from './common.mjs';

const DEFAULT_HELLO = { schema_version: 1, type: 'hello', protocol_version: 1, project_id: 'p-1', runner_version: '0.1.0' };

function eventForm(o) {
  switch (o.kind) {
    case 'hello':
      return { hello: srp.encode(o.message) };
    case 'received':
      return { received: srp.encode(o.message) };
    case 'inbound_gap':
      return { inbound_gap: o.resync };
    case 'outbound_resync':
      return { outbound_resync: o.resync };
    case 'peer_error':
      return { peer_error: o.code };
    case 'connected':
      return { connected: true };
    case 'disconnected':
      return { disconnected: o.reason };
    case 'reconnecting':
      return { reconnecting: { delay_ms: o.delay_ms, failures: o.failures } };
    case 'error':
      return { error: o.status === null ? { code: o.code } : { code: o.code, status: o.status } };
    case 'stalled':
      return { stalled: { bound: o.bound, kept_frames: o.kept_frames, kept_bytes: o.kept_bytes } };
    case 'unstalled':
      return { unstalled: true };
    case 'stopped':
      return { stopped: true };
    default:
      return { unknown_event: o };
  }
}

function outputForm(o) {
  if (srp.isLinkEvent(o)) return { event: eventForm(o) };
  switch (o.kind) {
    case 'connect':
    case 'pause':
    case 'resume':
    case 'abort':
      return { [o.kind]: o.socket };
    case 'send':
      return { send: { socket: o.socket, frame: o.frame } };
    case 'close':
      return { close: { socket: o.socket, code: o.code, reason: o.reason } };
    default:
      return { unknown: o };
  }
}

/** The link input of a vector input (`undefined` for the runner's own inputs). */
function linkInput(input, i) {
  if (input.start !== undefined) return { type: 'start' };
  if (input.stop !== undefined) return { type: 'stop', code: input.stop.code ?? 1000, reason: input.stop.reason ?? '' };
  if (typeof input.opened === 'number') return { type: 'opened', socket: input.opened };
  if (input.connect_failed !== undefined) {
    const c = input.connect_failed;
    const out = { type: 'connect_failed', socket: c.socket, failure: c.failure, detail: c.detail ?? '' };
    if (c.status !== undefined) out.status = c.status;
    return out;
  }
  if (typeof input.attach === 'number') return { type: 'attach', socket: input.attach };
  if (input.close !== undefined) return { type: 'close', code: input.close.code ?? 1000, reason: input.close.reason ?? '' };
  if (input.frame !== undefined) {
    const f = input.frame;
    if (typeof f.text === 'string') return { type: 'frame', socket: f.socket, frame: f.text };
    const b = bytesOf(f, 'binary');
    if (b !== undefined) return { type: 'frame', socket: f.socket, frame: new Uint8Array(b) };
    throw new Error(`step ${i}: frame needs text, binary or binary_hex`);
  }
  if (typeof input.socket_closed === 'number') return { type: 'socket_closed', socket: input.socket_closed };
  if (input.failed !== undefined) return { type: 'failed', socket: input.failed.socket, detail: input.failed.detail ?? '' };
  if (typeof input.events_taken === 'number') return { type: 'events_taken', n: input.events_taken };
  if (input.confirm !== undefined) {
    const c = input.confirm;
    return { type: 'confirm', task_id: c.task_id, attempt: c.attempt ?? null, seq: c.seq };
  }
  if (input.tick !== undefined) return { type: 'timeout' };
  return undefined;
}

function runOnce(vector, batch) {
  const { side, hello = DEFAULT_HELLO, seed, ...config } = vector.config ?? {};
  const make = () => {
    if (side === 'runner') return new srp.RunnerLink(hello, { config, seed: seed === undefined ? undefined : BigInt(seed) });
    if (side === 'hub') return new srp.HubLink({ config });
    throw new Error('config.side must be "hub" or "runner"');
  };
  const built = tryConfig(make, srp.ConfigError);
  if (checkConfig(vector, built.refused)) return;
  const link = built.value;
  let now = 0;
  for (const [i, input, expect] of steps(vector)) {
    if (typeof input.now === 'number') now = input.now;
    let outcome = { value: undefined };
    const outputs = [];
    if (input.configure !== undefined) {
      // Nothing to feed: the config was checked when the link was built.
    } else if (input.send !== undefined || input.resend !== undefined) {
      outcome = attempt(() => (input.resend !== undefined && side === 'runner' ? link.resend(now, input.resend) : link.send(now, input.send ?? input.resend)));
    } else if (typeof input.forget_task === 'string') {
      link.forgetTask(input.forget_task);
    } else {
      const li = linkInput(input, i);
      if (li === undefined) throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
      if (batch && li.type === 'frame' && typeof li.frame === 'string') {
        outcome = attempt(() => outputs.push(...link.handleFrames(now, li.socket, [li.frame])));
      } else {
        outcome = attempt(() => link.handleInput(now, li));
      }
    }
    checkError(i, outcome, expect);
    if (batch) outputs.push(...link.drainOutputs());
    else for (let o = link.pollOutput(); o !== null; o = link.pollOutput()) outputs.push(o);
    const forms = outputs.map(outputForm);
    forms.push({ timeout: link.pollTimeout() });
    if (expect.outputs !== undefined) same(i, 'outputs', forms, expect.outputs);
    if (expect.config !== undefined) same(i, 'config', link.config(), expect.config);
    if (expect.phase !== undefined) {
      if (side !== 'runner') throw new Error(`step ${i}: phase is a runner expectation`);
      same(i, 'phase', link.phase, expect.phase);
    }
    if (expect.queued_events !== undefined) same(i, 'queued_events', link.queuedEvents, expect.queued_events);
    if (expect.outbox_frames !== undefined) same(i, 'outbox_frames', link.outboxFrames(), expect.outbox_frames);
    if (expect.stats !== undefined) same(i, 'stats', { ...link.stats(), connected: link.isConnected }, expect.stats);
  }
}

export function run(vector) {
  runOnce(vector, false);
  runOnce(vector, true);
}
