// Area `runner_task`: the connected runner's task policy through the public
// runnerTaskCall (one call per step; `expect.result` or `expect.error`).
import * as srp from 'stapel-runner-protocol';
import { attempt, checkError, same, steps } from './common.mjs';

export function run(vector) {
  for (const [i, input, expect] of steps(vector)) {
    if (('result' in expect) === ('error' in expect)) throw new Error(`step ${i}: expect has exactly one of result/error`);
    const o = attempt(() => srp.runnerTaskCall(input));
    if (checkError(i, o, expect)) same(i, 'result', o.value, expect.result);
  }
}
