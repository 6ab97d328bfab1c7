/* The compiled N-API module (built by `napi build`). Internal: the package's public API is
   the TypeScript layer over it.

   Where the addon comes from, the first that exists wins:
   1. `stapel-runner-protocol.node` next to package.json: a development build
      (`npm run build` writes it; the published package has none);
   2. the platform package of this process, `stapel-runner-protocol-<platform>-<arch>[-<abi>]`
      (`stapel-runner-protocol-linux-x64-gnu`, …): an optional dependency of the published
      package, which npm installs only where its `os`, `cpu` and `libc` fields match.
   Its version must be this package's. */
import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type * as Native from '../native';

/** The npm name of this package; the platform packages are named after it. */
const PACKAGE = 'stapel-runner-protocol';
/** The development build's file, next to package.json. */
export const DEVELOPMENT_ADDON = join(__dirname, '..', `${PACKAGE}.node`);

/**
 * The C library the running Node is linked against, on Linux: the ELF interpreter of its
 * executable (`ld-musl-…` or `ld-linux-…`, read from the file's program headers), else what
 * Node's diagnostic report says (it names glibc's version when Node runs on glibc).
 */
export function linuxLibc(): 'musl' | 'gnu' {
  const interpreter = elfInterpreter(process.execPath);
  if (interpreter !== null && interpreter.includes('musl')) return 'musl';
  if (interpreter !== null && interpreter.includes('ld-linux')) return 'gnu';
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return report?.header?.glibcVersionRuntime ? 'gnu' : 'musl';
}

/** The PT_INTERP string of a 64-bit little-endian ELF file, or null (not one, static, unreadable). */
function elfInterpreter(path: string): string | null {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const read = (length: number, position: number): Buffer => {
      const b = Buffer.alloc(length);
      return b.subarray(0, readSync(fd as number, b, 0, length, position));
    };
    const header = read(64, 0);
    // ELF magic, ELFCLASS64, ELFDATA2LSB: every Linux target a platform package exists for.
    if (header.length < 64 || header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return null;
    const phoff = Number(header.readBigUInt64LE(32));
    const phentsize = header.readUInt16LE(54);
    const phnum = header.readUInt16LE(56);
    const table = read(phentsize * phnum, phoff);
    for (let i = 0; i < phnum && (i + 1) * phentsize <= table.length; i += 1) {
      const at = i * phentsize;
      if (table.readUInt32LE(at) !== 3 /* PT_INTERP */) continue;
      const text = read(Number(table.readBigUInt64LE(at + 32)), Number(table.readBigUInt64LE(at + 8)));
      return text.toString('latin1').replace(/\0.*$/s, '');
    }
    return null;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The name of the platform package for a platform, architecture and (Linux) C library. */
export function platformPackage(platform: string = process.platform, arch: string = process.arch, libc?: 'musl' | 'gnu'): string {
  if (platform === 'linux') return `${PACKAGE}-linux-${arch}-${libc ?? linuxLibc()}`;
  if (platform === 'win32') return `${PACKAGE}-win32-${arch}-msvc`;
  return `${PACKAGE}-${platform}-${arch}`;
}

function load(): typeof Native {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (existsSync(DEVELOPMENT_ADDON)) return require(DEVELOPMENT_ADDON) as typeof Native;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { version } = require('../package.json') as { version: string };
  const name = platformPackage();
  let addon: typeof Native;
  let found: string;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    found = (require(`${name}/package.json`) as { version: string }).version;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    addon = require(name) as typeof Native;
  } catch (cause) {
    throw new Error(
      `${PACKAGE}: no native addon for this platform (${process.platform}-${process.arch}): the platform ` +
        `package ${name} could not be loaded (${(cause as Error).message.split('\n')[0]}), and there is no ` +
        `development build at ${DEVELOPMENT_ADDON}. npm installs the platform package as an optional ` +
        `dependency where it exists: reinstall without --omit=optional / --no-optional, on the machine ` +
        `that runs the code; other platforms build the addon from source (see the README, "Install / platforms").`,
      { cause },
    );
  }
  if (found !== version) {
    throw new Error(`${PACKAGE} ${version}: the installed platform package ${name} is version ${found}; install ${name}@${version}`);
  }
  return addon;
}

export const native: typeof Native = load();

/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags);
 * read right after each call that fills it, before the next native call.
 */
export const SCRATCH: Float64Array = native.scratch();
