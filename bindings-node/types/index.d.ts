/**
 * stapel-runner-protocol for Node.js and TypeScript: the hub↔runner wire protocol, its
 * sequencing and session machines, the JSONL framer and the rest of the sans-IO Rust
 * core, through N-API. Messages are plain objects with the wire field names.
 */
export * from './errors';
export * from './wire';
export * from './framing';
export * from './session';
export * from './sequencing';
export * from './reducer';
export * from './local';
export * from './contract';
export * from './adapter';
export * from './host';
export * from './runner-task';
export { native as __native } from './native';
