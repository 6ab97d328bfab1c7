import type { Position, ReplayReport, Resync, SequencingConfig, StreamReplay } from './api-types';
import { type Message, type SequencedMessage } from './wire';
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
/**
 * A read-only copy of one task's streams in both directions (`attempt` is `null` for the
 * hub's command streams), taken by {@link ConnectionState.channel}.
 */
export declare class TaskChannel {
    /** The task. */
    readonly taskId: string;
    /** The task's outbound streams. */
    readonly outbound: readonly {
        readonly attempt: number | null;
        readonly log: OutboxLogView;
    }[];
    /** The task's inbound streams. */
    readonly inbound: readonly {
        readonly attempt: number | null;
        readonly tracker: InboxTrackerView;
    }[];
    /** What the task's `resume` entry declares: the last seq received contiguously (0: none). */
    readonly lastReceived: number;
    /** The log of the task's latest outbound stream, or `null`. */
    get outbox(): OutboxLogView | null;
    /** The tracker of the task's latest inbound stream, or `null`. */
    get inbox(): InboxTrackerView | null;
}
/**
 * The sequencing state of one end of a hub↔runner connection: per-(task, attempt)
 * outbound logs and inbound trackers, resume maps, replay, acknowledgements, and a
 * snapshot to persist it. Every bound is a key of `config` (absent keys: the core's
 * defaults); a full log refuses `emit` with `ProtocolStateError` (`backpressure`,
 * `frame_too_large`).
 */
export declare class ConnectionState {
    #private;
    constructor(role: Role, config?: SequencingConfig);
    /** A state restored from {@link snapshot} bytes (`ProtocolStateError`: `not_a_snapshot`, ...). */
    static restore(bytes: Uint8Array): ConnectionState;
    /** The state as bytes (format `stapel-seq-snapshot/1`). */
    snapshot(): Buffer;
    /** Whether both states hold the same streams, frames and bounds. */
    equals(other: ConnectionState): boolean;
    /** `hub` or `runner`. */
    get role(): Role;
    /** The bounds the state runs with, every key. */
    get config(): Required<SequencingConfig>;
    /** Stamp a sequenced message with its stream's next seq and keep it; the stamped message (a copy). */
    emit<M extends SequencedMessage>(message: M): M;
    /** {@link emit}, returning the stamped frame. */
    emitFrame(message: SequencedMessage): string;
    /** {@link emit}, returning the stamped message and its frame. */
    emitEncoded<M extends SequencedMessage>(message: M): [M, string];
    /** Record an inbound sequenced message; whether it is new (apply it) or a duplicate. */
    receive(message: Message): boolean;
    /** Record an inbound sequenced message; how it arrived. */
    receiveArrival(message: Message): Arrival;
    /** How an inbound message would arrive, recording nothing. */
    classify(message: Message): Arrival;
    /**
     * Record an inbound message only when it is exactly the next seq of its stream:
     * `in_order` (recorded), `duplicate`, or `ahead` (not recorded; hold it until the gap fills).
     */
    acceptInOrder(message: Message): Arrival;
    /** Per task, the last command seq received contiguously (a hello's `resume`). */
    resumeMap(): Record<string, number>;
    /** The messages to re-send per task for a peer's `hello.resume` map (also acknowledges it). */
    replayFor(resume: Record<string, number>): Record<string, Message[]>;
    /** {@link replayFor} with the full answer: frames per stream, resyncs, peer-ahead, unknown tasks. */
    replayReport(resume?: Record<string, number>): ReplayReport;
    /** What to re-send for exact per-stream declarations. */
    replayPositions(positions: Position[]): ReplayReport;
    /** Acknowledge a stream through `seq`; how many kept frames were dropped. */
    ack(taskId: string, attempt: number | null | undefined, seq: number): number;
    /** Drop kept frames at or below `seq` (numbering does not move); how many. */
    trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number;
    /** Whether an acknowledgement of `seq` is ahead of what the stream emitted. */
    isAhead(taskId: string, attempt: number | null | undefined, seq: number): boolean;
    /** The inbound stream continues at `seq`: the skipped `[from, to]`, or `null`. */
    skipTo(taskId: string, attempt: number | null | undefined, seq: number): [number, number] | null;
    /** Inbound watermarks above 0. */
    ackPositions(): Position[];
    /** Per emitted outbound stream, the lowest seq still sendable. */
    replayFrom(): Position[];
    /** Every kept frame, stream by stream. */
    unacked(): UnackedFrame[];
    /** Forget a task's streams (a bounded tombstone is kept); whether it was known. */
    forgetTask(taskId: string): boolean;
    /** Frames emitted from now on are provisional (re-stamped after the peer's position). */
    markUnconfirmed(): void;
    /** Every provisional frame is final. */
    confirmAll(): void;
    /** Whether no frame is provisional. */
    get isConfirmed(): boolean;
    /** Whether every frame of the task was acknowledged. */
    isFullyAcknowledged(taskId: string): boolean;
    /** Whether the task was forgotten. */
    isForgotten(taskId: string): boolean;
    /** Tombstones kept. */
    get forgottenCount(): number;
    /** A read-only copy of the task's streams (empty for an unknown task). */
    channel(taskId: string): TaskChannel;
    /** Read-only copies of every known task's streams, in first-seen order. */
    channels(): Record<string, TaskChannel>;
    /** The kept messages of an outbound stream above `seq`. */
    outboxSince(taskId: string, attempt: number | null | undefined, seq: number): Message[];
    /** Frames kept for replay. */
    get outboxFrames(): number;
    /** Encoded bytes kept for replay. */
    get outboxBytes(): number;
    /** Outbound and inbound stream counts. */
    streamCounts(): {
        outbound: number;
        inbound: number;
    };
    /** Estimated bytes held by this state (an estimate from capacities, not a measurement). */
    memoryFootprint(): number;
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
export declare class OutboxLog {
    #private;
    constructor(bounds?: OutboxLogBounds);
    /** Stamp the next seq on a sequenced message and keep its frame; the stamped message. */
    emit<M extends SequencedMessage>(message: M): M;
    /** Drop the kept frames at or below `seq` (numbering does not move); how many were dropped. */
    ack(seq: number): number;
    /** The kept messages with a seq above `seq`, ascending. */
    since(seq: number): Message[];
    /** The kept frames as `[seq, frame]` pairs, ascending. */
    frames(): [number, string][];
    /** The bounds this log was made with. */
    get bounds(): Required<OutboxLogBounds>;
    /** Highest seq assigned so far (0 before anything is emitted). */
    get lastSeq(): number;
    /** The seq the next emitted frame gets. */
    get nextSeq(): number;
    /** The lowest seq still kept (`nextSeq` when nothing is kept). */
    get firstAvailable(): number;
    /** Encoded bytes kept. */
    get keptBytes(): number;
    /** The first provisional seq (`nextSeq` when none is). */
    get unconfirmedFrom(): number;
    /** Whether no kept frame is provisional. */
    get isConfirmed(): boolean;
}
/**
 * A standalone tracker of one inbound stream: {@link receiveArrival} classifies and
 * records a seq; {@link lastSeq} (the contiguous high-water mark) advances across a gap
 * only once it fills. At most `window` seqs are recorded above it (the core clamps the
 * window to 1..=65536); seq 0 and a seq beyond the window throw `ProtocolStateError`
 * (`invalid_seq`, `beyond_window`) and record nothing.
 */
export declare class InboxTracker {
    #private;
    constructor(options?: {
        window?: number;
    });
    /** Record `seq`; whether it is new (not a duplicate). */
    receive(seq: number): boolean;
    /** Record `seq` and say how it arrived. */
    receiveArrival(seq: number): Arrival;
    /** The out-of-order window this tracker was made with. */
    get window(): number;
    /** Highest seq such that every seq in `1..=lastSeq` was received. */
    get lastSeq(): number;
    /** Seqs received above {@link lastSeq}, ascending. */
    get ahead(): number[];
    /** Whether anything was received. */
    get hasReceived(): boolean;
}
