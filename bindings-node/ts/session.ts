import type { ExternalObject } from '../native';
import type { PeerError, Resync, SequencingConfig } from './api-types';
import { call, checkedText, jsonText, parsed, translate } from './internal';
import { native, SCRATCH } from './native';
import { ConnectionState } from './sequencing';
import type { RunnerRows, RunnerRowsInput } from './store';
import { DecodedProgress, messageText, type Hello, type Message, type SequencedMessage } from './wire';

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
export type SessionInput =
  | { type: 'connected' }
  | { type: 'disconnected' }
  | { type: 'timeout' }
  | { type: 'frame'; frame: string }
  | { type: 'bytes'; bytes: Uint8Array }
  | { type: 'send'; message: SequencedMessage }
  | { type: 'confirm'; task_id: string; attempt?: number | null; seq: number };

export type { PeerError, Resync };

/** What a session machine asks of its host, in order (`kind` is the core's name). */
export type SessionOutput =
  | { kind: 'transmit'; frame: string }
  | { kind: 'close'; reason: string }
  | { kind: 'hello'; message: Hello }
  | { kind: 'received'; message: Message }
  | { kind: 'inbound_gap'; resync: Resync }
  | { kind: 'outbound_resync'; resync: Resync }
  | ({ kind: 'peer_error' } & PeerError);

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

/** Numbers per output record in the scratch (see `src/session.rs`). */
const RECORD = 11;

const INPUT_KIND = { connected: 0, disconnected: 1, timeout: 2 } as const;

/** Fast-path frames the TS layer keeps for the outputs they become (`FED` in `src/session.rs`). */
const FED = 128;

/**
 * The machine both sides share. Call order (as the core's `Machine`): feed an input with
 * {@link handleInput} (or many frames with {@link handleFrames}), take every output with
 * {@link pollOutput} until it returns `null` (or {@link drainOutputs}), perform them,
 * then arm a timer for {@link pollTimeout} and feed `{type: 'timeout'}` when it passes.
 * Outputs wait in the machine until polled (it decides what a later input drops).
 */
abstract class SessionBase {
  readonly #handle: Handle;
  /** The last fast-path frames fed, by serial (`serial % FED`). */
  readonly #ring: string[] = new Array<string>(FED);
  /** Whether the machine may hold outputs (any input since the last empty poll). */
  #more = true;
  /** Outputs of a batch that stopped at a refused frame, handed out first. */
  #carry: SessionOutput[] = [];

  protected constructor(handle: Handle) {
    this.#handle = handle;
  }

  /** @internal The native handle. */
  protected get handle(): Handle {
    return this.#handle;
  }

  /** The output of the record at `at` in the scratch (`list`: the call's slow outputs). */
  #record(at: number, frames: readonly string[], list: SessionOutput[]): SessionOutput {
    const tag = SCRATCH[at];
    if (tag === 2) return list[SCRATCH[at + 1] as number] as SessionOutput;
    const i = SCRATCH[at + 1] as number;
    const frame = (tag === 1 ? frames[i] : this.#ring[i % FED]) as string;
    return { kind: 'received', message: DecodedProgress.fromScratch(frame, at + 2) };
  }

  /** The outputs a native call left in the scratch and its JSON array, appended to `into`. */
  #collect(slow: string | null, frames: readonly string[], into: SessionOutput[]): void {
    const n = SCRATCH[0] as number;
    const list = slow === null ? [] : parsed<SessionOutput[]>(slow);
    let last = -1;
    for (let r = 0; r < n; r += 1) {
      const at = 2 + r * RECORD;
      if (SCRATCH[at] === 2) last = SCRATCH[at + 1] as number;
      into.push(this.#record(at, frames, list));
    }
    for (let k = last + 1; k < list.length; k += 1) into.push(list[k] as SessionOutput);
  }

  /** Feed one input at time `nowMs` (host-chosen monotonic milliseconds). */
  handleInput(nowMs: number, input: SessionInput): void {
    const h = this.#handle;
    this.#more = true;
    switch (input.type) {
      case 'frame': {
        const frame = checkedText(input.frame);
        let serial: number;
        try {
          serial = native.sessionInput(h, nowMs, 3, frame);
        } catch (e) {
          throw translate(e);
        }
        if (serial >= 0) this.#ring[serial % FED] = frame;
        return;
      }
      case 'bytes':
        call(() => native.sessionInput(h, nowMs, 4, undefined, input.bytes));
        return;
      case 'send':
        this.send(nowMs, input.message);
        return;
      case 'confirm':
        this.confirm(nowMs, input.task_id, input.attempt, input.seq);
        return;
      default:
        call(() => native.sessionInput(h, nowMs, INPUT_KIND[input.type]));
    }
  }

  /**
   * Feed whole frames (WebSocket text messages) in order, in one native call, and take
   * every output: those still waiting from earlier inputs, then the batch's, as
   * {@link drainOutputs} would return them after each frame. A refused frame (a machine
   * that is not connected) throws its error; the outputs of the frames before it are
   * then the first ones {@link pollOutput} / {@link drainOutputs} return.
   */
  handleFrames(nowMs: number, frames: readonly string[]): SessionOutput[] {
    for (const f of frames) checkedText(f);
    const out = this.#carry;
    this.#carry = [];
    const slow = call(() => native.sessionFrames(this.#handle, nowMs, frames as string[]));
    const handled = SCRATCH[1] as number;
    this.#collect(slow, frames, out);
    this.#more = true;
    if (handled < frames.length) {
      this.#carry = out;
      call(() => native.sessionTakeError(this.#handle));
    }
    return out;
  }

  /** Send a sequenced message; returns it stamped with its `seq` (a copy). */
  send<M extends SequencedMessage>(nowMs: number, message: M): M {
    const text = messageText(message);
    this.#more = true;
    return parsed<M>(call(() => native.sessionSend(this.#handle, nowMs, text)));
  }

  /**
   * Send a message that may have been sent before — stapel-runner-protocol 0.1.1's
   * re-send from a checkpoint (the core's `resend`): a message whose `seq` its stream
   * already emitted is that frame, so nothing is stamped, kept or transmitted (the
   * session replays it after a reconnect: the peer gets it once) and it comes back as
   * given; any other message is sent as {@link send} sends it. Returns the message with
   * the seq it goes under (a copy).
   */
  resend<M extends SequencedMessage>(nowMs: number, message: M): M {
    const text = messageText(message);
    this.#more = true;
    return parsed<M>(call(() => native.sessionResend(this.#handle, nowMs, text)));
  }

  /**
   * Durable acknowledgements ({@link SessionConfig.durable_acks}): the host's store
   * committed the inbound stream `(taskId, attempt)` through `seq` (`attempt`: `null` for
   * the runner's command streams), so acknowledgements may go up to it. Refused with
   * `not_durable` (no durable acks) or `confirm_ahead` (beyond what was delivered).
   */
  confirm(nowMs: number, taskId: string, attempt: number | null | undefined, seq: number): void {
    this.#more = true;
    call(() => native.sessionConfirm(this.#handle, nowMs, taskId, attempt ?? undefined, seq));
  }

  /** The next output, or `null` when there is nothing more to do now. */
  pollOutput(): SessionOutput | null {
    if (this.#carry.length > 0) return this.#carry.shift() as SessionOutput;
    if (!this.#more) return null;
    const slow = call(() => native.sessionPoll(this.#handle));
    this.#more = SCRATCH[1] === 1;
    if (slow !== null) return parsed<SessionOutput>(slow);
    if (SCRATCH[0] === 0) return null;
    return this.#record(2, [], []);
  }

  /** Every pending output, in order. */
  drainOutputs(): SessionOutput[] {
    const out = this.#carry;
    this.#carry = [];
    if (!this.#more) return out;
    const slow = call(() => native.sessionDrain(this.#handle));
    this.#collect(slow, [], out);
    this.#more = false;
    return out;
  }

  /** When to feed `{type: 'timeout'}` next (absolute, in the `nowMs` clock), or `null`. */
  pollTimeout(): number | null {
    return call(() => native.sessionPollTimeout(this.#handle));
  }

  /** Whether a transport connection is up. */
  get isConnected(): boolean {
    return call(() => native.sessionIsConnected(this.#handle));
  }

  /** A copy of the sequencing state. */
  state(): ConnectionState {
    return ConnectionState.fromHandle(call(() => native.sessionState(this.#handle)));
  }

  /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
  snapshot(): Buffer {
    return call(() => native.sessionSnapshot(this.#handle));
  }

  /** Per-task last applied inbound seq (what a runner's hello declares). */
  resumeMap(): Record<string, number> {
    return parsed<Record<string, number>>(call(() => native.sessionResumeMap(this.#handle)));
  }

  /** Frames kept for replay. */
  outboxFrames(): number {
    return call(() => native.sessionOutboxFrames(this.#handle));
  }

  /** Forget a finished task's streams; whether it was known. */
  forgetTask(taskId: string): boolean {
    return call(() => native.sessionForgetTask(this.#handle, taskId));
  }

  /** Drop the kept frames of a stream at or below `seq` (a checkpoint); how many. */
  trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number {
    return call(() => native.sessionTrimThrough(this.#handle, taskId, attempt ?? undefined, seq));
  }

  /** Whether every frame of the task was acknowledged by the peer. */
  isFullyAcknowledged(taskId: string): boolean {
    return call(() => native.sessionIsFullyAcknowledged(this.#handle, taskId));
  }

  /** Whether the task was forgotten (a tombstone is kept). */
  isForgotten(taskId: string): boolean {
    return call(() => native.sessionIsForgotten(this.#handle, taskId));
  }

  /** The session's counters. */
  stats(): SessionStats {
    return parsed<SessionStats>(call(() => native.sessionStats(this.#handle)));
  }
}

/** Options of a session: its configuration and a snapshot to resume from. */
export interface SessionOptions {
  config?: SessionConfig;
  snapshot?: Uint8Array;
}

function configText(config: SessionConfig | undefined): string | undefined {
  return config === undefined ? undefined : jsonText(config, 'the session config');
}

function snapshotOf(snapshot: Uint8Array | undefined): Uint8Array | undefined {
  return snapshot;
}

/** The handle {@link HubSession.fromRows} hands the constructor. */
let adopting: Handle | undefined;

/** The hub side of one hub↔runner connection. */
export class HubSession extends SessionBase {
  constructor(options?: SessionOptions) {
    const adopted = adopting;
    adopting = undefined;
    const config = configText(options?.config);
    super(adopted ?? call(() => native.sessionNew('hub', config, undefined, snapshotOf(options?.snapshot))));
  }

  /**
   * A hub session rebuilt from a store's rows (a takeover, on every new socket of a
   * runner): its state holds exactly the rows, its kept commands are provisional until
   * the runner's `hello`, and with `durable_acks` every inbound position counts as
   * confirmed (it was committed). Rows that make no hub session throw `StoreError`
   * (`invalid_rows`); a refused config `ConfigError`.
   */
  static fromRows(rows: RunnerRowsInput, config?: SessionConfig): HubSession {
    const r = jsonText(rows, 'the rows');
    const c = configText(config);
    adopting = call(() => native.sessionFromRows(r, c));
    return new HubSession();
  }

  /** @internal The native handle of a hub session. */
  static handleOf(session: HubSession): Handle {
    return session.handle;
  }

  /**
   * The rows a store holds for this session, sorted by key: an inbound stream's `through`
   * is what the host confirmed (durable acknowledgements), or its watermark without them.
   */
  rows(): RunnerRows {
    return parsed<RunnerRows>(call(() => native.sessionRows(this.handle)));
  }
}

/** The runner side of one hub↔runner connection; `hello` is its identity template. */
export class RunnerSession extends SessionBase {
  constructor(hello: Hello, options?: SessionOptions) {
    const config = configText(options?.config);
    const h = messageText(hello);
    super(call(() => native.sessionNew('runner', config, h, snapshotOf(options?.snapshot))));
  }
}

/** Either side's session machine. */
export type SessionMachine = HubSession | RunnerSession;
