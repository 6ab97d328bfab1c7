/** Bounds of a {@link LineFramer}; absent keys take the core's defaults. */
export interface FramerConfig {
    max_line_bytes?: number;
    skip_empty_lines?: boolean;
    max_ready_lines?: number;
    max_ready_bytes?: number;
}
/** A line, or a line error (`line_too_long`, `invalid_utf8`) with its 1-based number. */
export type LineItem = {
    line: string;
} | {
    error: string;
    line_number: number;
};
/** The bounded JSONL line framer: push bytes, pull lines. */
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
}
