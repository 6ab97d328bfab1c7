/**
 * Configuration of the host machines (the core's `HostConfig`); every key optional, absent
 * keys take the core's defaults ({@link HOST_CONSTANTS}).
 */
export interface HostConfig {
    /** Longest close handshake with a live peer, then the socket is aborted. */
    close_timeout_ms?: number;
    /** Disconnected, fully idle runners a hub keeps (the oldest are evicted first). */
    max_idle_runners?: number;
    /** Upgrade requests a hub remembers between the token check and the upgraded socket. */
    max_pending_connections?: number;
    /** Bound of each connection's application event queue (at least 1). */
    max_queued_events?: number;
    /** Bound of a paused socket's backlog, UTF-8 bytes (at least 1); beyond it the socket fails. */
    max_backlog_bytes?: number;
    /** Accepted bearer tokens → runner ids; absent: the hub asks the host (`authenticate`). */
    tokens?: Record<string, string>;
}
/** What the host tells a {@link SocketHost}. */
export type SocketInput = {
    type: 'opened';
} | {
    type: 'text';
    text: string;
} | {
    type: 'binary';
    bytes: Uint8Array;
} | {
    type: 'transmit';
    frame: string;
} | {
    type: 'session_close';
    reason: string;
} | {
    type: 'close';
    code?: number;
    reason?: string;
} | {
    type: 'failed';
} | {
    type: 'socket_closed';
} | {
    type: 'timeout';
};
/** What a {@link SocketHost} asks of the I/O shell (`kind` is the core's name). */
export type SocketOutput = {
    kind: 'attach';
} | {
    kind: 'deliver';
    text: string;
} | {
    kind: 'peer_error';
    code: string;
    detail: string;
} | {
    kind: 'send';
    frame: string;
} | {
    kind: 'detach';
} | {
    kind: 'close';
    code: number;
    reason: string;
    deadline_ms: number;
} | {
    kind: 'abort';
};
/** One WebSocket connection's host policy (attach, deliver, close handshake, abort). */
export declare class SocketHost {
    #private;
    constructor(config?: HostConfig);
    /** Feed one input at `nowMs`. */
    handleInput(nowMs: number, input: SocketInput): void;
    /** The next output, or `null`. */
    pollOutput(): SocketOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): SocketOutput[];
    /** The absolute deadline for the next `timeout` input, or `null`. */
    pollTimeout(): number | null;
    /** The connection state's name. */
    get state(): string;
    /** Whether the socket is open and the session attached. */
    get isOpen(): boolean;
}
/** One runner's activity, for the hub's eviction of idle runners. */
export interface RunnerActivity {
    runner_id: string;
    sockets?: number;
    kept_frames?: number;
    queued_events?: number;
    waiting_readers?: number;
    awaiting_accept?: boolean;
}
/** What the host tells a {@link HubHost}. */
export type HubInput = {
    type: 'request';
    conn: number;
    headers: [string, string][];
} | {
    type: 'upgraded';
    conn: number;
    headers: [string, string][];
} | {
    type: 'authenticated';
    conn: number;
    runner_id: string | null;
} | {
    type: 'runner_added';
    runner_id: string;
    activity: RunnerActivity[];
} | {
    type: 'timeout';
};
/** What a {@link HubHost} asks of the I/O shell (`kind` is the core's name). */
export type HubOutput = {
    kind: 'authenticate';
    conn: number;
    token: string;
} | {
    kind: 'accept';
    conn: number;
    runner_id: string;
} | {
    kind: 'reject';
    conn: number;
    status: number;
    body: string;
    refusal: string;
} | {
    kind: 'refuse';
    conn: number;
    code: number;
    reason: string;
    refusal: string;
} | {
    kind: 'attach';
    conn: number;
    runner_id: string;
    announce: boolean;
} | {
    kind: 'evict';
    runner_id: string;
};
/** The hub's connection policy: bearer token before upgrade, one session per runner. */
export declare class HubHost {
    #private;
    constructor(config?: HostConfig);
    /** Feed one input at `nowMs`. */
    handleInput(nowMs: number, input: HubInput): void;
    /** The next output, or `null`. */
    pollOutput(): HubOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): HubOutput[];
    /** Whether tokens are checked against a configured table (else: `authenticate` outputs). */
    get hasTokenTable(): boolean;
    /** The absolute deadline for the next `timeout` input, or `null`. */
    pollTimeout(): number | null;
    /** The runner ids with a session. */
    runners(): string[];
    /** Connections waiting for authentication or acceptance. */
    get pendingConnections(): number;
    /** The runner id a full `Authorization` header value maps to, or `null`. */
    runnerIdFor(authorization: string): string | null;
}
/** The host configuration as the core reads it (every key, with defaults). */
export declare function hostConfig(config?: HostConfig): HostConfig;
/** The `Authorization` header value for a bearer token, or `null` if a header cannot carry it. */
export declare function bearerAuthorization(token: string): string | null;
/** The token of an `Authorization` header value, or `null`. */
export declare function bearerToken(value: string): string | null;
/** Why upgrade request headers present no bearer token (a refusal code), or `null`. */
export declare function bearerRefusal(headers: [string, string][]): string | null;
/** The core's idle rule for one runner's activity. */
export declare function runnerIsIdle(activity: RunnerActivity): boolean;
/** The host constants of the core an I/O shell needs. */
export interface HostConstants {
    /** Close reason of a socket replaced by a newer socket of the same runner. */
    replaced_reason: string;
    /** Close code of a normal closure (1000). */
    close_normal: number;
    /** Default bound of a close handshake. */
    close_timeout_ms: number;
    /** Default number of disconnected, idle runners a hub keeps. */
    max_idle_runners: number;
    /** Default bound of a connection's application event queue. */
    max_queued_events: number;
    /** Default bound of a paused socket's backlog, UTF-8 bytes (1 MiB). */
    max_backlog_bytes: number;
    /** Default number of upgrade requests remembered between the token check and the socket. */
    max_pending_connections: number;
    /** Close code of an upgraded socket whose token is refused (1008). */
    close_policy_violation: number;
    /** HTTP status of a refused upgrade request (401). */
    status_unauthorized: number;
    /** The session close reason of a dead peer (the socket is aborted). */
    peer_timeout: string;
}
/** The host constants of the core an I/O shell needs. */
export declare const HOST_CONSTANTS: Readonly<HostConstants>;
