import type { NativeSubprocessSession } from '../native';
import { call, jsonText, parsed, translate } from './internal';
import { native } from './native';

/** The five components of a usage split (`stapel-taskspecs` UsageSplit), closed. */
export interface UsageSplit {
  fresh_input: number;
  output: number;
  cache_read: number;
  cache_write: number;
  thinking: number;
}

/**
 * The role an adapter plays and the model↔harness pairing it runs: the core's JSON form of
 * a role spec built from a `task.assign` invocation (`role`, the invocation's fields in
 * seed order with absent optional ones omitted, then the invocation keys seed 000 does not
 * name, in arrival order).
 */
export interface RoleSpec {
  /** The role (default `coder`). */
  role: string;
  /** Harness backend. */
  backend?: string;
  /** Model identifier. */
  model?: string;
  /** Session policy (default `per-task`). */
  session: string;
  /** Reference to the system prompt (never the prompt itself). */
  system_prompt_ref?: string;
  /** Tools the harness may use. */
  allowed_tools: string[];
  /** Base URL of the LLM gateway. */
  llm_base_url?: string;
  /** Budget, any JSON value (kept as given). */
  budget?: unknown;
  /** Invocation keys seed 000 does not name. */
  [extra: string]: unknown;
}

/** A turn's result: the final text and its usage (exactly these two keys). */
export interface TurnResult {
  text: string;
  usage: UsageSplit;
}

/** The agent SDK options of a role spec (the core's JSON form; absent keys omitted). */
export interface AgentOptions {
  model?: string;
  allowed_tools?: string[];
  system_prompt?: string;
  env?: Record<string, string>;
  max_turns?: unknown;
  max_budget_usd?: unknown;
  [key: string]: unknown;
}

/** The role spec of an invocation (`role` overrides the invocation's). */
export function roleSpecFromInvocation(invocation: Record<string, unknown>, role?: string | null): RoleSpec {
  const t = jsonText(invocation, 'the invocation');
  return parsed<RoleSpec>(call(() => native.roleSpecFromInvocation(t, role ?? undefined)));
}

/** The system prompt of the role spec of an invocation, or `null`. */
export function roleSpecSystemPrompt(invocation: Record<string, unknown>, role?: string | null): string | null {
  const t = jsonText(invocation, 'the invocation');
  return call(() => native.roleSpecSystemPrompt(t, role ?? undefined));
}

/** Options of {@link agentOptions}. */
export interface AgentOptionsInput {
  role?: string | null;
  /** Override the role spec's system prompt (`null`: none). */
  systemPrompt?: string | null;
}

/** The agent SDK options for the role spec of an invocation. */
export function agentOptions(invocation: Record<string, unknown>, options?: AgentOptionsInput): AgentOptions {
  const t = jsonText(invocation, 'the invocation');
  const override = options !== undefined && 'systemPrompt' in options;
  return parsed<AgentOptions>(
    call(() => native.agentOptions(t, options?.role ?? undefined, override, options?.systemPrompt ?? undefined)),
  );
}

/** Fold an agent turn's text blocks and final result (with its usage) into a TurnResult. */
export function agentTurn(textBlocks: string[], result?: { usage?: unknown } | null): TurnResult {
  const has = result !== undefined && result !== null;
  const usage = has && result.usage !== undefined && result.usage !== null ? jsonText(usageValue(result.usage, 'anthropic'), 'the usage') : undefined;
  return parsed<TurnResult>(call(() => native.agentTurn(textBlocks, has, usage)));
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
  const t = jsonText(usageValue(usage, shape), 'the usage');
  return parsed<MappedUsage>(call(() => native.usageFrom(shape, t, options?.thinking)));
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
  const t = jsonText(value, 'the turn result');
  return parsed<TurnResult>(call(() => native.turnResultFromValue(t)));
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
export const ADAPTER_DEFAULTS: Readonly<{ role: string; session: string; grace_ms: number; turn_max_line_bytes: number }> = Object.freeze(
  parsed<{ role: string; session: string; grace_ms: number; turn_max_line_bytes: number }>(native.adapterDefaults()),
);

/** How to start a harness process. */
export interface SpawnSpec {
  command: string[];
  path?: string;
  env?: Record<string, string>;
  llm_base_url?: string | null;
  cwd?: string | null;
}

/** What the host reports to a {@link SubprocessTurnMachine}. */
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

/** The spawn request of a {@link SubprocessTurnMachine}: the complete, cleared environment. */
export interface SpawnRequest {
  program: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
  new_process_group: boolean;
}

/** The JSON form of an adapter error (`code`, `line_number`, and `message` or `field`). */
export interface AdapterErrorValue {
  code: string;
  line_number: number | null;
  message?: string;
  field?: string;
}

/** What a {@link SubprocessTurnMachine} asks of its host, in order (`type` is the core's tag). */
export type SubprocessOutput =
  | { type: 'spawn'; request: SpawnRequest }
  | { type: 'write_stdin'; data: string }
  | { type: 'close_stdin' }
  | { type: 'signal'; target: 'process' | 'group'; signal: 'TERM' | 'KILL' }
  | { type: 'close_stdout' }
  | { type: 'progress'; event: Record<string, unknown> }
  | ({ type: 'turn_result' } & TurnResult)
  | ({ type: 'error' } & AdapterErrorValue);

/** Configuration of a {@link SubprocessTurnMachine}; absent keys take the core's defaults. */
export interface SubprocessConfig {
  /** Longest stdout line accepted (default {@link ADAPTER_DEFAULTS}`.turn_max_line_bytes`). */
  max_line_bytes?: number;
  /** Wait after closing stdin, and after each signal of the stop escalation (ms). */
  grace_ms?: number;
  /**
   * Whether the machine maps a result line's `usage` (default `true`). With `false` the
   * host maps it: the turn result's usage is zeros and {@link SubprocessTurnMachine.resultLine}
   * carries the line's `usage` (absent or any JSON value).
   */
  map_usage?: boolean;
}

/** Lifecycle states of a {@link SubprocessTurnMachine}. */
export type SubprocessLifecycle = 'new' | 'spawning' | 'idle' | 'in_turn' | 'closing' | 'closed';

/**
 * The subprocess JSONL turn machine (seed 000's subprocess protocol): the spawn request
 * and its cleared environment, one turn at a time, line framing with a bound, and the stop
 * escalation (close stdin, TERM, KILL, group KILL, with deadlines from
 * {@link pollTimeout}). The host performs its outputs and reports what happened.
 */
export class SubprocessTurnMachine {
  readonly #inner: NativeSubprocessSession;

  constructor(config?: SubprocessConfig) {
    const c = config === undefined ? undefined : jsonText(config, 'the subprocess config');
    this.#inner = call(() => new native.NativeSubprocessSession(c));
  }

  /** Feed one input at `nowMs`. */
  handleInput(nowMs: number, input: SubprocessInput): void {
    const inner = this.#inner;
    switch (input.type) {
      case 'open':
        call(() => inner.handle(nowMs, 'open', jsonText(input.spec, 'the spawn spec')));
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
    return out === null ? null : parsed<SubprocessOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): SubprocessOutput[] {
    return parsed<SubprocessOutput[]>(call(() => this.#inner.drainOutputs()));
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
  get lifecycle(): SubprocessLifecycle {
    return call(() => this.#inner.lifecycle()) as SubprocessLifecycle;
  }

  /**
   * The `result` line that ended the latest turn, as the object the child wrote (every
   * key: the raw answer), or `null` before the first result. A harness error leaves it;
   * the next result replaces it.
   */
  get resultLine(): Record<string, unknown> | null {
    const text = call(() => this.#inner.resultLine());
    return text === null ? null : parsed<Record<string, unknown>>(text);
  }
}
