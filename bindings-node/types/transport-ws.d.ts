import { HubSession, RunnerSession, type SessionConfig, type SessionOutput } from './session';
import type { Hello, Message } from './wire';
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
/** Reconnect delays: `minDelayMs` doubling per failed attempt up to `maxDelayMs`. */
export interface Backoff {
    minDelayMs?: number;
    maxDelayMs?: number;
}
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
    /** Reconnect delays (default 100 ms doubling up to 5 s). */
    backoff?: Backoff;
    /** Bound of the event queue (default: the core's host default). */
    maxQueuedEvents?: number;
}
/**
 * The runner's outbound connection: connects, sends `hello` (with resume), replays,
 * and reconnects with backoff whenever the link drops, until {@link close}.
 */
export declare class RunnerClient {
    #private;
    readonly session: RunnerSession;
    constructor(url: string, options: RunnerClientOptions);
    /** Start connecting (and keep reconnecting); resolves once the first socket is open. */
    connect(): Promise<void>;
    /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
    send(message: Message): Message;
    /** Whether a socket is up. */
    get connected(): boolean;
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
    send(message: Message): Message;
    /** Whether the runner's socket is up. */
    get connected(): boolean;
    /** The next event of this runner (across reconnects). */
    recv(): Promise<TransportEvent>;
    [Symbol.asyncIterator](): AsyncIterator<TransportEvent>;
}
/** Options of a {@link HubServer}. */
export interface HubServerOptions {
    /** Accepted bearer tokens → runner ids (compared in constant time by the core). */
    tokens: Record<string, string>;
    /** Session configuration of every runner's session. */
    config?: SessionConfig;
    /** Bound of each runner's event queue (default: the core's host default). */
    maxQueuedEvents?: number;
    /** Disconnected, idle runners kept (default: the core's host default). */
    maxIdleRunners?: number;
}
/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with HTTP 401), each runner id has one {@link HubRunner} with one
 * session, so a reconnect resumes its streams.
 */
export declare class HubServer {
    #private;
    constructor(options: HubServerOptions);
    /** Listen on `host:port` (port 0: any); resolves with the bound port. */
    listen(port?: number, host?: string): Promise<number>;
    /** The runner's handle (created on first use; usable before it connects). */
    runner(runnerId: string): HubRunner;
    /** The next runner that connects for the first time (or again after it was dropped). */
    accept(): Promise<HubRunner>;
    /** Stop listening and close every runner's socket. */
    close(): Promise<void>;
}
