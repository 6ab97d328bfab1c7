/** A position in one stream; `attempt` is absent for hub→runner command streams. */
export interface Position {
    /** The stream's task. */
    task_id: string;
    /** The stream's attempt; absent for hub→runner command streams. */
    attempt?: number;
    /** The seq. */
    seq: number;
}
/** The kept frames of one stream to re-send, ascending by seq. */
export interface StreamReplay {
    /** The stream's task. */
    task_id: string;
    /** The stream's attempt; absent for hub→runner command streams. */
    attempt?: number;
    /** The encoded frames to re-send (compact JSON), ascending by seq. */
    frames: string[];
}
/** A stream whose declared position is older than the kept log. */
export interface Resync {
    /** The stream's task. */
    task_id: string;
    /** The stream's attempt; absent for hub→runner command streams. */
    attempt?: number;
    /** The position the peer declared. */
    declared: number;
    /** First missing seq (`declared + 1`). */
    missing_from: number;
    /** Last missing seq (first kept seq − 1). */
    missing_to: number;
}
/** What to re-send after a peer declared its positions. */
export interface ReplayReport {
    /** Per stream, the kept frames above the declared position, in task order. */
    streams: StreamReplay[];
    /** Streams whose declared position is older than the kept log. */
    resync: Resync[];
    /** Streams where the peer declared a position beyond anything emitted. */
    peer_ahead: Position[];
    /** Task ids the peer declared that this state does not know. */
    unknown: string[];
}
/**
 * The bounds of a `ConnectionState` (every key is present in `ConnectionState.config`; a
 * session's `sequencing=` may give some).
 */
export interface SequencingConfig {
    /** Out-of-order window per inbound stream. Default 1024. */
    inbound_window?: number;
    /** Most frames kept for replay per connection. Default 4096. */
    max_outbox_frames?: number;
    /** Most encoded bytes kept for replay per connection. Default 16 MiB. */
    max_outbox_bytes?: number;
    /** Most streams per direction. Default 10,000. */
    max_streams?: number;
    /** Most tombstones of forgotten tasks. Default 10,000. */
    max_tombstones?: number;
}
/** A session's `("peer_error", …)` event: the peer broke the protocol. */
export interface PeerError {
    /** Stable snake_case code of the violation. */
    code: string;
    /** Human-readable detail. */
    detail: string;
}
/**
 * The core's role spec as `role_spec_from_invocation` returns it to
 * `RoleSpec.from_invocation` (absent fields `None`; `extra` holds the invocation keys seed
 * 000 does not name).
 */
export interface RoleSpecDict {
    /** The role (default `coder`). */
    role: string;
    /** Harness backend. */
    backend: string | null;
    /** Model identifier. */
    model: string | null;
    /** Session policy (default `per-task`). */
    session: string;
    /** Reference to the system prompt (never the prompt itself). */
    system_prompt_ref: string | null;
    /** Tools the harness may use. */
    allowed_tools: string[];
    /** Base URL of the LLM gateway. */
    llm_base_url: string | null;
    /** Budget, any JSON value (kept as given). */
    budget: unknown;
    /** Invocation keys seed 000 does not name, in arrival order. */
    extra: Record<string, unknown>;
}
/** A rein's tool-event visibility. */
export type ToolEventVisibility = "complete" | "partial" | "unavailable";
/** The tools a profile allows. */
export interface ToolPolicy {
    /** Tool names the gateway will dispatch. */
    allowed_tools: string[];
}
/** A consumer's request (absent optional references are omitted on output). */
export interface ExecutionRequest {
    /** The harness profile to run under (required, explicit). */
    harness_profile_ref: string;
    /** Repository the work is about. */
    repository: string;
    /** Short title. Content: never copied into evidence. */
    title: string;
    /** Description of the work. Content: never copied into evidence. */
    description: string;
    /** Correlation reference to an assignment record. */
    assignment_ref?: string | null;
    /** Correlation reference to a role record. */
    role_ref?: string | null;
    /** Correlation reference to a duty record. */
    duty_ref?: string | null;
    /** Correlation references to goal records. */
    goal_refs?: string[];
    /** Correlation references to resource envelopes. */
    resource_envelope_refs?: string[];
}
/** A harness profile (every key present on output; `enabled` defaults to true). */
export interface HarnessProfile {
    /** The exact contract version the profile is written for. */
    contract_version: string;
    /** Identifier matched by `ExecutionRequest.harness_profile_ref`. */
    profile_id: string;
    /** Identifier of the rein that executes this profile. */
    rein: string;
    /** A disabled profile is refused. Default true. */
    enabled?: boolean;
    /** The approved model. */
    model: string;
    /** The sand-boxer template to provision. */
    sandbox_profile: string;
    tool_policy: ToolPolicy;
    /** Credential-route references (`scheme:name`), never values. */
    credential_refs?: string[];
    /** Rein- or provider-specific, non-secret additions (the only open object). */
    metadata?: Record<string, unknown>;
}
/** A rein's descriptor (every key present on output). */
export interface ReinDescriptor {
    /** Identifier a profile's `rein` refers to. */
    rein_id: string;
    /** The exact contract version the rein supports. */
    contract_version: string;
    tool_event_visibility?: ToolEventVisibility;
    /** Rein- or provider-specific, non-secret additions (the only open object). */
    metadata?: Record<string, unknown>;
}
/** What a sandboxer returns for a created sandbox. */
export interface SandboxHandle {
    /** Sandbox identifier. */
    sandbox_id: string;
    /** Rein- or provider-specific, non-secret additions (the only open object). */
    metadata?: Record<string, unknown>;
}
/** One tool call of a request. */
export interface ToolCall {
    /** Caller's correlation id for the call. */
    call_id?: string | null;
    /** Tool name; dispatched only when the profile's tool policy lists it. */
    name: string;
    /** Arguments (content: never copied into evidence). */
    arguments?: Record<string, unknown>;
}
/** A rein's result of one tool call (`ok: false` fails the execution stage). */
export interface ToolResult {
    /** The rein's own verdict. */
    ok: boolean;
    /** Tool output, any JSON. Direct-caller only. */
    output?: unknown;
    /** Tool error text. Direct-caller only. */
    error?: string | null;
    /** Rein- or provider-specific, non-secret additions (the only open object). */
    metadata?: Record<string, unknown>;
}
/** The closed five-component token split in JSON form. */
export interface UsageSplitDict {
    cache_read: number;
    cache_write: number;
    fresh_input: number;
    output: number;
    thinking: number;
}
/**
 * A rein's normalised facts at session end; unknown measurements are `None`.
 * `tool_event_count` must be present for `complete` and absent for `unavailable`
 * visibility.
 */
export interface ExecutionSummary {
    /** Token usage of the session. */
    tokens?: UsageSplitDict | null;
    /** The rein's own measurement of the session, in milliseconds. */
    duration_ms?: number | null;
    /** The model that actually served the session. */
    resolved_model?: string | null;
    /** The commit the session produced. */
    commit?: string | null;
    /** Artifact references the session produced. */
    artifacts?: string[] | null;
    tool_event_visibility?: ToolEventVisibility;
    /** Inner tool events counted. */
    tool_event_count?: number | null;
    /** Rein- or provider-specific, non-secret additions (the only open object). */
    metadata?: Record<string, unknown>;
}
/** Counts of the tool calls of one execution. */
export interface ToolCallCounts {
    /** Calls in the request. */
    requested: number;
    /** Calls handed to the rein. */
    dispatched: number;
    /** Dispatched calls whose result had `ok: true`. */
    succeeded: number;
    /** Dispatched calls whose result had `ok: false`. */
    unsuccessful: number;
    /** Dispatched calls the host reported as failed to dispatch. */
    dispatch_failed: number;
    /** Calls not dispatched because the tool policy does not list the tool. */
    denied: number;
    /**
     * Calls never reached because an earlier call (or an abort) ended the execution stage.
     */
    skipped: number;
    /** Dispatched calls whose outcome was never reported because the host aborted. */
    abandoned: number;
}
/** Compact, content-free evidence of one execution (every key always present). */
export interface ExecutionEvidence {
    /** The contract version (`1.0`). */
    contract_version: string;
    /** Normalized outcome. */
    outcome: "succeeded" | "refused" | "failed";
    /** The first stage that refused or failed; null on success. */
    failure_stage: "resolution" | "sandbox_create" | "session_start" | "execution" | "session_end" | "teardown" | null;
    /** Gateway-defined failure code; null on success. */
    failure_code: string | null;
    /** Refusal reason codes, or the host's abort code. */
    failure_reasons: string[];
    /** The request's profile reference. */
    harness_profile_ref: string;
    /** The resolved rein; null when resolution refused. */
    rein_id: string | null;
    /** The profile's approved model; null when resolution refused. */
    model: string | null;
    /** The request's repository. */
    repository: string;
    /** Correlation reference. */
    assignment_ref: string | null;
    /** Correlation reference. */
    role_ref: string | null;
    /** Correlation reference. */
    duty_ref: string | null;
    /** Correlation references. */
    goal_refs: string[];
    /** Correlation references. */
    resource_envelope_refs: string[];
    /** The sandbox's id; null when none was created. */
    sandbox_id: string | null;
    /** What happened to the rein's session end. */
    session_end: "not_attempted" | "ended" | "failed" | "abandoned";
    /** What happened to the sandbox. */
    teardown: "not_needed" | "destroyed" | "failed" | "abandoned";
    tool_calls: ToolCallCounts;
    /** Names of the dispatched tools, first use order, unique. */
    tools_used: string[];
    /** Gateway-measured duration from `execute` to the result. */
    duration_ms: number;
    /** The rein's own session duration; null when unknown. */
    rein_duration_ms: number | null;
    /** Session tokens; null when unknown. */
    tokens: UsageSplitDict | null;
    /** The model that served the session; null when unknown. */
    resolved_model: string | null;
    /** The commit produced; null when unknown. */
    commit: string | null;
    /** Artifact references; null when unknown. */
    artifacts: string[] | null;
    /**
     * The summary's claim, capped at what the rein descriptor declares; `unavailable` when no
     * summary was received.
     */
    tool_event_visibility: ToolEventVisibility;
    /**
     * Inner tool events counted (null when visibility is `unavailable`; never null when
     * `complete`).
     */
    tool_event_count: number | null;
    /** Names of the evidence fields whose value was redacted or stripped. */
    redacted_fields: string[];
}
/** The JSON form of a gateway result (see `contract.GatewayResult`). */
export interface GatewayResultDict {
    /** Derived from the normalized outcome: true exactly when it is `succeeded`. */
    ok: boolean;
    /** Compact, content-free evidence; the only part fit for the State Hub. */
    evidence: ExecutionEvidence;
    /**
     * Output of the last dispatched tool call whose result was reported; null when it was
     * denied, failed to dispatch or was abandoned. Direct caller only; never reported.
     */
    tool_output: unknown;
    /**
     * Error text of that tool call, else the message of the first `*_failed` report that
     * carried one. Direct caller only; never reported.
     */
    tool_error: string | null;
}
/** Profiles and rein descriptors to resolve against. */
export interface Catalog {
    profiles?: HarnessProfile[];
    reins?: ReinDescriptor[];
}
/** `parse_catalog`'s answer. */
export interface CatalogCounts {
    profiles: number;
    reins: number;
}
/** A resolved profile and its rein. */
export interface Resolution {
    profile: HarnessProfile;
    rein: ReinDescriptor;
}
/** Gateway input: run one request. */
export interface ExecuteInput {
    type: "execute";
    request: ExecutionRequest;
    /** Rein inputs (string → string). */
    inputs?: Record<string, string>;
    tool_calls?: ToolCall[];
}
/** Gateway input: the answer to `create_sandbox`. */
export interface SandboxCreatedInput {
    type: "sandbox_created";
    sandbox: SandboxHandle;
}
/** Gateway input: the answer to `start_session`. */
export interface SessionStartedInput {
    type: "session_started";
    /** The rein's session handle (string → string). */
    session: Record<string, string>;
}
/** Gateway input: the answer to `dispatch_tool`. */
export interface ToolDispatchedInput {
    type: "tool_dispatched";
    result: ToolResult;
}
/** Gateway input: the answer to `end_session`. */
export interface SessionEndedInput {
    type: "session_ended";
    summary: ExecutionSummary;
}
/**
 * Gateway input: the outstanding action failed (`message` goes to the direct caller only,
 * never into evidence).
 */
export interface StageFailedInput {
    type: "sandbox_create_failed" | "session_start_failed" | "tool_dispatch_failed" | "session_end_failed" | "sandbox_destroy_failed";
    message?: string | null;
}
/** Gateway input: the answer to `destroy_sandbox`. */
export interface SandboxDestroyedInput {
    type: "sandbox_destroyed";
}
/** Gateway input: the host gives up on the outstanding action. */
export interface AbortInput {
    type: "abort";
    /** The host's abort code. */
    code: string;
}
/**
 * Gateway input: the callback for the outstanding action returned ``value`` (the core
 * validates it as that action's answer; an invalid one fails the stage).
 */
export interface AnswerInput {
    type: "answer";
    /** The callback's return value, any JSON. */
    value?: unknown;
}
/** Gateway input: the callback's return value could not be turned into JSON. */
export interface AnswerInvalidInput {
    type: "answer_invalid";
    /** Why the value is not JSON. */
    message?: string | null;
}
/** Gateway input: the callback for the outstanding action raised. */
export interface ActionFailedInput {
    type: "action_failed";
    /** The exception's message. */
    message?: string | null;
}
/** Any input of the gateway machine. */
export type GatewayInput = ExecuteInput | SandboxCreatedInput | SessionStartedInput | ToolDispatchedInput | SessionEndedInput | StageFailedInput | SandboxDestroyedInput | AbortInput | AnswerInput | AnswerInvalidInput | ActionFailedInput;
/** Gateway action: create a sandbox. */
export interface CreateSandboxAction {
    type: "create_sandbox";
    harness_profile_ref: string;
    sandbox_profile: string;
    repository: string;
}
/** Gateway action: start the rein's session. */
export interface StartSessionAction {
    type: "start_session";
    profile: HarnessProfile;
    inputs: Record<string, string>;
    sandbox: SandboxHandle;
}
/** Gateway action: dispatch one tool call. */
export interface DispatchToolAction {
    type: "dispatch_tool";
    /** The rein's session handle (string → string). */
    session: Record<string, string>;
    call: ToolCall;
}
/** Gateway action: end the rein's session. */
export interface EndSessionAction {
    type: "end_session";
    /** The rein's session handle (string → string). */
    session: Record<string, string>;
}
/** Gateway action: destroy the sandbox. */
export interface DestroySandboxAction {
    type: "destroy_sandbox";
    sandbox: SandboxHandle;
}
/**
 * Gateway action: the sandboxer's answer was not a valid handle; pass whatever it returned
 * to ``destroy``, best effort.
 */
export interface DiscardSandboxAction {
    type: "discard_sandbox";
}
/** An action of the gateway machine for the host. */
export type GatewayAction = CreateSandboxAction | StartSessionAction | DispatchToolAction | EndSessionAction | DestroySandboxAction | DiscardSandboxAction;
/** The gateway machine's last output. */
export interface ResultOutput {
    type: "result";
    result: GatewayResultDict;
}
/** Any output of the gateway machine. */
export type GatewayOutput = CreateSandboxAction | StartSessionAction | DispatchToolAction | EndSessionAction | DestroySandboxAction | DiscardSandboxAction | ResultOutput;
/**
 * The local-run machine's configuration (unknown keys are an error; see
 * conformance/README.md for the defaults).
 */
export interface LocalConfig {
    /** `runId` of every event (1..=160 chars). Default `run_local`. */
    run_id?: string;
    /** `normalizedSessionId` of every event. Default `session_local`. */
    normalized_session_id?: string;
    /** `sourceInstanceId` of every event. Default `runner_local`. */
    source_instance_id?: string;
    /** Unix ms of the first event's `emittedAt`. */
    clock_start_ms?: number;
    /** Ms added to `emittedAt` per event. Default 1. */
    clock_step_ms?: number;
    /** Program in the spawn action. Default `fake-harness`. */
    harness_program?: string;
    /** Arguments in the spawn action. Default none. */
    harness_args?: string[];
    /** Candidate environment offered by the host (filtered by `env_allow`). */
    harness_env?: Record<string, string>;
    /** Names allowed into the harness environment. Default `["PATH"]`. */
    env_allow?: string[];
    /** `driverKind` of `harness.starting` / `harness.ready`. Default `fake`. */
    driver_kind?: string;
    /** Bound on one harness stdout or stderr line. Default 65,536. */
    max_line_bytes?: number;
    /** Bound on one controller line. Default 65,536. */
    max_controller_line_bytes?: number;
    /** Log-tail lines kept. Default 200. */
    log_max_lines?: number;
    /** Log-tail bytes kept. Default 16,384. */
    log_max_bytes?: number;
    /** Command-ledger entries kept. Default 1,024. */
    ledger_max_entries?: number;
    /** Command-ledger bytes kept. Default 1 MiB. */
    ledger_max_bytes?: number;
    /** Harness ready deadline after `run.prepare`. Default 2,000 ms. */
    ready_timeout_ms?: number;
    /** Grace between TERM and KILL of the harness group. Default 2,000 ms. */
    shutdown_grace_ms?: number;
    /** Lifetime of a pending runtime request. Default 300,000 ms. */
    request_timeout_ms?: number;
    /** Time the harness has to exit after its terminal proposal. Default 10,000 ms. */
    exit_timeout_ms?: number;
    /** Controller lines held while `run.prepare` waits for `ready`. Default 64. */
    max_queued_commands?: number;
    /** Pending runtime requests held. Default 64. */
    max_pending_requests?: number;
    /**
     * `workingDirectory` of the `workspace.ready` event; null: the `run.prepare` payload's,
     * else `.`.
     */
    working_directory?: string | null;
}
/**
 * `("spawn", …)`: start the harness (the environment is complete: start from an empty one).
 */
export interface SpawnAction {
    /** Program. */
    program: string;
    /** Arguments. */
    args: string[];
    /** The complete environment as `[name, value]` pairs, sorted by name. */
    env: [string, string][];
    /** Always true: start the child in a new process group. */
    new_process_group: boolean;
}
/** `("signal", …)`: signal the harness's process group. */
export interface SignalAction {
    /** The process group id. */
    group: number;
    signal: "TERM" | "KILL";
}
/** The reducer's configuration (unknown keys are an error). */
export interface ReducerConfig {
    /** The run this reducer is bound to. Default `run_local`. */
    run_id?: string;
    /** The session this reducer is bound to; null binds to the first event's. */
    normalized_session_id?: string | null;
    /** Turns kept. Default 256. */
    max_turns?: number;
    /** Items kept. Default 4,096. */
    max_items?: number;
    /** Deltas kept per item. Default 4,096. */
    max_deltas_per_item?: number;
    /** Requests kept (pending plus answered). Default 1,024. */
    max_requests?: number;
    /** Diagnostics kept. Default 256. */
    max_diagnostics?: number;
    /** Gaps kept. Default 256. */
    max_gaps?: number;
    /** Out-of-order deliveries kept in the delivery report. Default 256. */
    max_out_of_order_records?: number;
    /** `sourceEventId`s remembered for duplicate detection. Default 65,536. */
    max_tracked_event_ids?: number;
}
/**
 * A canonical `paperclip.prp.event.v1` event (other optional keys, e.g. `observedAt` and
 * `debug`, are kept by the core).
 */
export interface CanonicalEvent {
    /** The schema id, `paperclip.prp.event.v1`. */
    schema: string;
    /** Always 1. */
    schemaVersion: number;
    sourceEventId: string;
    /** ≥ 1. */
    sourceSeq: number;
    sourceInstanceId: string;
    sourceKind: "runner" | "control_plane";
    runId: string;
    eventType: string;
    /** 0, 1 or 2. */
    priority: number;
    emittedAt: string;
    payload: Record<string, unknown>;
    normalizedSessionId?: string | null;
    turnId?: string | null;
    itemId?: string | null;
    observedAt?: string;
    debug?: unknown;
    [key: string]: unknown;
}
/** What `SessionReducer.apply` did with an accepted event. */
export type ReduceOutcome = "applied" | "applied_after_gap" | "duplicate" | "out_of_order";
/** The last applied `sourceSeq` of one source. */
export interface ReducerCursor {
    sourceKind: string;
    sourceInstanceId: string;
    lastSourceSeq: number;
}
/** A forward gap in one source. */
export interface ReducerGap {
    sourceKind: string;
    sourceInstanceId: string;
    expectedSourceSeq: number;
    receivedSourceSeq: number;
}
/** The run in a snapshot. */
export interface RunView {
    /** `idle`, `active` or the run's terminal state. */
    state: string;
    phase: string | null;
    workspaceReady: boolean;
    /** The proposed result, or null. */
    result: unknown;
}
/** The session in a snapshot. */
export interface SessionView {
    /** `not_started` or the suffix of the last `session.*` event. */
    state: string;
    driverSessionId: string | null;
}
/** One turn in a snapshot. */
export interface ReducerTurn {
    turnId: string | null;
    /** The suffix of the last `turn.*` event. */
    state: string;
    text: string | null;
    reason: string | null;
}
/** One item in a snapshot. */
export interface ReducerItem {
    itemId: string;
    turnId: string | null;
    kind: string | null;
    /** `started`, `streaming`, `completed` or `failed`. */
    state: string;
    text: string | null;
    message: string | null;
    /** The `item.delta` payloads kept. */
    deltas: unknown[];
    /** Deltas beyond `max_deltas_per_item`. */
    droppedDeltas: number;
}
/** A runtime (permission / input) request in a snapshot. */
export interface ReducerRequest {
    requestId: string;
    /** `pending`, `resolved`, `expired` or `cancelled`. */
    status: string;
    type: string | null;
    prompt: string | null;
    /** The answer; null while pending. */
    response: unknown;
    request: unknown;
}
/** What the bounds dropped. */
export interface ReducerLimits {
    droppedTurns: number;
    droppedItems: number;
    droppedRequests: number;
    droppedDiagnostics: number;
    droppedGaps: number;
}
/** The reducer's snapshot of one run and its session (every key always present). */
export interface ReducerSnapshot {
    /** The bound run. */
    runId: string;
    /** The bound session; null until bound. */
    normalizedSessionId: string | null;
    /** Events applied. */
    appliedEvents: number;
    /** Applied events per `eventType` (keys sorted). */
    eventCounts: Record<string, number>;
    cursors: ReducerCursor[];
    gaps: ReducerGap[];
    run: RunView;
    /**
     * `state` (`not_started`, `starting`, `ready`, `exited`), `driverKind`, `driverVersion`,
     * `transport`, `processExit`, `semanticResultObserved`.
     */
    harness: Record<string, unknown>;
    session: SessionView;
    turns: ReducerTurn[];
    items: ReducerItem[];
    pendingRequests: ReducerRequest[];
    answeredRequests: ReducerRequest[];
    /** The `harness.exited` payload's `logs`, or null. */
    logs: unknown;
    /** `{eventType, code, message}` per diagnostic event. */
    diagnostics: Record<string, unknown>[];
    /** The `run.terminal` payload, or null. */
    terminal: unknown;
    limits: ReducerLimits;
}
/** One out-of-order delivery. */
export interface OutOfOrderRecord {
    sourceEventId: string;
    sourceSeq: number;
    cursor: number;
}
/** Delivery anomalies (they do not affect the snapshot). */
export interface DeliveryReport {
    duplicates: number;
    outOfOrderCount: number;
    outOfOrder: OutOfOrderRecord[];
    rejected: number;
}
