// Every conformance vector through the browser build (browser/dist/), in headless
// Chromium: the page runs the Node suite's area modules (tests/conformance/*.mjs) with the
// browser build in place of the native one (page-conformance.mjs). Served from loopback
// with the cross-origin isolation headers a host may send (the build needs none: see
// api.test.mjs). Prints `conformance[browser]: N vectors passed`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { DIST, ENTRY, ISOLATION, PKG, launch, runPage, serve } from './harness.mjs';
import { bufferShim } from './shims.mjs';

const VECTORS = join(PKG, '..', 'conformance', 'vectors');

function collect(dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, out);
    else if (name.endsWith('.json')) out.push(p);
  }
  return out;
}

test('every conformance vector passes in headless Chromium through the browser build', async () => {
  const files = collect(VECTORS, []);
  const filter = process.env.CONFORMANCE_FILTER;
  const vectors = files
    .map((f) => [relative(VECTORS, f).split(sep).join('/'), f])
    .filter(([rel]) => !filter || rel.includes(filter))
    .map(([rel, f]) => [rel, readFileSync(f, 'utf8')]);
  const areas = readdirSync(join(PKG, 'tests', 'conformance'))
    .filter((n) => n.endsWith('.mjs'))
    .map((n) => n.slice(0, -'.mjs'.length))
    .sort();
  const importMap = { imports: { 'stapel-runner-protocol': ENTRY, 'node:util': '/pkg/tests/browser/node-util.mjs' } };
  const html = [
    '<!doctype html><meta charset="utf-8"><title>conformance[browser]</title><link rel="icon" href="data:,">',
    `<script type="importmap">${JSON.stringify(importMap)}</script>`,
    '<script type="module" src="/pkg/tests/browser/page-conformance.mjs"></script>',
  ].join('\n');
  const server = await serve({
    mounts: { '/dist/': DIST, '/pkg/tests/': join(PKG, 'tests') },
    pages: {
      '/': { type: 'text/html; charset=utf-8', body: html },
      '/suite.json': { type: 'application/json', body: JSON.stringify({ areas, vectors }) },
      '/shim/buffer.mjs': { type: 'text/javascript', body: await bufferShim() },
    },
    headers: ISOLATION,
  });
  const chromium = await launch();
  let result;
  try {
    ({ value: result } = await runPage(chromium.context, `${server.url}/`));
  } finally {
    await chromium.close();
    await server.close();
  }
  for (const [area, c] of Object.entries(result.byArea)) console.log(`  ${area}: ${c.passed} passed, ${c.failed} failed`);
  if (result.failures.length > 0) console.log(result.failures.slice(0, 30).join('\n\n'));
  console.log(`  ${result.userAgent}`);
  console.log(`conformance[browser]: ${result.passed} vectors passed`);
  assert.equal(result.failures.length, 0, `${result.failures.length} vectors failed in the browser`);
  assert.equal(result.passed, vectors.length, 'every vector ran and passed');
  if (!filter) assert.equal(result.passed, files.length, 'the count is the number of vector files');
});
