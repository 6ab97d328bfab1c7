// The README's TypeScript quick start type-checks under --strict and runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

test('the README quick start type-checks and prints what it says', () => {
  const text = readFileSync(join(root, 'README.md'), 'utf8');
  const start = text.indexOf('```ts\n') + '```ts\n'.length;
  const source = text.slice(start, text.indexOf('```', start));
  // Inside the package directory, `stapel-runner-protocol` resolves to the package itself.
  const dir = join(root, 'tests', '.tmp-readme');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, 'example.ts'), source);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, target: 'ES2022', module: 'node16', moduleResolution: 'node16', types: ['node'], outDir: '.', rootDir: '.', typeRoots: [join(root, 'node_modules', '@types')] },
        files: ['example.ts'],
      }),
    );
    execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', stdio: 'inherit' });
    const out = execFileSync(process.execPath, [join(dir, 'example.js')], { encoding: 'utf8' }).trim().split('\n');
    assert.deepEqual(out, ['true', 'schema_violation task_id', 'hub got task.progress']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
