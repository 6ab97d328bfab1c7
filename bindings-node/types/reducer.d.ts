/** Reducer configuration (`run_id`, `session_id`, limits); absent keys take the core's defaults. */
export type ReducerConfig = Record<string, unknown>;
/** A canonical event (`paperclip.prp.event.v1`), as a plain object. */
export type CanonicalEvent = Record<string, unknown>;
/** What applying one event did (`kind` is the core's outcome code). */
export type ReduceOutcome = {
    kind: 'applied';
} | {
    kind: 'applied_after_gap';
    expected: number;
    received: number;
} | {
    kind: 'duplicate';
} | {
    kind: 'out_of_order';
    cursor: number;
};
/** The reducer's snapshot of the run and its session (the core's shape). */
export type ReducerSnapshot = Record<string, unknown>;
/**
 * Folds canonical events into a run/session snapshot with exactly the core's reducer, so
 * a UI's live fold equals a replay of the same events.
 */
export declare class SessionReducer {
    #private;
    constructor(config?: ReducerConfig);
    /** Apply one event; throws {@link ReducerError} for an event the reducer refuses. */
    apply(event: CanonicalEvent): ReduceOutcome;
    /** Apply one JSONL line of an event log. */
    applyLine(line: string): ReduceOutcome;
    /** Apply many events in one call; how many were applied (throws at the first refusal). */
    applyAll(events: CanonicalEvent[]): number;
    /** The snapshot of everything applied so far. */
    snapshot(): ReducerSnapshot;
    /** The delivery report (duplicates, gaps, out-of-order events). */
    delivery(): Record<string, unknown>;
}
/** The snapshot a fresh reducer reaches over `events` (refused events are skipped). */
export declare function replayEvents(config: ReducerConfig | undefined, events: CanonicalEvent[]): ReducerSnapshot;
