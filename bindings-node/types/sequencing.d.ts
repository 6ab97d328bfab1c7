import { type Message } from './wire';
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
    streams: {
        task_id: string;
        attempt?: number;
        frames: string[];
    }[];
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
/**
 * The sequencing state of one end of a hub↔runner connection: per-(task, attempt)
 * outbound logs and inbound trackers, resume maps, replay, acknowledgements, and a
 * snapshot to persist it.
 */
export declare class ConnectionState {
    constructor(role: Role, config?: SequencingConfig);
    /** A state restored from {@link snapshot} bytes. */
    static restore(bytes: Uint8Array): ConnectionState;
    /** The state as bytes (format `stapel-seq-snapshot/1`). */
    snapshot(): Buffer;
    /** Whether both states hold the same streams, frames and bounds. */
    equals(other: ConnectionState): boolean;
    /** `hub` or `runner`. */
    get role(): Role;
    /** Stamp a sequenced message with its stream's next seq and keep it; the stamped message. */
    emit<M extends Message>(message: M): M;
    /** {@link emit}, returning the stamped frame. */
    emitFrame(message: Message): string;
    /** Record an inbound sequenced message. */
    receive(message: Message): Arrival;
    /** Like {@link receive}, recording nothing. */
    classify(message: Message): Arrival;
    /** Per task, the last command seq received contiguously (a hello's `resume`). */
    resumeMap(): Record<string, number>;
    /** What to re-send for a peer's `hello.resume` map (also acknowledges it). */
    replayFor(resume: Record<string, number>): Replay;
    /** What to re-send for exact per-stream declarations. */
    replayPositions(positions: Position[]): Replay;
    /** Acknowledge a stream through `seq`; how many kept frames were dropped. */
    ack(taskId: string, attempt: number | null | undefined, seq: number): number;
    /** Drop kept frames at or below `seq`; how many. */
    trimThrough(taskId: string, attempt: number | null | undefined, seq: number): number;
    /** The inbound stream continues at `seq`: the skipped `[from, to]`, or `null`. */
    skipTo(taskId: string, attempt: number | null | undefined, seq: number): [number, number] | null;
    /** Inbound watermarks above 0. */
    ackPositions(): Position[];
    /** Per emitted outbound stream, the lowest seq still sendable. */
    replayFrom(): Position[];
    /** Every kept frame, stream by stream. */
    unacked(): string[];
    /** Forget a task's streams (a tombstone is kept); whether it was known. */
    forgetTask(taskId: string): boolean;
    /** Frames emitted from now on are provisional. */
    markUnconfirmed(): void;
    /** Every provisional frame is final. */
    confirmAll(): void;
    /** Whether no frame is provisional. */
    get isConfirmed(): boolean;
    /** Whether every frame of the task was acknowledged. */
    isFullyAcknowledged(taskId: string): boolean;
    /** Whether the task was forgotten. */
    isForgotten(taskId: string): boolean;
    /** The task's streams (empty for an unknown task). */
    channel(taskId: string): ChannelInfo;
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
    emit<M extends Message>(message: M): M;
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
}
/**
 * A standalone tracker of one inbound stream: {@link receive} classifies and records a
 * seq; {@link lastSeq} (the contiguous high-water mark) advances across a gap only once
 * it fills. At most `window` seqs are recorded above it (the core clamps the window to
 * 1..=65536); seq 0 and a seq beyond the window throw `ProtocolStateError`
 * (`invalid_seq`, `beyond_window`) and record nothing.
 */
export declare class InboxTracker {
    #private;
    constructor(options?: {
        window?: number;
    });
    /** Record `seq` and say how it arrived. */
    receive(seq: number): Arrival;
    /** The out-of-order window this tracker was made with. */
    get window(): number;
    /** Highest seq such that every seq in `1..=lastSeq` was received. */
    get lastSeq(): number;
    /** Seqs received above {@link lastSeq}, ascending. */
    get ahead(): number[];
    /** Whether anything was received. */
    get hasReceived(): boolean;
}
