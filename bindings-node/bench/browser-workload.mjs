// The workload of bench/browser.mjs, shared by its Node half and its page
// (browser-page.mjs): the frame and the events of bench/run.mjs, and the timing loop.

/** The usage progress frame of bench/run.mjs. */
export const FRAME =
  '{"schema_version":1,"type":"task.progress","task_id":"T-0042","seq":17,"kind":"usage","attempt":1,' +
  '"payload":{"usage":{"fresh_input":1200,"output":340,"cache_read":5000,"cache_write":0,"thinking":120}}}';

/** Decode iterations per round. */
export const DECODES = 200_000;
/** Canonical events the reducer folds (bench/run.mjs's run). */
export const EVENTS = 100_000;
/** The reducer's configuration. */
export const REDUCER_CONFIG = { run_id: 'run_local' };

/** The JSONL lines of `EVENTS` canonical events (a phase change, a turn, a command, then deltas). */
export function eventLines() {
  const base = {
    schema: 'paperclip.prp.event.v1',
    sourceInstanceId: 'runner_local',
    sourceKind: 'runner',
    runId: 'run_local',
    normalizedSessionId: 'session_local',
    schemaVersion: 1,
  };
  const prefix = [
    ['runtime.phase.changed', { phase: 'executing' }, 1],
    ['turn.started', {}, 1],
    ['item.started', { kind: 'command', text: 'pnpm test' }, 1],
  ];
  const lines = [];
  for (let i = 0; i < EVENTS; i += 1) {
    const [eventType, payload, priority] = prefix[i] ?? ['item.delta', { text: `line ${i}\n` }, 2];
    const seq = i + 1;
    lines.push(
      JSON.stringify({
        ...base,
        sourceEventId: `event_run_local_${String(seq).padStart(6, '0')}`,
        sourceSeq: seq,
        eventType,
        priority,
        emittedAt: new Date(Date.UTC(2026, 0, 1) + seq).toISOString(),
        payload,
      }),
    );
  }
  return lines;
}

/** Best of 5 rounds of `n` calls (after a warm-up), in ns per call; `now()` in ms. */
export function nsPerOp(now, n, f) {
  for (let i = 0; i < Math.min(n, 20_000); i += 1) f(i);
  let best = Infinity;
  for (let round = 0; round < 5; round += 1) {
    const t0 = now();
    for (let i = 0; i < n; i += 1) f(i);
    best = Math.min(best, ((now() - t0) * 1e6) / n);
  }
  return best;
}

/** Best of 3 whole folds of the events, in events per second; `fold()` folds them once. */
export function eventsPerSecond(now, fold) {
  let best = Infinity;
  for (let round = 0; round < 3; round += 1) {
    const t0 = now();
    fold();
    best = Math.min(best, now() - t0);
  }
  return (EVENTS / best) * 1000;
}

/**
 * Every figure of one build through `api` (see browser-page.mjs and browser.mjs):
 * decode ns/frame (eager: a plain object; lazy when the build has it), JSON.parse of the
 * same frame, reducer events/s per line and in one call, JSON.parse of every line.
 */
export function measure(now, api) {
  const lines = eventLines();
  const jsonl = lines.join('\n');
  let sink = 0;
  const check = api.decodeEager(FRAME);
  if (check.payload.usage.output !== 340 || check.attempt !== 1 || check.seq !== 17) throw new Error('decode gave another message');
  const folded = api.reducer().applyLines(jsonl);
  if (folded !== EVENTS) throw new Error(`the reducer applied ${folded} of ${EVENTS} events`);
  const out = {};
  out.json_parse_ns = nsPerOp(now, DECODES, () => {
    sink += JSON.parse(FRAME).seq;
  });
  out.decode_eager_ns = nsPerOp(now, DECODES, () => {
    sink += api.decodeEager(FRAME).payload.usage.output;
  });
  if (api.decodeLazy) {
    out.decode_lazy_ns = nsPerOp(now, DECODES, () => {
      sink += api.decodeLazy(FRAME).seq;
    });
  }
  out.json_parse_events_per_s = eventsPerSecond(now, () => {
    for (const l of lines) sink += JSON.parse(l).sourceSeq;
  });
  out.reducer_line_events_per_s = eventsPerSecond(now, () => {
    const r = api.reducer();
    for (const l of lines) r.applyLine(l);
    sink += r.snapshotSize();
  });
  out.reducer_lines_events_per_s = eventsPerSecond(now, () => {
    const r = api.reducer();
    sink += r.applyLines(jsonl);
  });
  out.sink = sink > 0;
  return out;
}
