// The fingerprint of every source the browser build (browser/dist/) is made from: a sha256
// over the paths and contents of the files below and of the TypeScript files the bundle
// was made of (the bundler's own list, kept in the manifest: a change to a file the
// browser build does not bundle, such as ts/transport-ws.ts, needs no rebuild), as they
// are on disk. The build writes it into browser/dist/manifest.json; `node
// scripts/build-browser.mjs --check` (run by scripts/test-browser) fails when the sources
// no longer match it, before building.
//
//   node scripts/browser-inputs.mjs     prints the fingerprint of the committed build's sources
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const workspace = resolve(pkg, '..');

/** Folders (every file under them) and files, relative to the workspace, besides the bundled sources. */
const INPUTS = [
  'Cargo.toml',
  'Cargo.lock',
  'core/Cargo.toml',
  'core/src',
  'bindings-node/Cargo.toml',
  'bindings-node/build.rs',
  'bindings-node/src',
  'bindings-node/schemas',
  'bindings-node/package-lock.json',
  'bindings-node/tsconfig.json',
  'bindings-node/scripts/build-browser.mjs',
  'bindings-node/scripts/browser-inputs.mjs',
];

function walk(path, out) {
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) walk(join(path, name), out);
  } else {
    out.push(path);
  }
  return out;
}

/** The input files (`sources`: the bundled ones), workspace-relative with `/` separators, sorted. */
export function inputFiles(sources) {
  const files = [];
  for (const input of INPUTS) walk(join(workspace, input), files);
  const all = new Set(files.map((f) => relative(workspace, f).split(sep).join('/')));
  for (const s of sources) all.add(s);
  return [...all].sort();
}

/** The sha256 (hex) over every input file's path and bytes (a missing file counts as changed). */
export function inputsFingerprint(sources) {
  const h = createHash('sha256');
  for (const f of inputFiles(sources)) {
    let bytes;
    try {
      bytes = readFileSync(join(workspace, f));
    } catch {
      bytes = Buffer.from('\0missing');
    }
    h.update(`${f}\0${bytes.length}\0`);
    h.update(bytes);
  }
  return h.digest('hex');
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const manifest = JSON.parse(readFileSync(join(pkg, 'browser', 'dist', 'manifest.json'), 'utf8'));
  const files = inputFiles(manifest.sources);
  console.log(`${inputsFingerprint(manifest.sources)} (${files.length} files; manifest ${manifest.inputs_sha256})`);
}
