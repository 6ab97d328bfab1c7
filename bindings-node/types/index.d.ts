/**
 * stapel-runner-protocol for Node.js and TypeScript: the hub↔runner wire protocol, its
 * sequencing and session machines, the JSONL framer, the local-run machine, canonical
 * events and the session reducer, the harness-execution contract and the harness-adapter
 * seam — the sans-IO Rust core, through N-API. Messages are plain objects with the wire
 * field names; machines are classes with `handleInput(nowMs, input)` / `pollOutput()`.
 * Each side's whole connection driver is one machine too ({@link RunnerLink},
 * {@link HubLink}); the WebSocket transport that pumps them is
 * `stapel-runner-protocol/transport-ws`.
 */
export * from './errors';
export * from './error-table';
export { DecodedProgress, DEFAULT_MAX_LINE_BYTES, MESSAGES, PROTOCOL_VERSION, SCHEMA_FILES, SCHEMA_VERSION, SEQUENCED_TYPES, VERSION, answerPing, decode, encode, fromObject, isSequenced, isValid, iterErrors, loadSchema, messageTypes, toFrame, validate, } from './wire';
export type { BuildOptions, CodecOptions, DecodeOptions, Frame, Hello, Json, JsonObject, Message, MessageKind, MessageOf, MessageType, Ping, Pong, SequencedMessage, TaskAssign, TaskCancel, TaskProgress, TaskReportMessage, } from './wire';
export * from './framing';
export * from './session';
export * from './sequencing';
export * from './reducer';
export * from './local';
export * from './contract';
export * from './adapter';
export * from './subprocess-adapter';
export * from './host';
export * from './link';
export * from './runner-task';
export * from './admission';
export * from './store';
