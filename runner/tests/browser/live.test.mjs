// The live page in a real browser (Debian's Chromium through playwright-core): the page
// loads the core's browser build, starts runs, validates and reduces every streamed event
// with it, lets a person answer requests by clicking, typing and keyboard alone,
// interrupts, shows live == replay, rejects a tampered event visibly; and hostile pages —
// a DNS-rebound origin and another loopback port — can neither read a stream nor post an
// action. Screenshots of finished runs go to OUT (STAPEL_LIVE_OUT).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { launch, newPage, openLive, screenshot, startServer, waitDone, liveState } from './harness.mjs';

let server;
let browser;

before(async () => {
  server = await startServer(['--delay-ms', '20']);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** No console error, no page error (a CSP violation would be one). */
function clean(page) {
  assert.deepEqual(page.problems, [], 'console or page errors');
}

async function text(page, selector) {
  return (await page.textContent(selector))?.trim();
}

test('happy path: started by keyboard, every event applied, terminal shown, live == replay', async () => {
  const page = await newPage(browser.context);
  try {
    await openLive(page, server.url, '?script=happy-path');
    // Keyboard only: focus the script list, Tab to "Start run", press Enter.
    await page.focus('#script');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'start');
    await page.keyboard.press('Enter');
    const live = await waitDone(page);
    assert.equal(live.rejected.length, 0);
    assert.equal(live.equal, true);
    assert.ok(live.applied >= 15, `only ${live.applied} events applied`);
    assert.equal(await text(page, '#fact-run'), 'succeeded');
    assert.equal(await text(page, '#terminal-run'), 'succeeded');
    assert.equal(await text(page, '#terminal-reason'), 'successful_process_and_result');
    assert.match(await text(page, '#replay-result'), /^✓ EQUAL: replaying the \d+ applied events gives the live snapshot\.$/);
    assert.equal(await text(page, '#fact-applied'), String(live.applied));
    const timeline = await page.$$eval('#timeline li', (lis) => lis.map((li) => li.textContent));
    assert.ok(timeline.some((t) => t.includes('item.completed')));
    assert.ok(timeline.at(-1).includes('run.terminal'));
    await screenshot(page, 'happy-path.png');
    clean(page);
  } finally {
    await page.close();
  }
});

test('permission-input: the permission answered by clicking, the input by typing', async () => {
  const page = await newPage(browser.context);
  try {
    await openLive(page, server.url, '?script=permission-input');
    await page.click('#start');
    await page.waitForSelector('#request:not([hidden]) #request-choices button[data-choice="allow"]');
    assert.equal(await text(page, '#request-type'), 'permission');
    assert.match(await text(page, '#request-prompt'), /Allow the fake driver/);
    const labels = await page.$$eval('#request-choices button', (bs) => bs.map((b) => b.textContent));
    assert.deepEqual(labels, ['Allow', 'Deny']);
    await page.click('#request-choices button[data-choice="allow"]');
    await page.waitForSelector('#answer-form:not([hidden])');
    assert.equal(await text(page, '#request-type'), 'input');
    await page.click('#answer');
    await page.keyboard.type('typed in the page');
    await page.click('#send-answer');
    const live = await waitDone(page);
    assert.equal(live.equal, true);
    assert.equal(live.rejected.length, 0);
    assert.equal(await text(page, '#terminal-run'), 'succeeded');
    const timeline = await page.$$eval('#timeline li', (lis) => lis.map((li) => li.textContent));
    assert.ok(timeline.some((t) => t.includes('runtime_request.resolved {"choice":"allow"}')), timeline.join('\n'));
    assert.ok(timeline.some((t) => t.includes('runtime_request.resolved {"text":"typed in the page"}')));
    // Every command, the person's two included, went through the ledger: accepted receipts.
    const commands = await page.$$eval('#commands li', (lis) => lis.map((li) => li.textContent));
    assert.equal(commands.filter((c) => c.startsWith('✓ #')).length, 5, commands.join('\n'));
    assert.ok(commands.some((c) => c.includes('your resolve_permission was cmd_auto_004 (accepted)')));
    assert.ok(commands.some((c) => c.includes('your answer_input was cmd_auto_005 (accepted)')));
    await screenshot(page, 'permission-input.png');
    clean(page);
  } finally {
    await page.close();
  }
});

test('permission-input by keyboard alone', async () => {
  const page = await newPage(browser.context);
  try {
    await openLive(page, server.url, '?script=permission-input');
    await page.focus('#start');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#request-choices button[data-choice="deny"]');
    // The first choice has the focus; Tab to the second, Space chooses it.
    await page.waitForFunction(() => document.activeElement?.dataset?.choice === 'allow');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Space');
    await page.waitForSelector('#answer-form:not([hidden])');
    await page.waitForFunction(() => document.activeElement?.id === 'answer');
    await page.keyboard.type('by keys');
    await page.keyboard.press('Enter');
    const live = await waitDone(page);
    assert.equal(live.equal, true);
    const timeline = await page.$$eval('#timeline li', (lis) => lis.map((li) => li.textContent));
    assert.ok(timeline.some((t) => t.includes('runtime_request.resolved {"choice":"deny"}')));
    assert.ok(timeline.some((t) => t.includes('runtime_request.resolved {"text":"by keys"}')));
    clean(page);
  } finally {
    await page.close();
  }
});

test('interrupted: the interrupt button ends the turn as interrupted', async () => {
  const page = await newPage(browser.context);
  try {
    await openLive(page, server.url, '?script=interrupted');
    await page.click('#start');
    await page.waitForSelector('#interrupt:not([disabled])');
    await page.waitForFunction(() =>
      [...document.querySelectorAll('#timeline li')].some((li) => li.textContent.includes('item.started')));
    await page.click('#interrupt');
    const live = await waitDone(page);
    assert.equal(live.equal, true);
    assert.equal(await text(page, '#terminal-turn'), 'interrupted');
    assert.equal(await text(page, '#terminal-run'), 'cancelled');
    assert.equal(await text(page, '#terminal-reason'), 'turn_interrupted');
    assert.equal(await text(page, '#fact-turn'), 'turn_live_1 interrupted');
    await screenshot(page, 'interrupted.png');
    clean(page);
  } finally {
    await page.close();
  }
});

test('a tampered event (another run id) is rejected visibly; the rest is reduced and live == replay', async () => {
  const page = await newPage(browser.context);
  let tampered = 0;
  try {
    // The stream passes through the test: the fifth event's runId is changed on the way.
    await page.route('**/api/runs/*/events', async (route) => {
      const response = await route.fetch();
      let n = 0;
      const body = (await response.text()).replace(/event: event\ndata: (.*)\n/g, (all, data) => {
        n += 1;
        if (n !== 5) return all;
        tampered += 1;
        const e = JSON.parse(data);
        e.runId = 'run_tampered';
        return `event: event\ndata: ${JSON.stringify(e)}\n`;
      });
      await route.fulfill({ response, body });
    });
    await openLive(page, server.url, '?script=happy-path');
    await page.click('#start');
    const live = await waitDone(page);
    assert.equal(tampered, 1);
    assert.equal(live.rejected.length, 1);
    assert.equal(live.rejected[0].code, 'run_id_mismatch');
    assert.equal(await page.isVisible('#rejections'), true);
    const shown = await text(page, '#rejected-list');
    assert.match(shown, /^✗ message \d+: run_id_mismatch — /);
    assert.match(shown, /run_tampered/);
    assert.equal(await text(page, '#fact-rejected'), '1');
    // The other events were reduced (a gap is recorded where the tampered one was), and
    // the replay of the applied list equals the live snapshot.
    assert.equal(live.equal, true);
    assert.ok(live.outcomes.applied_after_gap >= 1, JSON.stringify(live.outcomes));
    await screenshot(page, 'tampered.png');
  } finally {
    await page.close();
  }
});

/** The page an attacker serves: it tries every read and write, and records what it got. */
const ATTACK = (base) => `<!doctype html><title>attacker</title><script>
(async () => {
  const base = ${JSON.stringify(base)};
  const out = {};
  const attempt = async (name, url, init) => {
    try {
      const r = await fetch(base + url, init);
      let body = null;
      try { body = await r.text(); } catch (e) { body = 'unreadable: ' + e; }
      out[name] = { status: r.status, type: r.type, body };
    } catch (e) {
      out[name] = { error: String(e) };
    }
  };
  const json = { 'Content-Type': 'application/json' };
  await attempt('scripts', '/api/scripts');
  await attempt('scripts_no_cors', '/api/scripts', { mode: 'no-cors' });
  await attempt('page', '/');
  await attempt('stream', '/api/runs/run_1/events');
  await attempt('start', '/api/runs', { method: 'POST', headers: json, body: JSON.stringify({ script: 'happy-path' }) });
  await attempt('start_simple', '/api/runs', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify({ script: 'happy-path' }) });
  const allow = JSON.stringify({ type: 'resolve_permission', requestId: 'request_local_runner_permission', choice: 'allow' });
  await attempt('action', '/api/runs/run_1/actions', { method: 'POST', headers: json, body: allow });
  await attempt('action_simple', '/api/runs/run_1/actions', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: allow });
  out.eventsource = await new Promise((done) => {
    const got = [];
    const es = new EventSource(base + '/api/runs/run_1/events');
    es.addEventListener('event', (e) => got.push(e.data));
    es.onerror = () => { es.close(); done({ error: true, got }); };
    setTimeout(() => { es.close(); done({ timeout: true, got }); }, 5000);
  });
  window.__attack = out;
})();
</script>`;

/** From Node (a local tool: no Origin, no Fetch Metadata): the run is untouched. */
async function assertUntouched(port) {
  const base = `http://127.0.0.1:${port}`;
  // run_1 still waits for its permission: a legitimate answer is the 4th command.
  const r = await fetch(`${base}/api/runs/run_1/actions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ type: 'resolve_permission', requestId: 'request_local_runner_permission', choice: 'deny' }),
  });
  const receipt = await r.json();
  assert.equal(r.status, 200);
  assert.equal(receipt.controllerSeq, 4, 'no attacker command reached the ledger');
  assert.equal(receipt.status, 'accepted');
  // No run was started by the attacker: the next one is run_2.
  const s = await fetch(`${base}/api/runs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ script: 'happy-path' }),
  });
  assert.equal((await s.json()).runId, 'run_2');
}

async function startVictimRun(port) {
  const r = await fetch(`http://127.0.0.1:${port}/api/runs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ script: 'permission-input' }),
  });
  assert.equal(r.status, 201);
  assert.equal((await r.json()).runId, 'run_1');
}

test('DNS rebinding: a page of attacker.test:PORT resolved to 127.0.0.1 can read no stream and post no action', async () => {
  const victim = await startServer(['--delay-ms', '0']);
  // Chromium's own Private Network Access checks would block the rebound page's requests
  // before they leave the browser (a page whose document came from the attacker counts as
  // public); they are turned off here so that what is tested is the server, as with a
  // browser without them.
  const rebound = await launch([
    '--host-resolver-rules=MAP attacker.test 127.0.0.1',
    '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks',
  ]);
  try {
    await startVictimRun(victim.port);
    const origin = `http://attacker.test:${victim.port}`;
    const page = await newPage(rebound.context);
    // Loading the live page itself under the rebound name is refused.
    const nav = await page.goto(`${origin}/`);
    assert.equal(nav.status(), 403);
    assert.equal((await nav.json()).error.code, 'bad_host');
    // The attacker's own page on that origin (served by the attacker before the rebinding:
    // here by the test), whose requests now reach the live server with Host attacker.test.
    await page.route(`${origin}/evil`, (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: ATTACK('') }));
    await page.goto(`${origin}/evil`);
    await page.waitForFunction(() => window.__attack !== undefined, null, { timeout: 30_000 });
    const got = await page.evaluate(() => window.__attack);
    const badHost = JSON.parse(
      '{"error":{"code":"bad_host","message":"The Host header must be this server\'s loopback address and port."}}');
    for (const name of ['scripts', 'page', 'stream', 'start', 'action']) {
      // Same-origin to the attacker, so the refusal is readable — and it is all there is.
      assert.equal(got[name].status, 403, `${name}: ${JSON.stringify(got[name])}`);
      assert.deepEqual(JSON.parse(got[name].body), badHost, name);
    }
    assert.equal(got.eventsource.error, true);
    assert.deepEqual(got.eventsource.got, []);
    await assertUntouched(victim.port);
    const refusals = victim.stderr.join('').split('\n').filter((l) => l.includes('refused'));
    assert.ok(refusals.length >= 9, refusals.join('\n'));
    assert.ok(refusals.every((l) => l.endsWith('403 bad_host')), refusals.join('\n'));
    await page.close();
  } finally {
    await rebound.close();
    await victim.stop();
  }
});

test('a page served from a second loopback port can read no stream and post no action', async () => {
  const victim = await startServer(['--delay-ms', '0']);
  const base = `http://127.0.0.1:${victim.port}`;
  const evil = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end(ATTACK(base));
  });
  await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
  try {
    await startVictimRun(victim.port);
    const page = await newPage(browser.context);
    await page.goto(`http://127.0.0.1:${evil.address().port}/`);
    await page.waitForFunction(() => window.__attack !== undefined, null, { timeout: 30_000 });
    const got = await page.evaluate(() => window.__attack);
    // Nothing is readable: CORS reads fail (no response carries a CORS header), and even
    // the no-cors (opaque) answers are withheld (Cross-Origin-Resource-Policy: same-origin).
    for (const name of ['scripts', 'scripts_no_cors', 'page', 'stream', 'start', 'start_simple', 'action', 'action_simple']) {
      assert.match(got[name].error ?? '', /TypeError/, `${name}: ${JSON.stringify(got[name])}`);
    }
    assert.equal(got.eventsource.error, true);
    assert.deepEqual(got.eventsource.got, []);
    await assertUntouched(victim.port);
    // What reached the server was refused for its Origin or its Fetch Metadata: the JSON
    // POSTs' preflights (OPTIONS, refused for their Origin), and the simple POSTs, sent
    // without a preflight and refused the same way.
    const refusals = victim.stderr.join('').split('\n').filter((l) => l.includes('refused'));
    const codes = refusals.map((l) => l.split(' ').at(-1));
    assert.ok(codes.length >= 6, refusals.join('\n'));
    assert.ok(codes.every((c) => ['origin_mismatch', 'fetch_site_refused'].includes(c)), refusals.join('\n'));
    assert.ok(refusals.some((l) => l.includes('"POST /api/runs"') && l.endsWith('403 origin_mismatch')), 'the simple POST reached the server and was refused');
    assert.ok(refusals.some((l) => l.includes('"OPTIONS /api/runs"') && l.endsWith('403 origin_mismatch')), 'the preflight was refused');
    await page.close();
  } finally {
    evil.close();
    await victim.stop();
  }
});
