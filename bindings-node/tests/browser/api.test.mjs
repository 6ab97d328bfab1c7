// The browser build (browser/dist/) against the Node build, in headless Chromium: the same
// exports, the same errors (class, chain, `.code`, fields) and values for representative
// calls (cases.mjs), a page without cross-origin isolation, the files a page loads, and a
// page under a strict Content-Security-Policy.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as srp from 'stapel-runner-protocol';
import { DIST, ENTRY, PKG, launch, runPage, serve } from './harness.mjs';
import { runCases } from './cases.mjs';

/** The policy the README tells hosts to send at the strictest: WebAssembly needs 'wasm-unsafe-eval'. */
const CSP = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; img-src 'self'; style-src 'self'";
const manifest = JSON.parse(readFileSync(join(DIST, 'manifest.json'), 'utf8'));

/** A page running `body` (an async function body with `srp` imported) as window.__done. */
function page(body) {
  return [
    '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,">',
    '<script type="module">',
    `window.__done = (async () => { const srp = await import('${ENTRY}'); ${body} })();`,
    '</script>',
  ].join('\n');
}

const PAGES = {
  '/exports': page('return Object.keys(srp).sort().map((k) => [k, typeof srp[k]]);'),
  '/cases': page("const { runCases } = await import('/pkg/tests/browser/cases.mjs'); return runCases(srp);"),
  '/isolation': page(
    "const m = srp.decode('{\"schema_version\":1,\"type\":\"ping\"}'); return { crossOriginIsolated, sharedArrayBuffer: typeof SharedArrayBuffer, type: m.type };",
  ),
  '/subprocess': page(
    "try { await new srp.SubprocessAdapter({ command: ['true'] }).openSession(srp.roleSpecFromInvocation({ role: 'coder' })); return 'opened'; } catch (e) { return { name: e.name, message: e.message }; }",
  ),
};

let server;
let chromium;
before(async () => {
  const pages = Object.fromEntries(Object.entries(PAGES).map(([k, body]) => [k, { type: 'text/html; charset=utf-8', body }]));
  // No COOP/COEP: the threadless build needs no cross-origin isolation.
  server = await serve({ mounts: { '/dist/': DIST, '/pkg/tests/': join(PKG, 'tests') }, pages });
  chromium = await launch();
});
after(async () => {
  await chromium?.close();
  await server?.close();
});

const open = async (path) => (await runPage(chromium.context, `${server.url}${path}`)).value;

test('the browser build exports the names of the Node ESM entry, each of the same kind', async () => {
  const node = Object.keys(srp)
    .filter((k) => k !== 'default')
    .sort()
    .map((k) => [k, typeof srp[k]]);
  assert.deepEqual(await open('/exports'), node);
});

test('representative errors and values are the same in the browser as in Node', async () => {
  const node = runCases(srp);
  const browser = await open('/cases');
  assert.deepEqual(Object.keys(browser), Object.keys(node));
  for (const label of Object.keys(node)) assert.deepEqual(browser[label], node[label], label);
  // The cases do throw what they are meant to (each class at least once).
  const classes = new Set(Object.values(node).flatMap((o) => (o.error ? [o.error.constructor] : [])));
  for (const c of ['DecodeError', 'UnknownMessageError', 'SchemaValidationError', 'ConfigError', 'ReducerError', 'ProtocolStateError', 'ContractError', 'ResolutionRefused', 'AdapterError']) {
    assert.ok(classes.has(c), `a case throws ${c}`);
  }
});

test('a page without cross-origin isolation loads the build and fetches exactly its files', async () => {
  server.requests.length = 0;
  const got = await open('/isolation');
  assert.deepEqual(got, { crossOriginIsolated: false, sharedArrayBuffer: 'undefined', type: 'ping' });
  const fetched = server.requests.filter((p) => p.startsWith('/dist/')).map((p) => p.slice('/dist/'.length)).sort();
  const shipped = Object.keys(manifest.files).filter((f) => /\.(js|wasm)$/.test(f)).sort();
  assert.deepEqual(fetched, shipped);
});

test('the build works under a strict Content-Security-Policy (no inline script, no eval, wasm allowed)', async () => {
  const csp = await serve({
    mounts: { '/dist/': DIST, '/pkg/tests/': join(PKG, 'tests') },
    pages: {
      '/': { type: 'text/html; charset=utf-8', body: '<!doctype html><meta charset="utf-8"><script type="module" src="/pkg/tests/browser/page-csp.mjs"></script>' },
      '/favicon.ico': { type: 'image/x-icon', body: '' },
    },
    headers: { 'Content-Security-Policy': CSP },
  });
  try {
    const { value, problems } = await runPage(chromium.context, `${csp.url}/`);
    // One report, no error: emnapi probes once whether `new Function` is allowed (in a
    // try/catch) and, refused, makes its functions without it.
    assert.deepEqual(value, { seq: 1, snapshot: 'object', violations: ['script-src eval'] });
    assert.deepEqual(problems, []);
  } finally {
    await csp.close();
  }
});

test('SubprocessAdapter refuses to start a harness in a page, with a clear error', async () => {
  const got = await open('/subprocess');
  assert.equal(got.name, 'Error');
  assert.match(got.message, /needs Node\.js/);
});
