// A consumer of the published types, checked with `tsc --strict --noEmit` against the
// installed package (tests/package.test.mjs). It uses every part of the API.
import {
  ConnectionState,
  ConfigError,
  DecodeError,
  Gateway,
  HubHost,
  HubSession,
  InboxTracker,
  LineFramer,
  LocalRun,
  OutboxLog,
  PROTOCOL_VERSION,
  ProtocolStateError,
  ReinSession,
  RunnerSession,
  SCHEMA_VERSION,
  SchemaValidationError,
  SessionIds,
  SessionReducer,
  SocketHost,
  SubprocessSession,
  agentOptions,
  agentTurn,
  bearerAuthorization,
  decode,
  encode,
  fromObject,
  hostConfig,
  isValid,
  iterErrors,
  mapUsage,
  messageTypes,
  parseModel,
  replayEvents,
  resolveProfile,
  roleSpecFromInvocation,
  runnerTaskCall,
  usageFromAnthropic,
  validate,
  validateTurnResult,
  type Arrival,
  type Hello,
  type Message,
  type SessionOutput,
  type TaskProgress,
  type UsageSplit,
} from 'stapel-runner-protocol';

function kindOf(m: Message): string {
  switch (m.type) {
    case 'task.progress':
      return `${m.task_id}:${m.kind}`;
    case 'hello':
      return m.project_id;
    default:
      return m.type;
  }
}

const hello: Hello = { type: 'hello', project_id: 'p', runner_version: '1.0.0' };
const progress: TaskProgress = { type: 'task.progress', task_id: 'T', kind: 'state', payload: { state: 'running' } };
const frame: string = encode(progress);
const back: Message = decode(Buffer.from(frame), { validate: true });
const checked: Message = validate(fromObject({ type: 'ping' }, { extra: { x: 1 } }), 'ping');
const ok: boolean = isValid(back, 'task.progress') && iterErrors(checked, 'ping').length === 0;
const types: string[] = messageTypes();
const versions: number = SCHEMA_VERSION + PROTOCOL_VERSION;

const hub = new HubSession({ config: { ping_interval_ms: 0 } });
hub.handleInput(0, { type: 'connected' });
const out: SessionOutput | null = hub.pollOutput();
if (out !== null && out.kind === 'received') {
  kindOf(out.message);
}
const runner = new RunnerSession(hello, { snapshot: hub.snapshot() });
const deadline: number | null = runner.pollTimeout();

const state = new ConnectionState('runner', { max_outbox_frames: 16 });
const stamped: TaskProgress = state.emit(progress);
const replay = ConnectionState.restore(state.snapshot()).replayFor({ T: 0 });
const log = new OutboxLog({ max_frames: 4 });
const logged: TaskProgress = log.emit(progress);
const tail: Message[] = log.since(0);
const inbox = new InboxTracker({ window: 8 });
const arrival: Arrival = inbox.receive(1);
const watermark: number = inbox.lastSeq + log.lastSeq;
const policy: unknown = runnerTaskCall({ backoff: { failures: 1, random: 0 } });
const framer = new LineFramer({ max_line_bytes: 1024 });
const items = framer.pushAll('{"a":1}\n');

const reducer = new SessionReducer();
const snapshot = replayEvents(undefined, []);
const local = new LocalRun();
local.handleInput(0, { type: 'controller_eof' });
const usage: UsageSplit = usageFromAnthropic({ input_tokens: 1, output_tokens: 2 });
const mapped = mapUsage('openai', { prompt_tokens: 1, completion_tokens: 1 });
const role = roleSpecFromInvocation({});
const options = agentOptions({}, { systemPrompt: null });
const turn = agentTurn(['hi'], { usage: { input_tokens: 1, output_tokens: 1 } });
const result = validateTurnResult(turn);
const sub = new SubprocessSession({ grace_ms: 10 });
const socket = new SocketHost();
const hubHost = new HubHost({ tokens: { t: 'r-1' } });
const auth: string | null = bearerAuthorization('t');
const config = hostConfig();
const gateway = new Gateway({ catalog: {} });
const rein = new ReinSession({}, 0);
const ids = new SessionIds();

function describe(e: unknown): string {
  if (e instanceof SchemaValidationError) return e.violations.map((v) => `${v.location}:${v.rule}`).join(',');
  if (e instanceof DecodeError) return e.lines.join('\n');
  if (e instanceof ConfigError) return e.key;
  if (e instanceof ProtocolStateError) return e.code;
  return String(e);
}

export const used = [
  frame, ok, types, versions, deadline, stamped, replay, items, reducer, snapshot, usage, mapped, role, options,
  result, logged, tail, arrival, watermark, policy, sub, socket, hubHost, auth, config, gateway, rein, ids, describe, parseModel, resolveProfile,
];
