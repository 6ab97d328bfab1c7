// Area `reducer` through the public SessionReducer and replayEvents.
import * as srp from 'stapel-runner-protocol';
import { isDeepStrictEqual } from 'node:util';
import { checkConfig, same, steps, tryConfig } from './common.mjs';

function pointer(value, ptr) {
  let v = value;
  for (const raw of ptr.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (v === null || typeof v !== 'object' || !(key in v)) return undefined;
    v = v[key];
  }
  return v;
}

export function run(vector) {
  const config = vector.config ?? {};
  const built = tryConfig(() => new srp.SessionReducer(config), srp.ConfigError);
  if (checkConfig(vector, built.refused)) return;
  const reducer = built.value;
  const recorded = [];
  for (const [i, input, expect] of steps(vector)) {
    let outcome = null;
    let error = null;
    let detail = null;
    let equalsLive = null;
    const record = (f) => {
      try {
        outcome = f().kind;
      } catch (e) {
        if (!(e instanceof srp.ReducerError)) throw e;
        error = e.code;
        detail = e.detailCode;
      }
    };
    if (input.event !== undefined) {
      recorded.push(input.event);
      record(() => reducer.apply(input.event));
    } else if (input.line !== undefined) {
      try {
        recorded.push(JSON.parse(input.line));
      } catch {
        // not JSON: nothing to record
      }
      record(() => reducer.applyLine(input.line));
    } else if (input.replay !== undefined) {
      const list = input.replay === 'recorded' ? recorded : input.replay;
      if (!Array.isArray(list)) throw new Error(`step ${i}: replay must be an array or "recorded"`);
      const fresh = new srp.SessionReducer(config);
      let failed = false;
      for (const e of list) {
        try {
          fresh.apply(e);
        } catch (err) {
          if (!(err instanceof srp.ReducerError)) throw err;
          error = err.code;
          detail = err.detailCode;
          failed = true;
          break;
        }
      }
      if (!failed) {
        const replayed = srp.replayEvents(config, list);
        same(i, 'replay() equals a strict fold', replayed, fresh.snapshot());
        equalsLive = isDeepStrictEqual(replayed, reducer.snapshot());
      }
    } else {
      throw new Error(`step ${i}: unknown input ${JSON.stringify(input)}`);
    }
    same(i, 'error', error, expect.error ?? null);
    if (expect.error_detail !== undefined) same(i, 'error_detail', detail, expect.error_detail);
    if (expect.outcome !== undefined) same(i, 'outcome', outcome, expect.outcome);
    if (expect.equals_live !== undefined) same(i, 'equals_live', equalsLive, expect.equals_live);
    const snapshot = reducer.snapshot();
    if (expect.snapshot !== undefined) same(i, 'snapshot', snapshot, expect.snapshot);
    if (expect.at !== undefined) {
      for (const [ptr, want] of Object.entries(expect.at)) {
        const got = pointer(snapshot, ptr);
        if (got === undefined) throw new Error(`step ${i}: snapshot has no ${ptr}`);
        same(i, `snapshot ${ptr}`, got, want);
      }
    }
    if (expect.delivery !== undefined) same(i, 'delivery', reducer.delivery(), expect.delivery);
  }
}
