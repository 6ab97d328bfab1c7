import type { NativeAdmission } from '../native';
import { call, jsonText, parsed } from './internal';
import { native } from './native';

/**
 * Configuration of the live server's admission machine (the core's `AdmissionConfig`);
 * every key optional, absent keys take the core's defaults.
 */
export interface AdmissionConfig {
  /** Most bytes of a request body, chunked bodies included (default 16384). */
  max_body_bytes?: number;
  /** Most active runs (default 4). */
  max_active_runs?: number;
  /** Most runs kept, active plus completed; the oldest completed is evicted (default 16). */
  max_retained_runs?: number;
  /** Most live stream clients per run (default 8). */
  max_stream_clients?: number;
  /** Most requests whose body is being read at once (default 64). */
  max_pending_bodies?: number;
  /** Longest time from a request's head to the end of its body, ms (default 10000). */
  body_timeout_ms?: number;
  /** Script names a start may choose (default empty: any plain name). */
  scripts?: string[];
  /** Page paths served by GET/HEAD (default ["/"]). */
  pages?: string[];
}

/** What the host reports to an {@link Admission} machine (the core's JSON forms). */
export type AdmissionInput =
  | {
      request: {
        id: number;
        peer: string;
        local: string;
        method: string;
        target: string;
        headers: [string, string][];
      };
    }
  | { body: { id: number; data: string } | { id: number; data_hex: string } }
  | { body_end: { id: number } }
  | { aborted: { id: number } }
  | { run_ended: { run: string } }
  | { stream_closed: { id: number } }
  | { timeout: true };

/** What an admitted request asks for (`kind` is the core's route name). */
export type AdmissionRoute =
  | { kind: 'page'; path: string }
  | { kind: 'scripts' }
  | { kind: 'start_run'; run: string; session: string; script: string }
  | { kind: 'events'; run: string; cursor: number }
  | { kind: 'action'; run: string; command: string; payload: Record<string, unknown> };

/** What an {@link Admission} machine asks of the I/O shell. */
export type AdmissionOutput =
  | { refuse: { id: number; status: number; code: string } }
  | { read_body: { id: number; limit: number } }
  | { admit: { id: number; route: AdmissionRoute } }
  | { evict: { run: string } };

/** One run the machine keeps. */
export interface AdmissionRun {
  run: string;
  active: boolean;
  streams: number;
}

/**
 * The live server's admission machine (the core's `admission::Admission`): loopback
 * sockets, exact Host and Origin, Fetch Metadata, JSON-only bounded bodies, the run and
 * stream caps and the route table, decided for every request before route lookup. Feed
 * inputs, then drain {@link pollOutput}; answer a refusal with its status,
 * {@link admissionErrorBody} and {@link admissionResponseHeaders}. Misuse throws
 * `ProtocolStateError` with the core's code.
 */
export class Admission {
  readonly #inner: NativeAdmission;

  constructor(config?: AdmissionConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the admission config');
    this.#inner = call(() => new native.NativeAdmission(c));
  }

  /** Feed one input (its JSON form) at `nowMs`. */
  handleInput(nowMs: number, input: AdmissionInput): void {
    const t = jsonText(input, 'the input');
    call(() => this.#inner.handle(nowMs, t));
  }

  /** Bytes of the body of request `id`, as they arrive. */
  body(nowMs: number, id: number, data: Uint8Array): void {
    call(() => this.#inner.body(nowMs, id, data));
  }

  /** The next output, or `null`. */
  pollOutput(): AdmissionOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : parsed<AdmissionOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): AdmissionOutput[] {
    return parsed<AdmissionOutput[]>(call(() => this.#inner.drainOutputs()));
  }

  /** The earliest body deadline (feed `{timeout: true}` then), or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** The runs kept, oldest first. */
  get runs(): AdmissionRun[] {
    return parsed<AdmissionRun[]>(call(() => this.#inner.runs()));
  }

  /** Requests whose body is being read. */
  get pendingBodies(): number {
    return call(() => this.#inner.pendingBodies());
  }

  /** Runs whose harness has not ended. */
  get activeRuns(): number {
    return call(() => this.#inner.activeRuns());
  }
}

/** The admission config as the core reads it (every key); throws `ConfigError`. */
export function admissionConfig(config?: AdmissionConfig): Required<AdmissionConfig> {
  const c = config === undefined ? undefined : jsonText(config, 'the admission config');
  return parsed<Required<AdmissionConfig>>(call(() => native.admissionConfig(c)));
}

/** The JSON error body of a refusal code, or `null` for an unknown code. */
export function admissionErrorBody(code: string): string | null {
  return call(() => native.admissionErrorBody(code));
}

/** The headers every live-server response carries, `[name, value]` pairs. */
export function admissionResponseHeaders(): [string, string][] {
  return parsed<[string, string][]>(call(() => native.admissionResponseHeaders()));
}
