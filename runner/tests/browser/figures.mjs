// Figures of the live view (rerunnable; no assertion): in Debian's Chromium,
//   1. page load → first event: navigation start to the first event the page applied and
//      listed, for a page that starts a happy-path run as soon as the core is loaded
//      (`?autostart=1`); the core's load (fetch + compile of the wasm) is shown apart;
//   2. events/s rendered: a run of a generated script with N item.delta events, each
//      validated and reduced by the core in the page and listed, the snapshot re-rendered
//      once per frame; against the rate the server streams the same run to a plain
//      reader (Node, no browser).
// Usage (after ./run built everything): node figures.mjs [RUNS=10] [EVENTS=5000]
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join } from 'node:path';
import { launch, newPage, startServer, liveState } from './harness.mjs';

const runs = Number(process.argv[2] ?? 10);
const n = Number(process.argv[3] ?? 5000);

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: q(0.5), p90: q(0.9), min: s[0], max: s.at(-1) };
}
const ms = (x) => `${x.toFixed(1)} ms`;

function floodScript(count) {
  const steps = [{ kind: 'event', event_type: 'item.started', item_id: 'item_flood', payload: { kind: 'assistant_message', text: '' } }];
  for (let i = 0; i < count; i += 1) {
    steps.push({ kind: 'event', event_type: 'item.delta', item_id: 'item_flood', payload: { delta: `chunk ${i} of the flood. ` } });
  }
  steps.push(
    { kind: 'event', event_type: 'item.completed', item_id: 'item_flood', payload: { kind: 'assistant_message', text: 'done' } },
    { kind: 'result', payload: { schema: 'paperclip.run_result.v1', reportedWorkDisposition: 'done', summary: 'flood', completionClaim: { contractRevision: 'x', objectiveSatisfied: true, criteria: [], remainingWork: [] }, evidence: [], verification: [], attentionRequests: [], artifacts: [] } },
    { kind: 'event', event_type: 'turn.completed', payload: {} },
    { kind: 'terminal', payload: { schema: 'paperclip.prp.terminal.v1', turnTerminalState: 'completed', runTerminalState: 'succeeded', reportedWorkDisposition: 'done' } },
    { kind: 'exit', code: 0 },
  );
  return { schema: 'paperclip.fake_harness.script.v1', name: `flood-${count}`, steps };
}

console.log(`live view figures: ${new Date().toISOString()}, ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);

// 1. page load → first event
{
  const server = await startServer(['--delay-ms', '0']);
  const browser = await launch();
  const first = [];
  const core = [];
  for (let i = 0; i < runs; i += 1) {
    const page = await newPage(browser.context);
    await page.goto(`${server.url}?script=happy-path&autostart=1`);
    await page.waitForFunction(() => window.__live?.done === true, null, { timeout: 60_000 });
    const live = await liveState(page);
    first.push(live.firstEventAt);
    core.push(live.coreLoadedAt);
    await page.close();
  }
  await browser.close();
  await server.stop();
  const f = stats(first);
  const c = stats(core);
  console.log(`page load → first event (${runs} loads): median ${ms(f.median)}, p90 ${ms(f.p90)} (min ${ms(f.min)}, max ${ms(f.max)})`);
  console.log(`  of which the core loaded (wasm fetched and compiled) at: median ${ms(c.median)}, p90 ${ms(c.p90)}`);
}

// 2. events/s rendered
{
  const dir = mkdtempSync(join(tmpdir(), 'stapel-live-figures-'));
  const path = join(dir, `flood-${n}.json`);
  writeFileSync(path, JSON.stringify(floodScript(n)));
  const server = await startServer(['--delay-ms', '0', '--script', path]);
  // The server alone: the same run read by Node, no browser.
  const t0 = performance.now();
  const start = await fetch(`${server.url}api/runs`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ script: `flood-${n}` }) });
  const { events } = await start.json();
  const res = await fetch(server.url + events.slice(1));
  const text = await res.text();
  const serverMs = performance.now() - t0;
  const streamed = (text.match(/^event: event$/gm) ?? []).length;
  const browser = await launch();
  const rates = [];
  const totals = [];
  for (let i = 0; i < Math.min(runs, 5); i += 1) {
    const page = await newPage(browser.context);
    await page.goto(`${server.url}?script=flood-${n}&autostart=1`);
    await page.waitForFunction(() => window.__live?.done === true, null, { timeout: 300_000 });
    const live = await liveState(page);
    rates.push(live.applied / ((live.lastEventAt - live.firstEventAt) / 1000));
    totals.push(live.renderedAt - live.firstEventAt);
    if (live.rejected.length !== 0 || live.equal !== true) throw new Error(`flood run: ${JSON.stringify(live).slice(0, 400)}`);
    await page.close();
  }
  await browser.close();
  await server.stop();
  const r = stats(rates);
  const t = stats(totals);
  console.log(`events/s rendered (${streamed} events per run, ${rates.length} runs): median ${Math.round(r.median)} events/s (min ${Math.round(r.min)}, max ${Math.round(r.max)}); first event → last render incl. replay: median ${ms(t.median)}`);
  console.log(`  the server alone (start + whole stream read by Node): ${streamed} events in ${ms(serverMs)} = ${Math.round(streamed / (serverMs / 1000))} events/s`);
}
