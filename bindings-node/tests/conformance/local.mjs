// Area `local` through the public LocalRun.
import * as srp from 'stapel-runner-protocol';
import { checkConfig, hex, same, steps, tryConfig } from './common.mjs';

function bytesOf(input, key) {
  if (input[key] !== undefined) return Buffer.from(`${JSON.stringify(input[key])}\n`, 'utf8');
  if (typeof input[`${key}_text`] === 'string') return Buffer.from(input[`${key}_text`], 'utf8');
  if (typeof input[`${key}_hex`] === 'string') return hex(input[`${key}_hex`]);
  return undefined;
}

function parseInput(input) {
  let b;
  if ((b = bytesOf(input, 'controller')) !== undefined) return { type: 'controller_bytes', bytes: b };
  if (input.controller_eof !== undefined) return { type: 'controller_eof' };
  if ((b = bytesOf(input, 'harness')) !== undefined) return { type: 'harness_stdout', bytes: b };
  if ((b = bytesOf(input, 'stderr')) !== undefined) return { type: 'harness_stderr', bytes: b };
  if (input.harness_spawned !== undefined) return { type: 'harness_spawned', pid: input.harness_spawned.pid };
  if (input.harness_spawn_failed !== undefined) return { type: 'harness_spawn_failed', message: input.harness_spawn_failed.message };
  if (input.harness_exited !== undefined) {
    return { type: 'harness_exited', code: input.harness_exited.code ?? null, signal: input.harness_exited.signal ?? null };
  }
  if (input.timeout !== undefined) return { type: 'timeout' };
  throw new Error(`unknown input ${JSON.stringify(input)}`);
}

function outputForm(o) {
  switch (o.kind) {
    case 'to_controller':
      return { to_controller: JSON.parse(o.line) };
    case 'to_harness':
      return { to_harness: JSON.parse(o.line) };
    case 'spawn':
      return { spawn: { program: o.program, args: o.args, env: o.env, new_process_group: o.new_process_group } };
    case 'close_harness_stdin':
      return { close_harness_stdin: true };
    case 'signal':
      return { signal: { group: o.group, signal: o.signal } };
    case 'exit':
      return { exit: o.code };
    default:
      return { unknown_output: o };
  }
}

export function run(vector) {
  const config = vector.config ?? {};
  const built = tryConfig(() => new srp.LocalRun(config), srp.ConfigError);
  if (checkConfig(vector, built.refused)) return;
  const machine = built.value;
  let now = 0;
  for (const [i, input, expect] of steps(vector)) {
    if (typeof input.now_ms === 'number') now = input.now_ms;
    const parsed = parseInput(input);
    let error = null;
    try {
      machine.handleInput(now, parsed);
    } catch (e) {
      if (!(e instanceof srp.RunnerProtocolError) || e instanceof srp.ConfigError) throw e;
      error = e.code;
    }
    const outputs = [];
    for (let o = machine.pollOutput(); o !== null; o = machine.pollOutput()) outputs.push(outputForm(o));
    for (const key of ['outputs', 'timeout']) {
      if (expect[key] === undefined) throw new Error(`step ${i}: expect has no ${key}`);
    }
    same(i, 'error', error, expect.error ?? null);
    same(i, 'outputs', outputs, expect.outputs);
    same(i, 'timeout', machine.pollTimeout(), expect.timeout);
  }
}
