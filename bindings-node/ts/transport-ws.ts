/**
 * WebSocket transport over the `ws` package: a pump around the core's link machines.
 * Each side's connection driver is one core machine — {@link RunnerLink} for the runner's
 * outbound connection, one {@link HubLink} per runner on the hub — and this module only
 * performs what it asks (open, write, pause, resume, close or abort a socket; arm one
 * timer; hand events to the application) and reports what the sockets do. Every decision
 * is the link's: when to connect and reconnect (the core's backoff, jittered from a seed),
 * the connect and close deadlines, what a frame is, when to pause a socket, the bounds of
 * the event queue and of a paused socket's backlog, when to abort, and the error codes.
 * The hub's door (the bearer token before the upgrade, one runner per token, eviction of
 * idle runners) is the core's {@link HubHost}.
 *
 * Bounds: the application's queue holds the link's events until the application takes
 * them (`recv`), and the link counts them: while `max_queued_events` are untaken the
 * socket is paused and frames `ws` had already read wait in the link's backlog (at most
 * `max_backlog_bytes`; beyond it the socket fails with `backlog_full`). News (`connected`,
 * `disconnected`, `reconnecting`, `error`) beyond the link's allowance is dropped and
 * counted (`droppedEvents`). A user callback that throws (`onReconnect`) becomes an
 * `error` event carrying what it threw (dropped and counted when `max_queued_events`
 * events wait); nothing a callback or an option does can throw out of a socket event
 * handler.
 *
 * `ws` is a peer dependency, loaded when a client or server is created.
 */
import { webcrypto } from 'node:crypto';
import { STATUS_CODES, validateHeaderValue, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { coreError } from './error-table';
import { RunnerProtocolError, TransportError } from './errors';
import { HubHost, SocketHost, HOST_CONSTANTS, bearerAuthorization, bearerToken, type HostConfig, type HubOutput, type RunnerActivity } from './host';
import { seedOf, typeError } from './internal';
import { HubLink, RunnerLink, linkConfig, type LinkConfig, type LinkEvent, type LinkInput, type LinkOutput, type LinkStats } from './link';
import type { BackoffPolicy } from './runner-task';
import type { ConnectionState } from './sequencing';
import type { SessionConfig } from './session';
import { decode, encode, type Hello, type Message, type SequencedMessage } from './wire';

export { TransportError };

/**
 * The core's default bound of a paused socket's backlog (`max_backlog_bytes`, 1 MiB).
 * Set another with the `maxBacklogBytes` option.
 */
export const MAX_BACKLOG_BYTES: number = HOST_CONSTANTS.max_backlog_bytes;

/**
 * What a connection hands the application: the link's events (the session's, and
 * `connected`, `disconnected`, `reconnecting`, `stalled`, `unstalled`, `stopped`), with a
 * link's `error` event as a {@link TransportError} (its `code` the link's: `upgrade_refused`
 * with `status`, `connect_failed`, `connect_timeout`, `no_token`, `transport_failed`,
 * `backlog_full`), or what a user callback threw.
 */
export type TransportEvent = Exclude<LinkEvent, { kind: 'error' }> | { kind: 'error'; error: Error };

/** The subset of a `ws` WebSocket this module uses. */
interface Socket {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  on(event: 'message', listener: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'open', listener: () => void): this;
  on(event: 'unexpected-response', listener: (req: { destroy(): void }, res: IncomingMessage) => void): this;
  removeAllListeners(): this;
}

/** The upgrade request, as `ws` hands it to `finishRequest`. */
interface UpgradeRequest {
  setHeader(name: string, value: string): void;
  end(): void;
}

interface WsModule {
  WebSocket: new (url: string, options: { finishRequest: (req: UpgradeRequest) => void }) => Socket;
  WebSocketServer: new (options: { noServer: true }) => {
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, cb: (ws: Socket) => void): void;
    close(): void;
  };
}

function loadWs(): WsModule {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('ws') as WsModule;
}

/** Monotonic milliseconds. */
function now(): number {
  return Math.floor(performance.now());
}

function noop(): void {}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/** One event for the application; `counted`: the link counts it until it is taken. */
interface Item {
  event: TransportEvent;
  counted: boolean;
}

/** The application's queue of one link's events, with its waiting readers. */
class EventQueue {
  #items: Item[] = [];
  #head = 0;
  readonly #waiters: ((e: TransportEvent) => void)[] = [];
  /** Counted events taken and not yet reported to the link. */
  taken = 0;
  /** Called when the application took a counted event outside the pump's loop. */
  onTaken: () => void = noop;

  get size(): number {
    return this.#items.length - this.#head;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  /** Hand an event on: to a waiting reader (taken at once), else into the queue. */
  push(event: TransportEvent, counted: boolean): void {
    const w = this.#waiters.shift();
    if (w !== undefined) {
      if (counted) this.taken += 1;
      w(event);
    } else {
      this.#items.push({ event, counted });
    }
  }

  next(): Promise<TransportEvent> {
    if (this.#head < this.#items.length) {
      const item = this.#items[this.#head] as Item;
      this.#head += 1;
      if (this.#head === this.#items.length) {
        this.#items = [];
        this.#head = 0;
      }
      if (item.counted) {
        this.taken += 1;
        this.onTaken();
      }
      return Promise.resolve(item.event);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/**
 * Pumps one link: feeds it what its sockets and timer do, performs its outputs, hands its
 * events to the application's queue and reports the ones taken.
 */
class Pump {
  readonly link: RunnerLink | HubLink;
  readonly events = new EventQueue();
  readonly sockets = new Map<number, Socket>();
  /** The events the link counts before it pauses (for user-callback errors, which it does not count). */
  readonly #maxQueued: number;
  /** User-callback errors dropped because the queue was full. */
  hostDropped = 0;
  /** Opens socket `socket` (runner). */
  onConnect: (socket: number) => void = noop;
  /** Sees every event before the application (connect waiters, callbacks). */
  onEvent: (event: LinkEvent) => void = noop;
  #timer: NodeJS.Timeout | null = null;
  #deadline: number | null = null;
  #running = false;
  #pending: LinkOutput[] = [];
  #frames: string[] = [];
  #framesSocket = -1;
  #flushQueued = false;
  #takenQueued = false;

  constructor(link: RunnerLink | HubLink, maxQueued: number) {
    this.link = link;
    this.#maxQueued = maxQueued;
    this.events.onTaken = () => {
      if (this.#takenQueued) return;
      this.#takenQueued = true;
      queueMicrotask(() => {
        this.#takenQueued = false;
        this.guard(() => this.#run());
      });
    };
  }

  /** Run `body` (a socket callback, a timer) so that nothing it throws escapes. */
  guard(body: () => void): void {
    try {
      body();
    } catch (e) {
      this.hostError(e);
    }
  }

  /** Something outside the link failed (a user callback): an `error` event, not counted. */
  hostError(e: unknown): void {
    if (this.events.size >= this.#maxQueued) {
      this.hostDropped += 1;
      return;
    }
    this.events.push({ kind: 'error', error: asError(e) }, false);
  }

  /** Feed one input (frames read before it go first); a refusal is thrown after the outputs are performed. */
  feed(input: LinkInput): void {
    this.#flushFrames();
    try {
      this.link.handleInput(now(), input);
    } finally {
      this.#run();
    }
  }

  /** A frame read from `socket`: text frames are fed in batches (one native call per read). */
  frame(socket: number, data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): void {
    if (isBinary) {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      this.feed({ type: 'frame', socket, frame: bytes });
      return;
    }
    if (socket !== this.#framesSocket) this.#flushFrames();
    this.#framesSocket = socket;
    this.#frames.push((data as Buffer).toString());
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(() => {
        this.#flushQueued = false;
        this.guard(() => this.#flushFrames());
      });
    }
  }

  /** Send a sequenced message through the link. */
  send<M extends SequencedMessage>(message: M, resend = false): M {
    this.#flushFrames();
    try {
      const link = this.link;
      if (link instanceof RunnerLink) return resend ? link.resend(now(), message) : link.send(now(), message);
      return link.send(now(), message);
    } finally {
      this.#run();
    }
  }

  #flushFrames(): void {
    if (this.#frames.length === 0) return;
    const frames = this.#frames;
    this.#frames = [];
    const taken = this.events.taken;
    this.events.taken = 0;
    const outputs = this.link.handleFrames(now(), this.#framesSocket, frames, taken);
    for (const o of outputs) this.#pending.push(o);
    this.#run();
  }

  /** Perform every output, reporting the events taken meanwhile, then arm the timer. */
  #run(): void {
    if (this.#running) return;
    this.#running = true;
    try {
      for (;;) {
        let outputs = this.#pending;
        this.#pending = [];
        if (outputs.length === 0) outputs = this.link.drainOutputs();
        if (outputs.length === 0) {
          if (this.events.taken === 0) break;
          const n = this.events.taken;
          this.events.taken = 0;
          this.link.handleInput(now(), { type: 'events_taken', n });
          continue;
        }
        for (const o of outputs) {
          // One output failing to be performed (a throwing socket) does not stop the others.
          try {
            this.#perform(o);
          } catch (e) {
            this.hostError(e);
          }
        }
      }
    } finally {
      this.#running = false;
    }
    this.#arm();
  }

  #perform(o: LinkOutput): void {
    switch (o.kind) {
      case 'connect':
        this.onConnect(o.socket);
        return;
      case 'send': {
        const ws = this.sockets.get(o.socket);
        if (ws === undefined) return;
        try {
          ws.send(o.frame);
        } catch (e) {
          this.link.handleInput(now(), { type: 'failed', socket: o.socket, detail: messageOf(e) });
        }
        return;
      }
      case 'pause':
        this.sockets.get(o.socket)?.pause();
        return;
      case 'resume':
        this.sockets.get(o.socket)?.resume();
        return;
      case 'close':
        // The link aborts the socket at its close deadline whatever happens here.
        this.sockets.get(o.socket)?.close(o.code, o.reason);
        return;
      case 'abort':
        this.drop(o.socket);
        return;
      default:
        this.#event(o);
    }
  }

  #event(e: LinkEvent): void {
    this.onEvent(e);
    if (e.kind === 'error') {
      const error = coreError('transport', e.code, e.detail, { status: e.status });
      this.events.push({ kind: 'error', error }, true);
    } else {
      this.events.push(e, true);
    }
  }

  /** Forget socket `id` and drop its connection (listeners gone, its late errors ignored). */
  drop(id: number): void {
    const ws = this.sockets.get(id);
    if (ws === undefined) return;
    this.sockets.delete(id);
    ws.removeAllListeners();
    ws.on('error', noop);
    ws.terminate();
  }

  /** Report what socket `id` does to the link. */
  watch(id: number, ws: Socket): void {
    this.sockets.set(id, ws);
    ws.on('message', (data, isBinary) => this.guard(() => this.frame(id, data, isBinary)));
    ws.on('close', () =>
      this.guard(() => {
        this.sockets.delete(id);
        this.feed({ type: 'socket_closed', socket: id });
      }),
    );
    ws.on('error', (error) => this.guard(() => this.feed({ type: 'failed', socket: id, detail: error.message })));
  }

  #arm(): void {
    const deadline = this.link.pollTimeout();
    if (deadline === this.#deadline) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#deadline = deadline;
    if (deadline === null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#deadline = null;
      this.guard(() => this.feed({ type: 'timeout' }));
    }, Math.max(0, deadline - now()));
  }

  /** Link counters, with user-callback errors dropped counted in `dropped_events`. */
  stats(): LinkStats {
    const s = this.link.stats();
    return { ...s, dropped_events: s.dropped_events + this.hostDropped };
  }
}

/** Refuse an options object that is not one, or that has keys this API does not know. */
function checkKeys(what: string, options: unknown, keys: readonly string[]): Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw typeError(`${what}: an options object is required`);
  for (const k of Object.keys(options)) {
    if (!keys.includes(k)) throw Object.assign(new TypeError(`${what}: unknown option ${JSON.stringify(k)}`), { code: 'ERR_INVALID_ARG_VALUE' });
  }
  return options as Record<string, unknown>;
}

function checkFunction(what: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw typeError(`${what}: a function is required, got ${typeof value}`);
}

/** Options of the link both sides share, as the core's link config keys. */
interface LinkOptions {
  config?: SessionConfig;
  maxQueuedEvents?: number;
  maxBacklogBytes?: number;
  closeTimeoutMs?: number;
  maxClosingSockets?: number;
}

/** The link config of the options (the core reads and refuses it: `ConfigError`). */
function linkConfigOf(options: LinkOptions & { backoff?: BackoffPolicy; connectTimeoutMs?: number; reconnect?: boolean }): LinkConfig {
  const c: LinkConfig = {};
  if (options.config !== undefined) c.session = options.config;
  if (options.maxQueuedEvents !== undefined) c.max_queued_events = options.maxQueuedEvents;
  if (options.maxBacklogBytes !== undefined) c.max_backlog_bytes = options.maxBacklogBytes;
  if (options.closeTimeoutMs !== undefined) c.close_timeout_ms = options.closeTimeoutMs;
  if (options.maxClosingSockets !== undefined) c.max_closing_sockets = options.maxClosingSockets;
  if (options.connectTimeoutMs !== undefined) c.connect_timeout_ms = options.connectTimeoutMs;
  if (options.reconnect !== undefined) c.reconnect = options.reconnect;
  const b = options.backoff;
  if (b !== undefined) {
    const known = checkKeys('backoff', b, ['initial_ms', 'max_ms']);
    if (known.initial_ms !== undefined) c.backoff_initial_ms = b.initial_ms as number;
    if (known.max_ms !== undefined) c.backoff_max_ms = b.max_ms as number;
  }
  return c;
}

/** Options of a {@link RunnerClient}. */
export interface RunnerClientOptions {
  /** The runner's identity; its `resume` is filled from the session on every connect. */
  hello: Hello;
  /** Sent as `Authorization: Bearer <token>` (never logged, never in an error or event). */
  token?: string;
  /** Session configuration (keepalive, acks, bounds). */
  config?: SessionConfig;
  /** Resume from a persisted session state. */
  snapshot?: Uint8Array;
  /** Reconnect delay bounds (default: the core's, 250 ms doubling to 30 s, jittered). */
  backoff?: BackoffPolicy;
  /** Seed of the reconnect delays' jitter, in `0..2^64` (default: from `crypto.getRandomValues`). */
  seed?: bigint | number;
  /**
   * @deprecated Use `seed`. A random source: called twice when the client is created to
   * make the seed (any function returning finite numbers, e.g. `Math.random`).
   */
  random?: () => number;
  /** Told each reconnect the link schedules: its delay (ms) and the failures counted (also the `reconnecting` event). */
  onReconnect?: (delayMs: number, failures: number) => void;
  /** Events left untaken before the socket is paused (default: the core's `max_queued_events`). */
  maxQueuedEvents?: number;
  /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
  maxBacklogBytes?: number;
  /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
  closeTimeoutMs?: number;
  /** Bound of a connect attempt (default: the core's `connect_timeout_ms`). */
  connectTimeoutMs?: number;
  /** Sockets kept while their close handshake runs (default: the core's `max_closing_sockets`). */
  maxClosingSockets?: number;
}

const RUNNER_OPTIONS = [
  'hello',
  'token',
  'config',
  'snapshot',
  'backoff',
  'seed',
  'random',
  'onReconnect',
  'maxQueuedEvents',
  'maxBacklogBytes',
  'closeTimeoutMs',
  'connectTimeoutMs',
  'maxClosingSockets',
] as const;

const PROTOCOLS = new Set(['ws:', 'wss:', 'http:', 'https:', 'ws+unix:']);

/** A 32-bit integer from a random source's draw (`TypeError` for a non-finite one). */
function draw(random: () => number): bigint {
  const x = random();
  if (typeof x !== 'number' || !Number.isFinite(x)) throw typeError('random: a function returning finite numbers is required');
  const v = Math.abs(x);
  return BigInt(Math.floor(v < 1 ? v * 2 ** 32 : v) % 2 ** 32);
}

/** The seed of the options: `seed`, else two draws of `random`, else 64 random bits. */
function seedOfOptions(seed: unknown, random: (() => number) | undefined): bigint {
  if (seed !== undefined) return seedOf(seed);
  if (random !== undefined) return (draw(random) << 32n) | draw(random);
  const words = webcrypto.getRandomValues(new Uint32Array(2));
  return (BigInt(words[0] as number) << 32n) | BigInt(words[1] as number);
}

/**
 * The runner's outbound connection: a pump around the core's {@link RunnerLink}, which
 * connects, sends `hello` (with the session's resume), replays, and reconnects whenever
 * the link drops, after the delay of the core's backoff, until {@link close}.
 *
 * Options are checked when the client is created: link and session values by the core
 * (`ConfigError`, naming the key), the hello by the core's schema check
 * (`SchemaValidationError`), the rest here (`TypeError` / `RangeError` with Node's
 * `ERR_INVALID_ARG_TYPE`, `ERR_INVALID_ARG_VALUE` or `ERR_OUT_OF_RANGE` code).
 */
export class RunnerClient {
  /** The link this client pumps (read its state; feed it only through this client). */
  readonly link: RunnerLink;
  readonly #pump: Pump;
  readonly #url: string;
  /** The `Authorization` header value (set on the upgrade request only, see #open). */
  readonly #authorization: string | null = null;
  readonly #onReconnect: ((delayMs: number, failures: number) => void) | undefined;
  readonly #opened: ((() => void) | null)[] = [];
  #connectWaiters: (() => void)[] = [];
  #failures = 0;

  constructor(url: string, options: RunnerClientOptions) {
    const o = checkKeys('RunnerClient', options, RUNNER_OPTIONS) as unknown as RunnerClientOptions;
    if (typeof url !== 'string') throw typeError('url: a string is required');
    let protocol: string;
    try {
      protocol = new URL(url).protocol;
    } catch {
      throw Object.assign(new TypeError('url: not a valid URL'), { code: 'ERR_INVALID_URL' });
    }
    if (!PROTOCOLS.has(protocol)) throw Object.assign(new TypeError(`url: ${protocol} is not a WebSocket URL scheme`), { code: 'ERR_INVALID_URL' });
    if (o.token !== undefined) {
      if (typeof o.token !== 'string') throw typeError(`token: a string is required, got ${typeof o.token}`);
      // The core's header value (none for an empty token); one HTTP cannot carry is
      // refused now (Node's ERR_INVALID_CHAR, whose message names the header, not the value).
      const auth = bearerAuthorization(o.token);
      if (auth !== null) validateHeaderValue('Authorization', auth);
      this.#authorization = auth;
    }
    checkFunction('onReconnect', o.onReconnect);
    checkFunction('random', o.random);
    if (o.snapshot !== undefined && !(o.snapshot instanceof Uint8Array)) throw typeError('snapshot: a Uint8Array is required');
    // The hello template, checked by the core's schema rules (defaults filled first).
    if (typeof o.hello !== 'object' || o.hello === null) throw typeError('hello: a hello message object is required');
    const hello = decode(encode(o.hello as unknown as Message), { validate: true });
    if (hello.type !== 'hello') throw typeError(`hello: a hello message is required, got ${hello.type}`);
    const seed = seedOfOptions(o.seed, o.random);
    this.link = new RunnerLink(o.hello, { config: linkConfigOf(o), snapshot: o.snapshot, seed });
    this.#url = url;
    this.#onReconnect = o.onReconnect;
    this.#pump = new Pump(this.link, this.link.config().max_queued_events);
    this.#pump.onConnect = (socket) => this.#open(socket);
    this.#pump.onEvent = (e) => this.#seen(e);
  }

  /** Start connecting (and keep reconnecting); resolves once a socket serves the session. */
  connect(): Promise<void> {
    return new Promise((resolve) => {
      this.#connectWaiters.push(resolve);
      this.#pump.feed({ type: 'start' });
      if (this.link.isConnected) this.#connected();
    });
  }

  #connected(): void {
    const waiters = this.#connectWaiters;
    this.#connectWaiters = [];
    for (const w of waiters) w();
  }

  /** Every event the link emits, before the application sees it. */
  #seen(e: LinkEvent): void {
    if (e.kind === 'connected') {
      this.#connected();
    } else if (e.kind === 'reconnecting') {
      this.#failures = e.failures;
      const cb = this.#onReconnect;
      if (cb !== undefined) {
        try {
          cb(e.delay_ms, e.failures);
        } catch (error) {
          this.#pump.hostError(error);
        }
      }
    }
  }

  /** Open socket `id` as the link asks. */
  #open(id: number): void {
    const pump = this.#pump;
    let ws: Socket;
    // The header goes on the request object, not into the connection options: those
    // reach `net.connect`, whose NODE_DEBUG=net log prints them.
    const authorization = this.#authorization;
    const finishRequest = (req: UpgradeRequest): void => {
      if (authorization !== null) req.setHeader('Authorization', authorization);
      req.end();
    };
    try {
      const { WebSocket } = loadWs();
      ws = new WebSocket(this.#url, { finishRequest });
    } catch (e) {
      this.link.handleInput(now(), { type: 'connect_failed', socket: id, failure: 'failed', detail: messageOf(e) });
      return;
    }
    let opened = false;
    const failed = (failure: { failure: 'refused'; status: number } | { failure: 'failed' }, detail: string): void => {
      pump.drop(id);
      pump.feed({ type: 'connect_failed', socket: id, ...failure, detail });
    };
    pump.sockets.set(id, ws);
    ws.on('open', () =>
      pump.guard(() => {
        opened = true;
        ws.removeAllListeners();
        pump.watch(id, ws);
        pump.feed({ type: 'opened', socket: id });
      }),
    );
    ws.on('unexpected-response', (req, res) =>
      pump.guard(() => {
        res.resume();
        req.destroy();
        const status = res.statusCode ?? 0;
        failed({ failure: 'refused', status }, `the hub answered the upgrade with HTTP ${status}`);
      }),
    );
    ws.on('error', (error) => pump.guard(() => failed({ failure: 'failed' }, error.message)));
    ws.on('close', () => pump.guard(() => (opened ? undefined : failed({ failure: 'failed' }, 'the connection closed before it opened'))));
  }

  /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
  send<M extends SequencedMessage>(message: M): M {
    return this.#pump.send(message);
  }

  /** Send a message that may have been sent before (the core's `resend`). */
  resend<M extends SequencedMessage>(message: M): M {
    return this.#pump.send(message, true);
  }

  /** Whether a socket serves the session. */
  get connected(): boolean {
    return this.link.isConnected;
  }

  /** Events waiting in the queue. */
  get queuedEvents(): number {
    return this.#pump.events.size;
  }

  /** Events dropped because the queue was full (the link's news beyond its allowance, callback errors). */
  get droppedEvents(): number {
    return this.#pump.stats().dropped_events;
  }

  /** The link's counters (dropped events as {@link droppedEvents}). */
  stats(): LinkStats {
    return this.#pump.stats();
  }

  /** Consecutive failures the core's reconnect counter held at the last `reconnecting` event. */
  get failures(): number {
    return this.#failures;
  }

  /** The sequencing state's snapshot (persist it; pass it back as `snapshot`). */
  snapshot(): Buffer {
    return this.link.snapshot();
  }

  /** A copy of the sequencing state. */
  state(): ConnectionState {
    return this.link.state();
  }

  /** Forget a finished task's streams (once its report was acknowledged). */
  forgetTask(taskId: string): boolean {
    return this.link.forgetTask(taskId);
  }

  /** The next event. */
  recv(): Promise<TransportEvent> {
    return this.#pump.events.next();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TransportEvent> {
    for (;;) yield await this.recv();
  }

  /** Close the connection and stop reconnecting (the session state is kept); a `stopped` event follows. */
  close(): void {
    this.#pump.feed({ type: 'stop', code: HOST_CONSTANTS.close_normal, reason: '' });
  }
}

/** One runner as the hub sees it, across its connections: one {@link HubLink}, one event queue. */
export class HubRunner {
  readonly runnerId: string;
  /** The link this handle pumps (read its state; feed it only through this handle). */
  readonly link: HubLink;
  readonly #pump: Pump;
  /** @internal */
  announced = false;

  /** @internal */
  constructor(runnerId: string, link: HubLink) {
    this.runnerId = runnerId;
    this.link = link;
    this.#pump = new Pump(link, link.config().max_queued_events);
  }

  /** Send a command (`task.assign` / `task.cancel`), connected or not; kept for replay. */
  send<M extends SequencedMessage>(message: M): M {
    return this.#pump.send(message);
  }

  /**
   * Durable acknowledgements (`durableAcks`): the hub's store committed the runner's
   * stream `(taskId, attempt)` through `seq`; acknowledgements may now go up to it.
   * Refused (`ProtocolStateError`) with `not_durable` without durable acks, or
   * `confirm_ahead` beyond what was delivered.
   */
  confirm(taskId: string, attempt: number | null, seq: number): void {
    this.#pump.feed({ type: 'confirm', task_id: taskId, attempt, seq });
  }

  /** Whether the runner's socket is up. */
  get connected(): boolean {
    return this.link.isConnected;
  }

  /** Events waiting in the queue. */
  get queuedEvents(): number {
    return this.#pump.events.size;
  }

  /** Events dropped because the queue was full (the link's news beyond its allowance). */
  get droppedEvents(): number {
    return this.#pump.stats().dropped_events;
  }

  /** The link's counters. */
  stats(): LinkStats {
    return this.#pump.stats();
  }

  /** The sequencing state's snapshot (persist it to resume the runner's streams). */
  snapshot(): Buffer {
    return this.link.snapshot();
  }

  /** Forget a finished task's streams. */
  forgetTask(taskId: string): boolean {
    return this.link.forgetTask(taskId);
  }

  /** The next event of this runner (across reconnects). */
  recv(): Promise<TransportEvent> {
    return this.#pump.events.next();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TransportEvent> {
    for (;;) yield await this.recv();
  }

  /** @internal What this handle is doing, for the core's eviction rule. */
  activity(): RunnerActivity {
    const s = this.link.status();
    return {
      runner_id: this.runnerId,
      sockets: s.sockets ?? 0,
      kept_frames: this.link.outboxFrames(),
      queued_events: this.#pump.events.size,
      waiting_readers: this.#pump.events.waiting,
      awaiting_accept: this.announced,
    };
  }

  /** @internal The upgraded socket `conn` serves this runner now (the link closes an older one). */
  attach(conn: number, ws: Socket): void {
    this.#pump.guard(() => {
      this.#pump.watch(conn, ws);
      this.#pump.feed({ type: 'attach', socket: conn });
    });
  }

  /** @internal */
  stop(): void {
    this.#pump.guard(() => this.#pump.feed({ type: 'close', code: HOST_CONSTANTS.close_normal, reason: '' }));
  }
}

/** `bearer token → runner id` (`null`: refuse), possibly asynchronous. */
export type Authenticate = (token: string) => string | null | Promise<string | null>;

/** Options of a {@link HubServer}: exactly one of `tokens` and `authenticate`. */
export interface HubServerOptions {
  /** Accepted bearer tokens → runner ids (compared in constant time by the core). */
  tokens?: Record<string, string>;
  /** Asked which runner a bearer token authenticates (when there is no token table). */
  authenticate?: Authenticate;
  /** Session configuration of every runner's session. */
  config?: SessionConfig;
  /**
   * Durable acknowledgements: acknowledge a runner's frames only up to what
   * {@link HubRunner.confirm} confirmed (a hub whose store commits progress). Default
   * `false`: acknowledged as they are delivered (an in-memory hub). The same as
   * `config.durable_acks`.
   */
  durableAcks?: boolean;
  /** Events left untaken before a runner's socket is paused (default: the core's `max_queued_events`). */
  maxQueuedEvents?: number;
  /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
  maxBacklogBytes?: number;
  /** Disconnected, idle runners kept (default: the core's `max_idle_runners`). */
  maxIdleRunners?: number;
  /** Upgrade requests awaiting their verdict (default: the core's `max_pending_connections`). */
  maxPendingConnections?: number;
  /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
  closeTimeoutMs?: number;
  /** Sockets of one runner kept while their close handshake runs (default: the core's `max_closing_sockets`). */
  maxClosingSockets?: number;
}

const HUB_OPTIONS = [
  'tokens',
  'authenticate',
  'config',
  'durableAcks',
  'maxQueuedEvents',
  'maxBacklogBytes',
  'maxIdleRunners',
  'maxPendingConnections',
  'closeTimeoutMs',
  'maxClosingSockets',
] as const;

interface PendingUpgrade {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  headers: [string, string][];
}

/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with the core's HTTP 401), each runner id has one {@link HubRunner}
 * with one {@link HubLink}, so a reconnect resumes its streams and a newer socket of the
 * same runner replaces the older one (closed with reason `replaced`). Options are
 * checked when the server is created, as {@link RunnerClient}'s.
 */
export class HubServer {
  readonly #host: HubHost;
  readonly #authenticate: Authenticate | undefined;
  readonly #link: LinkConfig;
  readonly #socketConfig: HostConfig;
  readonly #runners = new Map<string, HubRunner>();
  readonly #arrivals = new Set<HubRunner>();
  readonly #acceptors: ((r: HubRunner) => void)[] = [];
  readonly #pending = new Map<number, PendingUpgrade>();
  readonly #upgraded = new Map<number, Socket>();
  #server: Server | null = null;
  #wss: ReturnType<typeof makeWss> | null = null;
  #conn = 0;

  constructor(options: HubServerOptions) {
    const o = checkKeys('HubServer', options, HUB_OPTIONS) as HubServerOptions;
    if ((o.tokens === undefined) === (o.authenticate === undefined)) {
      throw Object.assign(new TypeError('HubServer needs exactly one of tokens and authenticate'), { code: 'ERR_INVALID_ARG_VALUE' });
    }
    checkFunction('authenticate', o.authenticate);
    if (o.durableAcks !== undefined && typeof o.durableAcks !== 'boolean') throw typeError('durableAcks: a boolean is required');
    const link = linkConfigOf(o);
    if (o.durableAcks !== undefined) link.session = { ...(link.session ?? {}), durable_acks: o.durableAcks };
    linkConfig(link); // refused values throw the core's ConfigError now
    const config: HostConfig = {};
    if (o.tokens !== undefined) config.tokens = o.tokens;
    if (o.maxIdleRunners !== undefined) config.max_idle_runners = o.maxIdleRunners;
    if (o.maxPendingConnections !== undefined) config.max_pending_connections = o.maxPendingConnections;
    if (o.closeTimeoutMs !== undefined) config.close_timeout_ms = o.closeTimeoutMs;
    this.#host = new HubHost(config);
    this.#authenticate = o.authenticate;
    this.#link = link;
    this.#socketConfig = o.closeTimeoutMs === undefined ? {} : { close_timeout_ms: o.closeTimeoutMs };
  }

  /** Listen on `host:port` (port 0: any); resolves with the bound port. */
  async listen(port = 0, host = '127.0.0.1'): Promise<number> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const http = require('node:http') as typeof import('node:http');
    const server = http.createServer((_req, res) => {
      res.writeHead(426).end();
    });
    this.#wss = makeWss();
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#request(req, socket, head));
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    const address = server.address();
    return typeof address === 'object' && address !== null ? address.port : port;
  }

  /** Every runner kept, by id. */
  get runners(): ReadonlyMap<string, HubRunner> {
    return new Map(this.#runners);
  }

  /** Upgrade requests awaiting their verdict (at most the core's bound). */
  get pendingConnections(): number {
    return this.#host.pendingConnections;
  }

  /** The runner's handle (created on first use; usable before it connects). */
  runner(runnerId: string): HubRunner {
    let runner = this.#runners.get(runnerId);
    if (runner === undefined) {
      runner = new HubRunner(runnerId, new HubLink({ config: this.#link }));
      this.#runners.set(runnerId, runner);
      this.#host.handleInput(now(), {
        type: 'runner_added',
        runner_id: runnerId,
        activity: [...this.#runners.values()].map((r) => r.activity()),
      });
      this.#decide();
    }
    return runner;
  }

  /** The next runner that connects for the first time (or again after it was dropped). */
  async accept(): Promise<HubRunner> {
    const first = this.#arrivals.values().next();
    const runner = first.done === true ? await new Promise<HubRunner>((resolve) => this.#acceptors.push(resolve)) : first.value;
    this.#arrivals.delete(runner);
    runner.announced = false;
    return runner;
  }

  /** The runner id a full `Authorization` header value authenticates, or `null`. */
  async runnerIdFor(authorization: string): Promise<string | null> {
    if (this.#host.hasTokenTable) return this.#host.runnerIdFor(authorization);
    const token = bearerToken(authorization);
    if (token === null || this.#authenticate === undefined) return null;
    return await this.#authenticate(token);
  }

  /** Stop listening and close every runner's socket. */
  async close(): Promise<void> {
    for (const r of this.#runners.values()) r.stop();
    for (const p of this.#pending.values()) p.socket.destroy();
    this.#pending.clear();
    this.#wss?.close();
    const server = this.#server;
    this.#server = null;
    if (server !== null) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** Perform the hub machine's outputs, each for the connection it names. */
  #decide(): void {
    for (const out of this.#host.drainOutputs()) this.#perform(out);
  }

  #perform(out: HubOutput): void {
    switch (out.kind) {
      case 'authenticate':
        this.#ask(out.conn, out.token);
        return;
      case 'accept': {
        const p = this.#pending.get(out.conn);
        this.#pending.delete(out.conn);
        if (p === undefined || p.socket.destroyed || this.#wss === null) return;
        this.#wss.handleUpgrade(p.req, p.socket, p.head, (ws) => {
          ws.on('error', noop);
          this.#upgraded.set(out.conn, ws);
          this.#host.handleInput(now(), { type: 'upgraded', conn: out.conn, headers: p.headers });
          this.#decide();
        });
        return;
      }
      case 'reject': {
        const p = this.#pending.get(out.conn);
        this.#pending.delete(out.conn);
        if (p === undefined) return;
        const reason = STATUS_CODES[out.status] ?? '';
        p.socket.end(
          `HTTP/1.1 ${out.status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
            `Content-Length: ${Buffer.byteLength(out.body)}\r\nConnection: close\r\n\r\n${out.body}`,
        );
        return;
      }
      case 'refuse': {
        const ws = this.#upgraded.get(out.conn);
        this.#upgraded.delete(out.conn);
        if (ws !== undefined) refuse(ws, this.#socketConfig, out.code, out.reason);
        return;
      }
      case 'attach': {
        const ws = this.#upgraded.get(out.conn);
        this.#upgraded.delete(out.conn);
        if (ws === undefined) return;
        const runner = this.runner(out.runner_id);
        if (out.announce) this.#announce(runner);
        ws.removeAllListeners();
        runner.attach(out.conn, ws);
        return;
      }
      case 'evict': {
        const runner = this.#runners.get(out.runner_id);
        this.#runners.delete(out.runner_id);
        if (runner !== undefined) this.#arrivals.delete(runner);
        return;
      }
    }
  }

  #announce(runner: HubRunner): void {
    runner.announced = true;
    const acceptor = this.#acceptors.shift();
    if (acceptor !== undefined) acceptor(runner);
    else this.#arrivals.add(runner);
  }

  /** Ask the authenticator about `conn`'s token and report its answer for `conn`. */
  #ask(conn: number, token: string): void {
    const answer = (runnerId: string | null): void => {
      try {
        this.#host.handleInput(now(), { type: 'authenticated', conn, runner_id: runnerId });
      } catch (e) {
        // The connection's wait ended meanwhile (the core dropped it to make room and
        // gave its verdict then): the late answer is dropped, as the core says.
        if (!(e instanceof RunnerProtocolError && e.code === 'unknown_connection')) throw e;
      }
      this.#decide();
    };
    const authenticate = this.#authenticate;
    if (authenticate === undefined) {
      answer(null);
      return;
    }
    let result: string | null | Promise<string | null>;
    try {
      result = authenticate(token);
    } catch {
      answer(null);
      return;
    }
    Promise.resolve(result).then(
      (id) => answer(typeof id === 'string' ? id : null),
      () => answer(null),
    );
  }

  #request(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#conn += 1;
    const conn = this.#conn;
    const headers = pairs(req.rawHeaders);
    socket.on('error', noop);
    this.#pending.set(conn, { req, socket, head, headers });
    this.#host.handleInput(now(), { type: 'request', conn, headers });
    this.#decide();
  }
}

/** Close an upgraded socket the hub refused, by its {@link SocketHost} (a bounded handshake). */
function refuse(ws: Socket, config: HostConfig, code: number, reason: string): void {
  const host = new SocketHost(config);
  let timer: NodeJS.Timeout | null = null;
  const step = (): void => {
    for (const o of host.drainOutputs()) {
      if (o.kind === 'close') {
        try {
          ws.close(o.code, o.reason);
        } catch {
          ws.terminate();
        }
      } else if (o.kind === 'abort') {
        ws.terminate();
      }
    }
    if (timer !== null) clearTimeout(timer);
    timer = null;
    const deadline = host.pollTimeout();
    if (deadline !== null) {
      timer = setTimeout(() => {
        timer = null;
        host.handleInput(now(), { type: 'timeout' });
        step();
      }, Math.max(0, deadline - now()));
    }
  };
  ws.on('error', noop);
  ws.on('close', () => {
    host.handleInput(now(), { type: 'socket_closed' });
    step();
  });
  host.handleInput(now(), { type: 'opened' });
  host.handleInput(now(), { type: 'close', code, reason });
  step();
}

function makeWss(): InstanceType<WsModule['WebSocketServer']> {
  const { WebSocketServer } = loadWs();
  return new WebSocketServer({ noServer: true });
}

/** A request's headers as name/value pairs in arrival order, repeats included. */
function pairs(raw: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i] as string, raw[i + 1] as string]);
  return out;
}
