import type { NativeHubHost, NativeSocketHost } from '../native';
import { call, jsonText, parsed } from './internal';
import { native } from './native';

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
export type SocketInput =
  | { type: 'opened' }
  | { type: 'text'; text: string }
  | { type: 'binary'; bytes: Uint8Array }
  | { type: 'transmit'; frame: string }
  | { type: 'session_close'; reason: string }
  | { type: 'close'; code?: number; reason?: string }
  | { type: 'failed' }
  | { type: 'socket_closed' }
  | { type: 'timeout' };

/** What a {@link SocketHost} asks of the I/O shell (`kind` is the core's name). */
export type SocketOutput =
  | { kind: 'attach' }
  | { kind: 'deliver'; text: string }
  | { kind: 'peer_error'; code: string; detail: string }
  | { kind: 'send'; frame: string }
  | { kind: 'detach' }
  | { kind: 'close'; code: number; reason: string; deadline_ms: number }
  | { kind: 'abort' };

/** One WebSocket connection's host policy (attach, deliver, close handshake, abort). */
export class SocketHost {
  readonly #inner: NativeSocketHost;

  constructor(config?: HostConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the host config');
    this.#inner = call(() => new native.NativeSocketHost(c));
  }

  /** Feed one input at `nowMs`. */
  handleInput(nowMs: number, input: SocketInput): void {
    const inner = this.#inner;
    switch (input.type) {
      case 'text':
        call(() => inner.handle(nowMs, 'text', input.text));
        return;
      case 'binary':
        call(() => inner.handle(nowMs, 'binary', undefined, input.bytes));
        return;
      case 'transmit':
        call(() => inner.handle(nowMs, 'transmit', input.frame));
        return;
      case 'session_close':
        call(() => inner.handle(nowMs, 'session_close', input.reason));
        return;
      case 'close':
        call(() => inner.handle(nowMs, 'close', input.reason ?? '', undefined, input.code));
        return;
      default:
        call(() => inner.handle(nowMs, input.type));
    }
  }

  /** The next output, or `null`. */
  pollOutput(): SocketOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : parsed<SocketOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): SocketOutput[] {
    return parsed<SocketOutput[]>(call(() => this.#inner.drainOutputs()));
  }

  /** The absolute deadline for the next `timeout` input, or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** The connection state's name. */
  get state(): string {
    return call(() => this.#inner.state());
  }

  /** Whether the socket is open and the session attached. */
  get isOpen(): boolean {
    return call(() => this.#inner.isOpen());
  }
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
export type HubInput =
  | { type: 'request'; conn: number; headers: [string, string][] }
  | { type: 'upgraded'; conn: number; headers: [string, string][] }
  | { type: 'authenticated'; conn: number; runner_id: string | null }
  | { type: 'runner_added'; runner_id: string; activity: RunnerActivity[] }
  | { type: 'timeout' };

/** What a {@link HubHost} asks of the I/O shell (`kind` is the core's name). */
export type HubOutput =
  | { kind: 'authenticate'; conn: number; token: string }
  | { kind: 'accept'; conn: number; runner_id: string }
  | { kind: 'reject'; conn: number; status: number; body: string; refusal: string }
  | { kind: 'refuse'; conn: number; code: number; reason: string; refusal: string }
  | { kind: 'attach'; conn: number; runner_id: string; announce: boolean }
  | { kind: 'evict'; runner_id: string };

/** The hub's connection policy: bearer token before upgrade, one session per runner. */
export class HubHost {
  readonly #inner: NativeHubHost;

  constructor(config?: HostConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the host config');
    this.#inner = call(() => new native.NativeHubHost(c));
  }

  /** Feed one input at `nowMs`. */
  handleInput(nowMs: number, input: HubInput): void {
    const { type, ...fields } = input;
    const t = jsonText(fields, 'the input');
    call(() => this.#inner.handle(nowMs, type, t));
  }

  /** The next output, or `null`. */
  pollOutput(): HubOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : parsed<HubOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): HubOutput[] {
    return parsed<HubOutput[]>(call(() => this.#inner.drainOutputs()));
  }

  /** Whether tokens are checked against a configured table (else: `authenticate` outputs). */
  get hasTokenTable(): boolean {
    return call(() => this.#inner.hasTokenTable());
  }

  /** The absolute deadline for the next `timeout` input, or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** The runner ids with a session. */
  runners(): string[] {
    return call(() => this.#inner.runners());
  }

  /** Connections waiting for authentication or acceptance. */
  get pendingConnections(): number {
    return call(() => this.#inner.pendingConnections());
  }

  /** The runner id a full `Authorization` header value maps to, or `null`. */
  runnerIdFor(authorization: string): string | null {
    return call(() => this.#inner.runnerIdFor(authorization));
  }
}

/** The host configuration as the core reads it (every key, with defaults). */
export function hostConfig(config?: HostConfig): HostConfig {
  const c = config === undefined ? undefined : jsonText(config, 'the host config');
  return parsed<HostConfig>(call(() => native.hostConfig(c)));
}

/** The `Authorization` header value for a bearer token, or `null` if a header cannot carry it. */
export function bearerAuthorization(token: string): string | null {
  return call(() => native.bearerAuthorization(token));
}

/** The token of an `Authorization` header value, or `null`. */
export function bearerToken(value: string): string | null {
  return call(() => native.bearerToken(value));
}

/** Why upgrade request headers present no bearer token (a refusal code), or `null`. */
export function bearerRefusal(headers: [string, string][]): string | null {
  return call(() => native.bearerRefusal(jsonText(headers, 'the headers')));
}

/** The core's idle rule for one runner's activity. */
export function runnerIsIdle(activity: RunnerActivity): boolean {
  return call(() => native.runnerIsIdle(jsonText(activity, 'the activity')));
}

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
export const HOST_CONSTANTS: Readonly<HostConstants> = Object.freeze(parsed<HostConstants>(native.hostConstants()));
