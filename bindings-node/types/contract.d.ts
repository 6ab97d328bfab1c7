/** A JSON object of the contract-1.0 models (wire field names). */
export type ContractValue = Record<string, unknown>;
/** Parse `value` strictly as the contract-1.0 model `name`; the normalized value. */
export declare function parseModel(name: string, value: unknown): ContractValue;
/** The names of the contract-1.0 models. */
export declare function contractModelNames(): string[];
/** Parse a catalog of harness profiles and reins; how many of each it holds. */
export declare function parseCatalog(catalog: unknown): {
    profiles: number;
    reins: number;
};
/** The profile and rein a harness profile reference resolves to. */
export interface Resolved {
    profile: ContractValue;
    rein: ContractValue;
}
/** Resolve a harness profile reference; throws {@link ResolutionRefused} with the reasons. */
export declare function resolveProfile(profileRef: string, catalog: unknown): Resolved;
/** An identifier made safe for evidence, and whether anything was redacted. */
export declare function safeIdentifier(value: string, kind?: string): {
    text: string;
    redacted: boolean;
};
/** Whether a string looks like a credential. */
export declare function looksLikeCredential(value: string): boolean;
/** Whether a key names sensitive data. */
export declare function isSensitiveKey(key: string): boolean;
/** Whether a string is a credential reference (not a credential itself). */
export declare function isCredentialReference(value: string): boolean;
/** The rein helpers of contract 1.0. */
export declare const rein: {
    /** The role spec a harness profile runs with. */
    roleSpec(profile: unknown): ContractValue;
    /** The session map of turn `n` in a sandbox. */
    sessionMap(n: number, sandbox: unknown): Record<string, string>;
    /** The initial prompt from a rein's inputs, or `null`. */
    initialPrompt(inputs: Record<string, string>): string | null;
    /** The tool result of a harness's final text. */
    toolResult(text: string): ContractValue;
    /** The tool result of a turn error, or `null` when a tool result does not report it. */
    toolResultFromTurnError(code: string, message: string): ContractValue | null;
};
/** Gateway configuration: the catalog, and optional bounds (absent: the core's defaults). */
export interface GatewayConfig {
    catalog: unknown;
    max_tool_calls?: number;
    max_evidence_refs?: number;
    max_evidence_artifacts?: number;
}
/** The contract-1.0 gateway lifecycle machine: `handleInput` / `pollOutput`. */
export declare class Gateway {
    #private;
    constructor(config: GatewayConfig);
    /** Feed one gateway input (`{type, ...}` in the core's form) at `nowMs`. */
    handleInput(nowMs: number, input: ContractValue): void;
    /** The next output (`{type, ...}`), or `null`. */
    pollOutput(): ContractValue | null;
    /** The absolute deadline for the next timeout, or `null`. */
    pollTimeout(): number | null;
    /** Whether the lifecycle is over. */
    get isFinished(): boolean;
    /** The lifecycle stage's name. */
    get stage(): string;
}
/** One rein session: tool-call prompts, turn usage, the execution summary. */
export declare class ReinSession {
    #private;
    constructor(profile: unknown, nowMs: number);
    /** The prompt of a tool call. */
    toolCallPrompt(toolCall: unknown): string;
    /** Record a turn's usage split. */
    recordTurn(usage: unknown): void;
    /** Tool calls so far. */
    get toolCalls(): number;
    /** The summed usage. */
    usage(): Record<string, number>;
    /** The execution summary at `nowMs`. */
    summary(nowMs: number): ContractValue;
}
/** Opens numbered sessions per sandbox. */
export declare class SessionIds {
    #private;
    constructor();
    /** Open the next session of a sandbox; its session map. */
    open(sandbox: unknown): Record<string, string>;
}
