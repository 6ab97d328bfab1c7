// How users get the package: `npm pack`, `npm install ./stapel-runner-protocol-X.tgz` into
// an empty project, then `require`, `import`, and `tsc --strict` of a consumer that uses
// the whole API, as CommonJS and as ESM; the browser build's files are in the tarball and
// `stapel-runner-protocol/browser` resolves to them. And the package's version is the
// workspace's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const env = { ...process.env, npm_config_cache: join(root, '.npm-cache'), npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

test('the package version is the workspace version (and the lock file\'s)', () => {
  const cargo = readFileSync(join(root, '..', 'Cargo.toml'), 'utf8');
  const section = cargo.slice(cargo.indexOf('[workspace.package]'));
  const workspace = /^version\s*=\s*"([^"]+)"/m.exec(section)?.[1];
  assert.ok(workspace, 'the workspace Cargo.toml names a version');
  assert.equal(pkg.version, workspace);
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
  assert.equal(lock.version, workspace);
  assert.equal(lock.packages[''].version, workspace);
  assert.equal(pkg.name, 'stapel-runner-protocol');
});

test('the packed tarball installs into an empty project and works from require, import and tsc (CJS and ESM)', () => {
  const work = mkdtempSync(join(tmpdir(), 'srp-pack-'));
  try {
    const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, env, encoding: 'utf8' }));
    const tarball = join(work, packed[0].filename);
    assert.equal(packed[0].filename, `stapel-runner-protocol-${pkg.version}.tgz`);
    const files = packed[0].files.map((f) => f.path);
    for (const f of ['index.mjs', 'dist/index.js', 'dist/transport-ws.js', 'types/index.d.ts', 'types/transport-ws.d.ts', 'native.d.ts', 'stapel-runner-protocol.node', 'package.json', 'schemas/ping.v1.json', 'schemas/api/session.json']) {
      assert.ok(files.includes(f), `${f} is not in the tarball`);
    }
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('tests/') || f.startsWith('ts/')), 'sources and tests stay out of the tarball');
    // The browser build (`stapel-runner-protocol/browser`): every file its manifest lists,
    // and nothing else of browser/ (its sources and the build folder stay out).
    const browser = JSON.parse(readFileSync(join(root, 'browser', 'dist', 'manifest.json'), 'utf8'));
    const browserFiles = [...Object.keys(browser.files), 'manifest.json'].map((f) => `browser/dist/${f}`).sort();
    assert.deepEqual(files.filter((f) => f.startsWith('browser/')).sort(), browserFiles);

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, version: '0.0.0' }));
    execFileSync(npm, ['install', '--offline', '--no-package-lock', tarball, join(root, 'node_modules', 'ws')], { cwd: app, env, stdio: 'pipe' });

    const frame = '{"schema_version":1,"type":"ping","nonce":"n"}';
    writeFileSync(
      join(app, 'use.cjs'),
      "const srp = require('stapel-runner-protocol');\nconst ws = require('stapel-runner-protocol/transport-ws');\n" +
        "console.log(srp.encode(srp.decode(process.argv[2], { validate: true })), srp.loadSchema('ping').title, typeof ws.HubServer);\n",
    );
    writeFileSync(
      join(app, 'use.mjs'),
      "import { decode, encode, loadSchema } from 'stapel-runner-protocol';\nimport srp from 'stapel-runner-protocol';\n" +
        "import { RunnerClient } from 'stapel-runner-protocol/transport-ws';\n" +
        "console.log(encode(decode(process.argv[2], { validate: true })), loadSchema('ping').title, typeof srp.HubSession, typeof RunnerClient);\n",
    );
    assert.equal(execFileSync(process.execPath, ['use.cjs', frame], { cwd: app, encoding: 'utf8' }).trim(), `${frame} ping function`);
    assert.equal(execFileSync(process.execPath, ['use.mjs', frame], { cwd: app, encoding: 'utf8' }).trim(), `${frame} ping function function`);
    // The browser export resolves to the installed build, byte for byte the committed one.
    const entry = execFileSync(process.execPath, ['-e', "console.log(require.resolve('stapel-runner-protocol/browser'))"], { cwd: app, encoding: 'utf8' }).trim();
    assert.equal(entry, join(app, 'node_modules', 'stapel-runner-protocol', 'browser', 'dist', browser.entry));
    for (const [f, { sha256 }] of Object.entries(browser.files)) {
      const installed = readFileSync(join(dirname(entry), f));
      assert.equal(createHash('sha256').update(installed).digest('hex'), sha256, `installed browser/dist/${f}`);
    }

    // The published types: a consumer using the whole API type-checks under --strict, as
    // CommonJS (node16 and the older node10 resolution) and as ESM.
    copyFileSync(join(root, 'tests', 'consumer', 'consumer.ts'), join(app, 'consumer.cts'));
    copyFileSync(join(root, 'tests', 'consumer', 'consumer.ts'), join(app, 'consumer.mts'));
    copyFileSync(join(root, 'tests', 'consumer', 'consumer.ts'), join(app, 'consumer.ts'));
    // The browser export has the same types.
    writeFileSync(
      join(app, 'browser.mts'),
      "import { decode, DecodeError, SessionReducer } from 'stapel-runner-protocol/browser';\n" +
        "const m = decode('{\"schema_version\":1,\"type\":\"ping\"}');\n" +
        "export const ok: boolean = m.type === 'ping' && DecodeError.name === 'DecodeError' && typeof SessionReducer === 'function';\n",
    );
    const base = { strict: true, noEmit: true, target: 'ES2022', types: ['node'], typeRoots: [join(root, 'node_modules', '@types')], skipLibCheck: false };
    const configs = {
      'tsconfig.node16.json': { compilerOptions: { ...base, module: 'node16', moduleResolution: 'node16' }, files: ['consumer.cts', 'consumer.mts', 'browser.mts'] },
      'tsconfig.node10.json': { compilerOptions: { ...base, module: 'commonjs', moduleResolution: 'node10' }, files: ['consumer.ts'] },
    };
    for (const [name, config] of Object.entries(configs)) {
      writeFileSync(join(app, name), JSON.stringify(config));
      execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(app, name)], { cwd: app, encoding: 'utf8' });
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
