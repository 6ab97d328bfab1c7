// The generated files are committed (native.d.ts from napi, types/*.d.ts from tsc, the
// ESM entry index.mjs, ts/api-types.ts and schemas/ from the conformance schemas): a fresh
// build must reproduce exactly what git holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The committed (staged) text of a file of this package, or its text on disk without git. */
function committed(rel) {
  const git = spawnSync('git', ['show', `:./${rel}`], { cwd: root, encoding: 'utf8' });
  return git.status === 0 ? git.stdout : readFileSync(join(root, rel), 'utf8');
}

test('native.d.ts, types/*.d.ts and index.mjs equal a fresh build', () => {
  const out = mkdtempSync(join(tmpdir(), 'srp-generated-'));
  try {
    const profile = process.env.STAPEL_NODE_DEBUG === '1' ? ['--debug'] : [];
    execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs'), ...profile, '--out', out], { cwd: root, stdio: 'pipe' });
    const files = ['native.d.ts', 'index.mjs', ...readdirSync(join(out, 'types')).map((f) => `types/${f}`)];
    assert.deepEqual(
      readdirSync(join(root, 'types')).sort(),
      readdirSync(join(out, 'types')).sort(),
      'types/ holds exactly the generated declarations',
    );
    for (const rel of files) {
      assert.equal(committed(rel), readFileSync(join(out, rel), 'utf8'), `${rel} differs from a fresh build: run npm run build and commit`);
    }
    // The declarations are not empty (a napi-cli/napi major mismatch yields an empty file).
    assert.match(readFileSync(join(out, 'native.d.ts'), 'utf8'), /export declare class NativeSession/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('ts/api-types.ts, schemas/, ts/errors.ts and ts/error-builders.ts equal what scripts/gen-types.mjs makes of conformance/schema/ and the core\'s error table', () => {
  const run = spawnSync(process.execPath, [join(root, 'scripts', 'gen-types.mjs'), '--check'], { cwd: root, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  // The check is a real comparison: a changed copy is found.
  const text = readFileSync(join(root, 'ts', 'api-types.ts'), 'utf8');
  assert.match(text, /^\/\/ GENERATED FILE/);
  assert.match(text, /export interface ReducerSnapshot \{/);
  assert.match(text, /export type GatewayInput = ExecuteInput \|/);
  const errors = readFileSync(join(root, 'ts', 'errors.ts'), 'utf8');
  assert.match(errors, /^\/\/ GENERATED FILE/);
  assert.match(errors, /export class ConfigError extends ProtocolStateError \{/);
});
