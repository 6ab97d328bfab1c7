/** Host configuration (`tokens`, close timeout, idle-runner and queue bounds). */
export type HostConfig = Record<string, unknown>;
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
    /** The absolute deadline for the next `timeout` input, or `null`. */
    pollTimeout(): number | null;
    /** The connection state's name. */
    get state(): string;
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
export declare const HOST_CONSTANTS: {
    replaced_reason: string;
    close_normal: number;
    close_timeout_ms: number;
    max_idle_runners: number;
    max_queued_events: number;
};
