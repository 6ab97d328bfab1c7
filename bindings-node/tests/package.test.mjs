// How users get the package: `npm pack`, `npm install ./stapel-runner-protocol-X.tgz` into
// an empty project, then `require`, `import`, and `tsc --strict` against its types.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const env = { ...process.env, npm_config_cache: join(root, '.npm-cache'), npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

test('the packed tarball installs into an empty project and works from require, import and tsc', () => {
  const work = mkdtempSync(join(tmpdir(), 'srp-pack-'));
  try {
    const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, env, encoding: 'utf8' }));
    const tarball = join(work, packed[0].filename);
    assert.equal(packed[0].filename, `stapel-runner-protocol-${pkg.version}.tgz`);
    const files = packed[0].files.map((f) => f.path);
    for (const f of ['index.mjs', 'dist/index.js', 'types/index.d.ts', 'native.d.ts', 'stapel-runner-protocol.node', 'package.json']) {
      assert.ok(files.includes(f), `${f} is not in the tarball`);
    }
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('tests/')), 'sources and tests stay out of the tarball');

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, version: '0.0.0' }));
    execFileSync(npm, ['install', '--offline', '--no-package-lock', tarball], { cwd: app, env, stdio: 'pipe' });

    const frame = '{"schema_version":1,"type":"ping","nonce":"n"}';
    writeFileSync(
      join(app, 'use.cjs'),
      `const srp = require('stapel-runner-protocol');\nconsole.log(srp.encode(srp.decode(process.argv[2], { validate: true })));\n`,
    );
    writeFileSync(
      join(app, 'use.mjs'),
      `import { decode, encode } from 'stapel-runner-protocol';\nimport srp from 'stapel-runner-protocol';\nconsole.log(encode(decode(process.argv[2], { validate: true })), typeof srp.HubSession);\n`,
    );
    assert.equal(execFileSync(process.execPath, ['use.cjs', frame], { cwd: app, encoding: 'utf8' }).trim(), frame);
    assert.equal(execFileSync(process.execPath, ['use.mjs', frame], { cwd: app, encoding: 'utf8' }).trim(), `${frame} function`);

    // The published types: a consumer using the whole API type-checks under --strict.
    copyFileSync(join(root, 'tests', 'consumer', 'consumer.ts'), join(app, 'consumer.ts'));
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'commonjs', moduleResolution: 'node10', types: ['node'], typeRoots: [join(root, 'node_modules', '@types')] },
        files: ['consumer.ts'],
      }),
    );
    execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], { cwd: app, encoding: 'utf8' });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
