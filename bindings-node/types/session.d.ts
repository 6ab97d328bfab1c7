import type { ExternalObject } from '../native';
import type { PeerError, Resync, SequencingConfig } from './api-types';
import { ConnectionState } from './sequencing';
import type { RunnerRows, RunnerRowsInput } from './store';
import { type Hello, type Message, type SequencedMessage } from './wire';
/** Session configuration: every key optional, absent keys take the core's defaults. */
export interface SessionConfig {
    /** Check every schema rule of received frames (default `true`). */
    validate?: boolean;
    /** Keepalive ping interval (0: none). */
    ping_interval_ms?: number;
    /** Dead-peer timeout (0: none). */
    peer_timeout_ms?: number;
    /** Acknowledge after this many frames. */
    ack_every_frames?: number;
    /** Acknowledge after this delay. */
    ack_delay_ms?: number;
    /** Most streams one acknowledgement names. */
    max_ack_entries?: number;
    /** Largest control frame accepted. */
    max_control_frame_bytes?: number;
    /** Most frames held ahead of a gap. */
    max_held_frames?: number;
    /** Most bytes held ahead of a gap. */
    max_held_bytes?: number;
    /** Lowest protocol version accepted. */
    min_protocol_version?: number;
    /** Highest protocol version accepted. */
    max_protocol_version?: number;
    /** Largest frame (line) accepted. */
    max_line_bytes?: number;
    /** Bounds of the session's sequencing state. */
    sequencing?: SequencingConfig;
    /**
     * A probe ping after this many sequenced frames transmitted since the last ping (0:
     * off; a send refused with `backpressure` sends one too), so that a seed-only peer's
     * plain pong trims the kept log (default 1024).
     */
    probe_every_frames?: number;
    /**
     * Durable acknowledgements: acknowledge inbound streams only up to the positions
     * confirmed with the `confirm` input (a hub whose store must commit first; default
     * `false`).
     */
    durable_acks?: boolean;
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
    message: SequencedMessage;
} | {
    type: 'confirm';
    task_id: string;
    attempt?: number | null;
    seq: number;
};
export type { PeerError, Resync };
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
} | ({
    kind: 'peer_error';
} & PeerError);
/** Counters of a session. */
export interface SessionStats {
    /** Sequenced frames delivered as `received`. */
    delivered: number;
    /** Sequenced frames dropped as duplicates. */
    duplicates: number;
    /** Frames that arrived ahead of a gap and were held. */
    held: number;
    /** Frames ahead of a gap dropped because the hold buffer was full. */
    held_dropped: number;
    /** Frames held now. */
    held_now: number;
    /** Frames transmitted (replays, pings and pongs included). */
    transmitted: number;
    /**
     * Kept frames dropped because a pong without an `ack` member answered a ping sent after
     * them (a seed-only peer's implied acknowledgement).
     */
    implied_acked: number;
    /** Probe pings sent (`probe_every_frames`, or after a send refused with `backpressure`). */
    probes: number;
}
type Handle = ExternalObject<'Session'>;
/**
 * The machine both sides share. Call order (as the core's `Machine`): feed an input with
 * {@link handleInput} (or many frames with {@link handleFrames}), take every output with
 * {@link pollOutput} until it returns `null` (or {@link drainOutputs}), perform them,
 * then arm a timer for {@link pollTimeout} and feed `{type: 'timeout'}` when it passes.
 * Outputs wait in the machine until polled (it decides what a later input drops).
 */
declare abstract class SessionBase {
    #private;
    protected constructor(handle: Handle);
    /** Feed one input at time `nowMs` (host-chosen monotonic milliseconds). */
    handleInput(nowMs: number, input: SessionInput): void;
    /**
     * Feed whole frames (WebSocket text messages) in order, in one native call, and take
     * every output: those still waiting from earlier inputs, then the batch's, as
     * {@link drainOutputs} would return them after each frame. A refused frame (a machine
     * that is not connected) throws its error; the outputs of the frames before it are
     * then the first ones {@link pollOutput} / {@link drainOutputs} return.
     */
    handleFrames(nowMs: number, frames: readonly string[]): SessionOutput[];
    /** Send a sequenced message; returns it stamped with its `seq` (a copy). */
    send<M extends SequencedMessage>(nowMs: number, message: M): M;
    /**
     * Send a message that may have been sent before — stapel-runner-protocol 0.1.1's
     * re-send from a checkpoint (the core's `resend`): a message whose `seq` its stream
     * already emitted is that frame, so nothing is stamped, kept or transmitted (the
     * session replays it after a reconnect: the peer gets it once) and it comes back as
     * given; any other message is sent as {@link send} sends it. Returns the message with
     * the seq it goes under (a copy).
     */
    resend<M extends SequencedMessage>(nowMs: number, message: M): M;
    /**
     * Durable acknowledgements ({@link SessionConfig.durable_acks}): the host's store
     * committed the inbound stream `(taskId, attempt)` through `seq` (`attempt`: `null` for
     * the runner's command streams), so acknowledgements may go up to it. Refused with
     * `not_durable` (no durable acks) or `confirm_ahead` (beyond what was delivered).
     */
    confirm(nowMs: number, taskId: string, attempt: number | null | undefined, seq: number): void;
    /** The next output, or `null` when there is nothing more to do now. */
    pollOutput(): SessionOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): SessionOutput[];
    /** When to feed `{type: 'timeout'}` next (absolute, in the `nowMs` clock), or `null`. */
    pollTimeout(): number | null;
    /** Whether a transport connection is up. */
    get isConnected(): boolean;
    /** A copy of the sequencing state. */
    state(): ConnectionState;
    /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
    snapshot(): Buffer;
    /** Per-task last applied inbound seq (what a runner's hello declares). */
    resumeMap(): Record<string, number>;
    /** Frames kept for replay. */
    outboxFrames(): number;
    /** Forget a finished task's streams; whether it was known. */
    forgetTask(taskId: string): boolean;
    /** Drop the kept frames of a stream at or below `seq` (a checkpoint); how many. */
    trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number;
    /** Whether every frame of the task was acknowledged by the peer. */
    isFullyAcknowledged(taskId: string): boolean;
    /** Whether the task was forgotten (a tombstone is kept). */
    isForgotten(taskId: string): boolean;
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
    /**
     * A hub session rebuilt from a store's rows (a takeover, on every new socket of a
     * runner): its state holds exactly the rows, its kept commands are provisional until
     * the runner's `hello`, and with `durable_acks` every inbound position counts as
     * confirmed (it was committed). Rows that make no hub session throw `StoreError`
     * (`invalid_rows`); a refused config `ConfigError`.
     */
    static fromRows(rows: RunnerRowsInput, config?: SessionConfig): HubSession;
    /**
     * The rows a store holds for this session, sorted by key: an inbound stream's `through`
     * is what the host confirmed (durable acknowledgements), or its watermark without them.
     */
    rows(): RunnerRows;
}
/** The runner side of one hub↔runner connection; `hello` is its identity template. */
export declare class RunnerSession extends SessionBase {
    constructor(hello: Hello, options?: SessionOptions);
}
/** Either side's session machine. */
export type SessionMachine = HubSession | RunnerSession;
