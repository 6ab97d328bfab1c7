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
/** The message of one `type`. */
export type MessageOf<T extends MessageType> = Extract<Message, {
    type: T;
}>;
/** The four sequenced messages (they carry a per-stream `seq`). */
export type SequencedMessage = TaskAssign | TaskProgress | TaskReportMessage | TaskCancel;
/** A frame as text or bytes. */
export type Frame = string | Uint8Array;
/** Options of {@link encode} and of the builders. */
export interface CodecOptions {
    /** Check every schema rule (default `false`: tolerant, defaults filled in). */
    validate?: boolean;
}
/** Options of {@link decode}. */
export interface DecodeOptions extends CodecOptions {
    /**
     * A plain, valid `task.progress` frame (the core's fast path) becomes a
     * {@link DecodedProgress} whose `payload` is parsed on first read (default `true`);
     * `false`: a plain object, its payload parsed at once.
     */
    lazy?: boolean;
}
/**
 * A `task.progress` message decoded by the core's validating fast path: the fixed fields
 * (`schema_version`, `type`, `task_id`, `seq`, `kind`, `attempt`) are own data properties,
 * and `payload` is an accessor over the frame's validated payload text, parsed by V8 on
 * first read and kept. Reading and writing `payload`, `JSON.stringify` (through `toJSON`:
 * the wire frame) and {@link encode} behave as for a plain message.
 *
 * The trade-off of not parsing the payload up front: `payload` lives on the prototype, so
 * `Object.keys`, spreading and `structuredClone` see the fixed fields (and any field you
 * add) but not the payload, and `assert.deepStrictEqual` against a plain object fails on
 * the prototype. Call `toJSON()` for a plain copy, or decode with `{ lazy: false }`.
 */
export declare class DecodedProgress implements TaskProgress {
    #private;
    [extra: string]: unknown;
    schema_version: number;
    type: 'task.progress';
    task_id: string;
    seq: number;
    kind: string;
    attempt: number;
    private constructor();
    /** The payload object (parsed from the frame's text on first read, then kept). */
    get payload(): JsonObject;
    set payload(value: JsonObject);
    /** The message as a plain object (what `JSON.stringify` writes: a valid frame). */
    toJSON(): TaskProgress;
}
/** The JSON text of a message (or message-like object) for a native call. */
export declare function messageText(message: unknown): string;
/**
 * Decode one frame (text or UTF-8 bytes, without the newline) into a message object with
 * the wire field names; `validate` checks every schema rule. A plain, valid
 * `task.progress` frame takes the core's validating fast path (one pass, nothing built in
 * native code) and, unless `{ lazy: false }`, is a {@link DecodedProgress} whose payload
 * V8 parses on first read. Bytes are borrowed, not copied.
 */
export declare function decode(frame: Frame, options?: DecodeOptions): Message;
/**
 * Encode a message object as its canonical frame (compact JSON, no newline): declared
 * fields in the protocol's order, then unknown fields.
 */
export declare function encode(message: Message | Record<string, unknown>, options?: CodecOptions): string;
/** {@link encode} under the name of the seed's `to_frame` (a frame is one text message). */
export declare function toFrame(message: Message | Record<string, unknown>, options?: CodecOptions): string;
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
export declare function validate<T extends MessageType>(value: unknown, type: T): MessageOf<T>;
/** Whether `value` passes every rule of message type `type`. */
export declare function isValid(value: unknown, type: MessageType): boolean;
/** The human-readable violation lines of `value` as message type `type` (empty: valid). */
export declare function iterErrors(value: unknown, type: MessageType): string[];
/** The pong answering `ping` (the core's rule: it echoes the ping's nonce). */
export declare function answerPing(ping: Ping): Pong;
/** The version of this package (the crates' version: one version for everything). */
export declare const VERSION: string;
/** `schema_version` of every frame (1). */
export declare const SCHEMA_VERSION: number;
/** The wire protocol version this package speaks (1). */
export declare const PROTOCOL_VERSION: number;
/** The message types that take part in per-task sequencing (the core's list). */
export declare const SEQUENCED_TYPES: ReadonlySet<MessageType>;
/** The core's default bound of one line (frame) of the JSONL framer, in bytes. */
export declare const DEFAULT_MAX_LINE_BYTES: number;
/** Wire `type` → the file name of its JSON Schema (shipped in the package's `schemas/`). */
export declare const SCHEMA_FILES: Readonly<Record<MessageType, string>>;
/** The seven message type names, in the protocol's order. */
export declare function messageTypes(): MessageType[];
/** Whether messages of this type belong to a per-task sequence. */
export declare function isSequenced(type: string): boolean;
/**
 * The JSON Schema (draft 2020-12) of message type `type`, parsed (and cached): the files
 * the core's rules correspond to, shipped in the package. An unknown type throws
 * `UnknownMessageError` (`unknown_type`, the core's error).
 */
export declare function loadSchema(type: string): Record<string, unknown>;
/** One message type: its name, whether it is sequenced, and builders of its messages. */
export interface MessageKind<T extends MessageType> {
    /** The wire `type`. */
    readonly type: T;
    /** Whether it takes part in per-task sequencing. */
    readonly sequenced: boolean;
    /** The file name of its JSON Schema. */
    readonly schemaFile: string;
    /** Build one from fields (the decoding rules; `type` is set). */
    create(fields: Omit<Partial<MessageOf<T>>, 'type'> & Record<string, unknown>, options?: BuildOptions): MessageOf<T>;
    /** Check a value against every rule of the type; the message. */
    validate(value: unknown): MessageOf<T>;
}
/** Wire `type` → its {@link MessageKind}, in the protocol's order. */
export declare const MESSAGES: {
    readonly [T in MessageType]: MessageKind<T>;
};
export {};
