import { native } from './native';
import type { NativeConnectionState, NativeInboxTracker, NativeOutboxLog } from '../native';
import { call, checkedText, type Message } from './wire';
import type { Resync } from './session';

/** Which end of the connection: the hub sends commands, the runner progress. */
export type Role = 'hub' | 'runner';

/** Bounds of a {@link ConnectionState}; absent keys take the core's defaults. */
export interface SequencingConfig {
  inbound_window?: number;
  max_outbox_frames?: number;
  max_outbox_bytes?: number;
  max_streams?: number;
  max_tombstones?: number;
}

/** How an inbound sequenced message relates to its stream. */
export type Arrival = 'in_order' | 'ahead' | 'duplicate';

/** A stream position: `attempt` is absent for the hub's command streams. */
export interface Position {
  task_id: string;
  attempt?: number;
  seq: number;
}

/** What to re-send after a peer declared its positions. */
export interface Replay {
  /** Per stream, the kept frames above the declared position. */
  streams: { task_id: string; attempt?: number; frames: string[] }[];
  /** Streams whose declared position is older than the kept log. */
  resync: Resync[];
  /** Streams where the peer declared a position beyond anything emitted. */
  peer_ahead: Position[];
  /** Task ids the peer declared that this state does not know. */
  unknown: string[];
}

/** A task's streams: counts and the last seq received contiguously. */
export interface ChannelInfo {
  outbound: number;
  inbound: number;
  last_received: number;
}

function text(message: Message): string {
  return checkedText(JSON.stringify(message));
}

/**
 * The sequencing state of one end of a hub↔runner connection: per-(task, attempt)
 * outbound logs and inbound trackers, resume maps, replay, acknowledgements, and a
 * snapshot to persist it.
 */
export class ConnectionState {
  /** @internal */
  readonly inner: NativeConnectionState;

  constructor(role: Role, config?: SequencingConfig) {
    const c = config === undefined ? undefined : JSON.stringify(config);
    this.inner = call(() => new native.NativeConnectionState(role, c));
  }

  /** A state restored from {@link snapshot} bytes. */
  static restore(bytes: Uint8Array): ConnectionState {
    const state = Object.create(ConnectionState.prototype) as ConnectionState;
    const inner = call(() => native.NativeConnectionState.restore(bytes));
    Object.defineProperty(state, 'inner', { value: inner });
    return state;
  }

  /** The state as bytes (format `stapel-seq-snapshot/1`). */
  snapshot(): Buffer {
    return call(() => this.inner.snapshot());
  }

  /** Whether both states hold the same streams, frames and bounds. */
  equals(other: ConnectionState): boolean {
    return call(() => this.inner.equals(other.inner));
  }

  /** `hub` or `runner`. */
  get role(): Role {
    return call(() => this.inner.role()) as Role;
  }

  /** Stamp a sequenced message with its stream's next seq and keep it; the stamped message. */
  emit<M extends Message>(message: M): M {
    const t = text(message);
    return JSON.parse(call(() => this.inner.emit(t))) as M;
  }

  /** {@link emit}, returning the stamped frame. */
  emitFrame(message: Message): string {
    const t = text(message);
    return call(() => this.inner.emitFrame(t));
  }

  /** Record an inbound sequenced message. */
  receive(message: Message): Arrival {
    const t = text(message);
    return call(() => this.inner.receive(t)) as Arrival;
  }

  /** Like {@link receive}, recording nothing. */
  classify(message: Message): Arrival {
    const t = text(message);
    return call(() => this.inner.classify(t)) as Arrival;
  }

  /** Per task, the last command seq received contiguously (a hello's `resume`). */
  resumeMap(): Record<string, number> {
    return JSON.parse(call(() => this.inner.resumeMap())) as Record<string, number>;
  }

  /** What to re-send for a peer's `hello.resume` map (also acknowledges it). */
  replayFor(resume: Record<string, number>): Replay {
    const t = JSON.stringify(resume);
    return JSON.parse(call(() => this.inner.replayFor(t))) as Replay;
  }

  /** What to re-send for exact per-stream declarations. */
  replayPositions(positions: Position[]): Replay {
    const t = JSON.stringify(positions);
    return JSON.parse(call(() => this.inner.replayPositions(t))) as Replay;
  }

  /** Acknowledge a stream through `seq`; how many kept frames were dropped. */
  ack(taskId: string, attempt: number | null | undefined, seq: number): number {
    return call(() => this.inner.ack(taskId, attempt ?? undefined, seq));
  }

  /** Drop kept frames at or below `seq`; how many. */
  trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number {
    return call(() => this.inner.trimThrough(taskId, attempt ?? undefined, seq));
  }

  /** The inbound stream continues at `seq`: the skipped `[from, to]`, or `null`. */
  skipTo(taskId: string, attempt: number | null | undefined, seq: number): [number, number] | null {
    return JSON.parse(call(() => this.inner.skipTo(taskId, attempt ?? undefined, seq))) as [number, number] | null;
  }

  /** Inbound watermarks above 0. */
  ackPositions(): Position[] {
    return JSON.parse(call(() => this.inner.ackPositions())) as Position[];
  }

  /** Per emitted outbound stream, the lowest seq still sendable. */
  replayFrom(): Position[] {
    return JSON.parse(call(() => this.inner.replayFrom())) as Position[];
  }

  /** Every kept frame, stream by stream. */
  unacked(): string[] {
    return call(() => this.inner.unacked());
  }

  /** Forget a task's streams (a tombstone is kept); whether it was known. */
  forgetTask(taskId: string): boolean {
    return call(() => this.inner.forgetTask(taskId));
  }

  /** Frames emitted from now on are provisional. */
  markUnconfirmed(): void {
    call(() => this.inner.markUnconfirmed());
  }

  /** Every provisional frame is final. */
  confirmAll(): void {
    call(() => this.inner.confirmAll());
  }

  /** Whether no frame is provisional. */
  get isConfirmed(): boolean {
    return call(() => this.inner.isConfirmed());
  }

  /** Whether every frame of the task was acknowledged. */
  isFullyAcknowledged(taskId: string): boolean {
    return call(() => this.inner.isFullyAcknowledged(taskId));
  }

  /** Whether the task was forgotten. */
  isForgotten(taskId: string): boolean {
    return call(() => this.inner.isForgotten(taskId));
  }

  /** The task's streams (empty for an unknown task). */
  channel(taskId: string): ChannelInfo {
    return JSON.parse(call(() => this.inner.channel(taskId))) as ChannelInfo;
  }

  /** The kept messages of an outbound stream above `seq`. */
  outboxSince(taskId: string, attempt: number | null | undefined, seq: number): Message[] {
    return JSON.parse(call(() => this.inner.outboxSince(taskId, attempt ?? undefined, seq))) as Message[];
  }

  /** Frames kept for replay. */
  get outboxFrames(): number {
    return call(() => this.inner.outboxFrames());
  }

  /** Encoded bytes kept for replay. */
  get outboxBytes(): number {
    return call(() => this.inner.outboxBytes());
  }

  /** Outbound and inbound stream counts. */
  streamCounts(): { outbound: number; inbound: number } {
    const [outbound, inbound] = call(() => this.inner.streamCounts());
    return { outbound: outbound ?? 0, inbound: inbound ?? 0 };
  }
}

/** Bounds of a standalone {@link OutboxLog}; absent keys take the core's defaults. */
export interface OutboxLogBounds {
  max_frames?: number;
  max_bytes?: number;
}

/**
 * A standalone, bounded log of one outbound stream: {@link emit} stamps the next seq and
 * keeps the frame, {@link since} gives the replay tail, {@link ack} drops what the peer
 * holds. A full log refuses `emit` (`ProtocolStateError`: `backpressure`,
 * `frame_too_large`) until `ack` trims it.
 */
export class OutboxLog {
  readonly #inner: NativeOutboxLog;

  constructor(bounds?: OutboxLogBounds) {
    this.#inner = call(() => new native.NativeOutboxLog(bounds?.max_frames, bounds?.max_bytes));
  }

  /** Stamp the next seq on a sequenced message and keep its frame; the stamped message. */
  emit<M extends Message>(message: M): M {
    const t = text(message);
    return JSON.parse(call(() => this.#inner.emit(t))) as M;
  }

  /** Drop the kept frames at or below `seq` (numbering does not move); how many were dropped. */
  ack(seq: number): number {
    return call(() => this.#inner.ack(seq));
  }

  /** The kept messages with a seq above `seq`, ascending. */
  since(seq: number): Message[] {
    return JSON.parse(call(() => this.#inner.since(seq))) as Message[];
  }

  /** The kept frames as `[seq, frame]` pairs, ascending. */
  frames(): [number, string][] {
    return JSON.parse(call(() => this.#inner.frames())) as [number, string][];
  }

  /** The bounds this log was made with. */
  get bounds(): Required<OutboxLogBounds> {
    const [max_frames, max_bytes] = call(() => this.#inner.bounds());
    return { max_frames: max_frames ?? 0, max_bytes: max_bytes ?? 0 };
  }

  /** Highest seq assigned so far (0 before anything is emitted). */
  get lastSeq(): number {
    return call(() => this.#inner.lastSeq());
  }

  /** The seq the next emitted frame gets. */
  get nextSeq(): number {
    return call(() => this.#inner.nextSeq());
  }

  /** The lowest seq still kept (`nextSeq` when nothing is kept). */
  get firstAvailable(): number {
    return call(() => this.#inner.firstAvailable());
  }

  /** Encoded bytes kept. */
  get keptBytes(): number {
    return call(() => this.#inner.keptBytes());
  }
}

/**
 * A standalone tracker of one inbound stream: {@link receive} classifies and records a
 * seq; {@link lastSeq} (the contiguous high-water mark) advances across a gap only once
 * it fills. At most `window` seqs are recorded above it (the core clamps the window to
 * 1..=65536); seq 0 and a seq beyond the window throw `ProtocolStateError`
 * (`invalid_seq`, `beyond_window`) and record nothing.
 */
export class InboxTracker {
  readonly #inner: NativeInboxTracker;

  constructor(options?: { window?: number }) {
    this.#inner = call(() => new native.NativeInboxTracker(options?.window));
  }

  /** Record `seq` and say how it arrived. */
  receive(seq: number): Arrival {
    return call(() => this.#inner.receive(seq)) as Arrival;
  }

  /** The out-of-order window this tracker was made with. */
  get window(): number {
    return call(() => this.#inner.window());
  }

  /** Highest seq such that every seq in `1..=lastSeq` was received. */
  get lastSeq(): number {
    return call(() => this.#inner.lastSeq());
  }

  /** Seqs received above {@link lastSeq}, ascending. */
  get ahead(): number[] {
    return call(() => this.#inner.ahead());
  }

  /** Whether anything was received. */
  get hasReceived(): boolean {
    return call(() => this.#inner.hasReceived());
  }
}
