import type { NativeGateway, NativeReinSession, NativeSessionIds } from '../native';
import type {
  AbortInput,
  ActionFailedInput,
  AnswerInput,
  AnswerInvalidInput,
  Catalog,
  CatalogCounts,
  CreateSandboxAction,
  DestroySandboxAction,
  DiscardSandboxAction,
  DispatchToolAction,
  EndSessionAction,
  ExecuteInput,
  ExecutionEvidence,
  ExecutionRequest,
  ExecutionSummary,
  GatewayAction,
  GatewayInput,
  GatewayOutput,
  GatewayResultDict,
  HarnessProfile,
  ReinDescriptor,
  Resolution,
  ResultOutput,
  RoleSpecDict,
  SandboxCreatedInput,
  SandboxDestroyedInput,
  SandboxHandle,
  SessionEndedInput,
  SessionStartedInput,
  StageFailedInput,
  StartSessionAction,
  ToolCall,
  ToolCallCounts,
  ToolDispatchedInput,
  ToolEventVisibility,
  ToolPolicy,
  ToolResult,
  UsageSplitDict,
} from './api-types';
import type { UsageSplit } from './adapter';
import { AdapterError } from './errors';
import { call, jsonText, parsed } from './internal';
import { native } from './native';
import type { HarnessAdapter, Session } from './subprocess-adapter';
import { SubprocessAdapter } from './subprocess-adapter';

export type {
  AbortInput,
  ActionFailedInput,
  AnswerInput,
  AnswerInvalidInput,
  Catalog,
  CatalogCounts,
  CreateSandboxAction,
  DestroySandboxAction,
  DiscardSandboxAction,
  DispatchToolAction,
  EndSessionAction,
  ExecuteInput,
  ExecutionEvidence,
  ExecutionRequest,
  ExecutionSummary,
  GatewayAction,
  GatewayInput,
  GatewayOutput,
  GatewayResultDict,
  HarnessProfile,
  ReinDescriptor,
  Resolution,
  ResultOutput,
  RoleSpecDict,
  SandboxCreatedInput,
  SandboxDestroyedInput,
  SandboxHandle,
  SessionEndedInput,
  SessionStartedInput,
  StageFailedInput,
  StartSessionAction,
  ToolCall,
  ToolCallCounts,
  ToolDispatchedInput,
  ToolEventVisibility,
  ToolPolicy,
  ToolResult,
  UsageSplitDict,
};

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
export function parseModel<N extends keyof ContractModels>(name: N, value: unknown): ContractModels[N];
export function parseModel(name: string, value: unknown): Record<string, unknown>;
export function parseModel(name: string, value: unknown): unknown {
  const t = jsonText(value, 'the model');
  return parsed<unknown>(call(() => native.contractParseModel(name, t)));
}

/** The names of the contract-1.0 models. */
export function contractModelNames(): (keyof ContractModels)[] {
  return call(() => native.contractModelNames()) as (keyof ContractModels)[];
}

/** Parse a catalog of harness profiles and reins; how many of each it holds. */
export function parseCatalog(catalog: Catalog): CatalogCounts {
  const t = jsonText(catalog, 'the catalog');
  return parsed<CatalogCounts>(call(() => native.contractParseCatalog(t)));
}

/** Resolve a harness profile reference; throws {@link ResolutionRefused} with the reasons. */
export function resolveProfile(profileRef: string, catalog: Catalog): Resolution {
  const t = jsonText(catalog, 'the catalog');
  return parsed<Resolution>(call(() => native.contractResolve(profileRef, t)));
}

/** Identifier kinds with their own redaction rules (absent: the generic rules). */
export type IdentifierKind = string;

/** An identifier made safe for evidence, and whether anything was redacted. */
export function safeIdentifier(value: string, kind?: IdentifierKind): { text: string; redacted: boolean } {
  return parsed<{ text: string; redacted: boolean }>(call(() => native.contractSafeIdentifier(value, kind)));
}

/** Whether a string looks like a credential. */
export function looksLikeCredential(value: string): boolean {
  return call(() => native.contractLooksLikeCredential(value));
}

/** Whether a key names sensitive data. */
export function isSensitiveKey(key: string): boolean {
  return call(() => native.contractIsSensitiveKey(key));
}

/** Whether a string is a credential reference (not a credential itself). */
export function isCredentialReference(value: string): boolean {
  return call(() => native.contractIsCredentialReference(value));
}

/** The role spec a rein runs a harness profile with (the core's JSON form). */
export interface ReinRoleSpec {
  role: string;
  model?: string;
  session: string;
  allowed_tools: string[];
  [key: string]: unknown;
}

/** The rein helpers of contract 1.0 (the core's rules of the reference rein). */
export const rein = Object.freeze({
  /** The role spec a harness profile runs with. */
  roleSpec(profile: HarnessProfile): ReinRoleSpec {
    return parsed<ReinRoleSpec>(call(() => native.reinRoleSpec(jsonText(profile, 'the profile'))));
  },
  /** The session map of turn `n` in a sandbox. */
  sessionMap(n: number, sandbox: SandboxHandle): Record<string, string> {
    return parsed<Record<string, string>>(call(() => native.reinSessionMap(n, jsonText(sandbox, 'the sandbox'))));
  },
  /** The initial prompt from a rein's inputs, or `null`. */
  initialPrompt(inputs: Record<string, string>): string | null {
    return call(() => native.reinInitialPrompt(jsonText(inputs, 'the inputs')));
  },
  /** The tool result of a harness's final text. */
  toolResult(text: string): ToolResult {
    return parsed<ToolResult>(call(() => native.reinToolResult(text)));
  },
  /** The tool result of a turn error, or `null` when a tool result does not report it. */
  toolResultFromTurnError(code: string, message: string): ToolResult | null {
    const out = call(() => native.reinToolResultFromTurnError(code, message));
    return out === null ? null : parsed<ToolResult>(out);
  },
});

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
export class GatewayMachine {
  readonly #inner: NativeGateway;

  constructor(config: GatewayConfig) {
    const t = jsonText(config, 'the gateway config');
    this.#inner = call(() => new native.NativeGateway(t));
  }

  /** Feed one input at `nowMs`. */
  handleInput(nowMs: number, input: GatewayInput): void {
    const t = jsonText(input, 'the input');
    call(() => this.#inner.handle(nowMs, t));
  }

  /** The next output, or `null`. */
  pollOutput(): GatewayOutput | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : parsed<GatewayOutput>(out);
  }

  /** Every pending output, in order. */
  drainOutputs(): GatewayOutput[] {
    return parsed<GatewayOutput[]>(call(() => this.#inner.drainOutputs()));
  }

  /** The absolute deadline for the next timeout, or `null`. */
  pollTimeout(): number | null {
    return call(() => this.#inner.pollTimeout());
  }

  /** Whether the lifecycle is over. */
  get isFinished(): boolean {
    return call(() => this.#inner.isFinished());
  }

  /** The lifecycle stage's name. */
  get stage(): GatewayStage {
    return call(() => this.#inner.stage());
  }
}

/** One rein session: tool-call prompts, turn usage, the execution summary. */
export class ReinSession {
  readonly #inner: NativeReinSession;

  constructor(profile: HarnessProfile, nowMs: number) {
    const t = jsonText(profile, 'the profile');
    this.#inner = call(() => new native.NativeReinSession(t, nowMs));
  }

  /** The prompt of a tool call. */
  toolCallPrompt(toolCall: ToolCall): string {
    return call(() => this.#inner.toolCallPrompt(jsonText(toolCall, 'the tool call')));
  }

  /** Record a turn's usage split. */
  recordTurn(usage: UsageSplit): void {
    const t = jsonText(usage, 'the usage');
    call(() => this.#inner.recordTurn(t));
  }

  /** Tool calls so far. */
  get toolCalls(): number {
    return call(() => this.#inner.toolCalls());
  }

  /** The summed usage. */
  usage(): UsageSplitDict {
    return parsed<UsageSplitDict>(call(() => this.#inner.usage()));
  }

  /** The execution summary at `nowMs`. */
  summary(nowMs: number): ExecutionSummary {
    return parsed<ExecutionSummary>(call(() => this.#inner.summary(nowMs)));
  }
}

/** Opens numbered sessions (`s-1`, `s-2`, …) per rein. */
export class SessionIds {
  readonly #inner: NativeSessionIds;

  constructor() {
    this.#inner = call(() => new native.NativeSessionIds());
  }

  /** Open the next session of a sandbox; its session map. */
  open(sandbox: SandboxHandle): Record<string, string> {
    return parsed<Record<string, string>>(call(() => this.#inner.open(jsonText(sandbox, 'the sandbox'))));
  }

  /** The number the next session gets. */
  get nextNumber(): number {
    return call(() => this.#inner.nextNumber());
  }
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
export interface GatewayResult extends GatewayResultDict {}

/** Options of a {@link Gateway}. */
export interface GatewayOptions extends Omit<GatewayConfig, 'catalog'> {
  /** The reins by `rein_id`. */
  reins: Record<string, Rein>;
  /** The sandboxer. */
  sandboxer: Sandboxer;
  /** Monotonic milliseconds (default `performance.now()`). */
  clock?: () => number;
}

function messageOf(e: unknown): string | null {
  const text = e instanceof Error ? e.message : String(e);
  return text.length > 0 ? text : null;
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
export class Gateway {
  readonly #catalog: Catalog;
  readonly #options: GatewayOptions;

  constructor(catalog: Catalog, options: GatewayOptions) {
    this.#catalog = catalog;
    this.#options = options;
  }

  #now(): number {
    return Math.floor(this.#options.clock?.() ?? performance.now());
  }

  /** Run one `ExecutionRequest`; an invalid request throws {@link ContractError}. */
  async execute(request: ExecutionRequest, options?: { inputs?: Record<string, string>; toolCalls?: readonly ToolCall[] }): Promise<GatewayResult> {
    const o = this.#options;
    const config: GatewayConfig = { catalog: this.#catalog };
    if (o.max_tool_calls !== undefined) config.max_tool_calls = o.max_tool_calls;
    if (o.max_evidence_refs !== undefined) config.max_evidence_refs = o.max_evidence_refs;
    if (o.max_evidence_artifacts !== undefined) config.max_evidence_artifacts = o.max_evidence_artifacts;
    const machine = new GatewayMachine(config);
    const execute: ExecuteInput = { type: 'execute', request, inputs: { ...(options?.inputs ?? {}) }, tool_calls: [...(options?.toolCalls ?? [])] };
    machine.handleInput(this.#now(), execute);
    let current: Rein | undefined;
    let created: unknown = null;
    for (;;) {
      const output = machine.pollOutput();
      if (output === null) throw new Error('the gateway machine stopped without a result');
      if (output.type === 'result') return parsed<GatewayResult>(JSON.stringify(output.result));
      let value: unknown;
      try {
        const action = output as GatewayAction;
        switch (action.type) {
          case 'create_sandbox':
            created = await o.sandboxer.create(action.harness_profile_ref, action.sandbox_profile, action.repository);
            value = created;
            break;
          case 'destroy_sandbox':
            await o.sandboxer.destroy(action.sandbox);
            value = null;
            break;
          case 'discard_sandbox':
            await o.sandboxer.destroy(created as SandboxHandle);
            value = null;
            break;
          case 'start_session':
            current = o.reins[action.profile.rein];
            if (current === undefined) throw new Error('no rein is registered for the resolved profile');
            value = await current.startSession(action.profile, action.inputs, action.sandbox);
            break;
          case 'dispatch_tool':
            if (current === undefined) throw new Error('no rein is registered for the resolved profile');
            value = await current.dispatchTool(action.session, action.call);
            break;
          case 'end_session':
            if (current === undefined) throw new Error('no rein is registered for the resolved profile');
            value = await current.endSession(action.session);
            break;
        }
      } catch (e) {
        const failed: ActionFailedInput = { type: 'action_failed', message: messageOf(e) };
        machine.handleInput(this.#now(), failed);
        continue;
      }
      const text = safeJson(value);
      if (text === undefined) {
        const invalid: AnswerInvalidInput = { type: 'answer_invalid', message: 'the answer is not a JSON value' };
        machine.handleInput(this.#now(), invalid);
      } else {
        const answer: AnswerInput = { type: 'answer', value: JSON.parse(text) as unknown };
        machine.handleInput(this.#now(), answer);
      }
    }
  }
}

/** JSON text of a value, or `undefined` for one JSON cannot carry (NaN, a cycle, a BigInt). */
function safeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value === undefined ? null : value, (_key, v: unknown) => {
      if (typeof v === 'number' && !Number.isFinite(v)) throw new TypeError('not a finite number');
      return v;
    }) as string | undefined;
  } catch {
    return undefined;
  }
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
export class SubprocessRein implements Rein {
  readonly #adapter: HarnessAdapter;
  readonly #clock: () => number;
  readonly #ids = new SessionIds();
  readonly #sessions = new Map<string, { harness: Session; rules: ReinSession }>();

  constructor(options: SubprocessReinOptions) {
    if (options.adapter !== undefined) this.#adapter = options.adapter;
    else if (options.command !== undefined && options.command.length > 0) this.#adapter = new SubprocessAdapter({ command: options.command, env: options.env });
    else throw new TypeError('SubprocessRein needs a command or an adapter');
    this.#clock = options.clock ?? (() => performance.now());
  }

  #now(): number {
    return Math.floor(this.#clock());
  }

  async startSession(profile: HarnessProfile, inputs: Record<string, string>, sandbox: SandboxHandle): Promise<Record<string, string>> {
    const spec = rein.roleSpec(profile);
    const harness = await this.#adapter.openSession({ ...spec, role: spec.role, session: spec.session, allowed_tools: spec.allowed_tools });
    const state = { harness, rules: new ReinSession(profile, this.#now()) };
    const session = this.#ids.open(sandbox);
    const id = session.session_id ?? '';
    this.#sessions.set(id, state);
    const prompt = rein.initialPrompt(inputs);
    if (prompt !== null) {
      try {
        await this.#turn(state, prompt);
      } catch (e) {
        await this.#drop(id);
        throw e;
      }
    }
    return session;
  }

  async dispatchTool(session: Record<string, string>, toolCall: ToolCall): Promise<ToolResult> {
    const state = this.#sessions.get(session.session_id ?? '');
    if (state === undefined) throw new Error('unknown rein session');
    const prompt = state.rules.toolCallPrompt(toolCall);
    try {
      return rein.toolResult(await this.#turn(state, prompt));
    } catch (e) {
      if (!(e instanceof AdapterError)) throw e;
      const message = e.details.message;
      const result = rein.toolResultFromTurnError(e.code, typeof message === 'string' ? message : e.message);
      if (result === null) throw e;
      return result;
    }
  }

  async endSession(session: Record<string, string>): Promise<ExecutionSummary> {
    const state = await this.#drop(session.session_id ?? '');
    if (state === undefined) throw new Error('unknown rein session');
    return state.rules.summary(this.#now());
  }

  /** Close every open session's child (idempotent). */
  async close(): Promise<void> {
    const states = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(states.map((s) => s.harness.close()));
  }

  async #turn(state: { harness: Session; rules: ReinSession }, prompt: string): Promise<string> {
    const result = await state.harness.turn(prompt);
    state.rules.recordTurn(result.usage);
    return result.text;
  }

  async #drop(id: string): Promise<{ harness: Session; rules: ReinSession } | undefined> {
    const state = this.#sessions.get(id);
    this.#sessions.delete(id);
    if (state !== undefined) await state.harness.close();
    return state;
  }
}
