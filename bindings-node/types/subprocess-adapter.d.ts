/**
 * The harness-adapter seam (seed 000) as I/O shells: {@link HarnessAdapter} opens
 * {@link Session}s, whose `turn(prompt)` resolves to a {@link TurnResult}, and the
 * reference adapter, {@link SubprocessAdapter}: one JSONL child process per session
 * (`node:child_process`).
 *
 * Every decision — the spawn request and its cleared environment, line framing with a
 * bound, parsing, the turn state, usage mapping, which faults close the session, the stop
 * escalation and its grace periods, the error codes — is the core's
 * {@link SubprocessTurnMachine}; this module performs its outputs (spawn, write, close,
 * signal) and reports what happened (stdout bytes, end of stdout, the exit, timer expiry).
 */
import { type ChildProcess } from 'node:child_process';
import { type RoleSpec, type TurnResult } from './adapter';
/** A live harness session: one turn at a time. */
export interface Session {
    /** Send `prompt`; resolves to the turn's `{text, usage}`, rejects with {@link AdapterError}. */
    turn(prompt: string): Promise<TurnResult>;
    /** Release the session's resources (idempotent). */
    close(): Promise<void>;
    /** Whether the session is closed. */
    readonly closed: boolean;
}
/** Opens sessions for one model↔harness backend. */
export interface HarnessAdapter {
    /** Open a {@link Session} configured by `roleSpec`. */
    openSession(roleSpec: RoleSpec): Promise<Session>;
    /** Open a session, run one turn, close the session. */
    oneshot(roleSpec: RoleSpec, prompt: string): Promise<TurnResult>;
    /** Release adapter-level resources (idempotent). */
    close(): Promise<void>;
}
/** A {@link HarnessAdapter} with the default `oneshot` and `close`. */
export declare abstract class BaseHarnessAdapter implements HarnessAdapter {
    abstract openSession(roleSpec: RoleSpec): Promise<Session>;
    oneshot(roleSpec: RoleSpec, prompt: string): Promise<TurnResult>;
    close(): Promise<void>;
}
/** Options of a {@link SubprocessSession} and a {@link SubprocessAdapter}. */
export interface SubprocessOptions {
    /** Longest stdout line accepted (default: the core's). */
    maxLineBytes?: number;
    /** Grace after closing stdin and after SIGTERM, in ms (default: the core's). */
    graceMs?: number;
    /** Called with every progress event the child prints during a turn. */
    onProgress?: (event: Record<string, unknown>) => void;
}
/**
 * One JSONL session over a child process, turn by turn, driven by a
 * {@link SubprocessTurnMachine}. The child's stdout is read only during a turn (the pipe
 * holds anything it prints between turns); `close()` closes the child's stdin, waits the
 * grace, then SIGTERM, SIGKILL (to its process group when it leads one) and a final group
 * SIGKILL, as the machine says.
 */
export declare class SubprocessSession implements Session {
    #private;
    /** The child process. */
    get process(): ChildProcess;
    /** Whether the session is closed or closing (by `close()` or a fault): no more turns. */
    get closed(): boolean;
    turn(prompt: string): Promise<TurnResult>;
    close(): Promise<void>;
}
/** Options of a {@link SubprocessAdapter}. */
export interface SubprocessAdapterOptions extends SubprocessOptions {
    /** Program and arguments, or a function of the role spec that gives them. */
    command: readonly string[] | ((roleSpec: RoleSpec) => readonly string[]);
    /** Variables added to the child's cleared environment. */
    env?: Record<string, string>;
    /** Working directory of the child (default: this process's). */
    cwd?: string;
}
/**
 * Spawns a JSONL child per session (in a new process group, with a cleared environment:
 * only `PATH`, the variables given as `env`, and `ANTHROPIC_BASE_URL` when the role spec
 * names an `llm_base_url` — the core's spawn request).
 */
export declare class SubprocessAdapter extends BaseHarnessAdapter {
    #private;
    constructor(options: SubprocessAdapterOptions);
    openSession(roleSpec: RoleSpec): Promise<SubprocessSession>;
    /** Close every session this adapter opened (idempotent). */
    close(): Promise<void>;
}
