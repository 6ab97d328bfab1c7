// Every vector of conformance/vectors/ through the public API of the package. A vector
// whose area has no runner here, or whose input form a runner does not know, fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..', 'conformance', 'vectors');
const AREAS = ['wire', 'framing', 'sequencing', 'session', 'link', 'host', 'local', 'reducer', 'contract', 'adapter', 'runner_task', 'errors', 'admission', 'store', 'lease'];

function collect(dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, out);
    else if (name.endsWith('.json')) out.push(p);
  }
  return out;
}

async function runners() {
  const map = new Map();
  for (const area of AREAS) {
    try {
      map.set(area, (await import(`./conformance/${area}.mjs`)).run);
    } catch (e) {
      if (e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    }
  }
  return map;
}

test('every conformance vector passes through the public API', async () => {
  const files = collect(root, []);
  const run = await runners();
  const filter = process.env.CONFORMANCE_FILTER;
  let passed = 0;
  const failures = [];
  const byArea = {};
  for (const file of files) {
    const rel = relative(root, file).split(sep).join('/');
    if (filter && !rel.includes(filter)) continue;
    const area = rel.split('/')[0];
    byArea[area] ??= { passed: 0, failed: 0 };
    try {
      const vector = JSON.parse(readFileSync(file, 'utf8'));
      if (vector.area !== area) throw new Error(`area ${vector.area} does not match folder ${area}`);
      if (!Array.isArray(vector.steps) || vector.steps.length === 0) throw new Error('vector has no steps');
      vector.steps.forEach((s, i) => {
        if (typeof s.expect !== 'object' || s.expect === null || Object.keys(s.expect).length === 0) {
          throw new Error(`step ${i} checks nothing (its expect is missing or empty)`);
        }
      });
      const runner = run.get(area);
      if (runner === undefined) throw new Error(`no runner for area ${area}`);
      runner(vector);
      passed += 1;
      byArea[area].passed += 1;
    } catch (e) {
      failures.push(`${rel}: ${process.env.CONFORMANCE_STACK ? e?.stack : e?.message ?? e}`);
      byArea[area].failed += 1;
    }
  }
  for (const [area, c] of Object.entries(byArea)) {
    console.log(`  ${area}: ${c.passed} passed, ${c.failed} failed`);
  }
  if (failures.length > 0) {
    console.log(failures.slice(0, 30).join('\n\n'));
  }
  console.log(`conformance[node]: ${passed} vectors passed`);
  assert.equal(failures.length, 0, `${failures.length} vectors failed`);
});
