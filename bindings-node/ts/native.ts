/* The compiled N-API module (`stapel-runner-protocol.node`, built by `napi build`). */
import type * as Native from '../native';

// eslint-disable-next-line @typescript-eslint/no-require-imports
export const native: typeof Native = require('../stapel-runner-protocol.node') as typeof Native;
