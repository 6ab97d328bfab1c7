#!/usr/bin/env node
// Builds the browser build of the package into browser/dist/ (committed; see the README's
// "Browser" section): the binding crate compiled by `napi build` for wasm32-wasip1 (the
// same N-API exports, run by emnapi through @napi-rs/wasm-runtime), and the TypeScript
// layer bundled with napi's generated browser loader and the runtime into one ES module.
//
//   node scripts/build-browser.mjs [--out DIR] [--check]
//
// --out DIR   writes the files under DIR instead of browser/dist/.
// --target wasm32-wasip1-threads
//             the threaded WASI target instead (needs --out; for bench/browser.mjs, which
//             measures it: it needs cross-origin isolation and starts workers, see README),
//             with its worker module wasi-worker-browser.mjs bundled beside the entry.
// --analyze   prints what the bundle is made of (bytes per input).
// --no-minify readable modules (for profiling; not the shipped build).
// --check     builds into a temporary folder and compares it with browser/dist/ byte for
//             byte (exit 1 on any difference), after checking that browser/dist/
//             manifest.json names the current sources (scripts/browser-inputs.mjs).
//
// The files (stable names, loaded from one folder, no bundler and no import map needed):
//   stapel-runner-protocol.js                 the ES module: `import * as srp from '…/stapel-runner-protocol.js'`
//   stapel-runner-protocol.runtime.js         imported by it (napi's loader, emnapi, the runtime)
//   stapel-runner-protocol.wasm32-wasip1.wasm fetched by the runtime, relative to its own URL
//   THIRD-PARTY-LICENSES.txt                  licenses of the bundled npm packages
//   manifest.json                             sizes, sha256, the inputs' fingerprint, tool versions
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inputsFingerprint } from './browser-inputs.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const check = args.includes('--check');
const outIndex = args.indexOf('--out');
const committed = join(root, 'browser', 'dist');
const out = check ? mkdtempSync(join(tmpdir(), 'srp-browser-')) : outIndex >= 0 ? resolve(args[outIndex + 1]) : committed;
const targetIndex = args.indexOf('--target');
const TARGET = targetIndex >= 0 ? args[targetIndex + 1] : 'wasm32-wasip1';
const THREADS = TARGET === 'wasm32-wasip1-threads';
if (!THREADS && TARGET !== 'wasm32-wasip1') throw new Error(`unknown --target ${TARGET}`);
if (THREADS && (out === committed || check)) throw new Error('--target wasm32-wasip1-threads is for measurements: give it --out DIR');
const WASM = THREADS ? 'stapel-runner-protocol.wasm32-wasi.wasm' : 'stapel-runner-protocol.wasm32-wasip1.wasm';
const ENTRY = 'stapel-runner-protocol.js';
const RUNTIME = 'stapel-runner-protocol.runtime.js';
const LOADER = THREADS ? 'stapel-runner-protocol.wasi-browser.js' : 'stapel-runner-protocol.wasip1-browser.js';
const WORKER = 'wasi-worker-browser.mjs';
const run = (cmd, argv, env = {}) => execFileSync(cmd, argv, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

if (check) {
  // The fast half first: a stale manifest needs no build to be reported.
  const manifest = JSON.parse(readFileSync(join(committed, 'manifest.json'), 'utf8'));
  const now = inputsFingerprint(manifest.sources);
  if (manifest.inputs_sha256 !== now) {
    console.error(`browser/dist/ was built from other sources (manifest ${manifest.inputs_sha256.slice(0, 12)}, sources ${now.slice(0, 12)}):`);
    console.error('rebuild it with `node scripts/build-browser.mjs` (in bindings-node/) and commit browser/dist/.');
    process.exit(1);
  }
}

// The Rust target, added where rustup manages the toolchain (a fresh machine has only the host's).
try {
  const installed = execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' });
  if (!installed.split('\n').includes(TARGET)) run('rustup', ['target', 'add', TARGET]);
} catch (e) {
  if (e.code !== 'ENOENT') throw e;
}

// The wasm and napi's generated loaders. Paths inside the wasm (panic locations) are made
// independent of the machine: the workspace, cargo's home and the target folder.
const work = join(root, 'browser', '.build');
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const workspace = resolve(root, '..');
const cargoHome = process.env.CARGO_HOME ?? join(process.env.HOME ?? '/root', '.cargo');
const remap = [`--remap-path-prefix=${workspace}=/stapel`, `--remap-path-prefix=${cargoHome}=/cargo`];
if (process.env.CARGO_TARGET_DIR) remap.push(`--remap-path-prefix=${resolve(process.env.CARGO_TARGET_DIR)}=/target`);
const flagsVar = `CARGO_TARGET_${TARGET.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`;
const rustflags = [process.env[flagsVar] ?? '', ...remap].filter(Boolean).join(' ');
// The workspace's `browser-wasm` profile (Cargo.toml: size-optimized release).
run(join(root, 'node_modules', '.bin', 'napi'), ['build', '--target', TARGET, '--profile', 'browser-wasm', '--dts', 'native.d.ts', '--output-dir', work], {
  [flagsVar]: rustflags,
});
for (const f of THREADS ? [WASM, LOADER, WORKER] : [WASM, LOADER]) {
  if (!existsSync(join(work, f))) throw new Error(`napi build wrote no ${f}`);
}

// loadSchema's files, bundled (browser/src/node-fs.ts reads them by name).
const schemas = {};
for (const name of readdirSync(join(root, 'schemas')).sort()) {
  if (name.endsWith('.json')) schemas[name] = readFileSync(join(root, 'schemas', name), 'utf8');
}
writeFileSync(join(work, 'schemas.mjs'), `export const SCHEMA_TEXT = ${JSON.stringify(schemas)};\n`);

// Two ES modules. The runtime: napi's generated loader with emnapi and
// @napi-rs/wasm-runtime (it fetches and instantiates the wasm), plus the Buffer both
// modules use. The entry: the TypeScript layer (ts/index.ts, the package's own entry)
// with the browser's native module (importing the runtime) and shims for the three Node
// modules it names. They are separate so that only the entry keeps its function names
// (`keepNames`: error classes are named as in Node), which costs a call per closure made;
// emnapi makes closures on every N-API call.
const esbuild = await import(join(root, 'node_modules', 'esbuild', 'lib', 'main.js'));
const src = join(root, 'browser', 'src');
const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome111'],
  minify: !args.includes('--no-minify'),
  legalComments: 'none',
  charset: 'utf8',
  metafile: true,
  logLevel: 'warning',
  banner: { js: '// stapel-runner-protocol browser build: generated by scripts/build-browser.mjs (see THIRD-PARTY-LICENSES.txt).' },
};
mkdirSync(out, { recursive: true });
const runtime = await esbuild.build({
  ...common,
  entryPoints: [join(src, 'runtime.ts')],
  outfile: join(out, RUNTIME),
  inject: [join(src, 'buffer.ts')],
  plugins: [
    {
      name: 'stapel-runtime',
      setup(build) {
        build.onResolve({ filter: /^stapel-runner-protocol-wasm$/ }, () => ({ path: join(work, LOADER) }));
      },
    },
  ],
});
const aliases = {
  'node:fs': join(src, 'node-fs.ts'),
  'node:path': join(src, 'node-path.ts'),
  'node:child_process': join(src, 'node-child-process.ts'),
  'stapel-runner-protocol-schemas': join(work, 'schemas.mjs'),
};
const entry = await esbuild.build({
  ...common,
  entryPoints: [join(root, 'ts', 'index.ts')],
  outfile: join(out, ENTRY),
  keepNames: true,
  inject: [join(src, 'buffer-from-runtime.ts')],
  define: { __dirname: '"."', 'process.env.PATH': 'undefined' },
  plugins: [
    {
      name: 'stapel-entry',
      setup(build) {
        build.onResolve({ filter: /^\.\/native$/ }, (a) =>
          a.importer.startsWith(join(root, 'ts') + sep) ? { path: join(src, 'native.ts') } : undefined,
        );
        build.onResolve({ filter: /^(node:(fs|path|child_process)|stapel-runner-protocol-schemas)$/ }, (a) => ({ path: aliases[a.path] }));
        // The runtime module, beside the entry.
        build.onResolve({ filter: /^stapel-runner-protocol-runtime$/ }, () => ({ path: `./${RUNTIME}`, external: true }));
      },
    },
  ],
});
cpSync(join(work, WASM), join(out, WASM));
if (THREADS) {
  // The threaded loader starts its workers from this module (beside the entry).
  await esbuild.build({ ...common, entryPoints: [join(work, WORKER)], outfile: join(out, WORKER), inject: [join(src, 'buffer.ts')] });
}
const result = { metafile: { inputs: { ...runtime.metafile.inputs, ...entry.metafile.inputs } } };
if (args.includes('--analyze')) for (const r of [entry, runtime]) console.log(await esbuild.analyzeMetafile(r.metafile));

// The licenses of every npm package bundled into the module; the project's own sources
// bundled (their fingerprint goes into the manifest).
const packages = new Map();
const sources = [];
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) packages.set(m[1], join(root, input.slice(0, m.index + m[0].length)));
  else if (!resolve(root, input).startsWith(work + sep)) sources.push(relative(resolve(root, '..'), resolve(root, input)).split(sep).join('/'));
}
sources.sort();
const licenses = [
  'Third-party software bundled into stapel-runner-protocol.js and stapel-runner-protocol.runtime.js, with its licenses.',
  'The wasm module also links the emnapi package\'s C archive (MIT).',
  '',
];
const licensed = new Map(packages);
licensed.set('emnapi', join(root, 'node_modules', 'emnapi'));
for (const [name, dir] of [...licensed].sort(([a], [b]) => a.localeCompare(b))) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  licenses.push(`== ${name} ${pkg.version} (${pkg.license}) ==`, '');
  licenses.push(file ? readFileSync(join(dir, file), 'utf8').trim() : `(no license file in the package; package.json says ${pkg.license})`, '');
}
writeFileSync(join(out, 'THIRD-PARTY-LICENSES.txt'), licenses.join('\n'));

const version = (name) => JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')).version;
const files = {};
for (const f of [ENTRY, RUNTIME, WASM, ...(THREADS ? [WORKER] : []), 'THIRD-PARTY-LICENSES.txt']) {
  const bytes = readFileSync(join(out, f));
  files[f] = { bytes: bytes.length, sha256: sha256(bytes) };
}
const manifest = {
  note: 'Generated by scripts/build-browser.mjs; scripts/test-browser checks it against the sources.',
  entry: ENTRY,
  files,
  inputs_sha256: inputsFingerprint(sources),
  sources,
  target: TARGET,
  profile: 'browser-wasm',
  rustc: execFileSync('rustc', ['--version'], { encoding: 'utf8' }).trim(),
  tools: Object.fromEntries(['@napi-rs/cli', '@napi-rs/wasm-runtime', 'emnapi', '@emnapi/core', '@emnapi/runtime', 'esbuild', 'buffer'].map((n) => [n, version(n)])),
  bundled: [...packages.keys()].sort(),
};
writeFileSync(join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
rmSync(work, { recursive: true, force: true });

if (check) {
  const old = JSON.parse(readFileSync(join(committed, 'manifest.json'), 'utf8'));
  const differ = [];
  for (const [f, v] of Object.entries(files)) {
    if (old.files[f]?.sha256 !== v.sha256) differ.push(`${f}: committed ${old.files[f]?.sha256 ?? 'absent'} (${old.files[f]?.bytes} B), rebuilt ${v.sha256} (${v.bytes} B)`);
    else if (sha256(readFileSync(join(committed, f))) !== v.sha256) differ.push(`${f}: the committed file does not match its manifest`);
  }
  const extra = readdirSync(committed).filter((f) => !(f in files) && f !== 'manifest.json');
  if (extra.length > 0) differ.push(`files not built: ${extra.join(', ')}`);
  rmSync(out, { recursive: true, force: true });
  if (differ.length > 0) {
    console.error(`browser/dist/ is not what the sources build (${old.rustc} committed, ${manifest.rustc} here):`);
    for (const d of differ) console.error(`  ${d}`);
    process.exit(1);
  }
  console.log(`browser/dist/ rebuilt byte for byte (${Object.keys(files).length} files, ${manifest.rustc})`);
} else {
  for (const [f, v] of Object.entries(files)) console.log(`${relative(process.cwd(), join(out, f))}: ${v.bytes} bytes`);
}
