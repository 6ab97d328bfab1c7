/**
 * The harness-adapter seam (seed 000) as I/O shells: {@link HarnessAdapter} opens
 * {@link Session}s, whose `turn(prompt)` resolves to a {@link TurnResult}, and the
 * reference adapter, {@link SubprocessAdapter}: one JSONL child process per session
 * (`node:child_process`).
 *
 * Every decision — the spawn request and its cleared environment, line framing with a
 * bound, parsing, the turn state, usage mapping, which faults close the session, the stop
 * escalation and its grace periods, the error codes — is the core's
 * {@link SubprocessTurnMachine}; this module performs its outputs (spawn, write, close,
 * signal) and reports what happened (stdout bytes, end of stdout, the exit, timer expiry).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { ADAPTER_DEFAULTS, SubprocessTurnMachine, type RoleSpec, type SubprocessOutput, type TurnResult } from './adapter';
import { AdapterError } from './errors';

/** A live harness session: one turn at a time. */
export interface Session {
  /** Send `prompt`; resolves to the turn's `{text, usage}`, rejects with {@link AdapterError}. */
  turn(prompt: string): Promise<TurnResult>;
  /** Release the session's resources (idempotent). */
  close(): Promise<void>;
  /** Whether the session is closed. */
  readonly closed: boolean;
}

/** Opens sessions for one model↔harness backend. */
export interface HarnessAdapter {
  /** Open a {@link Session} configured by `roleSpec`. */
  openSession(roleSpec: RoleSpec): Promise<Session>;
  /** Open a session, run one turn, close the session. */
  oneshot(roleSpec: RoleSpec, prompt: string): Promise<TurnResult>;
  /** Release adapter-level resources (idempotent). */
  close(): Promise<void>;
}

/** A {@link HarnessAdapter} with the default `oneshot` and `close`. */
export abstract class BaseHarnessAdapter implements HarnessAdapter {
  abstract openSession(roleSpec: RoleSpec): Promise<Session>;

  async oneshot(roleSpec: RoleSpec, prompt: string): Promise<TurnResult> {
    const session = await this.openSession(roleSpec);
    try {
      return await session.turn(prompt);
    } finally {
      await session.close();
    }
  }

  async close(): Promise<void> {}
}

/** Monotonic milliseconds: the machines' clock. */
function now(): number {
  return Math.floor(performance.now());
}

function adapterError(o: Extract<SubprocessOutput, { type: 'error' }>): AdapterError {
  const { type: _type, ...details } = o;
  const text = typeof o.message === 'string' ? `${o.code}: ${o.message}` : o.code;
  return new AdapterError(o.code, text, details, o.line_number);
}

interface Pending {
  resolve: (r: TurnResult) => void;
  reject: (e: unknown) => void;
  result?: TurnResult;
  error?: unknown;
}

/** Options of a {@link SubprocessSession} and a {@link SubprocessAdapter}. */
export interface SubprocessOptions {
  /** Longest stdout line accepted (default: the core's). */
  maxLineBytes?: number;
  /** Grace after closing stdin and after SIGTERM, in ms (default: the core's). */
  graceMs?: number;
  /** Called with every progress event the child prints during a turn. */
  onProgress?: (event: Record<string, unknown>) => void;
}

/**
 * One JSONL session over a child process, turn by turn, driven by a
 * {@link SubprocessTurnMachine}. The child's stdout is read only during a turn (the pipe
 * holds anything it prints between turns); `close()` closes the child's stdin, waits the
 * grace, then SIGTERM, SIGKILL (to its process group when it leads one) and a final group
 * SIGKILL, as the machine says.
 */
export class SubprocessSession implements Session {
  readonly #machine: SubprocessTurnMachine;
  readonly #child: ChildProcess;
  readonly #onProgress: ((event: Record<string, unknown>) => void) | undefined;
  #pending: Pending | null = null;
  #closers: (() => void)[] = [];
  #timer: NodeJS.Timeout | null = null;
  #exited = false;
  #busy = false;

  /** @internal Drive `child` with `machine` (already told it was spawned). */
  constructor(machine: SubprocessTurnMachine, child: ChildProcess, onProgress?: (event: Record<string, unknown>) => void) {
    this.#machine = machine;
    this.#child = child;
    this.#onProgress = onProgress;
    const stdout = child.stdout;
    stdout?.pause();
    stdout?.on('data', (chunk: Buffer) => this.#feed({ type: 'stdout', bytes: chunk }));
    stdout?.on('end', () => this.#feed({ type: 'eof' }));
    child.stdin?.on('error', (e: Error) => this.#feed({ type: 'stdin_write_failed', message: e.message }));
    child.on('exit', () => {
      this.#exited = true;
      this.#step();
    });
  }

  /** The child process. */
  get process(): ChildProcess {
    return this.#child;
  }

  /** Whether the session is closed or closing (by `close()` or a fault): no more turns. */
  get closed(): boolean {
    return this.#machine.isClosed;
  }

  turn(prompt: string): Promise<TurnResult> {
    return new Promise<TurnResult>((resolve, reject) => {
      try {
        this.#machine.handleInput(now(), { type: 'start_turn', prompt });
      } catch (e) {
        reject(e);
        return;
      }
      this.#pending = { resolve, reject };
      this.#step();
    });
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#machine.lifecycle === 'closed') {
        resolve();
        return;
      }
      this.#closers.push(resolve);
      if (!this.#machine.isClosed) this.#machine.handleInput(now(), { type: 'close' });
      this.#step();
    });
  }

  #feed(input: Parameters<SubprocessTurnMachine['handleInput']>[1]): void {
    if (this.#machine.lifecycle === 'closed') return;
    try {
      this.#machine.handleInput(now(), input);
    } catch (e) {
      const p = this.#pending;
      if (p !== null && p.error === undefined) p.error = e;
    }
    this.#step();
  }

  /** Perform the machine's outputs; settle what is settled; arm the timer. */
  #step(): void {
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (let outs = this.#machine.drainOutputs(); outs.length > 0; outs = this.#machine.drainOutputs()) {
        for (const o of outs) this.#perform(o);
      }
    } finally {
      this.#busy = false;
    }
    const lifecycle = this.#machine.lifecycle;
    if (lifecycle === 'in_turn') this.#child.stdout?.resume();
    else this.#child.stdout?.pause();
    if (lifecycle === 'closing' && this.#exited) {
      // The child is gone: the escalation ends.
      this.#exited = false;
      this.#feed({ type: 'exited' });
      return;
    }
    this.#arm();
    const p = this.#pending;
    if (p !== null && (p.result !== undefined || p.error !== undefined) && lifecycle !== 'closing') {
      this.#pending = null;
      if (p.error !== undefined) p.reject(p.error);
      else p.resolve(p.result as TurnResult);
    }
    if (lifecycle === 'closed') {
      for (const r of this.#closers.splice(0)) r();
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  #arm(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const deadline = this.#machine.pollTimeout();
    if (deadline === null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#feed({ type: 'timeout' });
    }, Math.max(0, deadline - now()));
  }

  #perform(o: SubprocessOutput): void {
    const child = this.#child;
    switch (o.type) {
      case 'write_stdin':
        child.stdin?.write(o.data);
        break;
      case 'close_stdin':
        child.stdin?.end();
        break;
      case 'signal':
        signal(child, o.target, o.signal);
        break;
      case 'close_stdout':
        child.stdout?.destroy();
        break;
      case 'progress':
        this.#onProgress?.(o.event);
        break;
      case 'turn_result': {
        const p = this.#pending;
        if (p !== null) p.result = { text: o.text, usage: o.usage };
        break;
      }
      case 'error': {
        const p = this.#pending;
        if (p !== null && p.error === undefined) p.error = adapterError(o);
        break;
      }
      case 'spawn':
        break;
    }
  }
}

/** Deliver a stop signal as the machine says (to the group the child leads, else to it). */
function signal(child: ChildProcess, target: 'process' | 'group', name: 'TERM' | 'KILL'): void {
  const sig = name === 'KILL' ? 'SIGKILL' : 'SIGTERM';
  if (target === 'group' && child.pid !== undefined) {
    try {
      process.kill(-child.pid, sig);
      return;
    } catch {
      // The group is gone (or was never ours): signal the child itself.
    }
  }
  try {
    child.kill(sig);
  } catch {
    // Already reaped.
  }
}

/** Options of a {@link SubprocessAdapter}. */
export interface SubprocessAdapterOptions extends SubprocessOptions {
  /** Program and arguments, or a function of the role spec that gives them. */
  command: readonly string[] | ((roleSpec: RoleSpec) => readonly string[]);
  /** Variables added to the child's cleared environment. */
  env?: Record<string, string>;
  /** Working directory of the child (default: this process's). */
  cwd?: string;
}

/**
 * Spawns a JSONL child per session (in a new process group, with a cleared environment:
 * only `PATH`, the variables given as `env`, and `ANTHROPIC_BASE_URL` when the role spec
 * names an `llm_base_url` — the core's spawn request).
 */
export class SubprocessAdapter extends BaseHarnessAdapter {
  readonly #options: SubprocessAdapterOptions;
  #sessions: SubprocessSession[] = [];

  constructor(options: SubprocessAdapterOptions) {
    super();
    this.#options = options;
  }

  async openSession(roleSpec: RoleSpec): Promise<SubprocessSession> {
    const o = this.#options;
    const machine = new SubprocessTurnMachine({
      max_line_bytes: o.maxLineBytes ?? ADAPTER_DEFAULTS.turn_max_line_bytes,
      grace_ms: o.graceMs ?? ADAPTER_DEFAULTS.grace_ms,
    });
    const command = typeof o.command === 'function' ? o.command(roleSpec) : o.command;
    machine.handleInput(now(), {
      type: 'open',
      spec: {
        command: [...command],
        path: process.env.PATH ?? '',
        env: { ...(o.env ?? {}) },
        llm_base_url: typeof roleSpec.llm_base_url === 'string' ? roleSpec.llm_base_url : null,
        cwd: o.cwd ?? null,
      },
    });
    let child: ChildProcess | null = null;
    for (const out of machine.drainOutputs()) {
      if (out.type === 'error') throw adapterError(out);
      if (out.type !== 'spawn') continue;
      const r = out.request;
      child = spawn(r.program, r.args, {
        env: r.env,
        cwd: r.cwd ?? undefined,
        detached: r.new_process_group,
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      const started = child;
      const failure = await new Promise<Error | null>((resolve) => {
        started.once('spawn', () => resolve(null));
        started.once('error', (e) => resolve(e));
      });
      if (failure !== null || started.pid === undefined) {
        machine.handleInput(now(), { type: 'spawn_failed', message: failure?.message ?? 'spawn failed' });
        for (const e of machine.drainOutputs()) if (e.type === 'error') throw adapterError(e);
        throw failure ?? new Error('spawn failed');
      }
      machine.handleInput(now(), { type: 'spawned', pid: started.pid, process_group: r.new_process_group });
    }
    if (child === null) throw new Error('the subprocess machine asked for no spawn');
    const session = new SubprocessSession(machine, child, o.onProgress);
    this.#sessions = this.#sessions.filter((s) => !s.closed);
    this.#sessions.push(session);
    return session;
  }

  /** Close every session this adapter opened (idempotent). */
  override async close(): Promise<void> {
    const sessions = this.#sessions;
    this.#sessions = [];
    await Promise.all(sessions.map((s) => s.close()));
  }
}
