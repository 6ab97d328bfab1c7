import type { AbortInput, ActionFailedInput, AnswerInput, AnswerInvalidInput, Catalog, CatalogCounts, CreateSandboxAction, DestroySandboxAction, DiscardSandboxAction, DispatchToolAction, EndSessionAction, ExecuteInput, ExecutionEvidence, ExecutionRequest, ExecutionSummary, GatewayAction, GatewayInput, GatewayOutput, GatewayResultDict, HarnessProfile, ReinDescriptor, Resolution, ResultOutput, RoleSpecDict, SandboxCreatedInput, SandboxDestroyedInput, SandboxHandle, SessionEndedInput, SessionStartedInput, StageFailedInput, StartSessionAction, ToolCall, ToolCallCounts, ToolDispatchedInput, ToolEventVisibility, ToolPolicy, ToolResult, UsageSplitDict } from './api-types';
import type { UsageSplit } from './adapter';
import type { HarnessAdapter } from './subprocess-adapter';
export type { AbortInput, ActionFailedInput, AnswerInput, AnswerInvalidInput, Catalog, CatalogCounts, CreateSandboxAction, DestroySandboxAction, DiscardSandboxAction, DispatchToolAction, EndSessionAction, ExecuteInput, ExecutionEvidence, ExecutionRequest, ExecutionSummary, GatewayAction, GatewayInput, GatewayOutput, GatewayResultDict, HarnessProfile, ReinDescriptor, Resolution, ResultOutput, RoleSpecDict, SandboxCreatedInput, SandboxDestroyedInput, SandboxHandle, SessionEndedInput, SessionStartedInput, StageFailedInput, StartSessionAction, ToolCall, ToolCallCounts, ToolDispatchedInput, ToolEventVisibility, ToolPolicy, ToolResult, UsageSplitDict, };
/** The contract-1.0 models by name, and the shape of their canonical JSON form. */
export interface ContractModels {
    ExecutionRequest: ExecutionRequest;
    HarnessProfile: HarnessProfile;
    ReinDescriptor: ReinDescriptor;
    SandboxHandle: SandboxHandle;
    ToolCall: ToolCall;
    ToolResult: ToolResult;
    ExecutionSummary: ExecutionSummary;
    ExecutionEvidence: ExecutionEvidence;
    GatewayResult: GatewayResultDict;
}
/** Parse `value` strictly as the contract-1.0 model `name`; the normalized value. */
export declare function parseModel<N extends keyof ContractModels>(name: N, value: unknown): ContractModels[N];
export declare function parseModel(name: string, value: unknown): Record<string, unknown>;
/** The names of the contract-1.0 models. */
export declare function contractModelNames(): (keyof ContractModels)[];
/** Parse a catalog of harness profiles and reins; how many of each it holds. */
export declare function parseCatalog(catalog: Catalog): CatalogCounts;
/** Resolve a harness profile reference; throws {@link ResolutionRefused} with the reasons. */
export declare function resolveProfile(profileRef: string, catalog: Catalog): Resolution;
/** Identifier kinds with their own redaction rules (absent: the generic rules). */
export type IdentifierKind = string;
/** An identifier made safe for evidence, and whether anything was redacted. */
export declare function safeIdentifier(value: string, kind?: IdentifierKind): {
    text: string;
    redacted: boolean;
};
/** Whether a string looks like a credential. */
export declare function looksLikeCredential(value: string): boolean;
/** Whether a key names sensitive data. */
export declare function isSensitiveKey(key: string): boolean;
/** Whether a string is a credential reference (not a credential itself). */
export declare function isCredentialReference(value: string): boolean;
/** The role spec a rein runs a harness profile with (the core's JSON form). */
export interface ReinRoleSpec {
    role: string;
    model?: string;
    session: string;
    allowed_tools: string[];
    [key: string]: unknown;
}
/** The rein helpers of contract 1.0 (the core's rules of the reference rein). */
export declare const rein: Readonly<{
    /** The role spec a harness profile runs with. */
    roleSpec(profile: HarnessProfile): ReinRoleSpec;
    /** The session map of turn `n` in a sandbox. */
    sessionMap(n: number, sandbox: SandboxHandle): Record<string, string>;
    /** The initial prompt from a rein's inputs, or `null`. */
    initialPrompt(inputs: Record<string, string>): string | null;
    /** The tool result of a harness's final text. */
    toolResult(text: string): ToolResult;
    /** The tool result of a turn error, or `null` when a tool result does not report it. */
    toolResultFromTurnError(code: string, message: string): ToolResult | null;
}>;
/** Gateway configuration: the catalog, and optional bounds (absent: the core's defaults). */
export interface GatewayConfig {
    catalog: Catalog;
    /** Most tool calls one `execute` may carry (default 256). */
    max_tool_calls?: number;
    /** Most entries evidence keeps of each ref list (default 64). */
    max_evidence_refs?: number;
    /** Most entries evidence keeps of the summary's artifacts (default 64). */
    max_evidence_artifacts?: number;
}
/** Lifecycle stages of a {@link GatewayMachine}. */
export type GatewayStage = string;
/**
 * The contract-1.0 gateway lifecycle machine: `execute` in, then the actions (create the
 * sandbox, start the session, dispatch each tool call, end the session, destroy the
 * sandbox) whose outcomes the host reports back, then one `result` with its evidence.
 */
export declare class GatewayMachine {
    #private;
    constructor(config: GatewayConfig);
    /** Feed one input at `nowMs`. */
    handleInput(nowMs: number, input: GatewayInput): void;
    /** The next output, or `null`. */
    pollOutput(): GatewayOutput | null;
    /** Every pending output, in order. */
    drainOutputs(): GatewayOutput[];
    /** The absolute deadline for the next timeout, or `null`. */
    pollTimeout(): number | null;
    /** Whether the lifecycle is over. */
    get isFinished(): boolean;
    /** The lifecycle stage's name. */
    get stage(): GatewayStage;
}
/** One rein session: tool-call prompts, turn usage, the execution summary. */
export declare class ReinSession {
    #private;
    constructor(profile: HarnessProfile, nowMs: number);
    /** The prompt of a tool call. */
    toolCallPrompt(toolCall: ToolCall): string;
    /** Record a turn's usage split. */
    recordTurn(usage: UsageSplit): void;
    /** Tool calls so far. */
    get toolCalls(): number;
    /** The summed usage. */
    usage(): UsageSplitDict;
    /** The execution summary at `nowMs`. */
    summary(nowMs: number): ExecutionSummary;
}
/** Opens numbered sessions (`s-1`, `s-2`, …) per rein. */
export declare class SessionIds {
    #private;
    constructor();
    /** Open the next session of a sandbox; its session map. */
    open(sandbox: SandboxHandle): Record<string, string>;
    /** The number the next session gets. */
    get nextNumber(): number;
}
/** A value or a promise of it. */
export type Awaitable<T> = T | Promise<T>;
/** A concrete harness backend that owns its inner agentic loop (seed 001's rein). */
export interface Rein {
    /** Set up a session in `sandbox`; the session (string map). */
    startSession(profile: HarnessProfile, inputs: Record<string, string>, sandbox: SandboxHandle): Awaitable<Record<string, string>>;
    /** Run one tool call. */
    dispatchTool(session: Record<string, string>, toolCall: ToolCall): Awaitable<ToolResult>;
    /** End the session; its normalised facts. */
    endSession(session: Record<string, string>): Awaitable<ExecutionSummary>;
}
/** Environment provisioning. */
export interface Sandboxer {
    /** Create a sandbox; its handle. */
    create(harnessProfileRef: string, sandboxProfile: string, repository: string): Awaitable<SandboxHandle>;
    /** Destroy the sandbox. */
    destroy(sandbox: SandboxHandle): Awaitable<void>;
}
/** What {@link Gateway.execute} resolves to (seed 001's `GatewayResult`). */
export interface GatewayResult extends GatewayResultDict {
}
/** Options of a {@link Gateway}. */
export interface GatewayOptions extends Omit<GatewayConfig, 'catalog'> {
    /** The reins by `rein_id`. */
    reins: Record<string, Rein>;
    /** The sandboxer. */
    sandboxer: Sandboxer;
    /** Monotonic milliseconds (default `performance.now()`). */
    clock?: () => number;
}
/**
 * Executes requests through the core's {@link GatewayMachine} with the given reins (by
 * `rein_id`) and sandboxer. This class only performs the machine's actions — it calls the
 * rein or sandboxer the action names (awaiting what they return) and reports back what
 * happened; every decision is the core's. A rein or sandboxer that throws, or returns a
 * model the core rejects, fails that stage; its message goes to the direct caller only
 * (`tool_error`), never into evidence. Once a sandbox exists its teardown is attempted on
 * every path.
 */
export declare class Gateway {
    #private;
    constructor(catalog: Catalog, options: GatewayOptions);
    /** Run one `ExecutionRequest`; an invalid request throws {@link ContractError}. */
    execute(request: ExecutionRequest, options?: {
        inputs?: Record<string, string>;
        toolCalls?: readonly ToolCall[];
    }): Promise<GatewayResult>;
}
/** Options of a {@link SubprocessRein}. */
export interface SubprocessReinOptions {
    /** The harness command (the rein makes a {@link SubprocessAdapter} of it), or ... */
    command?: readonly string[];
    /** ... the adapter that opens its harness sessions. */
    adapter?: HarnessAdapter;
    /** Variables added to the child's cleared environment (with `command`). */
    env?: Record<string, string>;
    /** Monotonic milliseconds (default `performance.now()`). */
    clock?: () => number;
}
/**
 * The reference rein: one JSONL harness child per session (seed 000's subprocess
 * protocol), whose rules are the core's ({@link ReinSession}, {@link rein},
 * {@link SessionIds}): `startSession` opens a harness session with the profile's role
 * spec and runs the initial prompt if the inputs have one; `dispatchTool` runs one turn
 * per tool call; `endSession` closes the child and reports the summed usage.
 */
export declare class SubprocessRein implements Rein {
    #private;
    constructor(options: SubprocessReinOptions);
    startSession(profile: HarnessProfile, inputs: Record<string, string>, sandbox: SandboxHandle): Promise<Record<string, string>>;
    dispatchTool(session: Record<string, string>, toolCall: ToolCall): Promise<ToolResult>;
    endSession(session: Record<string, string>): Promise<ExecutionSummary>;
    /** Close every open session's child (idempotent). */
    close(): Promise<void>;
}
