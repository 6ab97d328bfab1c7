import { RunnerProtocolError } from './errors';
import { type BackoffPolicy } from './runner-task';
import { HubSession, RunnerSession, type SessionConfig, type SessionOutput } from './session';
import type { Hello, SequencedMessage } from './wire';
/**
 * The core's default bound of a paused socket's backlog (`max_backlog_bytes`, 1 MiB): UTF-8
 * bytes of frames a paused socket may still hand over (what `ws` had already read from the
 * socket when the event queue filled up). Set another with the `maxBacklogBytes` option.
 */
export declare const MAX_BACKLOG_BYTES: number;
/**
 * A failure of this transport's own I/O (not of the protocol): `code` is `upgrade_refused`
 * (the hub answered the upgrade request with an HTTP status), `connect_failed` (the socket
 * could not be opened) or `backlog_full` (the peer kept sending while the event queue was
 * full).
 */
export declare class TransportError extends RunnerProtocolError {
}
/** What a connection hands the application: the session's events, plus transport news. */
export type TransportEvent = Exclude<SessionOutput, {
    kind: 'transmit';
} | {
    kind: 'close';
}> | {
    kind: 'connected';
} | {
    kind: 'disconnected';
} | {
    kind: 'error';
    error: Error;
};
/** Options of a {@link RunnerClient}. */
export interface RunnerClientOptions {
    /** The runner's identity; its `resume` is filled from the session on every connect. */
    hello: Hello;
    /** Sent as `Authorization: Bearer <token>`. */
    token?: string;
    /** Session configuration (keepalive, acks, bounds). */
    config?: SessionConfig;
    /** Resume from a persisted session state. */
    snapshot?: Uint8Array;
    /** Reconnect delay bounds (default: the core's, 250 ms doubling to 30 s, jittered). */
    backoff?: BackoffPolicy;
    /** The host's random source for the backoff's jitter: a non-negative integer (default: `Math.random`). */
    random?: () => number;
    /** Told each reconnect the core schedules: its delay (ms) and the failures counted after it. */
    onReconnect?: (delayMs: number, failures: number) => void;
    /** Bound of the event queue (default: the core's `max_queued_events`). */
    maxQueuedEvents?: number;
    /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
    maxBacklogBytes?: number;
    /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
    closeTimeoutMs?: number;
}
/**
 * The runner's outbound connection: connects, sends `hello` (with the session's resume),
 * replays, and reconnects whenever the link drops, until {@link close}, after the delay
 * the core's {@link Reconnect} counter gives: told of every failed connect and every lost
 * connection (and whether that connection handed a frame to the session).
 */
export declare class RunnerClient {
    #private;
    readonly session: RunnerSession;
    constructor(url: string, options: RunnerClientOptions);
    /** Start connecting (and keep reconnecting); resolves once the first socket is open. */
    connect(): Promise<void>;
    /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
    send<M extends SequencedMessage>(message: M): M;
    /** Whether a socket is up. */
    get connected(): boolean;
    /** Events waiting in the queue. */
    get queuedEvents(): number;
    /** Transport news dropped because the queue was full. */
    get droppedEvents(): number;
    /**
     * Consecutive failures the core's reconnect counter holds: failed connects and lost
     * connections since the last connection that delivered a frame.
     */
    get failures(): number;
    /** The next event. */
    recv(): Promise<TransportEvent>;
    [Symbol.asyncIterator](): AsyncIterator<TransportEvent>;
    /** Close the connection and stop reconnecting (the session state is kept). */
    close(): void;
}
/** One runner as the hub sees it, across its connections: one session, one event queue. */
export declare class HubRunner {
    #private;
    readonly runnerId: string;
    readonly session: HubSession;
    /** Send a command (`task.assign` / `task.cancel`), connected or not; kept for replay. */
    send<M extends SequencedMessage>(message: M): M;
    /** Whether the runner's socket is up. */
    get connected(): boolean;
    /** Events waiting in the queue. */
    get queuedEvents(): number;
    /** Transport news dropped because the queue was full. */
    get droppedEvents(): number;
    /** The next event of this runner (across reconnects). */
    recv(): Promise<TransportEvent>;
    [Symbol.asyncIterator](): AsyncIterator<TransportEvent>;
}
/** `bearer token → runner id` (`null`: refuse), possibly asynchronous. */
export type Authenticate = (token: string) => string | null | Promise<string | null>;
/** Options of a {@link HubServer}: exactly one of `tokens` and `authenticate`. */
export interface HubServerOptions {
    /** Accepted bearer tokens → runner ids (compared in constant time by the core). */
    tokens?: Record<string, string>;
    /** Asked which runner a bearer token authenticates (when there is no token table). */
    authenticate?: Authenticate;
    /** Session configuration of every runner's session. */
    config?: SessionConfig;
    /** Bound of each runner's event queue (default: the core's `max_queued_events`). */
    maxQueuedEvents?: number;
    /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
    maxBacklogBytes?: number;
    /** Disconnected, idle runners kept (default: the core's `max_idle_runners`). */
    maxIdleRunners?: number;
    /** Upgrade requests awaiting their verdict (default: the core's `max_pending_connections`). */
    maxPendingConnections?: number;
    /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
    closeTimeoutMs?: number;
}
/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with the core's HTTP 401), each runner id has one {@link HubRunner}
 * with one session, so a reconnect resumes its streams and a newer socket of the same
 * runner replaces the older one (closed with reason `replaced`).
 */
export declare class HubServer {
    #private;
    constructor(options: HubServerOptions);
    /** Listen on `host:port` (port 0: any); resolves with the bound port. */
    listen(port?: number, host?: string): Promise<number>;
    /** Every runner kept, by id. */
    get runners(): ReadonlyMap<string, HubRunner>;
    /** Upgrade requests awaiting their verdict (at most the core's bound). */
    get pendingConnections(): number;
    /** The runner's handle (created on first use; usable before it connects). */
    runner(runnerId: string): HubRunner;
    /** The next runner that connects for the first time (or again after it was dropped). */
    accept(): Promise<HubRunner>;
    /** The runner id a full `Authorization` header value authenticates, or `null`. */
    runnerIdFor(authorization: string): Promise<string | null>;
    /** Stop listening and close every runner's socket. */
    close(): Promise<void>;
}
