import { native } from './native';
import type { NativeLineFramer } from '../native';
import { call } from './wire';

/** Bounds of a {@link LineFramer}; absent keys take the core's defaults. */
export interface FramerConfig {
  max_line_bytes?: number;
  skip_empty_lines?: boolean;
  max_ready_lines?: number;
  max_ready_bytes?: number;
}

/** A line, or a line error (`line_too_long`, `invalid_utf8`) with its 1-based number. */
export type LineItem = { line: string } | { error: string; line_number: number };

function bytes(data: Uint8Array | string): Uint8Array {
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/** The bounded JSONL line framer: push bytes, pull lines. */
export class LineFramer {
  readonly #inner: NativeLineFramer;

  constructor(config?: FramerConfig) {
    const c = config === undefined ? undefined : JSON.stringify(config);
    this.#inner = call(() => new native.NativeLineFramer(c));
  }

  /** Push bytes; how many it took (all unless the ready queue filled up). */
  push(data: Uint8Array | string): number {
    return call(() => this.#inner.push(bytes(data)));
  }

  /** Push everything, pulling in turn; every item. */
  pushAll(data: Uint8Array | string): LineItem[] {
    return JSON.parse(call(() => this.#inner.pushAll(bytes(data)))) as LineItem[];
  }

  /** End of input: a last line without a newline becomes ready. */
  finish(): void {
    call(() => this.#inner.finish());
  }

  /** The next line or line error, or `null`. */
  pollLine(): LineItem | null {
    const out = call(() => this.#inner.pollLine());
    return out === null ? null : (JSON.parse(out) as LineItem);
  }

  /** Every ready line and line error. */
  drain(): LineItem[] {
    return JSON.parse(call(() => this.#inner.drain())) as LineItem[];
  }

  /** Bytes of the line being assembled. */
  get bufferedBytes(): number {
    return call(() => this.#inner.bufferedBytes());
  }

  /** Lines and line errors waiting to be pulled. */
  get readyLen(): number {
    return call(() => this.#inner.readyLen());
  }
}
