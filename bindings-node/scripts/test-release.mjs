// The npm release as a user gets it (see scripts/test-release): the tarballs of
// scripts/release in OUT_DIR, served by a throwaway registry on the loopback interface,
// installed into an empty project with no Rust toolchain on PATH.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { NAME, PLATFORMS, ROOT, checkAddon, hostPlatform, version } from './platforms.mjs';

const out = resolve(process.argv[2] ?? '');
if (!process.argv[2] || !existsSync(out)) {
  console.error('usage: scripts/test-release OUT_DIR (the folder scripts/release wrote)');
  process.exit(2);
}
const v = version();
const step = (s) => console.log(`\n==> ${s}`);
const fail = (s) => {
  throw new Error(`test-release: ${s}`);
};
const check = (ok, s) => {
  if (!ok) fail(s);
};

/** Runs a command; resolves to {code, stdout, stderr} (never rejects on a non-zero exit). */
function run(cmd, args, options) {
  return new Promise((done, reject) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    const stdout = [];
    const stderr = [];
    child.stdout.on('data', (d) => stdout.push(d));
    child.stderr.on('data', (d) => stderr.push(d));
    child.on('error', reject);
    child.on('close', (code) => done({ code, stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString() }));
  });
}
async function ok(cmd, args, options) {
  const r = await run(cmd, args, options);
  if (r.code !== 0) fail(`${cmd} ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

const work = mkdtempSync(join(tmpdir(), 'srp-release-test-'));
let server;
try {
  step(`the tarballs in ${out} (version ${v})`);
  const tarballs = {};
  const manifests = {};
  for (const name of [NAME, ...PLATFORMS.map((p) => p.package)]) {
    const file = join(out, `${name}-${v}.tgz`);
    check(existsSync(file), `${file} is missing (run scripts/release ${out})`);
    const unpacked = join(work, 'unpacked', name);
    mkdirSync(unpacked, { recursive: true });
    await ok('tar', ['-xzf', file, '-C', unpacked]);
    tarballs[name] = file;
    manifests[name] = JSON.parse(readFileSync(join(unpacked, 'package', 'package.json'), 'utf8'));
    check(manifests[name].name === name && manifests[name].version === v, `${file}: package.json names ${manifests[name].name}@${manifests[name].version}`);
  }
  const main = manifests[NAME];
  const listing = (await ok('tar', ['-tzf', tarballs[NAME]])).stdout.split('\n');
  check(!listing.some((f) => f.endsWith('.node')), `the main tarball carries a .node: ${listing.filter((f) => f.endsWith('.node'))}`);
  const wanted = Object.fromEntries(PLATFORMS.map((p) => [p.package, v]));
  check(JSON.stringify(main.optionalDependencies) === JSON.stringify(wanted), `the main package's optionalDependencies are ${JSON.stringify(main.optionalDependencies)}, not ${JSON.stringify(wanted)}`);
  console.log(`${NAME}: no .node (${listing.length - 1} files); optionalDependencies ${Object.keys(wanted).join(', ')}`);
  for (const p of PLATFORMS) {
    const m = manifests[p.package];
    const fields = { os: m.os, cpu: m.cpu, libc: m.libc, main: m.main };
    const expected = { os: [p.os], cpu: [p.cpu], libc: [p.libc], main: p.file };
    check(JSON.stringify(fields) === JSON.stringify(expected), `${p.package}: ${JSON.stringify(fields)}, expected ${JSON.stringify(expected)}`);
    const files = (await ok('tar', ['-tzf', tarballs[p.package]])).stdout.split('\n').filter(Boolean).sort();
    check(JSON.stringify(files) === JSON.stringify(['package/README.md', 'package/package.json', `package/${p.file}`].sort()), `${p.package} holds ${files.join(' ')}`);
    // The addon as shipped, checked again (machine, C library, glibc versions, entry point).
    const summary = checkAddon(p, join(work, 'unpacked', p.package, 'package', p.file));
    console.log(`${p.package}: os ${m.os} cpu ${m.cpu} libc ${m.libc}; ${summary}`);
  }

  const host = hostPlatform();
  check(host !== undefined, `this machine (${process.platform}-${process.arch}) has no platform package to run`);

  step('a throwaway registry on 127.0.0.1 serving the platform packages from OUT_DIR');
  const served = [];
  const routes = new Map();
  server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    served.push(path);
    const body = routes.get(path)?.();
    if (body === undefined) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    res.writeHead(200, { 'content-type': path.endsWith('.tgz') ? 'application/octet-stream' : 'application/json' }).end(body);
  });
  await new Promise((done) => server.listen(0, '127.0.0.1', done));
  const registry = `http://127.0.0.1:${server.address().port}/`;
  for (const p of PLATFORMS) {
    const bytes = readFileSync(tarballs[p.package]);
    const tarballPath = `/-/${p.package}-${v}.tgz`;
    const packument = {
      name: p.package,
      'dist-tags': { latest: v },
      versions: {
        [v]: {
          ...manifests[p.package],
          _id: `${p.package}@${v}`,
          dist: {
            tarball: `${registry.slice(0, -1)}${tarballPath}`,
            integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
            shasum: createHash('sha1').update(bytes).digest('hex'),
          },
        },
      },
    };
    routes.set(`/${p.package}`, () => JSON.stringify(packument));
    routes.set(tarballPath, () => bytes);
  }
  console.log(registry);

  step('an empty project: npm install of the main tarball, no cargo or rustc on PATH');
  // PATH: a folder with node and npm only, then the system folders that hold no Rust tools.
  const bin = join(work, 'bin');
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, 'node'));
  // npm: the one next to this node, else the first on PATH.
  const npmCli = realpathSync(
    [dirname(process.execPath), ...(process.env.PATH ?? '').split(delimiter)].map((d) => join(d, 'npm')).find((f) => existsSync(f)) ?? fail('npm not found'),
  );
  symlinkSync(npmCli, join(bin, 'npm'));
  const system = ['/usr/local/bin', '/usr/bin', '/bin'].filter((d) => !['cargo', 'rustc', 'rustup'].some((t) => existsSync(join(d, t))));
  writeFileSync(join(work, 'npmrc'), '');
  const env = {
    PATH: [bin, ...system].join(delimiter),
    HOME: work,
    TMPDIR: tmpdir(),
    npm_config_userconfig: join(work, 'npmrc'),
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_registry: registry,
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
  const tools = await run('sh', ['-c', 'command -v cargo || command -v rustc || command -v rustup'], { env });
  check(tools.code !== 0, `cargo or rustc is still on the PATH of the test: ${tools.stdout.trim()}`);
  console.log(`PATH=${env.PATH} (no cargo, rustc or rustup)`);
  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '0.0.0', private: true }));
  const install = await ok('npm', ['install', '--no-package-lock', tarballs[NAME]], { cwd: app, env });
  console.log(install.stdout.trim());
  const installed = PLATFORMS.filter((p) => existsSync(join(app, 'node_modules', p.package)));
  check(installed.length === 1 && installed[0] === host, `npm installed ${installed.map((p) => p.package).join(', ') || 'no platform package'}; expected ${host.package} only`);
  const fetched = served.filter((s) => s.endsWith('.tgz'));
  check(JSON.stringify(fetched) === JSON.stringify([`/-/${host.package}-${v}.tgz`]), `tarballs fetched from the registry: ${fetched.join(' ')}`);
  console.log(`npm asked the registry for ${[...new Set(served.filter((s) => !s.endsWith('.tgz')))].join(', ')}; chose by os/cpu/libc and fetched ${fetched.join(' ')}`);

  step("the README's quick start, compiled with tsc against the installed package, run");
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf('```ts\n') + '```ts\n'.length;
  const source = readme.slice(at, readme.indexOf('```', at));
  const printsAt = readme.indexOf('```text\n', at);
  check(printsAt > 0 && readme.slice(at, printsAt).includes('It prints:'), 'the README quick start is followed by "It prints:" and a ```text block');
  const expected = readme.slice(printsAt + '```text\n'.length, readme.indexOf('```', printsAt + 1)).trimEnd();
  writeFileSync(join(app, 'example.ts'), source);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, target: 'ES2022', module: 'node16', moduleResolution: 'node16', types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')], outDir: '.' },
      files: ['example.ts'],
    }),
  );
  await ok(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], { cwd: app, env });
  const example = await ok('node', ['example.js'], { cwd: app, env });
  process.stdout.write(example.stdout);
  check(example.stdout.trimEnd() === expected, `the example printed\n${example.stdout}\nand the README says it prints\n${expected}`);
  const loaded = await ok('node', ['-e', "require('stapel-runner-protocol'); console.log(Object.keys(require.cache).filter((f) => f.endsWith('.node')).join(' '))"], { cwd: app, env });
  const addon = join(realpathSync(app), 'node_modules', host.package, host.file);
  check(loaded.stdout.trim() === addon, `the addon loaded is ${loaded.stdout.trim()}, not ${addon}`);
  console.log(`the addon loaded: ${addon}`);
  const esm = await ok('node', ['--input-type=module', '-e', "import { VERSION } from 'stapel-runner-protocol'; console.log(VERSION)"], { cwd: app, env });
  check(esm.stdout.trim() === v, `import of the package gives VERSION ${esm.stdout.trim()}`);

  step('without the platform package, the loader fails and says why');
  const aside = join(work, 'aside');
  renameSync(join(app, 'node_modules', host.package), aside);
  const missing = await run('node', ['example.js'], { cwd: app, env });
  renameSync(aside, join(app, 'node_modules', host.package));
  check(missing.code !== 0, 'the example ran without the platform package');
  check(missing.stderr.includes(`${NAME}: no native addon for this platform`) && missing.stderr.includes(host.package), `the error does not name the platform package:\n${missing.stderr}`);
  console.log(missing.stderr.split('\n').find((l) => l.startsWith('Error:') && l.includes('no native addon')));
  const manifestPath = join(app, 'node_modules', host.package, 'package.json');
  const original = readFileSync(manifestPath, 'utf8');
  writeFileSync(manifestPath, JSON.stringify({ ...JSON.parse(original), version: '0.0.1' }));
  const stale = await run('node', ['example.js'], { cwd: app, env });
  writeFileSync(manifestPath, original);
  check(stale.code !== 0 && stale.stderr.includes(`is version 0.0.1; install ${host.package}@${v}`), `a platform package of another version was not refused:\n${stale.stderr}`);
  console.log(stale.stderr.split('\n').find((l) => l.includes('is version 0.0.1')));
  console.log(`\ntest-release: ok (${NAME} ${v}, ${host.package} installed from the registry and used)`);
} finally {
  server?.close();
  rmSync(work, { recursive: true, force: true });
}
