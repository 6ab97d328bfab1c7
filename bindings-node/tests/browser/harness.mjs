// What the browser tests and the browser benchmark share: a tiny loopback static server
// (with or without the cross-origin isolation headers) and headless Chromium driven by
// playwright-core — Debian's /usr/bin/chromium, never a downloaded browser.
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package folder (bindings-node/). */
export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The browser build's folder. */
export const DIST = join(PKG, 'browser', 'dist');
/** The browser build's module, as the pages import it. */
export const ENTRY = '/dist/stapel-runner-protocol.js';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
};

/** The headers a host sends for cross-origin isolation (COOP/COEP). */
export const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/**
 * Serve `mounts` (URL prefix → folder) and `pages` (path → { type, body }) on 127.0.0.1
 * on a free port, every response with `headers`. Resolves to { url, close, requests }.
 */
export function serve({ mounts = {}, pages = {}, headers = {} }) {
  const requests = [];
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    requests.push(path);
    const send = (status, type, body) => {
      res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...headers });
      res.end(body);
    };
    if (req.method !== 'GET') return send(405, 'text/plain', 'GET only');
    const page = pages[path];
    if (page !== undefined) return send(200, page.type, typeof page.body === 'function' ? page.body() : page.body);
    for (const [prefix, folder] of Object.entries(mounts)) {
      if (!path.startsWith(prefix)) continue;
      const file = normalize(join(folder, path.slice(prefix.length)));
      if (!file.startsWith(folder + sep)) return send(403, 'text/plain', 'outside the mount');
      try {
        if (!statSync(file).isFile()) break;
        return send(200, TYPES[extname(file)] ?? 'application/octet-stream', readFileSync(file));
      } catch {
        break;
      }
    }
    return send(404, 'text/plain', `not found: ${path}`);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      ok({
        url: `http://127.0.0.1:${port}`,
        requests,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}

/** The Chromium executable (CHROMIUM overrides; the test scripts install Debian's). */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/**
 * Launch headless Chromium with a fresh profile; resolves to { browser, close }. Requires
 * playwright-core (a devDependency; it drives the installed browser, downloads none).
 */
export async function launch() {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'srp-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Open `url` in a new page of `context`, collecting console errors and page errors, and
 * wait for `window.__done` (a promise the page sets) to settle; its value, or the error.
 */
export async function runPage(context, url, { timeout = 120_000 } = {}) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  try {
    await page.goto(url, { waitUntil: 'load', timeout });
    await page.waitForFunction(() => window.__done !== undefined, null, { timeout });
    const outcome = await page.evaluate(() => window.__done.then((value) => ({ value }), (e) => ({ error: String(e?.stack ?? e) })));
    if (outcome.error !== undefined) throw new Error(`${url}: ${outcome.error}\n${problems.join('\n')}`);
    return { value: outcome.value, problems };
  } finally {
    await page.close();
  }
}
