import type { CanonicalEvent, DeliveryReport, ReducerConfig, ReducerSnapshot, ReduceOutcome as OutcomeKind } from './api-types';
export type { CanonicalEvent, DeliveryReport, OutcomeKind as ReduceOutcomeKind, ReducerConfig, ReducerSnapshot };
/** What applying one event did (`kind` is the core's outcome code). */
export type ReduceOutcome = {
    kind: Extract<OutcomeKind, 'applied'>;
} | {
    kind: Extract<OutcomeKind, 'applied_after_gap'>;
    expected: number;
    received: number;
} | {
    kind: Extract<OutcomeKind, 'duplicate'>;
} | {
    kind: Extract<OutcomeKind, 'out_of_order'>;
    cursor: number;
};
/**
 * Folds canonical events into a run/session snapshot with exactly the core's reducer, so
 * a UI's live fold equals a replay of the same events. An event the reducer refuses
 * throws {@link ReducerError} (`invalid_event`, `run_mismatch`, ...).
 */
export declare class SessionReducer {
    #private;
    constructor(config?: ReducerConfig);
    /** Apply one event. */
    apply(event: CanonicalEvent): ReduceOutcome;
    /** Apply one JSONL line of an event log. */
    applyLine(line: string): ReduceOutcome;
    /** Apply many events in one call; how many were applied (throws at the first refusal). */
    applyAll(events: readonly CanonicalEvent[]): number;
    /** Apply every line of JSONL text in one call (blank lines skipped); how many were applied. */
    applyLines(text: string): number;
    /** The snapshot of everything applied so far. */
    snapshot(): ReducerSnapshot;
    /** The delivery report (duplicates, out-of-order events, rejections). */
    delivery(): DeliveryReport;
}
/** The snapshot a fresh reducer reaches over `events` (refused events are skipped). */
export declare function replayEvents(config: ReducerConfig | undefined, events: readonly CanonicalEvent[]): ReducerSnapshot;
