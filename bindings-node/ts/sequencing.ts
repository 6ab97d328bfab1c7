import type { ExternalObject, NativeInboxTracker, NativeOutboxLog } from '../native';
import type { Position, ReplayReport, Resync, SequencingConfig, StreamReplay } from './api-types';
import { call, jsonText, parsed } from './internal';
import { native } from './native';
import { messageText, type Message, type SequencedMessage } from './wire';

export type { Position, ReplayReport, Resync, SequencingConfig, StreamReplay };

/** Which end of the connection: the hub sends commands, the runner progress. */
export type Role = 'hub' | 'runner';

/** How an inbound sequenced message relates to its stream. */
export type Arrival = 'in_order' | 'ahead' | 'duplicate';

/** A kept frame of an outbound stream. */
export interface UnackedFrame {
  task_id: string;
  /** `null` for the hub's command streams. */
  attempt: number | null;
  seq: number;
  frame: string;
}

/** A read-only view of one outbound stream's log. */
export interface OutboxLogView {
  /** Highest seq assigned so far (0 before anything is emitted). */
  last_seq: number;
  /** The seq the next emitted frame gets. */
  next_seq: number;
  /** The lowest seq still kept (`next_seq` when nothing is kept). */
  first_available: number;
  /** Encoded bytes kept. */
  kept_bytes: number;
  /** The first provisional seq (`next_seq` when none is provisional). */
  unconfirmed_from: number;
  /** Whether no kept frame is provisional. */
  is_confirmed: boolean;
  /** The kept frames as `[seq, frame]` pairs, ascending. */
  frames: [number, string][];
}

/** A read-only view of one inbound stream's tracker. */
export interface InboxTrackerView {
  /** Highest seq such that every seq in `1..=last_seq` was received. */
  last_seq: number;
  /** Seqs received above `last_seq`, ascending. */
  ahead: number[];
  /** Whether anything was received. */
  has_received: boolean;
}

interface ChannelJson {
  task_id: string;
  outbound: { attempt: number | null; log: OutboxLogView }[];
  inbound: { attempt: number | null; tracker: InboxTrackerView }[];
  last_received: number;
}

/**
 * A read-only copy of one task's streams in both directions (`attempt` is `null` for the
 * hub's command streams), taken by {@link ConnectionState.channel}.
 */
export class TaskChannel {
  /** The task. */
  readonly taskId: string;
  /** The task's outbound streams. */
  readonly outbound: readonly { readonly attempt: number | null; readonly log: OutboxLogView }[];
  /** The task's inbound streams. */
  readonly inbound: readonly { readonly attempt: number | null; readonly tracker: InboxTrackerView }[];
  /** What the task's `resume` entry declares: the last seq received contiguously (0: none). */
  readonly lastReceived: number;

  /** @internal */
  constructor(c: ChannelJson) {
    this.taskId = c.task_id;
    this.outbound = c.outbound;
    this.inbound = c.inbound;
    this.lastReceived = c.last_received;
  }

  /** The log of the task's latest outbound stream, or `null`. */
  get outbox(): OutboxLogView | null {
    return this.outbound[this.outbound.length - 1]?.log ?? null;
  }

  /** The tracker of the task's latest inbound stream, or `null`. */
  get inbox(): InboxTrackerView | null {
    return this.inbound[this.inbound.length - 1]?.tracker ?? null;
  }
}

type Handle = ExternalObject<'State'>;

/** The handle {@link ConnectionState.fromHandle} hands its constructor. */
let adopting: Handle | undefined;

interface Counts {
  is_confirmed: boolean;
  outbox_frames: number;
  outbox_bytes: number;
  outbound_streams: number;
  inbound_streams: number;
  forgotten_count: number;
  memory_footprint: number;
}

/**
 * The sequencing state of one end of a hub↔runner connection: per-(task, attempt)
 * outbound logs and inbound trackers, resume maps, replay, acknowledgements, and a
 * snapshot to persist it. Every bound is a key of `config` (absent keys: the core's
 * defaults); a full log refuses `emit` with `ProtocolStateError` (`backpressure`,
 * `frame_too_large`).
 */
export class ConnectionState {
  readonly #h: Handle;

  constructor(role: Role, config?: SequencingConfig) {
    const adopted = adopting;
    if (adopted !== undefined) {
      adopting = undefined;
      this.#h = adopted;
      return;
    }
    const c = config === undefined ? undefined : jsonText(config, 'the sequencing config');
    this.#h = call(() => native.stateNew(role, c));
  }

  /** @internal A state over a native handle. */
  static fromHandle(h: Handle): ConnectionState {
    adopting = h;
    return new ConnectionState('hub');
  }

  /** A state restored from {@link snapshot} bytes (`ProtocolStateError`: `not_a_snapshot`, ...). */
  static restore(bytes: Uint8Array): ConnectionState {
    return ConnectionState.fromHandle(call(() => native.stateRestore(bytes)));
  }

  #counts(): Counts {
    return parsed<Counts>(call(() => native.stateCounts(this.#h)));
  }

  /** The state as bytes (format `stapel-seq-snapshot/1`). */
  snapshot(): Buffer {
    return call(() => native.stateSnapshot(this.#h));
  }

  /** Whether both states hold the same streams, frames and bounds. */
  equals(other: ConnectionState): boolean {
    return call(() => native.stateEquals(this.#h, other.#h));
  }

  /** `hub` or `runner`. */
  get role(): Role {
    return call(() => native.stateRole(this.#h)) as Role;
  }

  /** The bounds the state runs with, every key. */
  get config(): Required<SequencingConfig> {
    return parsed<Required<SequencingConfig>>(call(() => native.stateConfig(this.#h)));
  }

  /** Stamp a sequenced message with its stream's next seq and keep it; the stamped message (a copy). */
  emit<M extends SequencedMessage>(message: M): M {
    return parsed<M>(call(() => native.stateEmit(this.#h, messageText(message))));
  }

  /** {@link emit}, returning the stamped frame. */
  emitFrame(message: SequencedMessage): string {
    return call(() => native.stateEmit(this.#h, messageText(message)));
  }

  /** {@link emit}, returning the stamped message and its frame. */
  emitEncoded<M extends SequencedMessage>(message: M): [M, string] {
    const frame = this.emitFrame(message);
    return [JSON.parse(frame) as M, frame];
  }

  /** Record an inbound sequenced message; whether it is new (apply it) or a duplicate. */
  receive(message: Message): boolean {
    return this.receiveArrival(message) !== 'duplicate';
  }

  /** Record an inbound sequenced message; how it arrived. */
  receiveArrival(message: Message): Arrival {
    return call(() => native.stateReceive(this.#h, messageText(message))) as Arrival;
  }

  /** How an inbound message would arrive, recording nothing. */
  classify(message: Message): Arrival {
    return call(() => native.stateClassify(this.#h, messageText(message))) as Arrival;
  }

  /**
   * Record an inbound message only when it is exactly the next seq of its stream:
   * `in_order` (recorded), `duplicate`, or `ahead` (not recorded; hold it until the gap fills).
   */
  acceptInOrder(message: Message): Arrival {
    return call(() => native.stateAcceptInOrder(this.#h, messageText(message))) as Arrival;
  }

  /** Per task, the last command seq received contiguously (a hello's `resume`). */
  resumeMap(): Record<string, number> {
    return parsed<Record<string, number>>(call(() => native.stateResumeMap(this.#h)));
  }

  /** The messages to re-send per task for a peer's `hello.resume` map (also acknowledges it). */
  replayFor(resume: Record<string, number>): Record<string, Message[]> {
    const t = jsonText(resume, 'resume');
    return parsed<Record<string, Message[]>>(call(() => native.stateReplayFor(this.#h, t, false)));
  }

  /** {@link replayFor} with the full answer: frames per stream, resyncs, peer-ahead, unknown tasks. */
  replayReport(resume: Record<string, number> = {}): ReplayReport {
    const t = jsonText(resume, 'resume');
    return parsed<ReplayReport>(call(() => native.stateReplayFor(this.#h, t, true)));
  }

  /** What to re-send for exact per-stream declarations. */
  replayPositions(positions: Position[]): ReplayReport {
    const t = jsonText(positions, 'positions');
    return parsed<ReplayReport>(call(() => native.stateReplayPositions(this.#h, t)));
  }

  /** Acknowledge a stream through `seq`; how many kept frames were dropped. */
  ack(taskId: string, attempt: number | null | undefined, seq: number): number {
    return call(() => native.stateAck(this.#h, taskId, attempt ?? undefined, seq));
  }

  /** Drop kept frames at or below `seq` (numbering does not move); how many. */
  trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number {
    return call(() => native.stateTrimThrough(this.#h, taskId, attempt ?? undefined, seq));
  }

  /** Whether an acknowledgement of `seq` is ahead of what the stream emitted. */
  isAhead(taskId: string, attempt: number | null | undefined, seq: number): boolean {
    return call(() => native.stateIsAhead(this.#h, taskId, attempt ?? undefined, seq));
  }

  /** The inbound stream continues at `seq`: the skipped `[from, to]`, or `null`. */
  skipTo(taskId: string, attempt: number | null | undefined, seq: number): [number, number] | null {
    return parsed<[number, number] | null>(call(() => native.stateSkipTo(this.#h, taskId, attempt ?? undefined, seq)));
  }

  /** Inbound watermarks above 0. */
  ackPositions(): Position[] {
    return parsed<Position[]>(call(() => native.stateAckPositions(this.#h)));
  }

  /** Per emitted outbound stream, the lowest seq still sendable. */
  replayFrom(): Position[] {
    return parsed<Position[]>(call(() => native.stateReplayFrom(this.#h)));
  }

  /** Every kept frame, stream by stream. */
  unacked(): UnackedFrame[] {
    return parsed<UnackedFrame[]>(call(() => native.stateUnacked(this.#h)));
  }

  /** Forget a task's streams (a bounded tombstone is kept); whether it was known. */
  forgetTask(taskId: string): boolean {
    return call(() => native.stateForgetTask(this.#h, taskId));
  }

  /** Frames emitted from now on are provisional (re-stamped after the peer's position). */
  markUnconfirmed(): void {
    call(() => native.stateMarkUnconfirmed(this.#h));
  }

  /** Every provisional frame is final. */
  confirmAll(): void {
    call(() => native.stateConfirmAll(this.#h));
  }

  /** Whether no frame is provisional. */
  get isConfirmed(): boolean {
    return this.#counts().is_confirmed;
  }

  /** Whether every frame of the task was acknowledged. */
  isFullyAcknowledged(taskId: string): boolean {
    return call(() => native.stateIsFullyAcknowledged(this.#h, taskId));
  }

  /** Whether the task was forgotten. */
  isForgotten(taskId: string): boolean {
    return call(() => native.stateIsForgotten(this.#h, taskId));
  }

  /** Tombstones kept. */
  get forgottenCount(): number {
    return this.#counts().forgotten_count;
  }

  /** A read-only copy of the task's streams (empty for an unknown task). */
  channel(taskId: string): TaskChannel {
    return new TaskChannel(parsed<ChannelJson>(call(() => native.stateChannel(this.#h, taskId))));
  }

  /** Read-only copies of every known task's streams, in first-seen order. */
  channels(): Record<string, TaskChannel> {
    const out: Record<string, TaskChannel> = {};
    for (const c of parsed<ChannelJson[]>(call(() => native.stateChannels(this.#h)))) out[c.task_id] = new TaskChannel(c);
    return out;
  }

  /** The kept messages of an outbound stream above `seq`. */
  outboxSince(taskId: string, attempt: number | null | undefined, seq: number): Message[] {
    return parsed<Message[]>(call(() => native.stateOutboxSince(this.#h, taskId, attempt ?? undefined, seq)));
  }

  /** Frames kept for replay. */
  get outboxFrames(): number {
    return this.#counts().outbox_frames;
  }

  /** Encoded bytes kept for replay. */
  get outboxBytes(): number {
    return this.#counts().outbox_bytes;
  }

  /** Outbound and inbound stream counts. */
  streamCounts(): { outbound: number; inbound: number } {
    const c = this.#counts();
    return { outbound: c.outbound_streams, inbound: c.inbound_streams };
  }

  /** Estimated bytes held by this state (an estimate from capacities, not a measurement). */
  memoryFootprint(): number {
    return this.#counts().memory_footprint;
  }
}

/** Bounds of a standalone {@link OutboxLog}; absent keys take the core's defaults. */
export interface OutboxLogBounds {
  max_frames?: number;
  max_bytes?: number;
}

interface OutboxJson extends OutboxLogView {
  max_frames: number;
  max_bytes: number;
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

  #view(): OutboxJson {
    return parsed<OutboxJson>(call(() => this.#inner.view()));
  }

  /** Stamp the next seq on a sequenced message and keep its frame; the stamped message. */
  emit<M extends SequencedMessage>(message: M): M {
    const t = messageText(message);
    return parsed<M>(call(() => this.#inner.emit(t)));
  }

  /** Drop the kept frames at or below `seq` (numbering does not move); how many were dropped. */
  ack(seq: number): number {
    return call(() => this.#inner.ack(seq));
  }

  /** The kept messages with a seq above `seq`, ascending. */
  since(seq: number): Message[] {
    return parsed<Message[]>(call(() => this.#inner.since(seq)));
  }

  /** The kept frames as `[seq, frame]` pairs, ascending. */
  frames(): [number, string][] {
    return this.#view().frames;
  }

  /** The bounds this log was made with. */
  get bounds(): Required<OutboxLogBounds> {
    const v = this.#view();
    return { max_frames: v.max_frames, max_bytes: v.max_bytes };
  }

  /** Highest seq assigned so far (0 before anything is emitted). */
  get lastSeq(): number {
    return this.#view().last_seq;
  }

  /** The seq the next emitted frame gets. */
  get nextSeq(): number {
    return this.#view().next_seq;
  }

  /** The lowest seq still kept (`nextSeq` when nothing is kept). */
  get firstAvailable(): number {
    return this.#view().first_available;
  }

  /** Encoded bytes kept. */
  get keptBytes(): number {
    return this.#view().kept_bytes;
  }

  /** The first provisional seq (`nextSeq` when none is). */
  get unconfirmedFrom(): number {
    return this.#view().unconfirmed_from;
  }

  /** Whether no kept frame is provisional. */
  get isConfirmed(): boolean {
    return this.#view().is_confirmed;
  }
}

interface InboxJson extends InboxTrackerView {
  window: number;
}

/**
 * A standalone tracker of one inbound stream: {@link receiveArrival} classifies and
 * records a seq; {@link lastSeq} (the contiguous high-water mark) advances across a gap
 * only once it fills. At most `window` seqs are recorded above it (the core clamps the
 * window to 1..=65536); seq 0 and a seq beyond the window throw `ProtocolStateError`
 * (`invalid_seq`, `beyond_window`) and record nothing.
 */
export class InboxTracker {
  readonly #inner: NativeInboxTracker;

  constructor(options?: { window?: number }) {
    this.#inner = call(() => new native.NativeInboxTracker(options?.window));
  }

  #view(): InboxJson {
    return parsed<InboxJson>(call(() => this.#inner.view()));
  }

  /** Record `seq`; whether it is new (not a duplicate). */
  receive(seq: number): boolean {
    return this.receiveArrival(seq) !== 'duplicate';
  }

  /** Record `seq` and say how it arrived. */
  receiveArrival(seq: number): Arrival {
    return call(() => this.#inner.receive(seq)) as Arrival;
  }

  /** The out-of-order window this tracker was made with. */
  get window(): number {
    return this.#view().window;
  }

  /** Highest seq such that every seq in `1..=lastSeq` was received. */
  get lastSeq(): number {
    return this.#view().last_seq;
  }

  /** Seqs received above {@link lastSeq}, ascending. */
  get ahead(): number[] {
    return this.#view().ahead;
  }

  /** Whether anything was received. */
  get hasReceived(): boolean {
    return this.#view().has_received;
  }
}
