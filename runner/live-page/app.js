// The live page: starts a run, streams its events (server-sent events), and hands every
// event to the protocol core's browser build — which validates it (schema, run and
// session binding) and folds it with the core's session reducer. Nothing here decides
// what an event means: the page shows the core's snapshot, and sends a person's choices
// to the server as actions (which become controller commands there).

const $ = (id) => document.getElementById(id);

/** What the page knows, also read by the browser tests (never written by them). */
const live = {
  coreLoaded: false,
  coreLoadedAt: null,
  runId: null,
  sessionId: null,
  applied: 0,
  rejected: [],
  outcomes: {},
  done: false,
  equal: null,
  firstEventAt: null,
  lastEventAt: null,
  renderedAt: null,
  messages: 0,
};
window.__live = live;

/** At most this many timeline entries stay in the page (older ones are summarised). */
const TIMELINE_MAX = 1000;

let core = null;
let reducer = null;
let source = null;
let events = [];
let snapshot = null;
let renderScheduled = false;
let actionInFlight = false;
let hiddenEntries = 0;

function setText(id, text) {
  $(id).textContent = text;
}

function problem(id, text) {
  const el = $(id);
  el.textContent = text;
  el.hidden = false;
}

async function loadCore() {
  try {
    core = await import('./core/stapel-runner-protocol.js');
    live.coreLoaded = true;
    live.coreLoadedAt = performance.now();
    setText('core-status', `Protocol core ${core.VERSION} loaded (WebAssembly).`);
  } catch (e) {
    setText('core-status', `✗ The protocol core could not be loaded: ${e?.message ?? e}`);
    throw e;
  }
}

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  if (!res.ok) {
    const code = json?.error?.code ?? `http_${res.status}`;
    const err = new Error(json?.error?.message ?? `HTTP ${res.status}`);
    err.code = code;
    err.status = res.status;
    throw err;
  }
  return { status: res.status, json };
}

async function loadScripts() {
  const { json } = await api('GET', '/api/scripts');
  const select = $('script');
  select.replaceChildren();
  for (const name of json.scripts) {
    const o = document.createElement('option');
    o.value = name;
    o.textContent = name;
    if (name === json.default) o.selected = true;
    select.append(o);
  }
  const wanted = new URLSearchParams(location.search).get('script');
  if (wanted !== null && json.scripts.includes(wanted)) select.value = wanted;
  select.disabled = false;
  $('start').disabled = false;
}

function logLine(listId, parts, note = false) {
  const li = document.createElement('li');
  if (note) li.className = 'note';
  for (const [cls, text] of parts) {
    const span = document.createElement('span');
    if (cls) span.className = cls;
    span.textContent = text;
    li.append(span);
  }
  const list = $(listId);
  list.append(li);
  if (listId === 'timeline' && list.children.length > TIMELINE_MAX) {
    list.firstElementChild.remove();
    hiddenEntries += 1;
  }
  return li;
}

/** One line of the timeline for an event the core accepted (display only). */
function describe(event) {
  const p = event.payload ?? {};
  switch (event.eventType) {
    case 'item.completed':
    case 'item.delta':
      return p.text ?? p.delta ?? '';
    case 'runtime_request.created':
      return `${p.request?.type ?? ''}: ${p.request?.prompt ?? ''}`;
    case 'runtime_request.resolved':
      return JSON.stringify(p.response ?? {});
    case 'turn.interrupted':
      return `reason ${p.reason ?? ''}`;
    case 'run.terminal':
      return `${p.runTerminalState} (${p.reconciliation?.reason ?? ''})`;
    case 'runtime.phase.changed':
      return p.phase ?? '';
    default:
      return '';
  }
}

function onEvent(message) {
  live.messages += 1;
  let outcome;
  try {
    outcome = reducer.applyLine(message.data);
  } catch (e) {
    const code = e?.code ?? 'error';
    live.rejected.push({ code, message: e?.message ?? String(e), cursor: message.lastEventId });
    const li = document.createElement('li');
    li.textContent = `✗ message ${message.lastEventId}: ${code} — ${e?.message ?? e}`;
    $('rejected-list').append(li);
    $('rejections').hidden = false;
    logLine('timeline', [['kind', `✗ rejected (${code})`], ['', ` message ${message.lastEventId}`]], true);
    schedule();
    return;
  }
  const event = JSON.parse(message.data);
  live.outcomes[outcome.kind] = (live.outcomes[outcome.kind] ?? 0) + 1;
  if (outcome.kind === 'applied' || outcome.kind === 'applied_after_gap') {
    events.push(event);
    live.applied += 1;
    const now = performance.now();
    if (live.firstEventAt === null) live.firstEventAt = now;
    live.lastEventAt = now;
  }
  const mark = outcome.kind === 'applied' ? '' : ` [${outcome.kind}]`;
  logLine('timeline', [['', `#${event.sourceSeq} `], ['kind', event.eventType], ['', ` ${describe(event)}${mark}`]]);
  schedule();
}

function onReceipt(message) {
  live.messages += 1;
  const r = JSON.parse(message.data);
  const mark = r.status === 'accepted' ? '✓' : r.status === 'duplicate' ? '=' : '✗';
  logLine('commands', [['', `${mark} #${r.controllerSeq} `], ['kind', r.status], ['', ` ${r.commandId}: ${r.detail}`]]);
}

function onDiagnostic(message) {
  live.messages += 1;
  const d = JSON.parse(message.data);
  logLine('timeline', [['kind', `diagnostic ${d.level}`], ['', ` ${d.message}`]], true);
}

function schedule() {
  if (renderScheduled) return;
  renderScheduled = true;
  requestAnimationFrame(() => {
    renderScheduled = false;
    render();
  });
}

function render() {
  snapshot = reducer.snapshot();
  const terminal = snapshot.terminal;
  setText('fact-run', snapshot.run?.state ?? '—');
  const turn = snapshot.turns.at(-1);
  setText('fact-turn', turn ? `${turn.turnId ?? ''} ${turn.state}` : '—');
  setText('fact-applied', String(snapshot.appliedEvents));
  setText('fact-rejected', String(live.rejected.length));
  if (hiddenEntries > 0) $('timeline').dataset.hidden = String(hiddenEntries);

  const pending = snapshot.pendingRequests[0];
  const box = $('request');
  if (pending && !terminal) {
    box.hidden = false;
    setText('request-type', pending.type);
    setText('request-prompt', pending.prompt ?? '');
    const choices = $('request-choices');
    const form = $('answer-form');
    if (box.dataset.requestId !== pending.requestId) {
      box.dataset.requestId = pending.requestId;
      choices.replaceChildren();
      for (const c of pending.request?.choices ?? []) {
        const b = document.createElement('button');
        b.type = 'button';
        b.textContent = c.label ?? c.key;
        b.dataset.choice = c.key;
        b.addEventListener('click', () =>
          act({ type: 'resolve_permission', requestId: pending.requestId, choice: c.key }));
        choices.append(b);
      }
      form.hidden = pending.type !== 'input';
      $('answer').value = '';
      const first = choices.querySelector('button') ?? (form.hidden ? null : $('answer'));
      first?.focus();
    }
    for (const b of choices.querySelectorAll('button')) b.disabled = actionInFlight;
    $('send-answer').disabled = actionInFlight;
  } else {
    box.hidden = true;
    delete box.dataset.requestId;
  }

  const running = !terminal && !live.done;
  $('interrupt').disabled = !running || actionInFlight || turn?.state !== 'started';
  $('cancel').disabled = !running || actionInFlight;

  if (terminal) {
    $('terminal').hidden = false;
    setText('terminal-run', terminal.runTerminalState ?? '');
    setText('terminal-turn', terminal.turnTerminalState ?? '');
    setText('terminal-disposition', terminal.reportedWorkDisposition ?? '');
    setText('terminal-reason', terminal.reconciliation?.reason ?? '');
  }
  live.renderedAt = performance.now();
}

async function act(body) {
  if (actionInFlight) return;
  actionInFlight = true;
  render();
  try {
    const { status, json } = await api('POST', `/api/runs/${live.runId}/actions`, body);
    if (status === 202) logLine('commands', [['', `… ${body.type}: ${json.commandId} queued (no receipt yet)`]], true);
    else logLine('commands', [['', `↳ your ${body.type} was ${json.commandId} (${json.status})`]], true);
  } catch (e) {
    logLine('commands', [['kind', `✗ ${body.type} refused`], ['', ` ${e.code}: ${e.message}`]]);
  } finally {
    actionInFlight = false;
    render();
  }
}

function finish(message) {
  live.messages += 1;
  source.close();
  setText('fact-stream', 'ended');
  render();
  // The full list, replayed by a fresh reducer: the same snapshot, or the page says so.
  const replay = core.replayEvents({ run_id: live.runId, normalized_session_id: live.sessionId }, events);
  const equal = canonical(replay) === canonical(snapshot);
  live.equal = equal;
  live.done = true;
  const p = $('replay-result');
  p.className = equal ? 'equal' : 'different';
  p.textContent = equal
    ? `✓ EQUAL: replaying the ${events.length} applied events gives the live snapshot.`
    : `✗ DIFFERENT: replaying the ${events.length} applied events does not give the live snapshot.`;
  $('replay').hidden = false;
  render();
  live.endData = JSON.parse(message.data);
}

/** JSON with object keys sorted, for comparing two snapshots as values. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

async function start(script) {
  $('start').disabled = true;
  $('start-error').hidden = true;
  let run;
  try {
    run = (await api('POST', '/api/runs', { script })).json;
  } catch (e) {
    problem('start-error', `✗ The run was not started: ${e.code} — ${e.message}`);
    $('start').disabled = false;
    return;
  }
  Object.assign(live, { runId: run.runId, sessionId: run.sessionId, applied: 0, rejected: [], outcomes: {},
    done: false, equal: null, firstEventAt: null, lastEventAt: null, messages: 0 });
  events = [];
  hiddenEntries = 0;
  reducer = new core.SessionReducer({ run_id: run.runId, normalized_session_id: run.sessionId });
  $('run').hidden = false;
  for (const id of ['timeline', 'commands', 'rejected-list']) $(id).replaceChildren();
  for (const id of ['rejections', 'terminal', 'replay', 'request']) $(id).hidden = true;
  setText('run-id', run.runId);
  setText('fact-script', run.script);
  setText('fact-session', run.sessionId);
  setText('fact-stream', 'connecting');
  render();
  source = new EventSource(run.events);
  source.addEventListener('open', () => setText('fact-stream', 'live'));
  source.addEventListener('error', () => {
    if (!live.done) setText('fact-stream', source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
  });
  source.addEventListener('event', onEvent);
  source.addEventListener('receipt', onReceipt);
  source.addEventListener('diagnostic', onDiagnostic);
  source.addEventListener('end', finish);
  $('start').disabled = false;
}

function wire() {
  $('start-form').addEventListener('submit', (e) => {
    e.preventDefault();
    start($('script').value);
  });
  $('answer-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const requestId = $('request').dataset.requestId;
    if (requestId) act({ type: 'answer_input', requestId, text: $('answer').value });
  });
  $('interrupt').addEventListener('click', () => {
    const turn = snapshot?.turns.at(-1);
    act(turn?.turnId ? { type: 'interrupt', turnId: turn.turnId } : { type: 'interrupt' });
  });
  $('cancel').addEventListener('click', () => act({ type: 'cancel' }));
}

async function main() {
  wire();
  await loadCore();
  await loadScripts();
  if (new URLSearchParams(location.search).get('autostart') === '1') start($('script').value);
}

main().catch((e) => {
  console.error(e);
});
