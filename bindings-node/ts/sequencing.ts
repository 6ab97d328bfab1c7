import { native } from './native';
import type { NativeConnectionState } from '../native';
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
