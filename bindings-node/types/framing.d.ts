/** Bounds of a {@link LineFramer}; absent keys take the core's defaults. */
export interface FramerConfig {
    /** Longest line accepted, in bytes before the `\n` (default {@link DEFAULT_MAX_LINE_BYTES}). */
    max_line_bytes?: number;
    /** Skip lines that are empty after removing the terminator (default `true`). */
    skip_empty_lines?: boolean;
    /** Most lines and line errors waiting to be pulled (default 1024). */
    max_ready_lines?: number;
    /** Once the waiting lines hold this many bytes, `push` takes no new step (default 1 MiB). */
    max_ready_bytes?: number;
}
/** A line, or a line error (`line_too_long`, `invalid_utf8`) with its 1-based number. */
export type LineItem = {
    line: string;
} | {
    error: string;
    line_number: number;
};
/**
 * The bounded JSONL line framer: push bytes, pull lines. Lines longer than
 * `max_line_bytes` become one `line_too_long` error (the framer resynchronizes at the next
 * newline); at most `max_ready_lines` / `max_ready_bytes` wait to be pulled, beyond which
 * {@link push} takes fewer bytes than it was given.
 */
export declare class LineFramer {
    #private;
    constructor(config?: FramerConfig);
    /** Push bytes; how many it took (all unless the ready queue filled up). */
    push(data: Uint8Array | string): number;
    /** Push everything, pulling in turn; every item. */
    pushAll(data: Uint8Array | string): LineItem[];
    /** End of input: a last line without a newline becomes ready. */
    finish(): void;
    /** The next line or line error, or `null`. */
    pollLine(): LineItem | null;
    /** Every ready line and line error. */
    drain(): LineItem[];
    /** Bytes of the line being assembled. */
    get bufferedBytes(): number;
    /** Lines and line errors waiting to be pulled. */
    get readyLen(): number;
    /** Bytes of the lines waiting to be pulled. */
    get readyBytes(): number;
    /** Whether the ready queue is full (push takes nothing until lines are pulled). */
    get full(): boolean;
    /** Whether {@link finish} was called. */
    get finished(): boolean;
    /** The configuration the framer runs with, every key. */
    get config(): Required<FramerConfig>;
    /** The framer's bounds. */
    get bounds(): {
        max_line_bytes: number;
        max_ready_lines: number;
        max_ready_bytes: number;
    };
}
