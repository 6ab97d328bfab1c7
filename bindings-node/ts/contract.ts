import { native } from './native';
import type { NativeGateway, NativeReinSession, NativeSessionIds } from '../native';
import { call } from './wire';

/** A JSON object of the contract-1.0 models (wire field names). */
export type ContractValue = Record<string, unknown>;

/** Parse `value` strictly as the contract-1.0 model `name`; the normalized value. */
export function parseModel(name: string, value: unknown): ContractValue {
  const t = JSON.stringify(value);
  return JSON.parse(call(() => native.contractParseModel(name, t))) as ContractValue;
}

/** The names of the contract-1.0 models. */
export function contractModelNames(): string[] {
  return call(() => native.contractModelNames());
}

/** Parse a catalog of harness profiles and reins; how many of each it holds. */
export function parseCatalog(catalog: unknown): { profiles: number; reins: number } {
  const t = JSON.stringify(catalog);
  return JSON.parse(call(() => native.contractParseCatalog(t))) as { profiles: number; reins: number };
}

/** The profile and rein a harness profile reference resolves to. */
export interface Resolved {
  profile: ContractValue;
  rein: ContractValue;
}

/** Resolve a harness profile reference; throws {@link ResolutionRefused} with the reasons. */
export function resolveProfile(profileRef: string, catalog: unknown): Resolved {
  const t = JSON.stringify(catalog);
  return JSON.parse(call(() => native.contractResolve(profileRef, t))) as Resolved;
}

/** An identifier made safe for evidence, and whether anything was redacted. */
export function safeIdentifier(value: string, kind?: string): { text: string; redacted: boolean } {
  return JSON.parse(call(() => native.contractSafeIdentifier(value, kind))) as { text: string; redacted: boolean };
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

/** The rein helpers of contract 1.0. */
export const rein = {
  /** The role spec a harness profile runs with. */
  roleSpec(profile: unknown): ContractValue {
    const t = JSON.stringify(profile);
    return JSON.parse(call(() => native.reinRoleSpec(t))) as ContractValue;
  },
  /** The session map of turn `n` in a sandbox. */
  sessionMap(n: number, sandbox: unknown): Record<string, string> {
    const t = JSON.stringify(sandbox);
    return JSON.parse(call(() => native.reinSessionMap(n, t))) as Record<string, string>;
  },
  /** The initial prompt from a rein's inputs, or `null`. */
  initialPrompt(inputs: Record<string, string>): string | null {
    const t = JSON.stringify(inputs);
    return call(() => native.reinInitialPrompt(t));
  },
  /** The tool result of a harness's final text. */
  toolResult(text: string): ContractValue {
    return JSON.parse(call(() => native.reinToolResult(text))) as ContractValue;
  },
  /** The tool result of a turn error, or `null` when a tool result does not report it. */
  toolResultFromTurnError(code: string, message: string): ContractValue | null {
    const out = call(() => native.reinToolResultFromTurnError(code, message));
    return out === null ? null : (JSON.parse(out) as ContractValue);
  },
};

/** Gateway configuration: the catalog, and optional bounds (absent: the core's defaults). */
export interface GatewayConfig {
  catalog: unknown;
  max_tool_calls?: number;
  max_evidence_refs?: number;
  max_evidence_artifacts?: number;
}

/** The contract-1.0 gateway lifecycle machine: `handleInput` / `pollOutput`. */
export class Gateway {
  readonly #inner: NativeGateway;

  constructor(config: GatewayConfig) {
    const t = JSON.stringify(config);
    this.#inner = call(() => new native.NativeGateway(t));
  }

  /** Feed one gateway input (`{type, ...}` in the core's form) at `nowMs`. */
  handleInput(nowMs: number, input: ContractValue): void {
    const t = JSON.stringify(input);
    call(() => this.#inner.handle(nowMs, t));
  }

  /** The next output (`{type, ...}`), or `null`. */
  pollOutput(): ContractValue | null {
    const out = call(() => this.#inner.pollOutput());
    return out === null ? null : (JSON.parse(out) as ContractValue);
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
  get stage(): string {
    return call(() => this.#inner.stage());
  }
}

/** One rein session: tool-call prompts, turn usage, the execution summary. */
export class ReinSession {
  readonly #inner: NativeReinSession;

  constructor(profile: unknown, nowMs: number) {
    const t = JSON.stringify(profile);
    this.#inner = call(() => new native.NativeReinSession(t, nowMs));
  }

  /** The prompt of a tool call. */
  toolCallPrompt(toolCall: unknown): string {
    const t = JSON.stringify(toolCall);
    return call(() => this.#inner.toolCallPrompt(t));
  }

  /** Record a turn's usage split. */
  recordTurn(usage: unknown): void {
    const t = JSON.stringify(usage);
    call(() => this.#inner.recordTurn(t));
  }

  /** Tool calls so far. */
  get toolCalls(): number {
    return call(() => this.#inner.toolCalls());
  }

  /** The summed usage. */
  usage(): Record<string, number> {
    return JSON.parse(call(() => this.#inner.usage())) as Record<string, number>;
  }

  /** The execution summary at `nowMs`. */
  summary(nowMs: number): ContractValue {
    return JSON.parse(call(() => this.#inner.summary(nowMs))) as ContractValue;
  }
}

/** Opens numbered sessions per sandbox. */
export class SessionIds {
  readonly #inner: NativeSessionIds;

  constructor() {
    this.#inner = call(() => new native.NativeSessionIds());
  }

  /** Open the next session of a sandbox; its session map. */
  open(sandbox: unknown): Record<string, string> {
    const t = JSON.stringify(sandbox);
    return JSON.parse(call(() => this.#inner.open(t))) as Record<string, string>;
  }
}
