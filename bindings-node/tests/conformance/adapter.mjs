// Area `adapter` through the public adapter API.
import * as srp from 'stapel-runner-protocol';
import { bytesOf, same, steps } from './common.mjs';

function checkError(i, e, want) {
  if (typeof want !== 'object' || want === null) throw new Error(`step ${i}: expect.error must be an object`);
  for (const [k, w] of Object.entries(want)) same(i, `error.${k}`, e.details[k] ?? null, w);
}

function outcome(i, f, expect) {
  let value;
  let error;
  try {
    value = f();
  } catch (e) {
    if (!(e instanceof srp.AdapterError)) throw e;
    error = e;
  }
  if (error === undefined && expect.error === undefined) same(i, 'value', value ?? null, expect.value ?? null);
  else if (error !== undefined && expect.error !== undefined) checkError(i, error, expect.error);
  else if (error === undefined) throw new Error(`step ${i}: expected error ${JSON.stringify(expect.error)}, got value ${JSON.stringify(value)}`);
  else throw new Error(`step ${i}: unexpected error ${error.code}: ${error.message}`);
}

/** Usage as an SDK-style object: a class instance whose fields are accessors (nested too). */
function asObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  class SdkObject {}
  for (const [k, v] of Object.entries(value)) {
    const inner = asObject(v);
    Object.defineProperty(SdkObject.prototype, k, { get: () => inner, enumerable: false });
  }
  return new SdkObject();
}

export function run(vector) {
  const cfg = vector.config ?? {};
  const session = new srp.SubprocessTurnMachine({ max_line_bytes: cfg.max_line_bytes, grace_ms: cfg.grace_ms, map_usage: cfg.map_usage });
  const start = cfg.start ?? 'attached';
  if (start === 'attached') {
    session.handleInput(0, { type: 'spawned', pid: null, process_group: cfg.process_group ?? false });
  } else if (start !== 'new') {
    throw new Error(`unknown config.start ${start}`);
  }
  for (const [i, input, expect] of steps(vector)) {
    if (input.agent_options !== undefined) {
      const r = input.agent_options;
      const opts = { role: r.role };
      if ('system_prompt' in r) opts.systemPrompt = r.system_prompt;
      outcome(i, () => srp.agentOptions(r.invocation, opts), expect);
    } else if (input.agent_turn !== undefined) {
      const t = input.agent_turn;
      outcome(i, () => srp.agentTurn(t.text_blocks, t.result === undefined ? undefined : { usage: t.result.usage }), expect);
    } else if (input.host_fault !== undefined) {
      const { code, message } = input.host_fault;
      outcome(
        i,
        () => {
          const e = srp.hostAdapterError(code, message);
          if (e === null) return null;
          if (e.code !== code) throw new Error(`step ${i}: host_fault(${code}) built ${e.code}`);
          throw e;
        },
        expect,
      );
    } else if (input.role_spec !== undefined) {
      const r = input.role_spec;
      if (expect.system_prompt !== undefined && expect.error === undefined) {
        same(i, 'system_prompt', srp.roleSpecSystemPrompt(r.invocation, r.role), expect.system_prompt);
      }
      outcome(i, () => srp.roleSpecFromInvocation(r.invocation, r.role), expect);
    } else if (input.usage !== undefined) {
      const u = input.usage;
      const value = u.as_object === true ? asObject(u.value) : u.value;
      let mapped;
      outcome(
        i,
        () => {
          mapped = srp.mapUsage(u.shape, value, u.thinking === undefined ? undefined : { thinking: u.thinking });
          return mapped.usage;
        },
        expect,
      );
      if (mapped !== undefined && expect.total_tokens !== undefined) same(i, 'total_tokens', mapped.total_tokens, expect.total_tokens);
    } else if (input.turn_result !== undefined) {
      outcome(i, () => srp.validateTurnResult(input.turn_result), expect);
    } else {
      const now = input.now_ms ?? 0;
      const outputs = [];
      const drain = () => {
        for (let o = session.pollOutput(); o !== null; o = session.pollOutput()) outputs.push(o);
      };
      let error;
      const feed = (inp) => {
        try {
          session.handleInput(now, inp);
        } catch (e) {
          if (!(e instanceof srp.AdapterError)) throw e;
          error = e;
        }
      };
      const stdout = bytesOf(input, 'stdout');
      if (input.open !== undefined) feed({ type: 'open', spec: input.open });
      else if (input.spawned !== undefined) feed({ type: 'spawned', pid: input.spawned.pid ?? null, process_group: input.spawned.process_group ?? false });
      else if (input.spawn_failed !== undefined) feed({ type: 'spawn_failed', message: input.spawn_failed });
      else if (input.stdin_write_failed !== undefined) feed({ type: 'stdin_write_failed', message: input.stdin_write_failed });
      else if (input.exited !== undefined) feed({ type: 'exited' });
      else if (input.close !== undefined) feed({ type: 'close' });
      else if (input.timeout !== undefined) feed({ type: 'timeout' });
      else if (input.start_turn !== undefined) feed({ type: 'start_turn', prompt: input.start_turn });
      else if (stdout !== undefined) {
        const chunk = input.chunk_size > 0 ? input.chunk_size : Math.max(stdout.length, 1);
        for (let at = 0; at < stdout.length; at += chunk) {
          feed({ type: 'stdout', bytes: stdout.subarray(at, at + chunk) });
          if (error !== undefined) break;
          drain();
        }
      } else if (input.eof !== undefined) feed({ type: 'eof' });
      else throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
      if (stdout === undefined) drain();
      if (error === undefined && expect.error !== undefined) throw new Error(`step ${i}: expected error ${JSON.stringify(expect.error)}`);
      if (error !== undefined && expect.error === undefined) throw new Error(`step ${i}: unexpected error ${error.code}: ${error.message}`);
      if (error !== undefined) checkError(i, error, expect.error);
      same(i, 'outputs', outputs, expect.outputs ?? []);
      if (expect.state !== undefined) {
        same(i, 'state', session.isClosed ? 'closed' : session.inTurn ? 'in_turn' : 'idle', expect.state);
      }
      if (expect.lifecycle !== undefined) same(i, 'lifecycle', session.lifecycle, expect.lifecycle);
      if (expect.result_line !== undefined) same(i, 'result_line', session.resultLine, expect.result_line);
      if (expect.timeout !== undefined) same(i, 'timeout', session.pollTimeout(), expect.timeout);
    }
  }
}
