// How users get the package: the main package (no native addon; its optionalDependencies
// name the platform packages) and this machine's platform package, packed as
// scripts/release packs them (scripts/platforms.mjs; the development build stands in for
// the release addon), installed into an empty project; then `require`, `import`, and
// `tsc --strict` of a consumer that uses the whole API, as CommonJS and as ESM; the addon
// comes from the platform package, and without it the loader fails saying so; the
// browser build's files are in the tarball and `stapel-runner-protocol/browser` resolves
// to them. And the package's version is the workspace's; the loader's platform package
// names are the release's. (scripts/test-release tests the real release: every platform,
// npm choosing by os/cpu/libc from a registry.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PLATFORMS, hostPlatform, packMain, packPlatform, version } from '../scripts/platforms.mjs';

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
  assert.equal(version(), workspace);
});

test("the loader's platform package names are the release's, and it reads this machine's C library", () => {
  const { platformPackage, linuxLibc } = createRequire(import.meta.url)('../dist/native.js');
  for (const p of PLATFORMS) {
    assert.equal(platformPackage(p.os, p.cpu, p.libc === 'glibc' ? 'gnu' : 'musl'), p.package);
  }
  assert.equal(platformPackage('darwin', 'arm64'), 'stapel-runner-protocol-darwin-arm64');
  assert.equal(platformPackage('win32', 'x64'), 'stapel-runner-protocol-win32-x64-msvc');
  if (process.platform === 'linux') {
    // The ELF interpreter of this node against what its diagnostic report says.
    assert.equal(linuxLibc(), process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl');
  }
});

const host = hostPlatform();

test('the packed tarballs install into an empty project and work from require, import and tsc (CJS and ESM)', { skip: host === undefined && 'no platform package for this machine' }, () => {
  const work = mkdtempSync(join(tmpdir(), 'srp-pack-'));
  try {
    // The development build (this machine's glibc: no limit on its symbol versions).
    const platform = packPlatform(host, join(root, 'stapel-runner-protocol.node'), work, pkg.version, { maxGlibc: null });
    const packed = packMain([host.id], work, pkg.version);
    const tarball = packed.file;
    assert.equal(basename(tarball), `stapel-runner-protocol-${pkg.version}.tgz`);
    assert.equal(basename(platform.file), `${host.package}-${pkg.version}.tgz`);
    assert.deepEqual(platform.files.sort(), ['README.md', 'package.json', host.file].sort());
    const files = packed.files;
    for (const f of ['index.mjs', 'dist/index.js', 'dist/transport-ws.js', 'types/index.d.ts', 'types/transport-ws.d.ts', 'native.d.ts', 'package.json', 'schemas/ping.v1.json', 'schemas/api/session.json']) {
      assert.ok(files.includes(f), `${f} is not in the tarball`);
    }
    assert.deepEqual(files.filter((f) => f.endsWith('.node')), [], 'the main package carries no native addon');
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('tests/') || f.startsWith('ts/')), 'sources and tests stay out of the tarball');
    // The browser build (`stapel-runner-protocol/browser`): every file its manifest lists,
    // and nothing else of browser/ (its sources and the build folder stay out).
    const browser = JSON.parse(readFileSync(join(root, 'browser', 'dist', 'manifest.json'), 'utf8'));
    const browserFiles = [...Object.keys(browser.files), 'manifest.json'].map((f) => `browser/dist/${f}`).sort();
    assert.deepEqual(files.filter((f) => f.startsWith('browser/')).sort(), browserFiles);

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, version: '0.0.0' }));
    execFileSync(npm, ['install', '--offline', '--no-package-lock', tarball, platform.file, join(root, 'node_modules', 'ws')], { cwd: app, env, stdio: 'pipe' });
    const installedPkg = JSON.parse(readFileSync(join(app, 'node_modules', 'stapel-runner-protocol', 'package.json'), 'utf8'));
    assert.deepEqual(installedPkg.optionalDependencies, { [host.package]: pkg.version });

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
    // The addon is the platform package's.
    const addons = execFileSync(process.execPath, ['-e', "require('stapel-runner-protocol'); console.log(Object.keys(require.cache).filter((f) => f.endsWith('.node')).join(' '))"], { cwd: app, encoding: 'utf8' }).trim();
    assert.equal(addons, join(app, 'node_modules', host.package, host.file));
    // Without the platform package the loader fails, naming it.
    renameSync(join(app, 'node_modules', host.package), join(work, 'aside'));
    try {
      assert.throws(
        () => execFileSync(process.execPath, ['use.cjs', frame], { cwd: app, encoding: 'utf8', stdio: 'pipe' }),
        (e) => e.stderr.includes('stapel-runner-protocol: no native addon for this platform') && e.stderr.includes(host.package),
      );
    } finally {
      renameSync(join(work, 'aside'), join(app, 'node_modules', host.package));
    }
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
