import type * as Native from '../native';
/** The development build's file, next to package.json. */
export declare const DEVELOPMENT_ADDON: string;
/**
 * The C library the running Node is linked against, on Linux: the ELF interpreter of its
 * executable (`ld-musl-…` or `ld-linux-…`, read from the file's program headers), else what
 * Node's diagnostic report says (it names glibc's version when Node runs on glibc).
 */
export declare function linuxLibc(): 'musl' | 'gnu';
/** The name of the platform package for a platform, architecture and (Linux) C library. */
export declare function platformPackage(platform?: string, arch?: string, libc?: 'musl' | 'gnu'): string;
export declare const native: typeof Native;
/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags);
 * read right after each call that fills it, before the next native call.
 */
export declare const SCRATCH: Float64Array;
