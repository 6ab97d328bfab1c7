import { native } from './native';
import type { NativeSubprocessSession } from '../native';
import { translate } from './errors';
import { call } from './wire';

/** The five components of a usage split (`stapel-taskspecs` UsageSplit), closed. */
export interface UsageSplit {
  fresh_input: number;
  output: number;
  cache_read: number;
  cache_write: number;
  thinking: number;
}

/** A role spec built from a task's invocation (the core's JSON form). */
export type RoleSpec = Record<string, unknown>;

/** A turn's result: the final text and its usage. */
export interface TurnResult {
  text: string;
  usage: UsageSplit;
  [key: string]: unknown;
}

/** The role spec of an invocation (`role` overrides the invocation's). */
export function roleSpecFromInvocation(invocation: Record<string, unknown>, role?: string | null): RoleSpec {
  const t = JSON.stringify(invocation);
  return JSON.parse(call(() => native.roleSpecFromInvocation(t, role ?? undefined))) as RoleSpec;
}

/** The system prompt of the role spec of an invocation, or `null`. */
export function roleSpecSystemPrompt(invocation: Record<string, unknown>, role?: string | null): string | null {
  const t = JSON.stringify(invocation);
  return call(() => native.roleSpecSystemPrompt(t, role ?? undefined));
}

/** Options of {@link agentOptions}. */
export interface AgentOptionsInput {
  role?: string | null;
  /** Override the role spec's system prompt (`null`: none). */
  systemPrompt?: string | null;
}

/** The agent SDK options for the role spec of an invocation. */
export function agentOptions(invocation: Record<string, unknown>, options?: AgentOptionsInput): Record<string, unknown> {
  const t = JSON.stringify(invocation);
  const override = options !== undefined && 'systemPrompt' in options;
  return JSON.parse(
    call(() => native.agentOptions(t, options?.role ?? undefined, override, options?.systemPrompt ?? undefined)),
  ) as Record<string, unknown>;
}

/** Fold an agent turn's text blocks and final result (with its usage) into a TurnResult. */
export function agentTurn(textBlocks: string[], result?: { usage?: unknown } | null): TurnResult {
  const has = result !== undefined && result !== null;
  const usage = has && result.usage !== undefined && result.usage !== null ? JSON.stringify(usageValue(result.usage, 'anthropic')) : undefined;
  return JSON.parse(call(() => native.agentTurn(textBlocks, has, usage))) as TurnResult;
}

function isPlain(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A provider usage value as JSON data: plain objects as they are; an SDK object (a class
 * instance, its fields possibly accessors) read through the keys the core reads.
 */
function usageValue(value: unknown, shape: 'anthropic' | 'openai' | 'mapping'): unknown {
  if (isPlain(value) || shape === 'mapping') return value;
  const project = (v: unknown, keys: string[]): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const x = (v as Record<string, unknown>)[key];
      if (x === undefined || x === null) continue;
      const inner = call(() => native.usageDetailKeyList(key));
      out[key] = inner !== null && typeof x === 'object' && !isPlain(x) ? project(x, inner) : x;
    }
    return out;
  };
  return project(value, call(() => native.usageKeys(shape)));
}

/** A usage split and its total. */
export interface MappedUsage {
  usage: UsageSplit;
  total_tokens: number;
}

/** Map a provider usage value to a split and its total (`thinking`: anthropic only). */
export function mapUsage(shape: 'anthropic' | 'openai' | 'mapping', usage: unknown, options?: { thinking?: number }): MappedUsage {
  const t = JSON.stringify(usageValue(usage, shape));
  return JSON.parse(call(() => native.usageFrom(shape, t, options?.thinking))) as MappedUsage;
}

/** The UsageSplit of an Anthropic usage object (`thinking` overrides thinking tokens). */
export function usageFromAnthropic(usage: unknown, options?: { thinking?: number }): UsageSplit {
  return mapUsage('anthropic', usage, options).usage;
}

/** The UsageSplit of an OpenAI usage object. */
export function usageFromOpenai(usage: unknown): UsageSplit {
  return mapUsage('openai', usage).usage;
}

/** The UsageSplit of a mapping that already has the split's keys. */
export function usageFromMapping(usage: unknown): UsageSplit {
  return mapUsage('mapping', usage).usage;
}

/** Validate a turn result strictly. */
export function validateTurnResult(value: unknown): TurnResult {
  const t = JSON.stringify(value);
  return JSON.parse(call(() => native.turnResultFromValue(t))) as TurnResult;
}

/** The adapter error a host fault code stands for, or `null` when it is not a host fault. */
export function hostAdapterError(code: string, message: string): Error | null {
  try {
    native.hostFault(code, message);
    return null;
  } catch (e) {
    return translate(e) as Error;
  }
}

/** The adapter defaults of the core. */
export const ADAPTER_DEFAULTS: { role: string; session: string; grace_ms: number; turn_max_line_bytes: number } = JSON.parse(
  native.adapterDefaults(),
) as { role: string; session: string; grace_ms: number; turn_max_line_bytes: number };

/** How to start a harness process. */
export interface SpawnSpec {
  command: string[];
  path?: string;
  env?: Record<string, string>;
  llm_base_url?: string | null;
  cwd?: string | null;
}

/** What the host reports to a {@link SubprocessSession}. */
export type SubprocessInput =
  | { type: 'open'; spec: SpawnSpec }
  | { type: 'spawned'; pid?: number | null; process_group?: boolean }
  | { type: 'spawn_failed'; message: string }
  | { type: 'stdin_write_failed'; message: string }
  | { type: 'start_turn'; prompt: string }
  | { type: 'stdout'; bytes: Uint8Array }
  | { type: 'eof' }
  | { type: 'exited' }
  | { type: 'close' }
  | { type: 'timeout' };

/** What a {@link SubprocessSession} asks of its host (`type` is the core's tag). */
export type SubprocessOutput = { type: string; [key: string]: unknown };

/** The subprocess JSONL turn machine: one harness process, one turn at a time. */
export class SubprocessSession {
  readonly #inner: NativeSubprocessSession;

  constructor(config?: { max_line_bytes?: number; grace_ms?: number }) {
    const c = config === undefined ? undefined : JSON.stringify(config);
    this.#inner = call(() => new native.NativeSubprocessSession(c));
  }

  /** Feed one input at `nowMs`. */
  handleInput(nowMs: number, input: SubprocessInput): void {
    const inner = this.#inner;
    switch (input.type) {
      case 'open':
        call(() => inner.handle(nowMs, 'open', JSON.stringify(input.spec)));
        return;
      case 'spawned':
        call(() => inner.handle(nowMs, 'spawned', JSON.stringify({ pid: input.pid ?? null, process_group: input.process_group ?? false })));
        return;
      case 'spawn_failed':
      case 'stdin_write_failed':
        call(() => inner.handle(nowMs, input.type, input.message));
        return;
      case 'start_turn':
        call(() => inner.handle(nowMs, 'start_turn', input.prompt));
        return;
      case 'stdout':
        call(() => inner.handle(nowMs, 'stdout', undefined, input.bytes));
        return;
      default:
        call(() => inner.handle(nowMs, input.type));
    }
  }

  /** The next output, or `null`. */
  pollOutput(): SubprocessOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : (JSON.parse(out) as SubprocessOutput);
  }

  /** The absolute deadline for the next `timeout` input, or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** Whether a turn is running. */
  get inTurn(): boolean {
    return call(() => this.#inner.inTurn());
  }

  /** Whether the session is closed. */
  get isClosed(): boolean {
    return call(() => this.#inner.isClosed());
  }

  /** The lifecycle state's name. */
  get lifecycle(): string {
    return call(() => this.#inner.lifecycle());
  }
}
