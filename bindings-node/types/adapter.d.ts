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
export declare function agentOptions(invocation: Record<string, unknown>, options?: AgentOptionsInput): Record<string, unknown>;
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
export declare const ADAPTER_DEFAULTS: {
    role: string;
    session: string;
    grace_ms: number;
    turn_max_line_bytes: number;
};
/** How to start a harness process. */
export interface SpawnSpec {
    command: string[];
    path?: string;
    env?: Record<string, string>;
    llm_base_url?: string | null;
    cwd?: string | null;
}
/** What the host reports to a {@link SubprocessSession}. */
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
/** What a {@link SubprocessSession} asks of its host (`type` is the core's tag). */
export type SubprocessOutput = {
    type: string;
    [key: string]: unknown;
};
/** The subprocess JSONL turn machine: one harness process, one turn at a time. */
export declare class SubprocessSession {
    #private;
    constructor(config?: {
        max_line_bytes?: number;
        grace_ms?: number;
    });
    /** Feed one input at `nowMs`. */
    handleInput(nowMs: number, input: SubprocessInput): void;
    /** The next output, or `null`. */
    pollOutput(): SubprocessOutput | null;
    /** The absolute deadline for the next `timeout` input, or `null`. */
    pollTimeout(): number | null;
    /** Whether a turn is running. */
    get inTurn(): boolean;
    /** Whether the session is closed. */
    get isClosed(): boolean;
    /** The lifecycle state's name. */
    get lifecycle(): string;
}
