import { HubLink } from './link';
import { HubSession } from './session';
/** The tasks row of one task. */
export interface TaskRow {
    /** The task. */
    task_id: string;
    /** The next command seq the hub stamps for the task (1: none stamped yet). */
    next_seq: number;
    /** The attempt of the task's latest `task.assign` (0: none). */
    assigned_attempt: number;
    /** The task is forgotten (a tombstone): no commands are kept, its positions remain. */
    forgotten: boolean;
}
/** The inbound row of one runner stream `(task, attempt)`. */
export interface InboundRow {
    /** The task. */
    task_id: string;
    /** The attempt (0: a runner that sends no attempt). */
    attempt: number;
    /** Applied (committed) through this seq. */
    through: number;
}
/** One unacknowledged command. */
export interface CommandRow {
    /** The task. */
    task_id: string;
    /** The command's seq. */
    seq: number;
    /** The encoded frame, byte for byte as sent (replayed as is). */
    frame: string;
}
/**
 * Everything a store holds of one runner's hub session except its lease (the core's
 * `RunnerRows`, keyed by the runner id). Row order carries no meaning; the rows a session
 * returns are sorted by key. Every table is optional when given to
 * {@link HubSession.fromRows} / {@link RowTracker}.
 */
export interface RunnerRows {
    /** One row per known task. */
    tasks: TaskRow[];
    /** One row per runner stream. */
    inbound: InboundRow[];
    /** The unacknowledged commands. */
    commands: CommandRow[];
}
/** Rows as a caller may give them: every table optional. */
export type RunnerRowsInput = Partial<RunnerRows>;
/**
 * One write a step needs before its outputs are performed. Apply a step's writes in
 * order, in one transaction, after the fencing check.
 */
export type RowWrite = 
/** Insert or replace the task's row. */
({
    op: 'put_task';
} & TaskRow)
/** Insert or replace the command `(task_id, seq)`. */
 | ({
    op: 'put_command';
} & CommandRow)
/** Delete the task's commands with seq ≤ `through`. */
 | {
    op: 'delete_commands';
    task_id: string;
    through: number;
}
/** Delete every row of the task (tasks, inbound, commands). */
 | {
    op: 'delete_task';
    task_id: string;
};
/**
 * Which rows a hub session's steps changed (the core's `RowTracker`): after every input
 * or `send`, before performing any output of that step, commit {@link writes}, then call
 * {@link committed} (or {@link failed} when the transaction rolled back: the next
 * {@link writes} lists them again). It holds what the store holds: the rows it was built
 * over plus every committed batch. Inbound rows are never in it: the apply transaction of
 * each delivered frame writes them (then `confirm`).
 */
export declare class RowTracker {
    #private;
    /** A tracker over the rows the store holds (those the session was built from; none for a new runner). */
    constructor(rows?: RunnerRowsInput);
    /**
     * The writes that make the store hold the session's tasks and commands (a
     * {@link HubLink}: its session's), in order; pending until {@link committed} or
     * {@link failed}.
     */
    writes(session: HubSession | HubLink): RowWrite[];
    /** The last {@link writes} committed: the store holds them. */
    committed(): void;
    /** The last {@link writes} were rolled back: the next call lists them again. */
    failed(): void;
}
/** The lease timing of one hub process: every key optional, absent keys take the core's defaults. */
export interface LeaseConfig {
    /** How long a lease lasts after the renewal that set it, database clock (default 10000 ms; positive). */
    lease_ms?: number;
    /**
     * Renew this long after the last renewal started (default 3000 ms; positive, and
     * `renew_every_ms + margin_ms < lease_ms`).
     */
    renew_every_ms?: number;
    /** Stop serving this long before a lease can have expired (default 2000 ms). */
    margin_ms?: number;
    /** After a failed renewal, try again this much later (default 500 ms; positive). */
    retry_ms?: number;
}
/** What the host tells a {@link Lease}. */
export type LeaseInput = 
/** The renewal asked for committed; its transaction began at local time `started_at`. */
{
    type: 'renewed';
    started_at: number;
}
/** The renewal failed (the database unreachable, the transaction refused). */
 | {
    type: 'renew_failed';
}
/** {@link Lease.pollTimeout} passed (harmless at any time). */
 | {
    type: 'timeout';
};
/**
 * What a {@link Lease} asks of the host: `renew` (start a renewal now, report it),
 * `expiring` (stop confirming, close every runner socket with {@link closeFor}
 * `lease_expired`, take no runner until `held`), `held` (after `expiring`, a renewal
 * committed: serve again).
 */
export type LeaseOutput = 'renew' | 'expiring' | 'held';
/**
 * The lease timing of one hub process (the core's `store::Lease`): when to renew the
 * leases of its runners (one statement, database clock), and when it must stop serving
 * them because it could not. A renewal whose transaction began at local time `t` lets the
 * hub serve until `t + lease_ms − margin_ms` locally. The first poll asks for a renewal;
 * renewals never overlap. Feed inputs with {@link handleInput}, take {@link pollOutput}
 * until `null`, arm a timer for {@link pollTimeout}.
 */
export declare class Lease {
    #private;
    /** A lease not yet held; `ConfigError` for a config the core refuses. */
    constructor(config?: LeaseConfig);
    /** Feed one input at local monotonic time `nowMs`. */
    handleInput(nowMs: number, input: LeaseInput): void;
    /** The next output, or `null`. */
    pollOutput(): LeaseOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): LeaseOutput[];
    /** When to feed `{type: 'timeout'}` (absolute, in the `nowMs` clock), or `null`. */
    pollTimeout(): number | null;
    /** Whether the hub may serve its runners at `nowMs` (confirm applied frames, take over runners). */
    isHeld(nowMs: number): boolean;
    /** The configuration (every key). */
    get config(): Required<LeaseConfig>;
}
/** The lease config as the core reads it (every key); throws `ConfigError`. */
export declare function leaseConfig(config?: LeaseConfig): Required<LeaseConfig>;
/**
 * WebSocket close code of a runner socket a hub closes because of its store (1012,
 * "service restart"): the runner reconnects, possibly to another hub, and resumes from
 * the committed rows.
 */
export declare const CLOSE_STORE: number;
/**
 * The close `[code, reason]` of a runner socket whose hub hit the store error `code`
 * (`fenced`, `store_unavailable`, `lease_expired`, `store_limit`; any other code closes
 * as `store_unavailable`): {@link CLOSE_STORE} and the error's code.
 */
export declare function closeFor(code: string): [number, string];
