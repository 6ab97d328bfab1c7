// A panic in the core's call stack surfaces as a thrown PanicError and the process lives
// on. The probe exists only in a test-only build (cargo feature `panic-probe`, made by
// `node scripts/build.mjs --debug --probe --out tests/.probe`, which scripts/test runs
// first): LineFramer.pushAll panics inside the core's LineFramer::push_all on one magic
// line. The package's own addon has no probe: the same line is an ordinary line there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as srp from 'stapel-runner-protocol';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const probe = join(root, 'tests', '.probe');
const LINE = '\u0001stapel-runner-protocol:panic-probe';

test('a panic inside the core is a thrown PanicError, and the module keeps working', () => {
  if (!existsSync(join(probe, 'dist', 'index.js'))) {
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs'), '--debug', '--probe', '--out', probe], { cwd: root, stdio: 'pipe' });
  }
  const script = `
    const srp = require(${JSON.stringify(join(probe, 'dist', 'index.js'))});
    const framer = new srp.LineFramer();
    try { framer.pushAll(${JSON.stringify(`${LINE}\n`)}); console.log('no panic'); }
    catch (e) { console.log(e instanceof srp.PanicError, e instanceof srp.RunnerProtocolError, e.code, e.message); }
    console.log(JSON.stringify(framer.pushAll('after\\n')));
    console.log(srp.encode({ type: 'ping' }));
  `;
  const run = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const lines = run.stdout.trim().split('\n');
  assert.match(lines[0], /^true true panic the native core panicked: panic probe inside the core's LineFramer::push_all$/);
  assert.equal(lines[1], '[{"line":"after"}]');
  assert.equal(lines[2], '{"schema_version":1,"type":"ping"}');
});

test('the package itself has no probe: the magic line is an ordinary line', () => {
  assert.deepEqual(new srp.LineFramer().pushAll(`${LINE}\n`), [{ line: LINE }]);
});
