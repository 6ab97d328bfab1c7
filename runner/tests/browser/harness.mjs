// What the live page's browser tests and figures share: a `stapel-runner live` process
// and Debian's Chromium driven by playwright-core (executablePath; no browser download,
// a fresh profile per launch).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root. */
export const ROOT = resolve(here, '..', '..', '..');
/** The runner binary (scripts/run builds it; STAPEL_RUNNER_BIN overrides). */
export const RUNNER =
  process.env.STAPEL_RUNNER_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'), 'debug', 'stapel-runner');
/** Where screenshots go (git-ignored by default). */
export const OUT = process.env.STAPEL_LIVE_OUT ?? join(here, 'out');
/** The browser (the test script installs Debian's package). */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
/** The flags every launch uses. */
export const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Start `stapel-runner live --port 0` with `args`; resolves to { url, port, stop, stderr }
 * once its first stdout line (`{"url": …}`) arrived.
 */
export async function startServer(args = []) {
  const child = spawn(RUNNER, ['live', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr = [];
  child.stderr.on('data', (b) => stderr.push(b.toString()));
  const line = await new Promise((ok, fail) => {
    child.once('error', fail);
    child.once('exit', (code) => fail(new Error(`stapel-runner live exited (${code}): ${stderr.join('')}`)));
    createInterface({ input: child.stdout }).once('line', ok);
  });
  const { url } = JSON.parse(line);
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    stderr,
    stop: () =>
      new Promise((done) => {
        if (child.exitCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGTERM');
      }),
  };
}

/** Launch Chromium (extra flags appended); resolves to { context, close }. */
export async function launch(extra = []) {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'stapel-live-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...FLAGS, ...extra],
    viewport: { width: 1100, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A new page that records console errors and page errors in `page.problems`. */
export async function newPage(context) {
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console: ${m.text()}`);
  });
  return page;
}

/** Save a screenshot of `page` as OUT/name; its path. */
export async function screenshot(page, name) {
  mkdirSync(OUT, { recursive: true });
  const path = join(OUT, name);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The page's own record (window.__live). */
export function liveState(page) {
  return page.evaluate(() => JSON.parse(JSON.stringify(window.__live)));
}

/** Load the page with `query`, wait until the core is loaded and the scripts are listed. */
export async function openLive(page, url, query = '') {
  await page.goto(url + query, { waitUntil: 'load' });
  await page.waitForFunction(() => window.__live?.coreLoaded === true, null, { timeout: 60_000 });
  await page.waitForSelector('#start:not([disabled])');
}

/** Wait for the run to end and the replay to be compared. */
export async function waitDone(page, timeout = 60_000) {
  await page.waitForFunction(() => window.__live?.done === true, null, { timeout });
  return liveState(page);
}
