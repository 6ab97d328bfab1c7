// Area `lease`: the hub's lease timing through the public Lease.
import * as srp from 'stapel-runner-protocol';
import { checkConfig, same, steps, tryConfig } from './common.mjs';

export function run(vector) {
  const built = tryConfig(() => new srp.Lease(vector.config ?? {}), srp.ConfigError);
  if (checkConfig(vector, built.refused)) return;
  const lease = built.value;
  let now = 0;
  for (const [i, input, expect] of steps(vector)) {
    if (typeof input.now === 'number') now = input.now;
    if (typeof input.renewed === 'number') {
      lease.handleInput(now, { type: 'renewed', started_at: input.renewed });
    } else if (input.renew_failed !== undefined) {
      lease.handleInput(now, { type: 'renew_failed' });
    } else if (input.tick !== undefined) {
      lease.handleInput(now, { type: 'timeout' });
    } else if (input.config === undefined && input.start === undefined) {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    // Every output until null, then the timer as the last entry.
    const outputs = [];
    for (let o = lease.pollOutput(); o !== null; o = lease.pollOutput()) outputs.push(o);
    outputs.push({ timeout: lease.pollTimeout() });
    if (expect.outputs !== undefined) same(i, 'outputs', outputs, expect.outputs);
    if (expect.held !== undefined) same(i, 'held', lease.isHeld(now), expect.held);
    if (expect.config !== undefined) same(i, 'config', lease.config, expect.config);
  }
}
