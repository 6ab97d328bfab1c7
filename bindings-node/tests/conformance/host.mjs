// Area `host` through the public SocketHost, HubHost and bearer helpers.
import * as srp from 'stapel-runner-protocol';
import { bytesOf, same, steps } from './common.mjs';

const INPUT_KEYS = ['opened', 'text', 'binary', 'binary_hex', 'transmit', 'session_close', 'close', 'failed', 'socket_closed', 'timeout', 'request', 'upgraded', 'authenticated', 'runner_added', 'parse_config', 'authorization_for'];
const EXPECT_KEYS = ['outputs', 'error', 'timeout', 'state', 'runners', 'pending', 'value', 'config', 'config_error'];

function socketForm(o) {
  switch (o.kind) {
    case 'attach':
    case 'detach':
    case 'abort':
      return { [o.kind]: true };
    case 'deliver':
      return { deliver: o.text };
    case 'peer_error':
      return { peer_error: o.code };
    case 'send':
      return { send: o.frame };
    case 'close':
      return { close: { code: o.code, reason: o.reason, deadline: o.deadline_ms } };
    default:
      return { unknown: o };
  }
}

function hubForm(o) {
  const { kind, ...rest } = o;
  if (kind === 'evict') return { evict: o.runner_id };
  return { [kind]: rest };
}

function socketInput(input) {
  if (input.opened !== undefined) return { type: 'opened' };
  if (typeof input.text === 'string') return { type: 'text', text: input.text };
  const b = bytesOf(input, 'binary');
  if (b !== undefined) return { type: 'binary', bytes: b };
  if (typeof input.transmit === 'string') return { type: 'transmit', frame: input.transmit };
  if (typeof input.session_close === 'string') return { type: 'session_close', reason: input.session_close };
  if (input.close !== undefined) return { type: 'close', code: input.close.code ?? 1000, reason: input.close.reason ?? '' };
  if (input.failed !== undefined) return { type: 'failed' };
  if (input.socket_closed !== undefined) return { type: 'socket_closed' };
  if (input.timeout !== undefined) return { type: 'timeout' };
  throw new Error(`unknown socket input ${JSON.stringify(input)}`);
}

function hubInput(input) {
  if (input.request !== undefined) return { type: 'request', conn: input.request.conn, headers: input.request.headers ?? [] };
  if (input.upgraded !== undefined) return { type: 'upgraded', conn: input.upgraded.conn, headers: input.upgraded.headers ?? [] };
  if (input.authenticated !== undefined) return { type: 'authenticated', conn: input.authenticated.conn, runner_id: input.authenticated.runner_id ?? null };
  if (input.runner_added !== undefined) return { type: 'runner_added', runner_id: input.runner_added.runner_id, activity: input.runner_added.activity };
  if (input.timeout !== undefined) return { type: 'timeout' };
  throw new Error(`unknown hub input ${JSON.stringify(input)}`);
}

export function run(vector) {
  const { machine, ...config } = vector.config ?? {};
  let m;
  if (machine === 'socket') m = new srp.SocketHost(config);
  else if (machine === 'hub') m = new srp.HubHost(config);
  else throw new Error('config.machine must be "socket" or "hub"');
  let now = 0;
  for (const [i, input, expect] of steps(vector)) {
    for (const k of Object.keys(input)) {
      if (k !== 'now' && k !== 'poll' && !INPUT_KEYS.includes(k)) throw new Error(`step ${i}: unknown input key ${k}`);
    }
    for (const k of Object.keys(expect)) {
      if (!EXPECT_KEYS.includes(k)) throw new Error(`step ${i}: unknown expect key ${k}`);
    }
    if (typeof input.now === 'number') now = input.now;
    const poll = input.poll ?? true;
    if (input.authorization_for !== undefined) {
      if (expect.value === undefined) throw new Error('authorization_for needs expect.value');
      same(i, 'value', srp.bearerAuthorization(input.authorization_for), expect.value);
      continue;
    }
    if (expect.value !== undefined) throw new Error(`step ${i}: value is an authorization_for expectation`);
    if (input.parse_config !== undefined) {
      try {
        const c = srp.hostConfig(input.parse_config);
        if (expect.config === undefined) throw new Error(`step ${i}: parse_config succeeded, expected ${JSON.stringify(expect)}`);
        same(i, 'config', c, expect.config);
      } catch (e) {
        if (!(e instanceof srp.ConfigError)) throw e;
        if (expect.config_error === undefined) throw new Error(`step ${i}: unexpected config error ${e.code} (key ${e.key})`);
        same(i, 'config_error', { code: e.code, key: e.key }, expect.config_error);
      }
      const other = Object.keys(expect).find((k) => k !== 'config' && k !== 'config_error');
      if (other !== undefined) throw new Error(`step ${i}: ${other} is not a parse_config expectation`);
      continue;
    }
    for (const k of ['config', 'config_error']) {
      if (expect[k] !== undefined) throw new Error(`step ${i}: ${k} is a parse_config expectation`);
    }
    let error = null;
    try {
      m.handleInput(now, machine === 'socket' ? socketInput(input) : hubInput(input));
    } catch (e) {
      if (!(e instanceof srp.ProtocolStateError)) throw e;
      error = e.code;
    }
    const outputs = [];
    if (poll) {
      for (let o = m.pollOutput(); o !== null; o = m.pollOutput()) outputs.push(machine === 'socket' ? socketForm(o) : hubForm(o));
    }
    same(i, 'error', error, expect.error ?? null);
    if (poll) same(i, 'outputs', outputs, expect.outputs ?? []);
    else if (expect.outputs !== undefined) throw new Error(`step ${i}: outputs expected on a step with poll: false`);
    if (expect.timeout !== undefined) same(i, 'timeout', m.pollTimeout(), expect.timeout);
    if (expect.state !== undefined) {
      if (machine !== 'socket') throw new Error(`step ${i}: state is a socket expectation`);
      same(i, 'state', m.state, expect.state);
    }
    if (expect.runners !== undefined) {
      if (machine !== 'hub') throw new Error(`step ${i}: runners is a hub expectation`);
      same(i, 'runners', m.runners(), expect.runners);
    }
    if (expect.pending !== undefined) {
      if (machine !== 'hub') throw new Error(`step ${i}: pending is a hub expectation`);
      same(i, 'pending', m.pendingConnections, expect.pending);
    }
  }
}
