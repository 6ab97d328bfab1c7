// The README's TypeScript quick start type-checks under --strict and runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The first TypeScript block of the README after `heading` (from the start: ''). */
function block(heading) {
  const text = readFileSync(join(root, 'README.md'), 'utf8');
  const at = heading === '' ? 0 : text.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `the README has a section ${heading}`);
  const start = text.indexOf('```ts\n', at) + '```ts\n'.length;
  return text.slice(start, text.indexOf('```', start));
}

/** Type-check `source` under --strict, run it, and return the lines it printed. */
function runTs(source, name) {
  // Inside the package directory, `stapel-runner-protocol` resolves to the package itself.
  const dir = join(root, 'tests', `.tmp-${name}`);
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
    return execFileSync(process.execPath, [join(dir, 'example.js')], { encoding: 'utf8' }).trim().split('\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the README quick start type-checks and prints what it says', () => {
  const printed = runTs(block(''), 'readme');
  assert.deepEqual(printed, ['true', 'schema_violation task_id', 'hub got task.progress']);
  // The README's "It prints:" block, which scripts/test-release compares with the run.
  const text = readFileSync(join(root, 'README.md'), 'utf8');
  const at = text.indexOf('It prints:\n\n```text\n', text.indexOf('```ts\n'));
  assert.ok(at >= 0, 'the quick start is followed by "It prints:"');
  const start = text.indexOf('```text\n', at) + '```text\n'.length;
  assert.deepEqual(text.slice(start, text.indexOf('```', start)).trimEnd().split('\n'), printed);
});

test('the README hub store example type-checks and prints what it says', () => {
  assert.deepEqual(runTs(block('## Hub stores'), 'readme-store'), ['send {"schema_version":1,"type":"task.cancel"', '1 true']);
});
