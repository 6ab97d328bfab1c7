import type { NativeLocalRun } from '../native';
import type { LocalConfig, SignalAction, SpawnAction } from './api-types';
import { call, jsonText, parsed } from './internal';
import { native } from './native';

export type { LocalConfig, SignalAction, SpawnAction };

/** What the host reports to a {@link LocalRun}. */
export type LocalInput =
  | { type: 'controller_bytes'; bytes: Uint8Array }
  | { type: 'controller_eof' }
  | { type: 'harness_stdout'; bytes: Uint8Array }
  | { type: 'harness_stderr'; bytes: Uint8Array }
  | { type: 'harness_spawned'; pid: number }
  | { type: 'harness_spawn_failed'; message: string }
  | { type: 'harness_exited'; code: number | null; signal: number | null }
  | { type: 'timeout' };

/** What a {@link LocalRun} asks of its host, in order (`kind` is the core's name). */
export type LocalOutput =
  | { kind: 'to_controller'; line: string }
  | { kind: 'to_harness'; line: string }
  | ({ kind: 'spawn' } & SpawnAction)
  | { kind: 'close_harness_stdin' }
  | ({ kind: 'signal' } & SignalAction)
  | { kind: 'exit'; code: number };

/**
 * The local-run machine (seed 002): controller commands in, canonical events and
 * receipts out, plus the spawn/signal/exit actions the host performs. Call order: feed an
 * input, drain {@link pollOutput} (or {@link drainOutputs}), then arm {@link pollTimeout}.
 */
export class LocalRun {
  readonly #inner: NativeLocalRun;

  constructor(config?: LocalConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the local config');
    this.#inner = call(() => new native.NativeLocalRun(c));
  }

  /** Feed one input at time `nowMs`. */
  handleInput(nowMs: number, input: LocalInput): void {
    const inner = this.#inner;
    switch (input.type) {
      case 'controller_bytes':
      case 'harness_stdout':
      case 'harness_stderr':
        call(() => inner.handle(nowMs, input.type, input.bytes));
        return;
      case 'harness_spawned':
        call(() => inner.handle(nowMs, input.type, undefined, input.pid));
        return;
      case 'harness_spawn_failed':
        call(() => inner.handle(nowMs, input.type, undefined, undefined, input.message));
        return;
      case 'harness_exited':
        call(() =>
          inner.handle(nowMs, input.type, undefined, undefined, undefined, input.code ?? undefined, input.signal ?? undefined),
        );
        return;
      default:
        call(() => inner.handle(nowMs, input.type));
    }
  }

  /** The next output, or `null`. */
  pollOutput(): LocalOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : parsed<LocalOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): LocalOutput[] {
    return parsed<LocalOutput[]>(call(() => this.#inner.drainOutputs()));
  }

  /** When to feed `{type: 'timeout'}` next (absolute), or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** Whether the run is over. */
  get isFinished(): boolean {
    return call(() => this.#inner.isFinished());
  }
}
