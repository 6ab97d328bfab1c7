import type { NativeLineFramer } from '../native';
import { call, jsonText, parsed } from './internal';
import { native } from './native';
import { DEFAULT_MAX_LINE_BYTES } from './wire';

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
export type LineItem = { line: string } | { error: string; line_number: number };

interface Status {
  buffered_bytes: number;
  ready: number;
  ready_bytes: number;
  full: boolean;
  finished: boolean;
}

function bytes(data: Uint8Array | string): Uint8Array {
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/**
 * The bounded JSONL line framer: push bytes, pull lines. Lines longer than
 * `max_line_bytes` become one `line_too_long` error (the framer resynchronizes at the next
 * newline); at most `max_ready_lines` / `max_ready_bytes` wait to be pulled, beyond which
 * {@link push} takes fewer bytes than it was given.
 */
export class LineFramer {
  readonly #inner: NativeLineFramer;

  constructor(config?: FramerConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the framer config');
    this.#inner = call(() => new native.NativeLineFramer(c));
  }

  #status(): Status {
    return parsed<Status>(call(() => this.#inner.status()));
  }

  /** Push bytes; how many it took (all unless the ready queue filled up). */
  push(data: Uint8Array | string): number {
    return call(() => this.#inner.push(bytes(data)));
  }

  /** Push everything, pulling in turn; every item. */
  pushAll(data: Uint8Array | string): LineItem[] {
    return parsed<LineItem[]>(call(() => this.#inner.pushAll(bytes(data))));
  }

  /** End of input: a last line without a newline becomes ready. */
  finish(): void {
    call(() => this.#inner.finish());
  }

  /** The next line or line error, or `null`. */
  pollLine(): LineItem | null {
    const out = call(() => this.#inner.pollLine());
    return out === null ? null : parsed<LineItem>(out);
  }

  /** Every ready line and line error. */
  drain(): LineItem[] {
    return parsed<LineItem[]>(call(() => this.#inner.drain()));
  }

  /** Bytes of the line being assembled. */
  get bufferedBytes(): number {
    return call(() => this.#inner.bufferedBytes());
  }

  /** Lines and line errors waiting to be pulled. */
  get readyLen(): number {
    return this.#status().ready;
  }

  /** Bytes of the lines waiting to be pulled. */
  get readyBytes(): number {
    return this.#status().ready_bytes;
  }

  /** Whether the ready queue is full (push takes nothing until lines are pulled). */
  get full(): boolean {
    return this.#status().full;
  }

  /** Whether {@link finish} was called. */
  get finished(): boolean {
    return this.#status().finished;
  }

  /** The configuration the framer runs with, every key. */
  get config(): Required<FramerConfig> {
    return parsed<Required<FramerConfig>>(call(() => this.#inner.config()));
  }

  /** The framer's bounds. */
  get bounds(): { max_line_bytes: number; max_ready_lines: number; max_ready_bytes: number } {
    const c = this.config;
    return { max_line_bytes: c.max_line_bytes, max_ready_lines: c.max_ready_lines, max_ready_bytes: c.max_ready_bytes };
  }
}
