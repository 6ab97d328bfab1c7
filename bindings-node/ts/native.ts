/* The compiled N-API module (`stapel-runner-protocol.node`, built by `napi build`). Internal:
   the package's public API is the TypeScript layer over it. */
import type * as Native from '../native';

// eslint-disable-next-line @typescript-eslint/no-require-imports
export const native: typeof Native = require('../stapel-runner-protocol.node') as typeof Native;

/**
 * The scratch the native fast paths write numbers into (seqs, offsets, record tags);
 * read right after each call that fills it, before the next native call.
 */
export const SCRATCH: Float64Array = native.scratch();
