// Area `framing` through the public LineFramer.
import * as srp from 'stapel-runner-protocol';
import { bytesOf, same, steps } from './common.mjs';

export function run(vector) {
  const framer = new srp.LineFramer(vector.config ?? {});
  for (const [i, input, expect] of steps(vector)) {
    let output = [];
    let error = null;
    let accepted = null;
    const drainAfter = input.drain ?? true;
    const push = bytesOf(input, 'push');
    const pushAll = bytesOf(input, 'push_all');
    const guarded = (f) => {
      try {
        f();
      } catch (e) {
        if (!(e instanceof srp.RunnerProtocolError)) throw e;
        error = e.code;
      }
    };
    if (push !== undefined) {
      if (!drainAfter) {
        guarded(() => {
          accepted = framer.push(push);
        });
      } else {
        const chunk = input.chunk_size > 0 ? input.chunk_size : Math.max(push.length, 1);
        guarded(() => {
          for (let at = 0; at < push.length; at += chunk) {
            let rest = push.subarray(at, at + chunk);
            for (;;) {
              const n = framer.push(rest);
              output.push(...framer.drain());
              rest = rest.subarray(n);
              if (rest.length === 0) break;
              if (n === 0) throw new Error(`step ${i}: push into a drained framer took nothing`);
            }
          }
        });
      }
    } else if (pushAll !== undefined) {
      guarded(() => {
        output = framer.pushAll(pushAll);
      });
    } else if (input.pull !== undefined) {
      output = framer.drain();
    } else if (input.finish !== undefined) {
      framer.finish();
      output = framer.drain();
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    same(i, 'output', output, expect.output ?? []);
    same(i, 'error', error, expect.error ?? null);
    if (expect.accepted !== undefined) same(i, 'accepted', accepted, expect.accepted);
    if (expect.ready !== undefined) same(i, 'ready', framer.readyLen, expect.ready);
    if (expect.buffered_bytes !== undefined) same(i, 'buffered_bytes', framer.bufferedBytes, expect.buffered_bytes);
  }
}
