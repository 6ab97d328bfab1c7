/** A JSON value as it appears on the wire. */
export type Json = null | boolean | number | string | Json[] | {
    [key: string]: Json;
};
/** A JSON object. */
export type JsonObject = {
    [key: string]: Json;
};
/** Fields every message has; unknown fields survive a decode/encode round trip. */
interface Base {
    /** Always 1. */
    schema_version?: number;
    /** Unknown fields (kept in arrival order, re-encoded after the declared ones). */
    [extra: string]: unknown;
}
/** Runner → hub: identity and resume positions, the first frame of a connection. */
export interface Hello extends Base {
    type: 'hello';
    protocol_version?: number;
    project_id: string;
    runner_version: string;
    capabilities?: string[];
    /** Per-task last command seq the runner has applied. */
    resume?: Record<string, number>;
}
/** Hub → runner: a task to run (sequenced). */
export interface TaskAssign extends Base {
    type: 'task.assign';
    task_id?: string;
    task: JsonObject;
    role: string;
    invocation?: JsonObject;
    seq?: number;
    attempt?: number;
}
/** Runner → hub: progress of a task (sequenced). */
export interface TaskProgress extends Base {
    type: 'task.progress';
    task_id: string;
    seq?: number;
    kind: string;
    attempt?: number;
    payload: JsonObject;
}
/** Runner → hub: the final report of a task (sequenced). */
export interface TaskReportMessage extends Base {
    type: 'task.report';
    task_id?: string;
    report: JsonObject;
    seq?: number;
    attempt?: number;
}
/** Hub → runner: cancel a task (sequenced). */
export interface TaskCancel extends Base {
    type: 'task.cancel';
    task_id: string;
    reason?: string;
    seq?: number;
}
/** Keepalive and control carrier. */
export interface Ping extends Base {
    type: 'ping';
    nonce?: string | number;
    sent_at?: string | number;
}
/** The answer to a ping. */
export interface Pong extends Base {
    type: 'pong';
    nonce?: string | number;
}
/** Any of the seven hub-protocol messages, discriminated on `type`. */
export type Message = Hello | TaskAssign | TaskProgress | TaskReportMessage | TaskCancel | Ping | Pong;
/** The seven `type` names. */
export type MessageType = Message['type'];
/** A frame as text or bytes. */
export type Frame = string | Uint8Array;
/** Options of {@link decode} and {@link encode}. */
export interface CodecOptions {
    /** Check every schema rule (default `false`: tolerant, defaults filled in). */
    validate?: boolean;
}
/** Run a native call, turning its thrown error into this package's typed error. */
export declare function call<T>(f: () => T): T;
/** The text of a string argument, refusing one the core could not receive intact. */
export declare function checkedText(text: string): string;
/**
 * Decode one frame (text or UTF-8 bytes, without the newline) into a plain message
 * object with the wire field names. A plain, valid `task.progress` frame takes the core's
 * validating fast path and is parsed by V8 directly.
 */
export declare function decode(frame: Frame, options?: CodecOptions): Message;
/**
 * Encode a message object as its canonical frame (compact JSON, no newline): declared
 * fields in the protocol's order, then unknown fields.
 */
export declare function encode(message: Message | Record<string, unknown>, options?: CodecOptions): string;
/** Options of {@link fromObject}. */
export interface BuildOptions extends CodecOptions {
    /** Unknown fields to add (one that names a declared field is ignored). */
    extra?: Record<string, unknown>;
}
/**
 * Build a message from an object with the decoding rules (defaults filled in, `task_id`
 * taken from the task or report), optionally adding unknown fields: the message's
 * canonical wire object.
 */
export declare function fromObject(fields: Record<string, unknown>, options?: BuildOptions): Message;
/**
 * Check a value against every rule of message type `type` (its `type` may be absent);
 * throws {@link SchemaValidationError} with the located violations. Returns the message.
 */
export declare function validate(value: unknown, type: MessageType): Message;
/** Whether `value` passes every rule of message type `type`. */
export declare function isValid(value: unknown, type: MessageType): boolean;
/** The human-readable violation lines of `value` as message type `type` (empty: valid). */
export declare function iterErrors(value: unknown, type: MessageType): string[];
/** The seven message type names, in the protocol's order. */
export declare function messageTypes(): MessageType[];
/** Whether messages of this type belong to a per-task sequence. */
export declare function isSequenced(type: string): boolean;
/** `schema_version` of every frame (1). */
export declare const SCHEMA_VERSION: number;
/** The wire protocol version this package speaks (1). */
export declare const PROTOCOL_VERSION: number;
export {};
