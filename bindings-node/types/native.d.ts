import type * as Native from '../native';
export declare const native: typeof Native;
/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags);
 * read right after each call that fills it, before the next native call.
 */
export declare const SCRATCH: Float64Array;
