/**
 * WebSocket transport over the `ws` package, driven only by the core's machines: each
 * socket by a {@link SocketHost} (attach, deliver, close handshake, abort), each
 * connection by a {@link HubSession} / {@link RunnerSession} (hello, resume, replay,
 * acks, keepalive), the hub's upgrades by a {@link HubHost} (bearer token before the
 * upgrade, one session per runner, eviction of idle runners), and the runner's reconnect
 * delays by the core's reconnect counter ({@link Reconnect}: a failed connect, or a lost
 * connection that handed no frame to the session, backs off one step further; a lost
 * connection that delivered a frame starts the count again). This module moves bytes, arms
 * timers and queues events.
 *
 * Bounds (each a documented default of the core, {@link HOST_CONSTANTS}):
 *
 * * every connection object keeps one event queue of at most `maxQueuedEvents` events
 *   for its whole life. While it is full, the socket is paused: no frame is handed to the
 *   session (so nothing is acknowledged that the application has not been able to take),
 *   frames `ws` had already read (the rest of the socket read that filled the queue) wait
 *   in a backlog of at most `max_backlog_bytes` UTF-8 bytes, and a socket whose backlog
 *   grows beyond it fails with a {@link TransportError} `backlog_full` (it is aborted; the
 *   session resumes on the next connection). Session events are never dropped; transport news
 *   (`connected`, `disconnected`, `error`) finding the queue full is dropped and counted
 *   in `droppedEvents`;
 * * a hub remembers at most `max_pending_connections` upgrade requests awaiting their
 *   verdict (the core refuses the oldest beyond); runners waiting for {@link HubServer.accept}
 *   are held once each, so never more than the runners the hub keeps.
 *
 * `ws` is a peer dependency, loaded when a client or server is created.
 */
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { RunnerProtocolError } from './errors';
import { HubHost, SocketHost, HOST_CONSTANTS, bearerAuthorization, bearerToken, hostConfig, type HostConfig, type HubOutput, type RunnerActivity } from './host';
import { Reconnect, type BackoffPolicy } from './runner-task';
import { HubSession, RunnerSession, type SessionConfig, type SessionOutput } from './session';
import type { Hello, SequencedMessage } from './wire';

/**
 * The core's default bound of a paused socket's backlog (`max_backlog_bytes`, 1 MiB): UTF-8
 * bytes of frames a paused socket may still hand over (what `ws` had already read from the
 * socket when the event queue filled up). Set another with the `maxBacklogBytes` option.
 */
export const MAX_BACKLOG_BYTES: number = HOST_CONSTANTS.max_backlog_bytes;

/**
 * A failure of this transport's own I/O (not of the protocol): `code` is `upgrade_refused`
 * (the hub answered the upgrade request with an HTTP status), `connect_failed` (the socket
 * could not be opened) or `backlog_full` (the peer kept sending while the event queue was
 * full).
 */
export class TransportError extends RunnerProtocolError {}

/** What a connection hands the application: the session's events, plus transport news. */
export type TransportEvent =
  | Exclude<SessionOutput, { kind: 'transmit' } | { kind: 'close' }>
  | { kind: 'connected' }
  | { kind: 'disconnected' }
  | { kind: 'error'; error: Error };

/** The subset of a `ws` WebSocket this module uses. */
interface Socket {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  on(event: 'message', listener: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: 'open', listener: () => void): this;
  on(event: 'unexpected-response', listener: (req: unknown, res: IncomingMessage) => void): this;
  removeAllListeners(): this;
}

interface WsModule {
  WebSocket: new (url: string, options: { headers: Record<string, string> }) => Socket;
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

/** A bounded FIFO of events with waiting readers (see the module docs for the policy). */
class EventQueue {
  #items: TransportEvent[] = [];
  #head = 0;
  readonly #waiters: ((e: TransportEvent) => void)[] = [];
  readonly max: number;
  /** Transport news dropped because the queue was full. */
  dropped = 0;
  onSpace: (() => void) | null = null;

  constructor(max: number) {
    this.max = Math.max(1, max);
  }

  get size(): number {
    return this.#items.length - this.#head;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  get full(): boolean {
    return this.size >= this.max;
  }

  /** A session event: always taken (the reader stops feeding frames while full). */
  push(e: TransportEvent): void {
    const w = this.#waiters.shift();
    if (w !== undefined) w(e);
    else this.#items.push(e);
  }

  /** Transport news: taken when there is room, else dropped and counted. */
  offer(e: TransportEvent): boolean {
    if (this.#waiters.length === 0 && this.full) {
      this.dropped += 1;
      return false;
    }
    this.push(e);
    return true;
  }

  next(): Promise<TransportEvent> {
    if (this.#head < this.#items.length) {
      const e = this.#items[this.#head] as TransportEvent;
      this.#head += 1;
      if (this.#head === this.#items.length) {
        this.#items = [];
        this.#head = 0;
      }
      if (!this.full) this.onSpace?.();
      return Promise.resolve(e);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

type Session = HubSession | RunnerSession;

/** Runs one session machine over one socket, as the socket's SocketHost decides. */
class Driver {
  readonly host: SocketHost;
  readonly #session: Session;
  readonly #socket: Socket;
  readonly #events: EventQueue;
  readonly #backlog: string[] = [];
  readonly #maxBacklogBytes: number;
  #backlogBytes = 0;
  #sessionTimer: NodeJS.Timeout | null = null;
  #hostTimer: NodeJS.Timeout | null = null;
  #paused = false;
  gone = false;
  /** Whether this connection handed at least one frame to the session. */
  receivedFrame = false;
  onGone: (() => void) | null = null;

  /** `maxBacklogBytes`: the core's `max_backlog_bytes` of `config`, resolved. */
  constructor(session: Session, socket: Socket, events: EventQueue, config: HostConfig, maxBacklogBytes: number) {
    this.host = new SocketHost(config);
    this.#session = session;
    this.#socket = socket;
    this.#events = events;
    this.#maxBacklogBytes = maxBacklogBytes;
  }

  start(): void {
    const socket = this.#socket;
    socket.on('message', (data, isBinary) => {
      if (this.gone) return;
      if (isBinary) {
        const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
        this.host.handleInput(now(), { type: 'binary', bytes });
      } else {
        this.host.handleInput(now(), { type: 'text', text: data.toString() });
      }
      this.#step();
    });
    socket.on('close', () => {
      if (this.gone) return;
      this.host.handleInput(now(), { type: 'socket_closed' });
      this.#step();
    });
    socket.on('error', (error) => {
      if (this.gone) return;
      this.#events.offer({ kind: 'error', error });
      this.host.handleInput(now(), { type: 'failed' });
      this.#step();
    });
    this.#events.onSpace = () => this.#drainBacklog();
    this.host.handleInput(now(), { type: 'opened' });
    this.#step();
  }

  /** Send a sequenced message through the session (kept for replay either way). */
  send<M extends SequencedMessage>(message: M): M {
    const stamped = this.#session.send(now(), message);
    this.#relay();
    return stamped;
  }

  /** Close the socket for `reason`, detaching the session now. */
  stop(reason = ''): void {
    if (this.gone) return;
    this.host.handleInput(now(), { type: 'close', code: HOST_CONSTANTS.close_normal, reason });
    this.#step();
  }

  /** Hand one frame to the session (the queue has room). */
  #deliver(text: string): void {
    this.receivedFrame = true;
    this.#session.handleInput(now(), { type: 'frame', frame: text });
    this.#relay();
  }

  /** Frames read while the queue was full, handed over as room appears; then read on. */
  #drainBacklog(): void {
    while (!this.gone && this.#backlog.length > 0 && !this.#events.full) {
      const text = this.#backlog.shift() as string;
      this.#backlogBytes -= Buffer.byteLength(text);
      this.#deliver(text);
    }
    if (this.#backlog.length === 0 && !this.#events.full && this.#paused && !this.gone) {
      this.#paused = false;
      this.#socket.resume();
    }
  }

  /** The session's outputs: frames and close requests to the socket's machine, events out. */
  #relay(): void {
    for (const out of this.#session.drainOutputs()) {
      if (out.kind === 'transmit') this.host.handleInput(now(), { type: 'transmit', frame: out.frame });
      else if (out.kind === 'close') this.host.handleInput(now(), { type: 'session_close', reason: out.reason });
      else this.#events.push(out);
    }
    this.#armSession();
    this.#step();
  }

  /** Perform the socket machine's outputs. */
  #step(): void {
    for (let out = this.host.pollOutput(); out !== null; out = this.host.pollOutput()) {
      switch (out.kind) {
        case 'attach':
          this.#session.handleInput(now(), { type: 'connected' });
          this.#events.offer({ kind: 'connected' });
          this.#relay();
          break;
        case 'deliver':
          if (this.#events.full || this.#backlog.length > 0) {
            this.#backlog.push(out.text);
            this.#backlogBytes += Buffer.byteLength(out.text);
            if (!this.#paused) {
              this.#paused = true;
              this.#socket.pause();
            }
            if (this.#backlogBytes > this.#maxBacklogBytes) {
              this.#events.offer({ kind: 'error', error: new TransportError('backlog_full', 'the peer kept sending while the event queue was full') });
              this.#backlog.length = 0;
              this.#backlogBytes = 0;
              this.host.handleInput(now(), { type: 'failed' });
            }
          } else {
            this.#deliver(out.text);
          }
          break;
        case 'peer_error':
          this.#events.push({ kind: 'peer_error', code: out.code, detail: out.detail });
          break;
        case 'send':
          this.#socket.send(out.frame);
          break;
        case 'detach':
          this.#session.handleInput(now(), { type: 'disconnected' });
          this.#relay();
          this.#finish();
          break;
        case 'close':
          this.#socket.close(out.code, out.reason);
          break;
        case 'abort':
          this.#socket.terminate();
          break;
      }
    }
    this.#armHost();
  }

  #finish(): void {
    if (this.gone) return;
    this.gone = true;
    if (this.#sessionTimer !== null) clearTimeout(this.#sessionTimer);
    this.#sessionTimer = null;
    this.#events.onSpace = null;
    this.#backlog.length = 0;
    this.#backlogBytes = 0;
    if (this.#paused) this.#socket.resume();
    this.#events.offer({ kind: 'disconnected' });
    this.onGone?.();
  }

  #armSession(): void {
    if (this.gone) return;
    if (this.#sessionTimer !== null) clearTimeout(this.#sessionTimer);
    this.#sessionTimer = null;
    const deadline = this.#session.pollTimeout();
    if (deadline === null) return;
    this.#sessionTimer = setTimeout(() => {
      this.#sessionTimer = null;
      if (this.gone) return;
      this.#session.handleInput(now(), { type: 'timeout' });
      this.#relay();
    }, Math.max(0, deadline - now()));
  }

  #armHost(): void {
    if (this.#hostTimer !== null) clearTimeout(this.#hostTimer);
    this.#hostTimer = null;
    const deadline = this.host.pollTimeout();
    if (deadline === null) return;
    this.#hostTimer = setTimeout(() => {
      this.#hostTimer = null;
      this.host.handleInput(now(), { type: 'timeout' });
      this.#step();
    }, Math.max(0, deadline - now()));
  }
}

/** Options of a {@link RunnerClient}. */
export interface RunnerClientOptions {
  /** The runner's identity; its `resume` is filled from the session on every connect. */
  hello: Hello;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Session configuration (keepalive, acks, bounds). */
  config?: SessionConfig;
  /** Resume from a persisted session state. */
  snapshot?: Uint8Array;
  /** Reconnect delay bounds (default: the core's, 250 ms doubling to 30 s, jittered). */
  backoff?: BackoffPolicy;
  /** The host's random source for the backoff's jitter: a non-negative integer (default: `Math.random`). */
  random?: () => number;
  /** Told each reconnect the core schedules: its delay (ms) and the failures counted after it. */
  onReconnect?: (delayMs: number, failures: number) => void;
  /** Bound of the event queue (default: the core's `max_queued_events`). */
  maxQueuedEvents?: number;
  /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
  maxBacklogBytes?: number;
  /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
  closeTimeoutMs?: number;
}

/** The per-socket bounds of the options, as the core's host config keys. */
interface SocketBounds {
  maxQueuedEvents?: number;
  maxBacklogBytes?: number;
  closeTimeoutMs?: number;
}

function hostConfigOf(options: SocketBounds): HostConfig {
  const c: HostConfig = {};
  if (options.maxQueuedEvents !== undefined) c.max_queued_events = options.maxQueuedEvents;
  if (options.maxBacklogBytes !== undefined) c.max_backlog_bytes = options.maxBacklogBytes;
  if (options.closeTimeoutMs !== undefined) c.close_timeout_ms = options.closeTimeoutMs;
  return c;
}

/** The backlog bound the core reads from `config` (its default when absent). */
function backlogBound(config: HostConfig): number {
  return hostConfig(config).max_backlog_bytes as number;
}

/**
 * The runner's outbound connection: connects, sends `hello` (with the session's resume),
 * replays, and reconnects whenever the link drops, until {@link close}, after the delay
 * the core's {@link Reconnect} counter gives: told of every failed connect and every lost
 * connection (and whether that connection handed a frame to the session).
 */
export class RunnerClient {
  readonly session: RunnerSession;
  readonly #url: string;
  readonly #headers: Record<string, string> = {};
  readonly #events: EventQueue;
  readonly #reconnect: Reconnect;
  readonly #random: (() => number) | undefined;
  readonly #onReconnect: ((delayMs: number, failures: number) => void) | undefined;
  readonly #host: HostConfig;
  readonly #maxBacklogBytes: number;
  #driver: Driver | null = null;
  #closed = false;
  #retry: NodeJS.Timeout | null = null;

  constructor(url: string, options: RunnerClientOptions) {
    this.#url = url;
    this.session = new RunnerSession(options.hello, { config: options.config, snapshot: options.snapshot });
    const auth = options.token === undefined ? null : bearerAuthorization(options.token);
    if (auth !== null) this.#headers.Authorization = auth;
    this.#events = new EventQueue(options.maxQueuedEvents ?? HOST_CONSTANTS.max_queued_events);
    this.#reconnect = new Reconnect(options.backoff);
    this.#random = options.random;
    this.#onReconnect = options.onReconnect;
    this.#host = hostConfigOf(options);
    this.#maxBacklogBytes = backlogBound(this.#host);
  }

  /** Start connecting (and keep reconnecting); resolves once the first socket is open. */
  connect(): Promise<void> {
    return new Promise((resolve) => {
      this.#open(resolve);
    });
  }

  #open(onOpen?: () => void): void {
    if (this.#closed) return;
    const { WebSocket } = loadWs();
    const socket = new WebSocket(this.#url, { headers: this.#headers });
    let opened = false;
    socket.on('open', () => {
      if (this.#closed) {
        socket.terminate();
        return;
      }
      opened = true;
      const driver = new Driver(this.session, socket, this.#events, this.#host, this.#maxBacklogBytes);
      driver.onGone = () => {
        if (this.#driver === driver) this.#driver = null;
        this.#schedule(driver.receivedFrame, onOpen);
      };
      this.#driver = driver;
      driver.start();
      onOpen?.();
    });
    socket.on('unexpected-response', (_req, res) => {
      this.#events.offer({
        kind: 'error',
        error: new TransportError('upgrade_refused', `the hub answered the upgrade with HTTP ${res.statusCode ?? 0}`),
      });
      res.resume();
      socket.terminate();
    });
    socket.on('error', (error) => {
      if (!opened) this.#events.offer({ kind: 'error', error: new TransportError('connect_failed', error.message) });
    });
    socket.on('close', () => {
      if (!opened) this.#schedule(null, onOpen);
    });
  }

  /**
   * Tell the core's counter what ended (`lost`: `null` for a failed connect, else whether
   * the lost connection delivered a frame) and wait the delay it gives before the next try.
   */
  #schedule(lost: boolean | null, onOpen?: () => void): void {
    if (this.#closed || this.#retry !== null) return;
    const random = this.#random?.();
    const delay = lost === null ? this.#reconnect.connectFailed(random) : this.#reconnect.connectionLost(lost, random);
    this.#onReconnect?.(delay, this.#reconnect.failures);
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#open(onOpen);
    }, delay);
  }

  /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
  send<M extends SequencedMessage>(message: M): M {
    if (this.#driver !== null) return this.#driver.send(message);
    return this.session.send(now(), message);
  }

  /** Whether a socket is up. */
  get connected(): boolean {
    return this.#driver !== null;
  }

  /** Events waiting in the queue. */
  get queuedEvents(): number {
    return this.#events.size;
  }

  /** Transport news dropped because the queue was full. */
  get droppedEvents(): number {
    return this.#events.dropped;
  }

  /**
   * Consecutive failures the core's reconnect counter holds: failed connects and lost
   * connections since the last connection that delivered a frame.
   */
  get failures(): number {
    return this.#reconnect.failures;
  }

  /** The next event. */
  recv(): Promise<TransportEvent> {
    return this.#events.next();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TransportEvent> {
    for (;;) yield await this.recv();
  }

  /** Close the connection and stop reconnecting (the session state is kept). */
  close(): void {
    this.#closed = true;
    if (this.#retry !== null) clearTimeout(this.#retry);
    this.#retry = null;
    this.#driver?.stop();
  }
}

/** One runner as the hub sees it, across its connections: one session, one event queue. */
export class HubRunner {
  readonly runnerId: string;
  readonly session: HubSession;
  readonly #events: EventQueue;
  readonly #host: HostConfig;
  readonly #maxBacklogBytes: number;
  /** @internal */
  announced = false;
  #driver: Driver | null = null;

  /** @internal */
  constructor(runnerId: string, session: HubSession, maxQueuedEvents: number, host: HostConfig, maxBacklogBytes: number) {
    this.runnerId = runnerId;
    this.session = session;
    this.#events = new EventQueue(maxQueuedEvents);
    this.#host = host;
    this.#maxBacklogBytes = maxBacklogBytes;
  }

  /** Send a command (`task.assign` / `task.cancel`), connected or not; kept for replay. */
  send<M extends SequencedMessage>(message: M): M {
    if (this.#driver !== null) return this.#driver.send(message);
    return this.session.send(now(), message);
  }

  /** Whether the runner's socket is up. */
  get connected(): boolean {
    return this.#driver !== null;
  }

  /** Events waiting in the queue. */
  get queuedEvents(): number {
    return this.#events.size;
  }

  /** Transport news dropped because the queue was full. */
  get droppedEvents(): number {
    return this.#events.dropped;
  }

  /** The next event of this runner (across reconnects). */
  recv(): Promise<TransportEvent> {
    return this.#events.next();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TransportEvent> {
    for (;;) yield await this.recv();
  }

  /** @internal What this handle is doing, for the core's eviction rule. */
  activity(): RunnerActivity {
    return {
      runner_id: this.runnerId,
      sockets: this.#driver === null ? 0 : 1,
      kept_frames: this.session.outboxFrames(),
      queued_events: this.#events.size,
      waiting_readers: this.#events.waiting,
      awaiting_accept: this.announced,
    };
  }

  /** @internal Drive the session over a new socket; an older socket is replaced. */
  serve(socket: Socket): void {
    const old = this.#driver;
    this.#driver = null;
    old?.stop(HOST_CONSTANTS.replaced_reason);
    const driver = new Driver(this.session, socket, this.#events, this.#host, this.#maxBacklogBytes);
    driver.onGone = () => {
      if (this.#driver === driver) this.#driver = null;
    };
    this.#driver = driver;
    driver.start();
  }

  /** @internal */
  stop(): void {
    this.#driver?.stop();
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
  /** Bound of each runner's event queue (default: the core's `max_queued_events`). */
  maxQueuedEvents?: number;
  /** Bound of a paused socket's backlog, UTF-8 bytes (default: the core's `max_backlog_bytes`). */
  maxBacklogBytes?: number;
  /** Disconnected, idle runners kept (default: the core's `max_idle_runners`). */
  maxIdleRunners?: number;
  /** Upgrade requests awaiting their verdict (default: the core's `max_pending_connections`). */
  maxPendingConnections?: number;
  /** Bound of a close handshake (default: the core's `close_timeout_ms`). */
  closeTimeoutMs?: number;
}

interface PendingUpgrade {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  headers: [string, string][];
}

/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with the core's HTTP 401), each runner id has one {@link HubRunner}
 * with one session, so a reconnect resumes its streams and a newer socket of the same
 * runner replaces the older one (closed with reason `replaced`).
 */
export class HubServer {
  readonly #host: HubHost;
  readonly #authenticate: Authenticate | undefined;
  readonly #config: SessionConfig | undefined;
  readonly #maxQueued: number;
  readonly #socketConfig: HostConfig;
  readonly #maxBacklogBytes: number;
  readonly #runners = new Map<string, HubRunner>();
  readonly #arrivals = new Set<HubRunner>();
  readonly #acceptors: ((r: HubRunner) => void)[] = [];
  readonly #pending = new Map<number, PendingUpgrade>();
  readonly #upgraded = new Map<number, Socket>();
  #server: Server | null = null;
  #wss: ReturnType<typeof makeWss> | null = null;
  #conn = 0;

  constructor(options: HubServerOptions) {
    if ((options.tokens === undefined) === (options.authenticate === undefined)) {
      throw new TypeError('HubServer needs exactly one of tokens and authenticate');
    }
    const config: HostConfig = { ...hostConfigOf(options) };
    if (options.tokens !== undefined) config.tokens = options.tokens;
    if (options.maxIdleRunners !== undefined) config.max_idle_runners = options.maxIdleRunners;
    if (options.maxPendingConnections !== undefined) config.max_pending_connections = options.maxPendingConnections;
    this.#host = new HubHost(config);
    this.#authenticate = options.authenticate;
    this.#config = options.config;
    this.#maxQueued = options.maxQueuedEvents ?? HOST_CONSTANTS.max_queued_events;
    this.#socketConfig = hostConfigOf(options);
    this.#maxBacklogBytes = backlogBound(this.#socketConfig);
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
      runner = new HubRunner(runnerId, new HubSession({ config: this.#config }), this.#maxQueued, this.#socketConfig, this.#maxBacklogBytes);
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
        if (ws === undefined) return;
        const host = new SocketHost(this.#socketConfig);
        host.handleInput(now(), { type: 'opened' });
        host.handleInput(now(), { type: 'close', code: out.code, reason: out.reason });
        for (const o of host.drainOutputs()) {
          if (o.kind === 'close') ws.close(o.code, o.reason);
          else if (o.kind === 'abort') ws.terminate();
        }
        return;
      }
      case 'attach': {
        const ws = this.#upgraded.get(out.conn);
        this.#upgraded.delete(out.conn);
        if (ws === undefined) return;
        const runner = this.runner(out.runner_id);
        if (out.announce) this.#announce(runner);
        runner.serve(ws);
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
    socket.on('error', () => {});
    this.#pending.set(conn, { req, socket, head, headers });
    this.#host.handleInput(now(), { type: 'request', conn, headers });
    this.#decide();
  }
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
