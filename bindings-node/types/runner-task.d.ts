import type { RoleSpec, UsageSplit } from './adapter';
import type { GatewayResultDict } from './api-types';
/** How a task ended, in the core's JSON form (`runner_task::TaskOutcome`). */
export type TaskOutcome = {
    type: 'done';
} | {
    type: 'blocked';
} | {
    type: 'failed';
    failure_type: string;
} | {
    type: 'cancelled';
    reason: string;
} | {
    type: 'refused';
    code: string;
    reasons: string[];
} | {
    type: 'invalid_assignment';
    code: string;
} | {
    type: 'busy';
    max_tasks: number;
} | {
    type: 'duplicate';
} | {
    type: 'runner_restarted';
};
/** A progress frame's `kind` and `payload`, before the session stamps it. */
export interface ProgressItem {
    kind: string;
    payload: Record<string, unknown>;
}
/** Reconnect delay bounds (absent: the core's defaults, 250 ms doubling to 30 s). */
export interface BackoffPolicy {
    initial_ms?: number;
    max_ms?: number;
}
/** The calls of the connected runner's task policy: argument and result of each. */
export interface RunnerTaskCalls {
    /** The reconnect delay after `failures` failed attempts, jittered by `random`. */
    backoff: {
        arg: BackoffPolicy & {
            failures: number;
            random: number;
        };
        result: {
            capped_ms: number;
            delay_ms: number;
        };
    };
    /** Whether to start a task. */
    admit: {
        arg: {
            running: number;
            max_tasks: number;
            already_running: boolean;
        };
        result: 'start' | 'busy' | 'duplicate';
    };
    /** The progress of one local-run stream message, or `null` when it is not forwarded. */
    local_event: {
        arg: Record<string, unknown>;
        result: ProgressItem | null;
    };
    /** The progress of one harness event. */
    harness_event: {
        arg: Record<string, unknown>;
        result: ProgressItem;
    };
    /** The TaskReport of an outcome. */
    report: {
        arg: {
            task_id: string;
            outcome: TaskOutcome;
            usage?: UsageSplit;
        };
        result: Record<string, unknown>;
    };
    /** The outcome of a local run's `run.terminal` payload. */
    local_terminal: {
        arg: Record<string, unknown>;
        result: TaskOutcome;
    };
    /** The outcome of a local run's `run.terminal` payload and the violation that ended it. */
    local_end: {
        arg: {
            payload: Record<string, unknown>;
            violation?: string | null;
        };
        result: TaskOutcome;
    };
    /** The harness-violation code of a local-run stream message, or `null`. */
    local_violation: {
        arg: Record<string, unknown>;
        result: string | null;
    };
    /** The `hello.capabilities` of a runner: the catalog's reins it can drive. */
    capabilities: {
        arg: {
            catalog?: Record<string, unknown>;
            drivable: string[];
        };
        result: string[];
    };
    /** The harness profile reference of an invocation. */
    profile_ref: {
        arg: {
            invocation: Record<string, unknown>;
            role?: string;
        };
        result: string;
    };
    /** The outcome of a gateway result (and the harness's own outcome). */
    gateway_outcome: {
        arg: {
            result: GatewayResultDict;
            harness?: TaskOutcome | null;
        };
        result: TaskOutcome;
    };
}
/** A one-key call of {@link RunnerTaskCalls}. */
export type RunnerTaskCall<K extends keyof RunnerTaskCalls> = {
    [P in K]: RunnerTaskCalls[P]['arg'];
};
/**
 * Evaluate one decision of the connected runner's task policy: a one-key call such as
 * `{ backoff: {...} }`, `{ admit: {...} }` or `{ report: {...} }` (the core's
 * `runner_task::call`); its result. A malformed call throws `ProtocolStateError` (code
 * `invalid_call`).
 */
export declare function runnerTaskCall<K extends keyof RunnerTaskCalls>(request: RunnerTaskCall<K>): RunnerTaskCalls[K]['result'];
/**
 * The core's reconnect backoff: the delay before attempt `failures + 1`, doubling from
 * `initial_ms` up to `max_ms` and jittered into the upper half by `random` (a random
 * integer the host draws; default `Math.random`).
 */
export declare function reconnectDelay(failures: number, policy?: BackoffPolicy, random?: number): number;
/**
 * The core's reconnect counter (`runner_task::Reconnect`) over a backoff: consecutive
 * failures since the last connection that delivered a frame. A failed connect counts one
 * more failure; so does a lost connection, unless it handed at least one frame to the
 * session, when the count starts again at 0 — so a hub that accepts the upgrade and drops
 * every connection before saying anything still gets exponential backoff. Each call
 * returns the delay before the next attempt, ms.
 */
export declare class Reconnect {
    #private;
    constructor(policy?: BackoffPolicy);
    /** A connect failed (refused, timed out, the upgrade rejected): the next delay. */
    connectFailed(random?: number): number;
    /** A connection was lost; `receivedFrame`: it delivered a frame. The next delay. */
    connectionLost(receivedFrame: boolean, random?: number): number;
    /** Consecutive failures counted so far. */
    get failures(): number;
}
/** The `harness_profile_ref` a role spec's invocation names (the core's rule). */
export declare function profileRef(invocation: Record<string, unknown>, role?: RoleSpec['role']): string;
