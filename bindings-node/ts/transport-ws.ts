/**
 * WebSocket transport over the `ws` package, driven only by the core's machines: each
 * socket by a {@link SocketHost} (attach, deliver, close handshake, abort), each
 * connection by a {@link HubSession} / {@link RunnerSession} (hello, resume, replay,
 * acks, keepalive), and the hub's upgrades by a {@link HubHost} (bearer token before the
 * upgrade, one session per runner, eviction of idle runners). This module only moves
 * bytes, arms timers and queues events.
 *
 * `ws` is a peer dependency, loaded when a client or server is created.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { HubHost, SocketHost, HOST_CONSTANTS, bearerAuthorization, type HubOutput, type RunnerActivity } from './host';
import { HubSession, RunnerSession, type SessionConfig, type SessionOutput } from './session';
import type { Hello, Message } from './wire';

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

/** A bounded FIFO of events; readers wait, a full queue pauses the socket that feeds it. */
class EventQueue {
  readonly #items: TransportEvent[] = [];
  readonly #waiters: ((e: TransportEvent) => void)[] = [];
  readonly max: number;
  onSpace: (() => void) | null = null;

  constructor(max: number) {
    this.max = Math.max(1, max);
  }

  get size(): number {
    return this.#items.length;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  get full(): boolean {
    return this.#items.length >= this.max;
  }

  push(e: TransportEvent): void {
    const w = this.#waiters.shift();
    if (w !== undefined) w(e);
    else this.#items.push(e);
  }

  next(): Promise<TransportEvent> {
    const e = this.#items.shift();
    if (e !== undefined) {
      if (this.#items.length < this.max) this.onSpace?.();
      return Promise.resolve(e);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

type Session = HubSession | RunnerSession;

/** Runs one session machine over one socket, as the socket's SocketHost decides. */
class Driver {
  readonly host = new SocketHost();
  readonly #session: Session;
  readonly #socket: Socket;
  readonly #events: EventQueue;
  #sessionTimer: NodeJS.Timeout | null = null;
  #hostTimer: NodeJS.Timeout | null = null;
  #paused = false;
  gone = false;
  onGone: (() => void) | null = null;

  constructor(session: Session, socket: Socket, events: EventQueue) {
    this.#session = session;
    this.#socket = socket;
    this.#events = events;
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
      this.#events.push({ kind: 'error', error });
      this.host.handleInput(now(), { type: 'failed' });
      this.#step();
    });
    this.#events.onSpace = () => {
      if (this.#paused) {
        this.#paused = false;
        this.#socket.resume();
      }
    };
    this.host.handleInput(now(), { type: 'opened' });
    this.#step();
  }

  /** Send a sequenced message through the session (kept for replay either way). */
  send(message: Message): Message {
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
          this.#events.push({ kind: 'connected' });
          this.#relay();
          break;
        case 'deliver':
          this.#session.handleInput(now(), { type: 'frame', frame: out.text });
          this.#relay();
          if (this.#events.full && !this.#paused) {
            this.#paused = true;
            this.#socket.pause();
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
    if (this.#paused) this.#socket.resume();
    this.#events.push({ kind: 'disconnected' });
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

/** Reconnect delays: `minDelayMs` doubling per failed attempt up to `maxDelayMs`. */
export interface Backoff {
  minDelayMs?: number;
  maxDelayMs?: number;
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
  /** Reconnect delays (default 100 ms doubling up to 5 s). */
  backoff?: Backoff;
  /** Bound of the event queue (default: the core's host default). */
  maxQueuedEvents?: number;
}

/**
 * The runner's outbound connection: connects, sends `hello` (with resume), replays,
 * and reconnects with backoff whenever the link drops, until {@link close}.
 */
export class RunnerClient {
  readonly session: RunnerSession;
  readonly #url: string;
  readonly #headers: Record<string, string> = {};
  readonly #events: EventQueue;
  readonly #backoff: Required<Backoff>;
  #driver: Driver | null = null;
  #closed = false;
  #attempts = 0;
  #retry: NodeJS.Timeout | null = null;

  constructor(url: string, options: RunnerClientOptions) {
    this.#url = url;
    this.session = new RunnerSession(options.hello, { config: options.config, snapshot: options.snapshot });
    const auth = options.token === undefined ? null : bearerAuthorization(options.token);
    if (auth !== null) this.#headers.Authorization = auth;
    this.#events = new EventQueue(options.maxQueuedEvents ?? HOST_CONSTANTS.max_queued_events);
    this.#backoff = { minDelayMs: options.backoff?.minDelayMs ?? 100, maxDelayMs: options.backoff?.maxDelayMs ?? 5000 };
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
      opened = true;
      this.#attempts = 0;
      const driver = new Driver(this.session, socket, this.#events);
      driver.onGone = () => {
        if (this.#driver === driver) this.#driver = null;
        this.#schedule();
      };
      this.#driver = driver;
      driver.start();
      onOpen?.();
    });
    socket.on('error', (error) => {
      if (!opened) this.#events.push({ kind: 'error', error });
    });
    socket.on('close', () => {
      if (!opened) this.#schedule(onOpen);
    });
  }

  #schedule(onOpen?: () => void): void {
    if (this.#closed || this.#retry !== null) return;
    const delay = Math.min(this.#backoff.maxDelayMs, this.#backoff.minDelayMs * 2 ** Math.min(this.#attempts, 20));
    this.#attempts += 1;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#open(onOpen);
    }, delay);
  }

  /** Send a sequenced message (`task.progress` / `task.report`); kept for replay. */
  send(message: Message): Message {
    if (this.#driver !== null) return this.#driver.send(message);
    return this.session.send(now(), message);
  }

  /** Whether a socket is up. */
  get connected(): boolean {
    return this.#driver !== null;
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
  /** @internal */
  announced = false;
  #driver: Driver | null = null;

  /** @internal */
  constructor(runnerId: string, session: HubSession, maxQueuedEvents: number) {
    this.runnerId = runnerId;
    this.session = session;
    this.#events = new EventQueue(maxQueuedEvents);
  }

  /** Send a command (`task.assign` / `task.cancel`), connected or not; kept for replay. */
  send(message: Message): Message {
    if (this.#driver !== null) return this.#driver.send(message);
    return this.session.send(now(), message);
  }

  /** Whether the runner's socket is up. */
  get connected(): boolean {
    return this.#driver !== null;
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
    const driver = new Driver(this.session, socket, this.#events);
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

/** Options of a {@link HubServer}. */
export interface HubServerOptions {
  /** Accepted bearer tokens → runner ids (compared in constant time by the core). */
  tokens: Record<string, string>;
  /** Session configuration of every runner's session. */
  config?: SessionConfig;
  /** Bound of each runner's event queue (default: the core's host default). */
  maxQueuedEvents?: number;
  /** Disconnected, idle runners kept (default: the core's host default). */
  maxIdleRunners?: number;
}

/**
 * The hub's WebSocket server for runners: the bearer token is checked before the
 * upgrade (refused with HTTP 401), each runner id has one {@link HubRunner} with one
 * session, so a reconnect resumes its streams.
 */
export class HubServer {
  readonly #host: HubHost;
  readonly #config: SessionConfig | undefined;
  readonly #maxQueued: number;
  readonly #runners = new Map<string, HubRunner>();
  readonly #arrivals = new EventQueueOf<HubRunner>();
  #server: Server | null = null;
  #wss: ReturnType<typeof makeWss> | null = null;
  #conn = 0;

  constructor(options: HubServerOptions) {
    this.#host = new HubHost({ tokens: options.tokens, max_idle_runners: options.maxIdleRunners ?? HOST_CONSTANTS.max_idle_runners });
    this.#config = options.config;
    this.#maxQueued = options.maxQueuedEvents ?? HOST_CONSTANTS.max_queued_events;
  }

  /** Listen on `host:port` (port 0: any); resolves with the bound port. */
  async listen(port = 0, host = '127.0.0.1'): Promise<number> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const http = require('node:http') as typeof import('node:http');
    const server = http.createServer((_req, res) => {
      res.writeHead(426).end();
    });
    this.#wss = makeWss();
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head));
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    const address = server.address();
    return typeof address === 'object' && address !== null ? address.port : port;
  }

  /** The runner's handle (created on first use; usable before it connects). */
  runner(runnerId: string): HubRunner {
    let runner = this.#runners.get(runnerId);
    if (runner === undefined) {
      runner = new HubRunner(runnerId, new HubSession({ config: this.#config }), this.#maxQueued);
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
    const runner = await this.#arrivals.next();
    runner.announced = false;
    return runner;
  }

  /** Stop listening and close every runner's socket. */
  async close(): Promise<void> {
    for (const r of this.#runners.values()) r.stop();
    this.#wss?.close();
    const server = this.#server;
    this.#server = null;
    if (server !== null) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  #decide(): HubOutput[] {
    const outs: HubOutput[] = [];
    for (let o = this.#host.pollOutput(); o !== null; o = this.#host.pollOutput()) {
      if (o.kind === 'evict') this.#runners.delete(o.runner_id);
      else outs.push(o);
    }
    return outs;
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#conn += 1;
    const conn = this.#conn;
    const headers = pairs(req.rawHeaders);
    this.#host.handleInput(now(), { type: 'request', conn, headers });
    for (const out of this.#decide()) {
      if (out.kind === 'reject') {
        socket.end(
          `HTTP/1.1 ${out.status} Unauthorized\r\nContent-Type: text/plain; charset=utf-8\r\n` +
            `Content-Length: ${Buffer.byteLength(out.body)}\r\nConnection: close\r\n\r\n${out.body}`,
        );
        return;
      }
    }
    const wss = this.#wss;
    if (wss === null) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      this.#host.handleInput(now(), { type: 'upgraded', conn, headers });
      for (const out of this.#decide()) {
        if (out.kind === 'refuse') {
          const host = new SocketHost();
          host.handleInput(now(), { type: 'opened' });
          host.handleInput(now(), { type: 'close', code: out.code, reason: out.reason });
          for (let o = host.pollOutput(); o !== null; o = host.pollOutput()) {
            if (o.kind === 'close') ws.close(o.code, o.reason);
            else if (o.kind === 'abort') ws.terminate();
          }
          return;
        }
        if (out.kind === 'attach') {
          const runner = this.runner(out.runner_id);
          if (out.announce) {
            runner.announced = true;
            this.#arrivals.push(runner);
          }
          runner.serve(ws);
          return;
        }
      }
    });
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

/** An unbounded FIFO with waiting readers. */
class EventQueueOf<T> {
  readonly #items: T[] = [];
  readonly #waiters: ((t: T) => void)[] = [];

  push(t: T): void {
    const w = this.#waiters.shift();
    if (w !== undefined) w(t);
    else this.#items.push(t);
  }

  next(): Promise<T> {
    const t = this.#items.shift();
    return t !== undefined ? Promise.resolve(t) : new Promise((resolve) => this.#waiters.push(resolve));
  }
}
