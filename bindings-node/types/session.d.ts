import type { NativeSession } from '../native';
import { type Hello, type Message } from './wire';
/** Session configuration: every key optional, absent keys take the core's defaults. */
export interface SessionConfig {
    validate?: boolean;
    ping_interval_ms?: number;
    peer_timeout_ms?: number;
    ack_every_frames?: number;
    ack_delay_ms?: number;
    max_ack_entries?: number;
    max_control_frame_bytes?: number;
    max_held_frames?: number;
    max_held_bytes?: number;
    [key: string]: unknown;
}
/** What the host tells a session machine. */
export type SessionInput = {
    type: 'connected';
} | {
    type: 'disconnected';
} | {
    type: 'timeout';
} | {
    type: 'frame';
    frame: string;
} | {
    type: 'bytes';
    bytes: Uint8Array;
} | {
    type: 'send';
    message: Message;
};
/** A stream whose seqs were declared lost. */
export interface Resync {
    task_id: string;
    attempt?: number;
    declared: number;
    missing_from: number;
    missing_to: number;
}
/** What a session machine asks of its host, in order (`kind` is the core's name). */
export type SessionOutput = {
    kind: 'transmit';
    frame: string;
} | {
    kind: 'close';
    reason: string;
} | {
    kind: 'hello';
    message: Hello;
} | {
    kind: 'received';
    message: Message;
} | {
    kind: 'inbound_gap';
    resync: Resync;
} | {
    kind: 'outbound_resync';
    resync: Resync;
} | {
    kind: 'peer_error';
    code: string;
    detail: string;
};
/** Counters of a session. */
export interface SessionStats {
    delivered: number;
    duplicates: number;
    held: number;
    held_dropped: number;
    held_now: number;
    transmitted: number;
}
/** The machine both sides share: `handleInput` / `pollOutput` / `pollTimeout`. */
declare abstract class SessionBase {
    protected constructor(inner: NativeSession);
    /** Feed one input at time `nowMs` (host-chosen monotonic milliseconds). */
    handleInput(nowMs: number, input: SessionInput): void;
    /**
     * Feed whole frames (WebSocket text messages) in order and drain: every output, as
     * {@link drainOutputs} would return it after each frame. One native call for the batch.
     */
    handleFrames(nowMs: number, frames: string[]): SessionOutput[];
    /** Send a sequenced message; returns it stamped with its `seq`. */
    send(nowMs: number, message: Message): Message;
    /** The next output, or `null` when there is nothing more to do now. */
    pollOutput(): SessionOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): SessionOutput[];
    /** When to feed `{type: 'timeout'}` next (absolute, in the `nowMs` clock), or `null`. */
    pollTimeout(): number | null;
    /** Whether a transport connection is up. */
    get isConnected(): boolean;
    /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
    snapshot(): Buffer;
    /** Per-task last applied inbound seq (what a runner's hello declares). */
    resumeMap(): Record<string, number>;
    /** Frames kept for replay. */
    outboxFrames(): number;
    /** Forget a finished task's streams; whether it was known. */
    forgetTask(taskId: string): boolean;
    /** The session's counters. */
    stats(): SessionStats;
}
/** Options of a session: its configuration and a snapshot to resume from. */
export interface SessionOptions {
    config?: SessionConfig;
    snapshot?: Uint8Array;
}
/** The hub side of one hub↔runner connection. */
export declare class HubSession extends SessionBase {
    constructor(options?: SessionOptions);
}
/** The runner side of one hub↔runner connection; `hello` is its identity template. */
export declare class RunnerSession extends SessionBase {
    constructor(hello: Hello, options?: SessionOptions);
}
export {};
