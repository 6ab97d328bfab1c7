// The npm layout of the package: the main package `stapel-runner-protocol` (JavaScript,
// types, schemas, the browser build; no native addon) and one small package per platform
// holding that platform's addon (`stapel-runner-protocol-linux-x64-gnu`, …), each with the
// `os`, `cpu` and `libc` fields npm selects it by, named in the main package's
// `optionalDependencies`. The loader (ts/native.ts) requires the one for its process.
//
// Used by scripts/release (every platform), scripts/test-release and tests/package.test.mjs
// (the development build as the x64 glibc package).
//
//   node scripts/platforms.mjs version          prints the version (the workspace Cargo.toml's;
//                                              fails when package.json or the lock disagree)
//   node scripts/platforms.mjs targets          prints "id rust-target zig-target" per platform
//   node scripts/platforms.mjs pack OUT_DIR ID=ADDON…
//                                              checks every addon with readelf, writes the
//                                              platform packages and the main package into
//                                              OUT_DIR as npm tarballs, prints their sizes
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const NAME = 'stapel-runner-protocol';
/** The oldest glibc the gnu addons are linked against (zig's target suffix), and so need. */
export const GLIBC = '2.17';

/**
 * The platforms with a package. `rust`: the target triple; `zig`: the triple cargo-zigbuild
 * builds (the glibc version as a suffix); `machine`: readelf's name of the ELF machine;
 * `needed`: the shared libraries the addon may need (it must need the C library's own).
 */
export const PLATFORMS = [
  { id: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc', rust: 'x86_64-unknown-linux-gnu', machine: 'Advanced Micro Devices X86-64' },
  { id: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc', rust: 'aarch64-unknown-linux-gnu', machine: 'AArch64' },
  { id: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl', rust: 'x86_64-unknown-linux-musl', machine: 'Advanced Micro Devices X86-64' },
  { id: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl', rust: 'aarch64-unknown-linux-musl', machine: 'AArch64' },
].map((p) => ({
  ...p,
  zig: p.libc === 'glibc' ? `${p.rust}.${GLIBC}` : p.rust,
  package: `${NAME}-${p.id}`,
  file: `${NAME}.${p.id}.node`,
}));

/** Shared libraries an addon may need, by C library; the first is required. */
const NEEDED = {
  glibc: ['libc.so.6', 'libm.so.6', 'libpthread.so.0', 'libdl.so.2', 'librt.so.1', 'libgcc_s.so.1', 'ld-linux-x86-64.so.2', 'ld-linux-aarch64.so.1'],
  musl: ['libc.so', 'libgcc_s.so.1'],
};

/** The version of everything: the workspace Cargo.toml's; throws when package.json or the lock file disagree. */
export function version() {
  const cargo = readFileSync(join(ROOT, '..', 'Cargo.toml'), 'utf8');
  const section = cargo.slice(cargo.indexOf('[workspace.package]'));
  const workspace = /^version\s*=\s*"([^"]+)"/m.exec(section)?.[1];
  if (!workspace) throw new Error('the workspace Cargo.toml names no [workspace.package] version');
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
  for (const [what, v] of [['package.json', pkg.version], ['package-lock.json', lock.version], ["package-lock.json's root package", lock.packages?.['']?.version]]) {
    if (v !== workspace) throw new Error(`${what} says version ${v}, the workspace Cargo.toml ${workspace}: make them agree`);
  }
  return workspace;
}

/**
 * What readelf says about an addon, checked against its platform: a 64-bit shared object
 * for the platform's machine, no interpreter, needing the platform's C library and nothing
 * outside `NEEDED`, glibc symbol versions at most `GLIBC` (none at all for musl), and the
 * N-API entry point exported. Returns the summary; throws with every failed check.
 * `maxGlibc: null` lifts the glibc limit (a development build, linked on this machine).
 */
export function checkAddon(platform, path, { maxGlibc = GLIBC } = {}) {
  const readelf = (...args) => execFileSync('readelf', ['-W', ...args, path], { encoding: 'utf8' });
  const header = readelf('-h');
  const field = (name) => new RegExp(`^\\s*${name}:\\s*(.+?)\\s*$`, 'm').exec(header)?.[1] ?? '?';
  const cls = field('Class');
  const machine = field('Machine');
  const type = field('Type').split(' ')[0];
  const interpreter = /Requesting program interpreter: ([^\]]+)\]/.exec(readelf('-l'))?.[1] ?? null;
  const needed = [...readelf('-d').matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const versions = [...new Set([...readelf('-V').matchAll(/Name: (GLIBC_[0-9.]+)/g)].map((m) => m[1].slice(6)))];
  const newest = versions.sort(compareVersions).at(-1) ?? null;
  const exported = /\bnapi_register_module_v1\b/.test(readelf('--dyn-syms'));

  const failures = [];
  if (cls !== 'ELF64') failures.push(`class ${cls}, not ELF64`);
  if (machine !== platform.machine) failures.push(`machine ${machine}, not ${platform.machine}`);
  if (type !== 'DYN') failures.push(`type ${type}, not DYN (a shared object)`);
  if (interpreter !== null) failures.push(`it requests an interpreter (${interpreter}): not a plain shared object`);
  const allowed = NEEDED[platform.libc];
  if (!needed.includes(allowed[0])) failures.push(`it does not need ${allowed[0]} (needs: ${needed.join(' ') || 'nothing'})`);
  for (const lib of needed) if (!allowed.includes(lib)) failures.push(`it needs ${lib}, not a ${platform.libc} library this package may need`);
  if (platform.libc === 'glibc' && maxGlibc !== null && newest !== null && compareVersions(newest, maxGlibc) > 0) failures.push(`it needs GLIBC_${newest}, newer than ${maxGlibc}`);
  if (platform.libc === 'musl' && versions.length > 0) failures.push(`it references glibc symbol versions (GLIBC_${newest})`);
  if (!exported) failures.push('it does not export napi_register_module_v1 (not an N-API addon)');
  const summary =
    `${platform.id}: ${cls} ${machine}, ${type}, interpreter ${interpreter ?? 'none'}, NEEDED ${needed.join(' ')}, ` +
    (platform.libc === 'glibc' ? `max GLIBC_${newest ?? '(none)'}` : `GLIBC_ versions: ${versions.length ? versions.join(' ') : 'none'}`) +
    `, napi_register_module_v1 ${exported ? 'exported' : 'MISSING'}`;
  if (failures.length > 0) throw new Error(`readelf check of ${path} failed:\n  ${failures.join('\n  ')}\n  (${summary})`);
  return summary;
}

function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  }
  return 0;
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const npmEnv = () => ({ ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', npm_config_loglevel: 'error' });

/** `npm pack` of `dir` into `out`: {file, size, files (paths in the tarball)}. */
function pack(dir, out) {
  const [packed] = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', out], { cwd: dir, env: npmEnv(), encoding: 'utf8' }));
  const file = join(out, packed.filename);
  return { file, size: statSync(file).size, unpacked: packed.unpackedSize, files: packed.files.map((f) => f.path) };
}

/** The package.json of a platform package. */
export function platformManifest(platform, v) {
  return {
    name: platform.package,
    version: v,
    description: `The ${platform.id} native addon of ${NAME} (N-API); installed by ${NAME} as an optional dependency`,
    license: 'MIT',
    main: platform.file,
    files: [platform.file],
    os: [platform.os],
    cpu: [platform.cpu],
    libc: [platform.libc],
    engines: { node: '>=20' },
  };
}

/**
 * Writes one platform package's tarball into `out` from `addon` (a `.node` file), after
 * checking it with readelf (`check`: checkAddon's options). Returns {platform, summary,
 * ...pack result}.
 */
export function packPlatform(platform, addon, out, v = version(), check = {}) {
  const summary = checkAddon(platform, addon, check);
  const stage = mkdtempSync(join(tmpdir(), `srp-${platform.id}-`));
  try {
    copyFileSync(addon, join(stage, platform.file));
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(platformManifest(platform, v), null, 2)}\n`);
    writeFileSync(
      join(stage, 'README.md'),
      `# ${platform.package}\n\nThe ${platform.id} build of the native addon of [\`${NAME}\`](https://www.npmjs.com/package/${NAME}). ` +
        `Do not install it yourself: \`npm install ${NAME}\` installs it on ${platform.os} ${platform.cpu} with ${platform.libc}.\n`,
    );
    return { platform, summary, ...pack(stage, out) };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/**
 * Writes the main package's tarball into `out`: the files `npm pack` takes from this
 * package (the `files` list of package.json, built by scripts/build.mjs: no `.node`), with
 * `optionalDependencies` naming the platform packages at this version. Throws if the
 * tarball would carry a native addon.
 */
export function packMain(platformIds, out, v = version()) {
  const [dry] = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json'], { cwd: ROOT, env: npmEnv(), encoding: 'utf8' }));
  const stage = mkdtempSync(join(tmpdir(), 'srp-main-'));
  try {
    for (const { path } of dry.files) {
      if (path === 'package.json') continue;
      mkdirSync(dirname(join(stage, path)), { recursive: true });
      copyFileSync(join(ROOT, path), join(stage, path));
    }
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    pkg.version = v;
    pkg.optionalDependencies = Object.fromEntries(
      PLATFORMS.filter((p) => platformIds.includes(p.id)).map((p) => [p.package, v]),
    );
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    const result = pack(stage, out);
    const addons = result.files.filter((f) => f.endsWith('.node'));
    if (addons.length > 0) throw new Error(`the main package would carry native addons: ${addons.join(', ')}`);
    return result;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** The platform of this process, if it has a package. */
export function hostPlatform() {
  if (process.platform !== 'linux') return undefined;
  const glibc = Boolean(process.report.getReport().header.glibcVersionRuntime);
  return PLATFORMS.find((p) => p.cpu === process.arch && p.libc === (glibc ? 'glibc' : 'musl'));
}

const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [command, ...rest] = process.argv.slice(2);
  if (command === 'version') {
    console.log(version());
  } else if (command === 'targets') {
    for (const p of PLATFORMS) console.log(`${p.id} ${p.rust} ${p.zig}`);
  } else if (command === 'pack' && rest.length >= 2) {
    const out = resolve(rest[0]);
    mkdirSync(out, { recursive: true });
    const v = version();
    const addons = new Map(rest.slice(1).map((a) => [a.slice(0, a.indexOf('=')), resolve(a.slice(a.indexOf('=') + 1))]));
    for (const id of addons.keys()) {
      if (!PLATFORMS.some((p) => p.id === id)) throw new Error(`unknown platform ${id}`);
    }
    const results = [];
    for (const p of PLATFORMS.filter((x) => addons.has(x.id))) {
      const addon = addons.get(p.id);
      const r = packPlatform(p, addon, out, v);
      console.log(`readelf ${r.summary}`);
      results.push({ ...r, addonSize: statSync(addon).size });
    }
    const main = packMain([...addons.keys()], out, v);
    console.log(`\nartifacts in ${out}:`);
    for (const r of results) console.log(`  ${r.file.slice(out.length + 1)}  ${kb(r.size)} (addon ${kb(r.addonSize)})`);
    console.log(`  ${main.file.slice(out.length + 1)}  ${kb(main.size)} (unpacked ${kb(main.unpacked)}, ${main.files.length} files, no .node; optionalDependencies: ${results.map((r) => r.platform.package).join(', ')})`);
  } else {
    console.error('usage: node scripts/platforms.mjs version | targets | pack OUT_DIR ID=ADDON…');
    process.exit(2);
  }
}
