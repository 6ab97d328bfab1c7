// Calls whose outcome the browser build must reproduce exactly as the Node build does
// (api.test.mjs runs them in Node and in the page and compares): representative errors of
// every error class — class, prototype chain, name, `.code`, message and the class's own
// fields — and a few values whose bytes cross the boundary (snapshots, lazy decode).

/** The error classes of the package, most derived first. */
const CLASSES = [
  'SchemaValidationError',
  'UnknownMessageError',
  'DecodeError',
  'ProtocolStateError',
  'ConfigError',
  'AdapterUnavailableError',
  'AdapterError',
  'ReducerError',
  'ContractError',
  'ResolutionRefused',
  'FencedError',
  'StoreError',
  'PanicError',
  'RunnerProtocolError',
];
const FIELDS = ['violations', 'lines', 'key', 'detailCode', 'model', 'field', 'reasons', 'details', 'lineNumber'];

/** A comparable description of a thrown value. */
export function describeError(srp, e) {
  if (!(e instanceof Error)) return { thrown: String(e) };
  const out = {
    name: e.name,
    constructor: e.constructor.name,
    instanceOf: CLASSES.filter((c) => e instanceof srp[c]),
    isError: e instanceof Error,
    code: e.code,
    message: e.message,
  };
  for (const f of FIELDS) if (f in e) out[f] = e[f];
  return out;
}

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

const PROFILE = {
  contract_version: '1.0',
  profile_id: 'coder-default',
  rein: 'fake-rein',
  model: 'claude-sonnet-4-5',
  sandbox_profile: 'repo-rw',
  tool_policy: { allowed_tools: ['run_task', 'read_file'] },
  credential_refs: ['env:ANTHROPIC_API_KEY'],
};
const FRAME =
  '{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"usage","attempt":2,' +
  '"payload":{"usage":{"fresh_input":12,"output":3,"cache_read":50,"cache_write":0,"thinking":1}}}';

/** [label, (srp) => value]: each throws (an error case) or returns a JSON value. */
export const CASES = [
  ['decode: not JSON', (srp) => srp.decode('not json')],
  ['decode: unknown type', (srp) => srp.decode('{"schema_version":1,"type":"nope"}')],
  [
    'decode: schema violations',
    (srp) =>
      srp.decode('{"schema_version":3,"type":"task.progress","task_id":"","seq":-4,"kind":"usage","payload":{"usage":{"cache_read":1}}}', {
        validate: true,
      }),
  ],
  ['decode: a lone surrogate', (srp) => srp.decode('{"schema_version":1,"type":"ping","x":"\ud800"}')],
  ['LocalRun: a config value of the wrong type', (srp) => new srp.LocalRun({ max_line_bytes: '64k' })],
  ['SessionReducer: an invalid event', (srp) => new srp.SessionReducer({ run_id: 'run_local' }).applyLine('{}')],
  ['ConnectionState.restore: not a snapshot', (srp) => srp.ConnectionState.restore(new Uint8Array([1, 2, 3]))],
  ['parseModel: an unknown model', (srp) => srp.parseModel('no_such_model', {})],
  ['resolveProfile: ambiguous', (srp) => srp.resolveProfile('coder-default', { profiles: [PROFILE, { ...PROFILE, model: 'gpt-5' }], reins: [] })],
  ['validateTurnResult: not a turn result', (srp) => srp.validateTurnResult({})],
  ['HubSession.fromRows: a command of an unknown task', (srp) => srp.HubSession.fromRows({ commands: [{ task_id: 'T-9', seq: 1, frame: '{}' }] })],
  ['Lease: a renewal period that leaves no margin', (srp) => new srp.Lease({ renew_every_ms: 8000 })],
  [
    'HubSession: rows, fromRows and a RowTracker',
    (srp) => {
      const hub = new srp.HubSession({ config: { durable_acks: true } });
      hub.handleInput(0, { type: 'connected' });
      hub.handleInput(1, { type: 'frame', frame: '{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1"}' });
      hub.handleInput(2, { type: 'frame', frame: FRAME.replace('"seq":3', '"seq":1') });
      hub.confirm(3, 'T-1', 2, 1);
      hub.send(4, { type: 'task.cancel', task_id: 'T-1', reason: 'é' });
      const rows = hub.rows();
      const tracker = new srp.RowTracker();
      const writes = tracker.writes(hub);
      tracker.committed();
      return { rows, writes, rebuilt: srp.HubSession.fromRows(rows, { durable_acks: true }).rows(), again: tracker.writes(hub) };
    },
  ],
  [
    'Lease and closeFor',
    (srp) => {
      const lease = new srp.Lease();
      const first = lease.drainOutputs();
      lease.handleInput(10, { type: 'renewed', started_at: 5 });
      return { first, timeout: lease.pollTimeout(), held: lease.isHeld(10), config: lease.config, close: srp.closeFor('fenced'), code: srp.CLOSE_STORE };
    },
  ],
  [
    'ConnectionState: snapshot bytes and restore',
    (srp) => {
      const state = new srp.ConnectionState('runner');
      state.emit({ type: 'task.progress', task_id: 'T-1', kind: 'log', payload: { line: 'a' } });
      state.emit({ type: 'task.progress', task_id: 'T-1', kind: 'log', payload: { line: 'é' } });
      const bytes = state.snapshot();
      const restored = srp.ConnectionState.restore(bytes);
      return { snapshot: hex(bytes), isUint8Array: bytes instanceof Uint8Array, restoredEqual: restored.equals(state) };
    },
  ],
  [
    'decode: the fast path (lazy payload) and encode',
    (srp) => {
      const m = srp.decode(FRAME, { validate: true });
      return { seq: m.seq, attempt: m.attempt, taskId: m.task_id, output: m.payload.usage.output, frame: srp.encode(m), json: JSON.stringify(m) };
    },
  ],
  [
    'LineFramer: bytes in, lines out',
    (srp) => {
      const f = new srp.LineFramer({ max_line_bytes: 8 });
      const items = f.pushAll('ab\r\ncdefghijklmn\nxyz');
      f.finish();
      return [...items, ...f.drain()].map((item) => (item instanceof Uint8Array ? { bytes: hex(item), isUint8Array: true } : item));
    },
  ],
];

/** Every case's outcome: `{ value }` or `{ error: describeError(...) }`, by label. */
export function runCases(srp) {
  const out = {};
  for (const [label, f] of CASES) {
    try {
      out[label] = { value: JSON.parse(JSON.stringify(f(srp) ?? null)) };
    } catch (e) {
      out[label] = { error: describeError(srp, e) };
    }
  }
  return out;
}
