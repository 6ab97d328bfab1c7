// One error table: the package's exception classes are the core's (errors::table_value()),
// and real core errors triggered through the public API are the class the core's
// error_class(kind, code) names, with the core's code — the same class name and code
// every binding raises. A configuration the core refuses is one class everywhere.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as srp from 'stapel-runner-protocol';

/** The error `f` throws (it must throw). */
function thrown(f) {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error(`no error from ${f}`);
}

/** `e` is the class the core's table gives `kind` and its code, with the table's ancestry. */
function isTableClass(e, kind, code) {
  const table = srp.errorTable();
  const parents = new Map(table.classes.map((c) => [c.name, c.parent]));
  const name = srp.errorClass(kind, code);
  assert.equal(e.code, code, `${kind}: code`);
  assert.equal(e.constructor.name, name, `${kind}/${code}: class`);
  assert.equal(e.name, name);
  for (let c = name; c !== null; c = parents.get(c)) {
    assert.ok(e instanceof srp[c], `${name} is a ${c}`);
  }
  assert.ok(e instanceof Error);
}

test('the exception classes are the core table\'s: names, parents, nothing else', () => {
  const table = srp.errorTable();
  assert.deepEqual(srp.ERROR_CLASS_NAMES, table.classes.map((c) => c.name));
  for (const c of table.classes) {
    const cls = srp[c.name];
    assert.equal(typeof cls, 'function', c.name);
    const parent = Object.getPrototypeOf(cls);
    assert.equal(parent === Error ? null : parent.name, c.parent, c.name);
  }
  // Every rule names a class of the table; an unknown kind is the root class.
  for (const r of table.rules) assert.ok(table.classes.some((c) => c.name === r.class), r.class);
  assert.equal(srp.errorClass('no_such_kind', 'x'), 'RunnerProtocolError');
});

test('representative core errors through the public API are error_class(kind, code)', () => {
  // decode: unknown_type, schema_violation, not_json.
  isTableClass(thrown(() => srp.decode('{"schema_version":1,"type":"task.nope","task_id":"T"}', { validate: true })), 'decode', 'unknown_type');
  const schema = thrown(() => srp.decode('{"schema_version":1,"type":"task.cancel","task_id":"","reason":"x","seq":1}', { validate: true }));
  isTableClass(schema, 'decode', 'schema_violation');
  assert.equal(schema.violations[0].location, 'task_id');
  isTableClass(thrown(() => srp.decode('{not json', { validate: true })), 'decode', 'not_json');
  // config: unknown_key, through the session, naming the key.
  const config = thrown(() => new srp.HubSession({ config: { sequencing: { max_stream: 1 } } }));
  isTableClass(config, 'config', 'unknown_key');
  assert.equal(config.key, 'sequencing.max_stream');
  // session: backpressure (a send refused because the kept log is full).
  const session = new srp.RunnerSession({ type: 'hello', project_id: 'p', runner_version: '1' }, { config: { sequencing: { max_outbox_frames: 1 } } });
  session.send(0, { type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: {} });
  isTableClass(thrown(() => session.send(0, { type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: {} })), 'session', 'backpressure');
  // sequencing: backpressure from the state itself.
  const state = new srp.ConnectionState('runner', { max_outbox_frames: 1 });
  state.emit({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: {} });
  isTableClass(thrown(() => state.emit({ type: 'task.progress', task_id: 'T', attempt: 1, kind: 'log', payload: {} })), 'sequencing', 'backpressure');
  // link: wrong_side, invalid_close_code; and the session's not_durable inside a link.
  const hub = new srp.HubLink();
  isTableClass(thrown(() => hub.handleInput(0, { type: 'start' })), 'link', 'wrong_side');
  isTableClass(thrown(() => hub.handleInput(0, { type: 'close', code: 1005, reason: '' })), 'link', 'invalid_close_code');
  isTableClass(thrown(() => hub.handleInput(0, { type: 'confirm', task_id: 'T', attempt: 1, seq: 1 })), 'session', 'not_durable');
  // host: a socket input before it opened.
  isTableClass(thrown(() => new srp.SocketHost().handleInput(0, { type: 'text', text: 'x' })), 'host', 'not_opened');
  // reducer: an event of an unsupported schema.
  const reducer = thrown(() => new srp.SessionReducer().apply({}));
  isTableClass(reducer, 'reducer', 'invalid_event');
  // adapter: a usage shape with no token count.
  isTableClass(thrown(() => srp.usageFromMapping({ nope: -1 })), 'adapter', 'invalid_usage');
  // contract: a model missing a field; resolution: an unknown profile.
  isTableClass(thrown(() => srp.parseModel('HarnessProfile', {})), 'contract', 'missing_field');
  const refused = thrown(() => srp.resolveProfile('nope', {}));
  isTableClass(refused, 'resolution', refused.code);
  assert.deepEqual(refused.reasons, ['profile_not_found']);
  // store: rows that make no hub session (a session's and a link's); a fenced write as a
  // host raises it.
  isTableClass(thrown(() => srp.HubSession.fromRows({ tasks: [{ task_id: 'T', next_seq: 0, assigned_attempt: 0, forgotten: false }] })), 'store', 'invalid_rows');
  isTableClass(thrown(() => srp.HubLink.fromRows({ commands: [{ task_id: 'T', seq: 1, frame: '{}' }] })), 'store', 'invalid_rows');
  const fenced = srp.coreError('store', 'fenced', 'runner r-1 is no longer owned at epoch 3');
  isTableClass(fenced, 'store', 'fenced');
  assert.ok(fenced instanceof srp.StoreError && !(fenced instanceof srp.ProtocolStateError));
  // transport: a link's error event as a host raises it.
  const transport = srp.coreError('transport', 'upgrade_refused', 'HTTP 401', { status: 401 });
  isTableClass(transport, 'transport', 'upgrade_refused');
  assert.equal(transport.status, 401);
});

test('one core ConfigError is one class everywhere', () => {
  const refusals = [
    () => new srp.HubSession({ config: { bogus: 1 } }),
    () => new srp.RunnerSession({ type: 'hello', project_id: 'p', runner_version: '1' }, { config: { bogus: 1 } }),
    () => new srp.ConnectionState('hub', { bogus: 1 }),
    () => new srp.LineFramer({ bogus: 1 }),
    () => new srp.LocalRun({ bogus: 1 }),
    () => new srp.SessionReducer({ bogus: 1 }),
    () => new srp.SocketHost({ bogus: 1 }),
    () => new srp.HubHost({ bogus: 1 }),
    () => srp.hostConfig({ bogus: 1 }),
    () => new srp.HubLink({ config: { bogus: 1 } }),
    () => new srp.RunnerLink({ type: 'hello', project_id: 'p', runner_version: '1' }, { config: { bogus: 1 } }),
    () => srp.linkConfig({ bogus: 1 }),
    () => new srp.Lease({ bogus: 1 }),
    () => srp.leaseConfig({ bogus: 1 }),
    () => srp.HubSession.fromRows({}, { bogus: 1 }),
  ];
  for (const f of refusals) {
    const e = thrown(f);
    isTableClass(e, 'config', 'unknown_key');
    assert.equal(e.key, 'bogus', String(f));
  }
  const nested = thrown(() => srp.linkConfig({ session: { ping_interval_ms: 'soon' } }));
  isTableClass(nested, 'config', 'wrong_type');
  assert.equal(nested.key, 'session.ping_interval_ms');
});
