// Runs in the page: every conformance vector through the browser build, with the Node
// suite's own area modules (bindings-node/tests/conformance/<area>.mjs). The page's import
// map points their `stapel-runner-protocol` import at the browser build and `node:util` at
// node-util.mjs; `Buffer` (which they use for test bytes) is the `buffer` package,
// bundled by the test. The checks on each vector are those of tests/conformance.test.mjs.
import { Buffer } from '/shim/buffer.mjs';

globalThis.Buffer = Buffer;

async function main() {
  const { areas, vectors } = await (await fetch('/suite.json')).json();
  const runners = new Map();
  for (const name of areas) {
    const mod = await import(`/pkg/tests/conformance/${name}.mjs`);
    // A module without `run` is a helper of the others (common.mjs), not an area.
    if (typeof mod.run === 'function') runners.set(name, mod.run);
  }
  let passed = 0;
  const failures = [];
  const byArea = {};
  for (const [rel, text] of vectors) {
    const area = rel.split('/')[0];
    byArea[area] ??= { passed: 0, failed: 0 };
    try {
      const vector = JSON.parse(text);
      if (vector.area !== area) throw new Error(`area ${vector.area} does not match folder ${area}`);
      if (!Array.isArray(vector.steps) || vector.steps.length === 0) throw new Error('vector has no steps');
      vector.steps.forEach((s, i) => {
        if (typeof s.expect !== 'object' || s.expect === null || Object.keys(s.expect).length === 0) {
          throw new Error(`step ${i} checks nothing (its expect is missing or empty)`);
        }
      });
      const runner = runners.get(area);
      if (runner === undefined) throw new Error(`no runner for area ${area}`);
      runner(vector);
      passed += 1;
      byArea[area].passed += 1;
    } catch (e) {
      failures.push(`${rel}: ${e?.stack ?? e}`);
      byArea[area].failed += 1;
    }
  }
  return { passed, failures, byArea, areas: [...runners.keys()], userAgent: navigator.userAgent };
}

window.__done = main();
