import type { ExternalObject } from '../native';
import type { PeerError, Resync } from './api-types';
import { call, checkedText, jsonText, parsed, seedOf } from './internal';
import { native, SCRATCH } from './native';
import { ConnectionState } from './sequencing';
import type { SessionConfig, SessionStats } from './session';
import type { RunnerRows, RunnerRowsInput } from './store';
import { DecodedProgress, messageText, type Hello, type Message, type SequencedMessage } from './wire';

/**
 * Configuration of a link (the core's `LinkConfig`); every key optional, absent keys take
 * the core's defaults. Refused values throw the core's `ConfigError` naming the key
 * (dotted inside `session`, e.g. `session.ping_interval_ms`).
 */
export interface LinkConfig {
  /** The session's configuration. */
  session?: SessionConfig;
  /** Longest close handshake with a live peer, then the socket is aborted (default 2000). */
  close_timeout_ms?: number;
  /** Runner: longest time from `connect` to `opened`, then the attempt is aborted (default 10000). */
  connect_timeout_ms?: number;
  /** Events the application may leave untaken before the socket is paused (≥ 1, default 1024). */
  max_queued_events?: number;
  /** UTF-8 bytes a paused socket may still deliver, beyond which it fails (≥ 1, default 1 MiB). */
  max_backlog_bytes?: number;
  /** Sockets kept while their close handshake runs (≥ 1, default 4). */
  max_closing_sockets?: number;
  /** Runner: reconnect by itself after a loss or a failed connect (default `true`). */
  reconnect?: boolean;
  /** Runner: first reconnect delay bound, ms (default 250). */
  backoff_initial_ms?: number;
  /** Runner: largest reconnect delay bound, ms (default 30000). */
  backoff_max_ms?: number;
}

/** A link's own configuration keys with their values (the core's `LinkConfig::to_value`). */
export type LinkConfigValues = Required<Omit<LinkConfig, 'session'>>;

/** Why a connect failed, as the host saw it (the link turns it into an error code). */
export type ConnectFailure = 'refused' | 'no_token' | 'failed';

/** What the host tells a link (`socket` is the socket's id: the runner link's, the hub host's). */
export type LinkInput =
  | { type: 'start' }
  | { type: 'stop'; code?: number; reason?: string }
  | { type: 'opened'; socket: number }
  | { type: 'connect_failed'; socket: number; failure: 'refused'; status: number; detail?: string }
  | { type: 'connect_failed'; socket: number; failure: 'no_token' | 'failed'; detail?: string }
  | { type: 'attach'; socket: number }
  | { type: 'close'; code?: number; reason?: string }
  | { type: 'frame'; socket: number; frame: string | Uint8Array }
  | { type: 'socket_closed'; socket: number }
  | { type: 'failed'; socket: number; detail?: string }
  | { type: 'events_taken'; n: number }
  | { type: 'confirm'; task_id: string; attempt?: number | null; seq: number }
  | { type: 'timeout' };

/** What a link tells the application (`kind` is the core's name). */
export type LinkEvent =
  | { kind: 'hello'; message: Hello }
  | { kind: 'received'; message: Message }
  | { kind: 'inbound_gap'; resync: Resync }
  | { kind: 'outbound_resync'; resync: Resync }
  | ({ kind: 'peer_error' } & PeerError)
  | { kind: 'connected' }
  | { kind: 'disconnected'; reason: string }
  | { kind: 'reconnecting'; delay_ms: number; failures: number }
  | { kind: 'error'; code: string; detail: string; status: number | null }
  | { kind: 'stalled'; bound: string; kept_frames: number; kept_bytes: number; detail: string }
  | { kind: 'unstalled' }
  | { kind: 'stopped' };

/** What a link asks of its host's sockets. */
export type LinkAction =
  | { kind: 'connect'; socket: number }
  | { kind: 'send'; socket: number; frame: string }
  | { kind: 'pause'; socket: number }
  | { kind: 'resume'; socket: number }
  | { kind: 'close'; socket: number; code: number; reason: string }
  | { kind: 'abort'; socket: number };

/** What a link asks of its host, in order: socket actions and the application's events. */
export type LinkOutput = LinkAction | LinkEvent;

const ACTIONS: ReadonlySet<string> = new Set(['connect', 'send', 'pause', 'resume', 'close', 'abort']);

/** Whether an output is an event for the application (else a socket action). */
export function isLinkEvent(output: LinkOutput): output is LinkEvent {
  return !ACTIONS.has(output.kind);
}

/** Where a runner link is. */
export type LinkPhase = 'idle' | 'waiting' | 'connecting' | 'open';

/** Counters of a link. */
export interface LinkStats {
  /** Droppable events (news) not emitted because the application's queue was full. */
  dropped_events: number;
  /** Sockets attached to the session. */
  connections: number;
  /** Paused sockets that failed because their backlog outgrew its bound. */
  backlog_overflows: number;
}

/** A link's status, in one call. */
export interface LinkStatus {
  /** Runner: the phase; hub: `open` while a socket serves the runner, else `idle`. */
  phase: LinkPhase;
  /** Whether a socket serves the session. */
  connected: boolean;
  /** The socket serving the session, or `null`. */
  socket: number | null;
  /** Hub: sockets attached or in their close handshake; runner: `null`. */
  sockets: number | null;
  /** Events emitted and not yet reported taken. */
  queued_events: number;
  /** Whether a send was refused (`stalled`) and `unstalled` has not followed. */
  stalled: boolean;
  /** The link's counters. */
  stats: LinkStats;
  /** The session's counters. */
  session_stats: SessionStats;
}

type Handle = ExternalObject<'Link'>;

/** Numbers per output record in the scratch (see `src/session.rs`). */
const RECORD = 11;

/** Fast-path frames the TS layer keeps for the outputs they become (`FED` in `src/session.rs`). */
const FED = 128;

/**
 * The machinery both links share. Call order (the core's): feed an input with
 * {@link handleInput} (or text frames with {@link handleFrames}, which also returns the
 * outputs), take every output with {@link pollOutput} until `null` (or
 * {@link drainOutputs}) and perform each in order, then arm one timer for
 * {@link pollTimeout} and feed `{type: 'timeout'}` when it passes. Report every event
 * the application took with `{type: 'events_taken', n}`. Outputs wait in the link until
 * taken (an input may drop sends queued for a socket that is gone).
 */
abstract class LinkBase {
  /** @internal */
  protected readonly handle: Handle;
  /** Whether the link may hold outputs (any input since the last empty drain). */
  #more = true;
  /** The last fast-path frames fed one at a time, by serial (`serial % FED`). */
  readonly #ring: string[] = new Array<string>(FED);

  protected constructor(handle: Handle) {
    this.handle = handle;
  }

  /** The outputs a native call left in the scratch and its JSON array, appended to `into`. */
  #collect(slow: string | null, frames: readonly string[], into: LinkOutput[]): void {
    const n = SCRATCH[0] as number;
    const list = slow === null ? [] : parsed<LinkOutput[]>(slow);
    let last = -1;
    for (let r = 0; r < n; r += 1) {
      const at = 2 + r * RECORD;
      if (SCRATCH[at] === 2) {
        last = SCRATCH[at + 1] as number;
        into.push(list[last] as LinkOutput);
      } else {
        const i = SCRATCH[at + 1] as number;
        const frame = (SCRATCH[at] === 1 ? frames[i] : this.#ring[i % FED]) as string;
        into.push({ kind: 'received', message: DecodedProgress.fromScratch(frame, at + 2) });
      }
    }
    for (let k = last + 1; k < list.length; k += 1) into.push(list[k] as LinkOutput);
  }

  /** Feed one input at time `nowMs` (host-chosen monotonic milliseconds). */
  handleInput(nowMs: number, input: LinkInput): void {
    const h = this.handle;
    this.#more = true;
    switch (input.type) {
      case 'frame': {
        const frame = input.frame;
        if (typeof frame === 'string') {
          const text = checkedText(frame);
          const serial = call(() => native.linkFrame(h, nowMs, input.socket, text));
          if (serial >= 0) this.#ring[serial % FED] = text;
        } else {
          call(() => native.linkBinary(h, nowMs, input.socket, frame));
        }
        return;
      }
      case 'events_taken':
        call(() => native.linkEventsTaken(h, nowMs, input.n));
        return;
      default: {
        const text = jsonText(input, 'the input');
        call(() => native.linkInput(h, nowMs, text));
      }
    }
  }

  /**
   * Feed text frames (WebSocket text messages) of socket `socket` in order, in one native
   * call, and take every output: those still waiting from earlier inputs, then the
   * frames'. A plain `task.progress` the session receives from one of these frames is a
   * {@link DecodedProgress} over your string. `eventsTaken` > 0 reports that many events
   * taken first (`{type: 'events_taken'}`), in the same call.
   */
  handleFrames(nowMs: number, socket: number, frames: readonly string[], eventsTaken = 0): LinkOutput[] {
    for (const f of frames) checkedText(f);
    const out: LinkOutput[] = [];
    const slow = call(() => native.linkFrames(this.handle, nowMs, socket, frames as string[], eventsTaken));
    this.#collect(slow, frames, out);
    this.#more = false;
    return out;
  }

  /** The next output, or `null` when there is nothing more to do now. */
  pollOutput(): LinkOutput | null {
    if (!this.#more) return null;
    const out = call(() => native.linkPoll(this.handle));
    if (out === null) {
      this.#more = false;
      return null;
    }
    return parsed<LinkOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): LinkOutput[] {
    const out: LinkOutput[] = [];
    if (!this.#more) return out;
    const slow = call(() => native.linkDrain(this.handle));
    this.#collect(slow, [], out);
    this.#more = false;
    return out;
  }

  /** @internal After a send (its outputs wait in the link). */
  protected sent(): void {
    this.#more = true;
  }

  /** When to feed `{type: 'timeout'}` next (absolute, in the `nowMs` clock), or `null`. */
  pollTimeout(): number | null {
    return call(() => native.linkPollTimeout(this.handle));
  }

  /** The link's status (phase, socket, queued events, counters) in one call. */
  status(): LinkStatus {
    return parsed<LinkStatus>(call(() => native.linkStatus(this.handle)));
  }

  /** Whether a socket serves the session. */
  get isConnected(): boolean {
    return this.status().connected;
  }

  /** Events emitted and not yet reported taken. */
  get queuedEvents(): number {
    return this.status().queued_events;
  }

  /** Whether a send was refused (`stalled`) and `unstalled` has not followed. */
  get isStalled(): boolean {
    return this.status().stalled;
  }

  /** The link's counters. */
  stats(): LinkStats {
    return this.status().stats;
  }

  /** The session's counters. */
  sessionStats(): SessionStats {
    return this.status().session_stats;
  }

  /** The configuration (the link's keys; the session's is its own). */
  config(): LinkConfigValues {
    return parsed<LinkConfigValues>(call(() => native.linkConfigValue(this.handle)));
  }

  /** A copy of the sequencing state. */
  state(): ConnectionState {
    return ConnectionState.fromHandle(call(() => native.linkState(this.handle)));
  }

  /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
  snapshot(): Buffer {
    return call(() => native.linkSnapshot(this.handle));
  }

  /** Per-task last applied inbound seq. */
  resumeMap(): Record<string, number> {
    return parsed<Record<string, number>>(call(() => native.linkResumeMap(this.handle)));
  }

  /** Frames kept for replay. */
  outboxFrames(): number {
    return call(() => native.linkOutboxFrames(this.handle));
  }

  /** Forget a finished task's streams (once its report was acknowledged); whether it was known. */
  forgetTask(taskId: string): boolean {
    return call(() => native.linkForgetTask(this.handle, taskId));
  }

  /** Whether every frame of the task was acknowledged by the peer. */
  isFullyAcknowledged(taskId: string): boolean {
    return call(() => native.linkIsFullyAcknowledged(this.handle, taskId));
  }
}

/** Options of a {@link RunnerLink}. */
export interface RunnerLinkOptions {
  /** The link's configuration (its `session` object configures the session). */
  config?: LinkConfig;
  /** Resume from a persisted sequencing state. */
  snapshot?: Uint8Array;
  /**
   * Seed of the reconnect delays' jitter, an integer in `0..2^64` (a `bigint`, or a safe
   * non-negative integer `number`); default 0. Take it from your random source once.
   */
  seed?: bigint | number;
}

/** Options of a {@link HubLink}. */
export interface HubLinkOptions {
  /** The link's configuration (its `session` object configures the session). */
  config?: LinkConfig;
  /** Resume the runner's streams from a persisted sequencing state. */
  snapshot?: Uint8Array;
}

/** The handle {@link HubLink.fromRows} hands the constructor. */
let adopting: Handle | undefined;

function configText(config: LinkConfig | undefined): string | undefined {
  return config === undefined ? undefined : jsonText(config, 'the link config');
}

/**
 * The runner's outbound connection as one sans-IO machine (the core's `RunnerLink`): when
 * to connect (at once, then after the core's backoff with jitter from the seed), the
 * connect deadline, the session on one socket at a time, what a frame is, the event-queue
 * bound and the paused socket's backlog, abort of a dead peer, the close handshake's
 * bound, and the error codes. Feed `{type: 'start'}` to begin.
 */
export class RunnerLink extends LinkBase {
  constructor(hello: Hello, options?: RunnerLinkOptions) {
    const config = configText(options?.config);
    const h = messageText(hello);
    const seed = seedOf(options?.seed);
    super(call(() => native.linkNew('runner', config, h, options?.snapshot, seed)));
  }

  /**
   * Send a sequenced message (`task.progress` / `task.report`): stamped, kept for replay,
   * transmitted when connected; returns it stamped (a copy). A refused send throws
   * (`backpressure`: the kept log is full; a `stalled` event is emitted once, send again
   * after `unstalled`).
   */
  send<M extends SequencedMessage>(nowMs: number, message: M): M {
    const text = messageText(message);
    this.sent();
    return parsed<M>(call(() => native.linkSend(this.handle, nowMs, text, false)));
  }

  /** {@link send} of a message that may have been sent before (the core's `resend`). */
  resend<M extends SequencedMessage>(nowMs: number, message: M): M {
    const text = messageText(message);
    this.sent();
    return parsed<M>(call(() => native.linkSend(this.handle, nowMs, text, true)));
  }

  /** Where the link is: `idle`, `waiting`, `connecting` or `open`. */
  get phase(): LinkPhase {
    return this.status().phase;
  }
}

/**
 * One runner as a hub serves it, across its sockets (the core's `HubLink`): its session
 * (kept across reconnects), the socket that serves it (`attach` a newer one and the older
 * one is closed, `replaced`), the event and backlog bounds and the close policy. The
 * hub's door (token check, eviction) is {@link HubHost}.
 */
export class HubLink extends LinkBase {
  constructor(options?: HubLinkOptions) {
    const adopted = adopting;
    adopting = undefined;
    const config = configText(options?.config);
    super(adopted ?? call(() => native.linkNew('hub', config, undefined, options?.snapshot, undefined)));
  }

  /**
   * A hub link over a session rebuilt from a store's rows (see
   * {@link HubSession.fromRows}: a takeover, on every new socket of a runner); `config`'s
   * `session` object configures the session (turn `durable_acks` on). Rows that make no
   * hub session throw `StoreError` (`invalid_rows`).
   */
  static fromRows(rows: RunnerRowsInput, config?: LinkConfig): HubLink {
    const r = jsonText(rows, 'the rows');
    const c = configText(config);
    adopting = call(() => native.linkFromRows(r, c));
    return new HubLink();
  }

  /** @internal The native handle of a hub link. */
  static handleOf(link: HubLink): Handle {
    return link.handle;
  }

  /** The rows a store holds for this link's session (see {@link HubSession.rows}). */
  rows(): RunnerRows {
    return parsed<RunnerRows>(call(() => native.linkRows(this.handle)));
  }

  /** Send a command (`task.assign` / `task.cancel`), connected or not; returns it stamped. */
  send<M extends SequencedMessage>(nowMs: number, message: M): M {
    const text = messageText(message);
    this.sent();
    return parsed<M>(call(() => native.linkSend(this.handle, nowMs, text, false)));
  }

  /** The socket serving the runner, or `null`. */
  get socket(): number | null {
    return this.status().socket;
  }

  /** Sockets attached or in their close handshake (for the hub's eviction decision). */
  get sockets(): number {
    return this.status().sockets ?? 0;
  }
}

/** The link configuration as the core reads it (its link keys, with defaults). */
export function linkConfig(config?: LinkConfig): LinkConfigValues {
  return parsed<LinkConfigValues>(call(() => native.linkConfig(configText(config))));
}

/** The link constants of the core a host needs. */
export interface LinkConstants {
  /** News events admitted beyond `max_queued_events` before further news is dropped (and counted). */
  news_allowance: number;
  /** Default bound of a connect attempt, ms. */
  connect_timeout_ms: number;
  /** Default number of sockets kept while their close handshake runs. */
  max_closing_sockets: number;
  /** The `disconnected` reasons of the link itself (the session's close reasons come too). */
  reasons: {
    stopped: string;
    closed: string;
    replaced: string;
    peer_closed: string;
    transport_failed: string;
    backlog_full: string;
  };
  /** The `error` codes of a link. */
  errors: {
    upgrade_refused: string;
    connect_failed: string;
    connect_timeout: string;
    no_token: string;
    transport_failed: string;
    backlog_full: string;
  };
}

/** The link constants of the core a host needs. */
export const LINK_CONSTANTS: Readonly<LinkConstants> = Object.freeze(parsed<LinkConstants>(native.linkConstants()));
