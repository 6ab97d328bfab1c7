import { TransportError } from './errors';
import { HubLink, RunnerLink, type LinkEvent, type LinkStats } from './link';
import type { BackoffPolicy } from './runner-task';
import type { ConnectionState } from './sequencing';
import type { SessionConfig } from './session';
import { type Hello, type SequencedMessage } from './wire';
export { TransportError };
/**
 * The core's default bound of a paused socket's backlog (`max_backlog_bytes`, 1 MiB).
 * Set another with the `maxBacklogBytes` option.
 */
export declare const MAX_BACKLOG_BYTES: number;
/**
 * What a connection hands the application: the link's events (the session's, and
 * `connected`, `disconnected`, `reconnecting`, `stalled`, `unstalled`, `stopped`), with a
 * link's `error` event as a {@link TransportError} (its `code` the link's: `upgrade_refused`
 * with `status`, `connect_failed`, `connect_timeout`, `no_token`, `transport_failed`,
 * `backlog_full`), or what a user callback threw.
 */
export type TransportEvent = Exclude<LinkEvent, {
    kind: 'error';
}> | {
    kind: 'error';
    error: Error;
};
/** Options of a {@link RunnerClient}. */
export interface RunnerClientOptions {
    /** The runner's identity; its `resume` is filled from the session on every connect. */
    hello: Hello;
    /** Sent as `Authorization: Bearer <token>` (never logged, never in an error or event). */
    token?: string;
    /** Session configuration (keepalive, acks, bounds). */
    config?: SessionConfig;
    /** Resume from a persisted session state. */
    snapshot?: Uint8Array;
    /** Reconnect delay bounds (default: the core's, 250 ms doubling to 30 s, jittered). */
    backoff?: BackoffPolicy;
    /** Seed of the reconnect delays' jitter, in `0..2^64` (default: from `crypto.getRandomValues`). */
    seed?: bigint | number;
    /**
     * @deprecated Use `seed`. A random source: called twice when the client is created to
     * make the seed (any function returning finite numbers, e.g. `Math.random`).
     */
    random?: () => number;
    /** Told each reconnect the link schedules: its delay (ms) and the failures counted (also the `reconnecting` event). */
    onReconnect?: (delayMs: number, failures: number) => void;
    /** Events left untaken before the socket is paused (default: the core's `max_queued_events`). */
    maxQueuedEvents?: number;
    /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
    maxBacklogBytes?: number;
    /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
    closeTimeoutMs?: number;
    /** Bound of a connect attempt (default: the core's `connect_timeout_ms`). */
    connectTimeoutMs?: number;
    /** Sockets kept while their close handshake runs (default: the core's `max_closing_sockets`). */
    maxClosingSockets?: number;
}
/**
 * The runner's outbound connection: a pump around the core's {@link RunnerLink}, which
 * connects, sends `hello` (with the session's resume), replays, and reconnects whenever
 * the link drops, after the delay of the core's backoff, until {@link close}.
 *
 * Options are checked when the client is created: link and session values by the core
 * (`ConfigError`, naming the key), the hello by the core's schema check
 * (`SchemaValidationError`), the rest here (`TypeError` / `RangeError` with Node's
 * `ERR_INVALID_ARG_TYPE`, `ERR_INVALID_ARG_VALUE` or `ERR_OUT_OF_RANGE` code).
 */
export declare class RunnerClient {
    #private;
    /** The link this client pumps (read its state; feed it only through this client). */
    readonly link: RunnerLink;
    constructor(url: string, options: RunnerClientOptions);
    /** Start connecting (and keep reconnecting); resolves once a socket serves the session. */
    connect(): Promise<void>;
    /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
    send<M extends SequencedMessage>(message: M): M;
    /** Send a message that may have been sent before (the core's `resend`). */
    resend<M extends SequencedMessage>(message: M): M;
    /** Whether a socket serves the session. */
    get connected(): boolean;
    /** Events waiting in the queue. */
    get queuedEvents(): number;
    /** Events dropped because the queue was full (the link's news beyond its allowance, callback errors). */
    get droppedEvents(): number;
    /** The link's counters (dropped events as {@link droppedEvents}). */
    stats(): LinkStats;
    /** Consecutive failures the core's reconnect counter held at the last `reconnecting` event. */
    get failures(): number;
    /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
    snapshot(): Buffer;
    /** A copy of the sequencing state. */
    state(): ConnectionState;
    /** Forget a finished task's streams (once its report was acknowledged). */
    forgetTask(taskId: string): boolean;
    /** The next event. */
    recv(): Promise<TransportEvent>;
    [Symbol.asyncIterator](): AsyncIterator<TransportEvent>;
    /** Close the connection and stop reconnecting (the session state is kept); a `stopped` event follows. */
    close(): void;
}
/** One runner as the hub sees it, across its connections: one {@link HubLink}, one event queue. */
export declare class HubRunner {
    #private;
    readonly runnerId: string;
    /** The link this handle pumps (read its state; feed it only through this handle). */
    readonly link: HubLink;
    /** Send a command (`task.assign` / `task.cancel`), connected or not; kept for replay. */
    send<M extends SequencedMessage>(message: M): M;
    /**
     * Durable acknowledgements (`durableAcks`): the hub's store committed the runner's
     * stream `(taskId, attempt)` through `seq`; acknowledgements may now go up to it.
     * Refused (`ProtocolStateError`) with `not_durable` without durable acks, or
     * `confirm_ahead` beyond what was delivered.
     */
    confirm(taskId: string, attempt: number | null, seq: number): void;
    /** Whether the runner's socket is up. */
    get connected(): boolean;
    /** Events waiting in the queue. */
    get queuedEvents(): number;
    /** Events dropped because the queue was full (the link's news beyond its allowance). */
    get droppedEvents(): number;
    /** The link's counters. */
    stats(): LinkStats;
    /** The sequencing state's snapshot (persist it to resume the runner's streams). */
    snapshot(): Buffer;
    /** Forget a finished task's streams. */
    forgetTask(taskId: string): boolean;
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
    /**
     * Durable acknowledgements: acknowledge a runner's frames only up to what
     * {@link HubRunner.confirm} confirmed (a hub whose store commits progress). Default
     * `false`: acknowledged as they are delivered (an in-memory hub). The same as
     * `config.durable_acks`.
     */
    durableAcks?: boolean;
    /** Events left untaken before a runner's socket is paused (default: the core's `max_queued_events`). */
    maxQueuedEvents?: number;
    /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
    maxBacklogBytes?: number;
    /** Disconnected, idle runners kept (default: the core's `max_idle_runners`). */
    maxIdleRunners?: number;
    /** Upgrade requests awaiting their verdict (default: the core's `max_pending_connections`). */
    maxPendingConnections?: number;
    /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
    closeTimeoutMs?: number;
    /** Sockets of one runner kept while their close handshake runs (default: the core's `max_closing_sockets`). */
    maxClosingSockets?: number;
}
/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with the core's HTTP 401), each runner id has one {@link HubRunner}
 * with one {@link HubLink}, so a reconnect resumes its streams and a newer socket of the
 * same runner replaces the older one (closed with reason `replaced`). Options are
 * checked when the server is created, as {@link RunnerClient}'s.
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
