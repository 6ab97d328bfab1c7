// A consumer of the published types, checked with `tsc --strict --noEmit` against the
// installed package, as CommonJS and as ESM (tests/package.test.mjs). It uses every part
// of the API, the transport included.
import {
  CLOSE_STORE,
  FencedError,
  Lease,
  RowTracker,
  StoreError,
  closeFor,
  leaseConfig,
  type CommandRow,
  type InboundRow,
  type LeaseConfig,
  type LeaseInput,
  type LeaseOutput,
  type RowWrite,
  type RunnerRows,
  type TaskRow,
  ADAPTER_DEFAULTS,
  ERROR_CLASS_NAMES,
  HubLink,
  LINK_CONSTANTS,
  RunnerLink,
  TransportError as CoreTransportError,
  coreError,
  errorClass,
  errorTable,
  isLinkEvent,
  linkConfig,
  type LinkConfig,
  type LinkConfigValues,
  type LinkEvent,
  type LinkOutput,
  type LinkStatus,
  AdapterError,
  AdapterUnavailableError,
  BaseHarnessAdapter,
  ConfigError,
  ConnectionState,
  ContractError,
  DEFAULT_MAX_LINE_BYTES,
  DecodeError,
  DecodedProgress,
  Gateway,
  GatewayMachine,
  HOST_CONSTANTS,
  HubHost,
  HubSession,
  InboxTracker,
  LineFramer,
  LocalRun,
  MESSAGES,
  OutboxLog,
  PROTOCOL_VERSION,
  PanicError,
  ProtocolStateError,
  ReducerError,
  ReinSession,
  ResolutionRefused,
  RunnerProtocolError,
  RunnerSession,
  SCHEMA_FILES,
  SCHEMA_VERSION,
  SEQUENCED_TYPES,
  SchemaValidationError,
  SessionIds,
  SessionReducer,
  SocketHost,
  SubprocessAdapter,
  SubprocessRein,
  SubprocessSession,
  SubprocessTurnMachine,
  TaskChannel,
  UnknownMessageError,
  VERSION,
  agentOptions,
  agentTurn,
  answerPing,
  bearerAuthorization,
  bearerRefusal,
  bearerToken,
  contractModelNames,
  decode,
  encode,
  fromObject,
  hostAdapterError,
  hostConfig,
  isCredentialReference,
  isSensitiveKey,
  isSequenced,
  isValid,
  iterErrors,
  loadSchema,
  looksLikeCredential,
  mapUsage,
  messageTypes,
  parseCatalog,
  parseModel,
  profileRef,
  reconnectDelay,
  rein,
  replayEvents,
  resolveProfile,
  roleSpecFromInvocation,
  roleSpecSystemPrompt,
  runnerIsIdle,
  runnerTaskCall,
  safeIdentifier,
  toFrame,
  usageFromAnthropic,
  usageFromMapping,
  usageFromOpenai,
  validate,
  validateTurnResult,
  type Arrival,
  type CanonicalEvent,
  type Catalog,
  type DeliveryReport,
  type ExecutionSummary,
  type GatewayOutput,
  type GatewayResult,
  type HarnessAdapter,
  type HarnessProfile,
  type Hello,
  type HubOutput,
  type LineItem,
  type LocalConfig,
  type LocalOutput,
  type Message,
  type Ping,
  type ReduceOutcome,
  type ReducerSnapshot,
  type Rein,
  type ReplayReport,
  type Resolution,
  type RoleSpec,
  type SandboxHandle,
  type Sandboxer,
  type Session,
  type SessionOutput,
  type SocketOutput,
  type SubprocessOutput,
  type TaskCancel,
  type TaskOutcome,
  type TaskProgress,
  type ToolCall,
  type ToolResult,
  type TurnResult,
  type UnackedFrame,
  type UsageSplit,
} from 'stapel-runner-protocol';
import { HubServer, MAX_BACKLOG_BYTES, RunnerClient, TransportError, type TransportEvent } from 'stapel-runner-protocol/transport-ws';

function kindOf(m: Message): string {
  switch (m.type) {
    case 'task.progress':
      return `${m.task_id}:${m.kind}:${JSON.stringify(m.payload)}`;
    case 'hello':
      return m.project_id;
    default:
      return m.type;
  }
}

// Codec.
const hello: Hello = { type: 'hello', project_id: 'p', runner_version: '1.0.0' };
const progress: TaskProgress = { type: 'task.progress', task_id: 'T', kind: 'state', payload: { state: 'running' } };
const frame: string = encode(progress) + toFrame(hello, { validate: true });
const back: Message = decode(Buffer.from(frame), { validate: true, lazy: false });
if (back instanceof DecodedProgress) kindOf(back.toJSON());
const checked = validate(fromObject({ type: 'ping' }, { extra: { x: 1 } }), 'ping');
const pong = answerPing(checked satisfies Ping);
const ok: boolean = isValid(back, 'task.progress') && iterErrors(checked, 'ping').length === 0 && isSequenced('task.cancel');
const constants = [VERSION, SCHEMA_VERSION + PROTOCOL_VERSION, DEFAULT_MAX_LINE_BYTES, SEQUENCED_TYPES.has('task.cancel'), SCHEMA_FILES.ping, messageTypes()];
const schema: Record<string, unknown> = loadSchema('ping');
const cancel: TaskCancel = MESSAGES['task.cancel'].create({ task_id: 'T', reason: 'r' });

// Sessions and sequencing.
const hub = new HubSession({ config: { ping_interval_ms: 0, sequencing: { max_streams: 8 } } });
hub.handleInput(0, { type: 'connected' });
const outs: SessionOutput[] = [...hub.handleFrames(0, [frame]), ...hub.drainOutputs()];
for (let out = hub.pollOutput(); out !== null; out = hub.pollOutput()) {
  if (out.kind === 'received') kindOf(out.message);
  if (out.kind === 'peer_error') void out.code;
}
const runner = new RunnerSession(hello, { snapshot: hub.snapshot() });
runner.send(0, cancel);
const again: TaskCancel = runner.resend(0, cancel);
void again.seq;
const deadline: number | null = runner.pollTimeout();
const stateCopy: ConnectionState = runner.state();
const state = new ConnectionState('runner', { max_outbox_frames: 16 });
const stamped: TaskProgress = state.emit(progress);
const replay: ReplayReport = ConnectionState.restore(state.snapshot()).replayReport({ T: 0 });
const replayed: Record<string, Message[]> = state.replayFor({ T: 0 });
const isNew: boolean = state.receive(cancel);
const arrival: Arrival = state.receiveArrival(cancel) ?? state.acceptInOrder(cancel);
const channel: TaskChannel = state.channel('T');
const unacked: UnackedFrame[] = state.unacked();
const sizes = [state.memoryFootprint(), state.forgottenCount, state.config.max_streams, channel.outbox?.last_seq, state.isAhead('T', 1, 9)];
const log = new OutboxLog({ max_frames: 4 });
const logged: TaskProgress = log.emit(progress);
const tail: Message[] = log.since(0);
const inbox = new InboxTracker({ window: 8 });
const watermark: number = inbox.lastSeq + log.lastSeq + log.unconfirmedFrom + (inbox.receive(1) ? 1 : 0);
const framer = new LineFramer({ max_line_bytes: 1024 });
const items: LineItem[] = framer.pushAll('{"a":1}\n');
const framerState = [framer.readyBytes, framer.full, framer.finished, framer.bounds.max_ready_lines];

// Local run and reducer.
const localConfig: LocalConfig = { run_id: 'run_local' };
const local = new LocalRun(localConfig);
local.handleInput(0, { type: 'controller_eof' });
const localOuts: LocalOutput[] = local.drainOutputs();
const reducer = new SessionReducer({ run_id: 'run_local' });
const event: CanonicalEvent = {
  schema: 'paperclip.prp.event.v1',
  schemaVersion: 1,
  sourceEventId: 'e1',
  sourceSeq: 1,
  sourceInstanceId: 'runner_local',
  sourceKind: 'runner',
  runId: 'run_local',
  eventType: 'turn.started',
  priority: 1,
  emittedAt: '2026-01-01T00:00:00.001Z',
  payload: {},
};
const outcome: ReduceOutcome = reducer.apply(event);
const snapshot: ReducerSnapshot = replayEvents(undefined, [event]);
const delivery: DeliveryReport = reducer.delivery();
reducer.applyAll([event]);

// Harness adapters.
const usage: UsageSplit = usageFromAnthropic({ input_tokens: 1, output_tokens: 2 });
const usage2: UsageSplit = usageFromOpenai({ prompt_tokens: 1 });
const usage3: UsageSplit = usageFromMapping(usage);
const mapped = mapUsage('openai', { prompt_tokens: 1, completion_tokens: 1 });
const role: RoleSpec = roleSpecFromInvocation({});
const prompt: string | null = roleSpecSystemPrompt({}, 'coder');
const options = agentOptions({}, { systemPrompt: null });
const turn: TurnResult = agentTurn(['hi'], { usage: { input_tokens: 1, output_tokens: 1 } });
const result: TurnResult = validateTurnResult(turn);
const fault: Error | null = hostAdapterError('spawn_failed', 'x');
const machine = new SubprocessTurnMachine({ grace_ms: 10 });
const subOuts: SubprocessOutput[] = machine.drainOutputs();
const adapter: HarnessAdapter = new SubprocessAdapter({ command: ['fake-harness'], graceMs: 10 });
class EchoAdapter extends BaseHarnessAdapter {
  async openSession(_spec: RoleSpec): Promise<Session> {
    return { closed: false, turn: async (p: string) => ({ text: p, usage }), close: async () => {} };
  }
}
const echoed: Promise<TurnResult> = new EchoAdapter().oneshot(role, 'hi');
const isSession = (s: Session): s is SubprocessSession => s instanceof SubprocessSession;

// Host policy and the task policy.
const socket = new SocketHost({ close_timeout_ms: 10 });
const socketOuts: SocketOutput[] = socket.drainOutputs();
const hubHost = new HubHost({ tokens: { t: 'r-1' } });
const hubOuts: HubOutput[] = hubHost.drainOutputs();
const auth = [bearerAuthorization('t'), bearerToken('Bearer t'), bearerRefusal([]), runnerIsIdle({ runner_id: 'r' }), hostConfig().max_queued_events, HOST_CONSTANTS.replaced_reason, hubHost.hasTokenTable, socket.isOpen];
const delay: number = reconnectDelay(1, { initial_ms: 100 });
const backoff: { capped_ms: number; delay_ms: number } = runnerTaskCall({ backoff: { failures: 1, random: 0 } });
const admit: 'start' | 'busy' | 'duplicate' = runnerTaskCall({ admit: { running: 0, max_tasks: 1, already_running: false } });
const report: Record<string, unknown> = runnerTaskCall({ report: { task_id: 'T', outcome: { type: 'done' } satisfies TaskOutcome } });
const ref: string = profileRef({});

// Contract.
const catalog: Catalog = { profiles: [], reins: [] };
const counts = parseCatalog(catalog);
const names = contractModelNames();
const sandbox: SandboxHandle = parseModel('SandboxHandle', { sandbox_id: 'sb' });
const resolution = (): Resolution => resolveProfile('p@1', catalog);
const safe = [safeIdentifier('x').text, looksLikeCredential('x'), isSensitiveKey('token'), isCredentialReference('env:X')];
const gatewayMachine = new GatewayMachine({ catalog, max_tool_calls: 4 });
const gatewayOuts: GatewayOutput[] = gatewayMachine.drainOutputs();
const profile = (p: HarnessProfile): string => `${rein.roleSpec(p).role}:${new ReinSession(p, 0).toolCalls}`;
const ids = new SessionIds();
const next: number = ids.nextNumber;
const sandboxer: Sandboxer = { create: async () => sandbox, destroy: () => {} };
const myRein: Rein = {
  startSession: () => ({ session_id: 's-1' }),
  dispatchTool: (_s, call: ToolCall): ToolResult => rein.toolResult(call.name),
  endSession: (): ExecutionSummary => new ReinSession({} as HarnessProfile, 0).summary(1),
};
const gateway = new Gateway(catalog, { reins: { r: myRein, sub: new SubprocessRein({ command: ['fake-harness'] }) }, sandboxer });
const executed = (): Promise<GatewayResult> => gateway.execute({} as Parameters<Gateway['execute']>[0]);

// Links.
const linkCfg: LinkConfig = { connect_timeout_ms: 100, session: { ping_interval_ms: 0, durable_acks: false } };
const runnerLink = new RunnerLink(hello, { config: linkCfg, seed: 42n });
runnerLink.handleInput(0, { type: 'start' });
const linkOuts: LinkOutput[] = runnerLink.drainOutputs();
const linkEvents: LinkEvent[] = linkOuts.filter(isLinkEvent);
const hubLink = new HubLink({ config: { max_queued_events: 8 } });
hubLink.handleInput(0, { type: 'attach', socket: 1 });
const hubLinkOuts: LinkOutput[] = hubLink.handleFrames(0, 1, ['{}'], 0);
for (const o of hubLinkOuts) {
  if (o.kind === 'received') void o.message.type;
  else if (o.kind === 'error') void [o.code, o.status];
  else if (o.kind === 'send') void o.frame;
}
hubLink.handleInput(1, { type: 'confirm', task_id: 'T', attempt: 1, seq: 1 });
const linkStatus: LinkStatus = hubLink.status();
const linkValues: LinkConfigValues = linkConfig(linkCfg);
const linkBits = [runnerLink.phase, runnerLink.pollTimeout(), hubLink.socket, hubLink.sockets, runnerLink.stats().dropped_events, LINK_CONSTANTS.news_allowance, runnerLink.snapshot(), runnerLink.state()];
// The error table.
const table = errorTable();
const tableBits: [string, readonly string[], string, boolean] = [errorClass('decode', 'unknown_type'), ERROR_CLASS_NAMES, table.classes[0]?.name ?? '', coreError('transport', 'connect_failed', 'x') instanceof CoreTransportError];
// Hub stores.
const storedRows: RunnerRows = new HubSession().rows();
const firstTask: TaskRow | undefined = storedRows.tasks[0];
const firstInbound: InboundRow | undefined = storedRows.inbound[0];
const firstCommand: CommandRow | undefined = storedRows.commands[0];
const rebuiltHub: HubSession = HubSession.fromRows({ tasks: [] }, { durable_acks: true });
const rebuiltLink: HubLink = HubLink.fromRows(storedRows, { session: { durable_acks: true } });
const rowTracker = new RowTracker(storedRows);
const rowWrites: RowWrite[] = [...rowTracker.writes(rebuiltHub), ...rowTracker.writes(rebuiltLink)];
for (const w of rowWrites) {
  if (w.op === 'put_task') void [w.next_seq, w.forgotten];
  else if (w.op === 'put_command') void w.frame;
  else if (w.op === 'delete_commands') void w.through;
  else void w.task_id;
}
rowTracker.committed();
rowTracker.failed();
const leaseCfg: LeaseConfig = { lease_ms: 10000, margin_ms: 2000 };
const lease = new Lease(leaseCfg);
const leaseInput: LeaseInput = { type: 'renewed', started_at: 0 };
lease.handleInput(1, leaseInput);
const leaseOut: LeaseOutput | null = lease.pollOutput();
const closeBits: [number, string] = closeFor('fenced');
const storeBits = [firstTask, firstInbound, firstCommand, rebuiltLink.rows(), leaseOut, lease.drainOutputs(), lease.pollTimeout(), lease.isHeld(1), lease.config.retry_ms, leaseConfig(), closeBits, CLOSE_STORE, new FencedError('fenced', 'x') instanceof StoreError];

// Transport.
const server = new HubServer({ authenticate: async (token) => (token === 't' ? 'r-1' : null), maxQueuedEvents: 16, durableAcks: true });
const client = new RunnerClient('ws://127.0.0.1:1/', { hello, token: 't', backoff: { initial_ms: 10 }, seed: 7n, connectTimeoutMs: 1000, onReconnect: (d: number, f: number) => void [d, f] });
async function transport(): Promise<void> {
  const port: number = await server.listen(0);
  await client.connect();
  const r = await server.accept();
  r.send(cancel);
  const e: TransportEvent = await r.recv();
  if (e.kind === 'error' && e.error instanceof TransportError) void [e.error.code, e.error.status];
  if (e.kind === 'disconnected') void e.reason;
  if (e.kind === 'reconnecting') void [e.delay_ms, e.failures];
  client.send(progress);
  r.confirm('T-1', 1, 1);
  void [port, client.queuedEvents, client.droppedEvents, r.queuedEvents, MAX_BACKLOG_BYTES, client.link.phase, r.link.socket, client.snapshot(), r.snapshot(), client.stats(), client.failures];
  client.close();
  await server.close();
}

function describe(e: unknown): string {
  if (e instanceof SchemaValidationError) return e.violations.map((v) => `${v.location}:${v.rule}`).join(',');
  if (e instanceof UnknownMessageError) return e.code;
  if (e instanceof DecodeError) return e.lines.join('\n');
  if (e instanceof ConfigError) return e.key;
  if (e instanceof ProtocolStateError) return e.code;
  if (e instanceof AdapterUnavailableError) return e.code;
  if (e instanceof AdapterError) return `${e.code}:${e.lineNumber}`;
  if (e instanceof ReducerError) return `${e.detailCode}`;
  if (e instanceof ContractError) return `${e.model}.${e.field}`;
  if (e instanceof ResolutionRefused) return e.reasons.join(',');
  if (e instanceof PanicError) return e.message;
  if (e instanceof RunnerProtocolError) return e.code;
  return String(e);
}

export const used = [
  frame, ok, constants, schema, pong, outs, deadline, stateCopy, stamped, replay, replayed, isNew, arrival, unacked, sizes, logged, tail,
  watermark, items, framerState, localOuts, outcome, snapshot, delivery, usage, usage2, usage3, mapped, prompt, options, result, fault,
  subOuts, adapter, echoed, isSession, socketOuts, hubOuts, auth, delay, backoff, admit, report, ref, counts, names, resolution, safe,
  gatewayOuts, profile, next, executed, transport, describe, ADAPTER_DEFAULTS,
  linkEvents, linkStatus, linkValues, linkBits, tableBits, storeBits,
];
