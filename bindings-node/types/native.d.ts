import type * as Native from '../native';
export declare const native: typeof Native;
