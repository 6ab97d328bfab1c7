import type { ExternalObject } from '../native';
import type { CanonicalEvent, DeliveryReport, ReducerConfig, ReducerSnapshot, ReduceOutcome as OutcomeKind } from './api-types';
import { call, checkedText, jsonText, parsed } from './internal';
import { native } from './native';

export type { CanonicalEvent, DeliveryReport, OutcomeKind as ReduceOutcomeKind, ReducerConfig, ReducerSnapshot };

/** What applying one event did (`kind` is the core's outcome code). */
export type ReduceOutcome =
  | { kind: Extract<OutcomeKind, 'applied'> }
  | { kind: Extract<OutcomeKind, 'applied_after_gap'>; expected: number; received: number }
  | { kind: Extract<OutcomeKind, 'duplicate'> }
  | { kind: Extract<OutcomeKind, 'out_of_order'>; cursor: number };

type Handle = ExternalObject<'Reducer'>;

/**
 * Folds canonical events into a run/session snapshot with exactly the core's reducer, so
 * a UI's live fold equals a replay of the same events. An event the reducer refuses
 * throws {@link ReducerError} (`invalid_event`, `run_mismatch`, ...).
 */
export class SessionReducer {
  readonly #h: Handle;

  constructor(config?: ReducerConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the reducer config');
    this.#h = call(() => native.reducerNew(c));
  }

  /** Apply one event. */
  apply(event: CanonicalEvent): ReduceOutcome {
    const t = jsonText(event, 'the event');
    return parsed<ReduceOutcome>(call(() => native.reducerApplyLine(this.#h, t)));
  }

  /** Apply one JSONL line of an event log. */
  applyLine(line: string): ReduceOutcome {
    const t = checkedText(line);
    return parsed<ReduceOutcome>(call(() => native.reducerApplyLine(this.#h, t)));
  }

  /** Apply many events in one call; how many were applied (throws at the first refusal). */
  applyAll(events: readonly CanonicalEvent[]): number {
    const t = jsonText(events, 'the events');
    return call(() => native.reducerApplyAll(this.#h, t, false));
  }

  /** Apply every line of JSONL text in one call (blank lines skipped); how many were applied. */
  applyLines(text: string): number {
    const t = checkedText(text);
    return call(() => native.reducerApplyAll(this.#h, t, true));
  }

  /** The snapshot of everything applied so far. */
  snapshot(): ReducerSnapshot {
    return parsed<ReducerSnapshot>(call(() => native.reducerSnapshot(this.#h)));
  }

  /** The delivery report (duplicates, out-of-order events, rejections). */
  delivery(): DeliveryReport {
    return parsed<DeliveryReport>(call(() => native.reducerDelivery(this.#h)));
  }
}

/** The snapshot a fresh reducer reaches over `events` (refused events are skipped). */
export function replayEvents(config: ReducerConfig | undefined, events: readonly CanonicalEvent[]): ReducerSnapshot {
  const c = config === undefined ? undefined : jsonText(config, 'the reducer config');
  const t = jsonText(events, 'the events');
  return parsed<ReducerSnapshot>(call(() => native.reducerReplay(c, t)));
}
