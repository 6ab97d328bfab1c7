#!/usr/bin/env node
// The browser build measured against the other ways in (a script, not a test: no
// assertions on time). In headless Chromium (Debian's, through playwright-core), for:
//
//   wasip1   the package's browser build (browser/dist/): napi-rs WASI, wasm32-wasip1
//   threads  the same crate for wasm32-wasip1-threads (needs COOP/COEP, starts workers)
//   bindgen  a throwaway wasm-bindgen build of the core on wasm32-unknown-unknown
//            (bench/browser-bindgen/: decode and the reducer only, the same boundary design)
//   json     a page that only JSON.parses (the page's own cost to the first frame)
//
// and in Node, the native N-API build. Figures: gzipped bytes of what a page loads, time
// from navigation start to the first decoded frame (median of --runs cold starts, each a
// fresh browser and profile), decode ns/frame (eager plain object; lazy payload where the
// build has it) against JSON.parse of the same frame, reducer events/s (per line and in one
// call) against JSON.parse of every line. Workload: bench/browser-workload.mjs.
//
//   node bench/browser.mjs [--runs N] [--builds wasip1,threads,bindgen,json] [--rebuild] [--json FILE]
//
// Needs the native addon (npm run build) and /usr/bin/chromium (scripts/test-browser
// installs it). Builds the `threads` and `bindgen` variants into bench/.browser/ when they
// are missing (or with --rebuild): `bindgen` installs wasm-bindgen-cli at the version
// bench/browser-bindgen/Cargo.toml pins into bench/.browser/tools unless WASM_BINDGEN
// names that binary.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as srp from 'stapel-runner-protocol';
import { DIST, ISOLATION, launch, runPage, serve } from '../tests/browser/harness.mjs';
import { REDUCER_CONFIG, measure } from './browser-workload.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const RUNS = Number(opt('--runs', '5'));
const BUILDS = opt('--builds', 'wasip1,threads,bindgen,json').split(',');
const rebuild = args.includes('--rebuild');
const work = join(root, 'bench', '.browser');
const run = (cmd, argv, options = {}) => execFileSync(cmd, argv, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], ...options });
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');

/** The folder each build is served from. */
const FOLDERS = { wasip1: DIST, threads: join(work, 'threads'), bindgen: join(work, 'bindgen') };

function buildThreads() {
  if (existsSync(join(FOLDERS.threads, 'stapel-runner-protocol.js')) && !rebuild) return;
  run('node', [join(root, 'scripts', 'build-browser.mjs'), '--target', 'wasm32-wasip1-threads', '--out', FOLDERS.threads]);
}

function buildBindgen() {
  if (existsSync(join(FOLDERS.bindgen, 'stapel_bench_bindgen.js')) && !rebuild) return;
  const crate = join(root, 'bench', 'browser-bindgen');
  const pin = /wasm-bindgen = "=([0-9.]+)"/.exec(readFileSync(join(crate, 'Cargo.toml'), 'utf8'))[1];
  let cli = process.env.WASM_BINDGEN ?? join(work, 'tools', 'bin', 'wasm-bindgen');
  const version = () => {
    try {
      return execFileSync(cli, ['--version'], { encoding: 'utf8' }).trim().split(' ')[1];
    } catch {
      return null;
    }
  };
  if (version() !== pin) {
    if (process.env.WASM_BINDGEN) throw new Error(`WASM_BINDGEN is ${version()}, the crate pins ${pin}`);
    run('cargo', ['install', 'wasm-bindgen-cli', '--version', `=${pin}`, '--root', join(work, 'tools')]);
    cli = join(work, 'tools', 'bin', 'wasm-bindgen');
  }
  run('rustup', ['target', 'add', 'wasm32-unknown-unknown']);
  const target = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(work, 'target');
  run('cargo', ['build', '--release', '--target', 'wasm32-unknown-unknown', '--manifest-path', join(crate, 'Cargo.toml')], {
    env: { ...process.env, CARGO_TARGET_DIR: target },
  });
  rmSync(FOLDERS.bindgen, { recursive: true, force: true });
  run(cli, ['--target', 'web', '--out-dir', FOLDERS.bindgen, join(target, 'wasm32-unknown-unknown', 'release', 'stapel_bench_bindgen.wasm')]);
}

/** Gzipped (level 9) and raw bytes of what a page of the build loads. */
function sizes(name) {
  if (name === 'json') return { gzip: 0, raw: 0, files: [] };
  const folder = FOLDERS[name];
  const files = readdirSync(folder).filter((f) => /\.(m?js|wasm)$/.test(f));
  let gzip = 0;
  let raw = 0;
  const each = [];
  for (const f of files.sort()) {
    const bytes = readFileSync(join(folder, f));
    const z = gzipSync(bytes, { level: 9 }).length;
    gzip += z;
    raw += bytes.length;
    each.push(`${f} ${bytes.length} B, gzip ${z} B`);
  }
  return { gzip, raw, files: each };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function page(server, build, mode) {
  const chromium = await launch();
  try {
    const { value } = await runPage(chromium.context, `${server.url}/bench/?build=${build}&mode=${mode}`, { timeout: 600_000 });
    return value;
  } finally {
    await chromium.close();
  }
}

if (BUILDS.includes('threads')) buildThreads();
if (BUILDS.includes('bindgen')) buildBindgen();

const chromiumVersion = execFileSync(process.env.CHROMIUM ?? '/usr/bin/chromium', ['--version'], { encoding: 'utf8' }).trim();
console.log(`${new Date().toISOString()}  ${cpus().length} cores (${cpus()[0].model}), load average ${load()}`);
console.log(`node ${process.version}; ${chromiumVersion}; ${RUNS} cold starts per build`);

// The native build, in this process.
const nativeApi = {
  decodeEager: (f) => srp.decode(f, { validate: true, lazy: false }),
  decodeLazy: (f) => srp.decode(f, { validate: true }),
  reducer() {
    const r = new srp.SessionReducer(REDUCER_CONFIG);
    return { applyLine: (l) => r.applyLine(l), applyLines: (t) => r.applyLines(t), snapshotSize: () => JSON.stringify(r.snapshot()).length };
  },
};
const results = { node: { build: 'node', ...measure(() => performance.now(), nativeApi) } };

const html = '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="/bench/browser-page.mjs"></script>';
const mounts = { '/bench/': join(root, 'bench'), '/builds/wasip1/': FOLDERS.wasip1, '/builds/threads/': FOLDERS.threads, '/builds/bindgen/': FOLDERS.bindgen };
// Every build is served with the isolation headers (the threaded one needs them).
const server = await serve({ mounts, pages: { '/bench/': { type: 'text/html; charset=utf-8', body: html } }, headers: ISOLATION });
try {
  for (const build of BUILDS) {
    const firsts = [];
    for (let i = 0; i < RUNS; i += 1) firsts.push((await page(server, build, 'first')).firstFrameMs);
    const all = await page(server, build, 'all');
    results[build] = { ...all, firstFrameMs: median(firsts), firstFrameRange: [Math.min(...firsts), Math.max(...firsts)], ...sizes(build) };
  }
} finally {
  await server.close();
}

const f0 = (x) => (x === undefined ? '—' : x.toFixed(0));
const r2 = (a, b) => (a === undefined || b === undefined ? '—' : `${(a / b).toFixed(2)}x`);
const NAMES = {
  node: 'Node native (N-API)',
  wasip1: 'Chromium: napi-rs WASI wasm32-wasip1 (shipped)',
  threads: 'Chromium: napi-rs WASI wasm32-wasip1-threads',
  bindgen: 'Chromium: wasm-bindgen (decode+reducer only)',
  json: 'Chromium: JSON.parse only',
};
console.log('\nsize and cold start');
for (const [k, v] of Object.entries(results)) {
  if (k === 'node') continue;
  const range = v.firstFrameRange.map((x) => x.toFixed(0)).join('–');
  console.log(`  ${NAMES[k].padEnd(48)} gzip ${String(v.gzip).padStart(8)} B (raw ${v.raw} B)  first frame ${f0(v.firstFrameMs).padStart(5)} ms (${range})`);
  for (const f of v.files) console.log(`      ${f}`);
}
console.log('\nthroughput (best of rounds)');
console.log(`  ${''.padEnd(48)} ${'eager ns'.padStart(9)} ${'lazy ns'.padStart(8)} ${'JSON.parse'.padStart(10)} ${'line ev/s'.padStart(10)} ${'call ev/s'.padStart(10)} ${'parse ev/s'.padStart(10)}`);
for (const [k, v] of Object.entries(results)) {
  if (k === 'json') continue;
  console.log(
    `  ${NAMES[k].padEnd(48)} ${f0(v.decode_eager_ns).padStart(9)} ${f0(v.decode_lazy_ns).padStart(8)} ${f0(v.json_parse_ns).padStart(10)} ` +
      `${f0(v.reducer_line_events_per_s).padStart(10)} ${f0(v.reducer_lines_events_per_s).padStart(10)} ${f0(v.json_parse_events_per_s).padStart(10)}`,
  );
}
console.log('\nratios');
const n = results.node;
for (const [k, v] of Object.entries(results)) {
  if (k === 'json' || k === 'node') continue;
  console.log(`  ${NAMES[k]}`);
  console.log(`    decode eager / JSON.parse (same engine): ${r2(v.decode_eager_ns, v.json_parse_ns)}; lazy: ${r2(v.decode_lazy_ns, v.json_parse_ns)}`);
  console.log(`    decode eager / Node native: ${r2(v.decode_eager_ns, n.decode_eager_ns)}; lazy: ${r2(v.decode_lazy_ns, n.decode_lazy_ns)}`);
  console.log(`    reducer per line: ${r2(n.reducer_line_events_per_s, v.reducer_line_events_per_s)} slower than Node native; one call: ${r2(n.reducer_lines_events_per_s, v.reducer_lines_events_per_s)}`);
  console.log(`    reducer per line / JSON.parse of the lines (same engine): ${r2(v.json_parse_events_per_s, v.reducer_line_events_per_s)} slower`);
  if (results.json) console.log(`    first frame: ${f0(v.firstFrameMs - results.json.firstFrameMs)} ms after a JSON.parse-only page's (${f0(results.json.firstFrameMs)} ms)`);
}
console.log(`  Node native: decode eager / JSON.parse ${r2(n.decode_eager_ns, n.json_parse_ns)}; lazy ${r2(n.decode_lazy_ns, n.json_parse_ns)}`);
console.log(`\nload average after: ${load()}`);
const jsonOut = opt('--json', undefined);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ date: new Date().toISOString(), chromium: chromiumVersion, node: process.version, runs: RUNS, results }, null, 2)}\n`);
