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
export declare function roleSpecFromInvocation(invocation: Record<string, unknown>, role?: string | null): RoleSpec;
/** The system prompt of the role spec of an invocation, or `null`. */
export declare function roleSpecSystemPrompt(invocation: Record<string, unknown>, role?: string | null): string | null;
/** Options of {@link agentOptions}. */
export interface AgentOptionsInput {
    role?: string | null;
    /** Override the role spec's system prompt (`null`: none). */
    systemPrompt?: string | null;
}
/** The agent SDK options for the role spec of an invocation. */
export declare function agentOptions(invocation: Record<string, unknown>, options?: AgentOptionsInput): AgentOptions;
/** Fold an agent turn's text blocks and final result (with its usage) into a TurnResult. */
export declare function agentTurn(textBlocks: string[], result?: {
    usage?: unknown;
} | null): TurnResult;
/** A usage split and its total. */
export interface MappedUsage {
    usage: UsageSplit;
    total_tokens: number;
}
/** Map a provider usage value to a split and its total (`thinking`: anthropic only). */
export declare function mapUsage(shape: 'anthropic' | 'openai' | 'mapping', usage: unknown, options?: {
    thinking?: number;
}): MappedUsage;
/** The UsageSplit of an Anthropic usage object (`thinking` overrides thinking tokens). */
export declare function usageFromAnthropic(usage: unknown, options?: {
    thinking?: number;
}): UsageSplit;
/** The UsageSplit of an OpenAI usage object. */
export declare function usageFromOpenai(usage: unknown): UsageSplit;
/** The UsageSplit of a mapping that already has the split's keys. */
export declare function usageFromMapping(usage: unknown): UsageSplit;
/** Validate a turn result strictly. */
export declare function validateTurnResult(value: unknown): TurnResult;
/** The adapter error a host fault code stands for, or `null` when it is not a host fault. */
export declare function hostAdapterError(code: string, message: string): Error | null;
/** The adapter defaults of the core. */
export declare const ADAPTER_DEFAULTS: Readonly<{
    role: string;
    session: string;
    grace_ms: number;
    turn_max_line_bytes: number;
}>;
/** How to start a harness process. */
export interface SpawnSpec {
    command: string[];
    path?: string;
    env?: Record<string, string>;
    llm_base_url?: string | null;
    cwd?: string | null;
}
/** What the host reports to a {@link SubprocessTurnMachine}. */
export type SubprocessInput = {
    type: 'open';
    spec: SpawnSpec;
} | {
    type: 'spawned';
    pid?: number | null;
    process_group?: boolean;
} | {
    type: 'spawn_failed';
    message: string;
} | {
    type: 'stdin_write_failed';
    message: string;
} | {
    type: 'start_turn';
    prompt: string;
} | {
    type: 'stdout';
    bytes: Uint8Array;
} | {
    type: 'eof';
} | {
    type: 'exited';
} | {
    type: 'close';
} | {
    type: 'timeout';
};
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
export type SubprocessOutput = {
    type: 'spawn';
    request: SpawnRequest;
} | {
    type: 'write_stdin';
    data: string;
} | {
    type: 'close_stdin';
} | {
    type: 'signal';
    target: 'process' | 'group';
    signal: 'TERM' | 'KILL';
} | {
    type: 'close_stdout';
} | {
    type: 'progress';
    event: Record<string, unknown>;
} | ({
    type: 'turn_result';
} & TurnResult) | ({
    type: 'error';
} & AdapterErrorValue);
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
export declare class SubprocessTurnMachine {
    #private;
    constructor(config?: SubprocessConfig);
    /** Feed one input at `nowMs`. */
    handleInput(nowMs: number, input: SubprocessInput): void;
    /** The next output, or `null`. */
    pollOutput(): SubprocessOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): SubprocessOutput[];
    /** The absolute deadline for the next `timeout` input, or `null`. */
    pollTimeout(): number | null;
    /** Whether a turn is running. */
    get inTurn(): boolean;
    /** Whether the session is closed. */
    get isClosed(): boolean;
    /** The lifecycle state's name. */
    get lifecycle(): SubprocessLifecycle;
    /**
     * The `result` line that ended the latest turn, as the object the child wrote (every
     * key: the raw answer), or `null` before the first result. A harness error leaves it;
     * the next result replaces it.
     */
    get resultLine(): Record<string, unknown> | null;
}
