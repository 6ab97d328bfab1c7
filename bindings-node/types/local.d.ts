import type { LocalConfig, SignalAction, SpawnAction } from './api-types';
export type { LocalConfig, SignalAction, SpawnAction };
/** What the host reports to a {@link LocalRun}. */
export type LocalInput = {
    type: 'controller_bytes';
    bytes: Uint8Array;
} | {
    type: 'controller_eof';
} | {
    type: 'harness_stdout';
    bytes: Uint8Array;
} | {
    type: 'harness_stderr';
    bytes: Uint8Array;
} | {
    type: 'harness_spawned';
    pid: number;
} | {
    type: 'harness_spawn_failed';
    message: string;
} | {
    type: 'harness_exited';
    code: number | null;
    signal: number | null;
} | {
    type: 'timeout';
};
/** What a {@link LocalRun} asks of its host, in order (`kind` is the core's name). */
export type LocalOutput = {
    kind: 'to_controller';
    line: string;
} | {
    kind: 'to_harness';
    line: string;
} | ({
    kind: 'spawn';
} & SpawnAction) | {
    kind: 'close_harness_stdin';
} | ({
    kind: 'signal';
} & SignalAction) | {
    kind: 'exit';
    code: number;
};
/**
 * The local-run machine (seed 002): controller commands in, canonical events and
 * receipts out, plus the spawn/signal/exit actions the host performs. Call order: feed an
 * input, drain {@link pollOutput} (or {@link drainOutputs}), then arm {@link pollTimeout}.
 */
export declare class LocalRun {
    #private;
    constructor(config?: LocalConfig);
    /** Feed one input at time `nowMs`. */
    handleInput(nowMs: number, input: LocalInput): void;
    /** The next output, or `null`. */
    pollOutput(): LocalOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): LocalOutput[];
    /** When to feed `{type: 'timeout'}` next (absolute), or `null`. */
    pollTimeout(): number | null;
    /** Whether the run is over. */
    get isFinished(): boolean;
}
