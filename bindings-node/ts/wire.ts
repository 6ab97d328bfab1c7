import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, jsonText, parsed, translate } from './internal';
import { native, SCRATCH } from './native';

/** A JSON value as it appears on the wire. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

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
export type MessageOf<T extends MessageType> = Extract<Message, { type: T }>;
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

const WIRE = Symbol('stapel-runner-protocol.wire');

interface KeptPayload {
  text: string;
  shape: string;
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
export class DecodedProgress implements TaskProgress {
  [extra: string]: unknown;
  schema_version: number;
  type: 'task.progress';
  task_id: string;
  seq: number;
  kind: string;
  attempt: number;
  #text: string | undefined;
  #payload: JsonObject | undefined;
  #exact: boolean;
  #kept: KeptPayload | undefined;

  private constructor(taskId: string, seq: number, kind: string, attempt: number, text: string, exact: boolean) {
    this.schema_version = SCHEMA_VERSION;
    this.type = 'task.progress';
    this.task_id = taskId;
    this.seq = seq;
    this.kind = kind;
    this.attempt = attempt;
    this.#text = text;
    this.#payload = undefined;
    this.#exact = exact;
    this.#kept = undefined;
  }

  /** @internal The message of the fast-path numbers at `at` in the scratch, over `frame`. */
  static fromScratch(frame: string, at: number): DecodedProgress {
    const s = SCRATCH;
    return new DecodedProgress(
      frame.slice(s[at + 2], s[at + 3]),
      s[at] as number,
      frame.slice(s[at + 4], s[at + 5]),
      s[at + 1] as number,
      frame.slice(s[at + 6], s[at + 7]),
      s[at + 8] === 1,
    );
  }

  /** The payload object (parsed from the frame's text on first read, then kept). */
  get payload(): JsonObject {
    const cached = this.#payload;
    if (cached !== undefined) return cached;
    const text = this.#text as string;
    const value = JSON.parse(text) as JsonObject;
    if (!this.#exact) {
      // A number a JS number may not carry back (a float such as 1.0, an integer beyond
      // 2^53 - 1): encode() writes the original text while the payload is unchanged.
      this.#kept = { text, shape: JSON.stringify(value) };
    }
    this.#payload = value;
    this.#text = undefined;
    return value;
  }

  set payload(value: JsonObject) {
    this.#payload = value;
    this.#text = undefined;
    this.#kept = undefined;
  }

  /** The message as a plain object (what `JSON.stringify` writes: a valid frame). */
  toJSON(): TaskProgress {
    const out = { ...this } as Record<string, unknown>;
    out.payload = this.payload;
    return out as TaskProgress;
  }

  /** @internal The JSON text of the message for the core, without parsing the payload. */
  [WIRE](): string {
    let text = this.#text;
    if (text === undefined && this.#kept !== undefined && JSON.stringify(this.#payload) === this.#kept.shape) {
      text = this.#kept.text;
    }
    if (text === undefined) return jsonText(this, 'the message');
    const head = jsonText({ ...this }, 'the message');
    return head.length === 2 ? `{"payload":${text}}` : `${head.slice(0, -1)},"payload":${text}}`;
  }
}

/** The JSON text of a message (or message-like object) for a native call. */
export function messageText(message: unknown): string {
  if (message instanceof DecodedProgress) return message[WIRE]();
  return jsonText(message, 'the message');
}

interface WellFormed {
  isWellFormed(): boolean;
}

/** The JS string of a frame's UTF-8 bytes. */
function textOf(bytes: Uint8Array): string {
  return (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString('utf8');
}

/** The message of a fast-path frame whose numbers are at the start of the scratch. */
function fastMessage(frame: string, lazy: boolean, validate: boolean): Message {
  if (lazy) return DecodedProgress.fromScratch(frame, 0);
  if (SCRATCH[8] !== 1) {
    // Numbers a JS number cannot carry back: the full decode keeps the frame with them.
    return fromDecoded(call(() => native.decodeText(frame, validate, false)) as string);
  }
  // The attempt the core decoded (the frame's, or the core's default when it has none).
  const attempt = SCRATCH[1] as number;
  const message = JSON.parse(frame) as TaskProgress;
  message.attempt = attempt;
  return message;
}

/**
 * Decode one frame (text or UTF-8 bytes, without the newline) into a message object with
 * the wire field names; `validate` checks every schema rule. A plain, valid
 * `task.progress` frame takes the core's validating fast path (one pass, nothing built in
 * native code) and, unless `{ lazy: false }`, is a {@link DecodedProgress} whose payload
 * V8 parses on first read. Bytes are borrowed, not copied.
 */
export function decode(frame: Frame, options?: DecodeOptions): Message {
  const validate = options?.validate === true;
  if (typeof frame === 'string') {
    if (!(frame as unknown as WellFormed).isWellFormed()) {
      call(() => native.notUnicodeError());
    }
    let out: string | null;
    try {
      out = native.decodeText(frame, validate, true);
    } catch (e) {
      throw translate(e);
    }
    return out === null ? fastMessage(frame, options?.lazy !== false, validate) : fromDecoded(out);
  }
  const out = call(() => native.decodeBytes(frame, validate, true));
  return out === null ? fastMessage(textOf(frame), options?.lazy !== false, validate) : fromDecoded(out);
}

/**
 * Where a decoded message keeps its frame when a number in it cannot be held exactly by a
 * JS number (an integer beyond ±(2^53 − 1), a float such as `1e5` the core writes as
 * `100000.0`): `encode` emits that frame while the object still serializes as decoded.
 */
const KEPT = Symbol('stapel-runner-protocol.frame');

interface Kept {
  frame: string;
  shape: string;
}

/** A message from the JSON text the full decode returned (see `decoded_text`). */
function fromDecoded(out: string): Message {
  if (out.charCodeAt(0) !== 2) {
    return JSON.parse(out) as Message;
  }
  const newline = out.indexOf('\n');
  const frame = out.slice(1, newline);
  const message = JSON.parse(out.slice(newline + 1)) as Message;
  const kept: Kept = { frame, shape: JSON.stringify(message) };
  Object.defineProperty(message, KEPT, { value: kept, enumerable: false });
  return message;
}

/**
 * Encode a message object as its canonical frame (compact JSON, no newline): declared
 * fields in the protocol's order, then unknown fields.
 */
export function encode(message: Message | Record<string, unknown>, options?: CodecOptions): string {
  const text = messageText(message);
  const kept = (message as { [KEPT]?: Kept })[KEPT];
  if (kept !== undefined && kept.shape === text && options?.validate !== true) {
    return kept.frame;
  }
  return call(() => native.encode(text, options?.validate === true));
}

/** {@link encode} under the name of the seed's `to_frame` (a frame is one text message). */
export function toFrame(message: Message | Record<string, unknown>, options?: CodecOptions): string {
  return encode(message, options);
}

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
export function fromObject(fields: Record<string, unknown>, options?: BuildOptions): Message {
  const text = messageText(fields);
  const extra = options?.extra === undefined ? undefined : jsonText(options.extra, 'extra');
  return parsed<Message>(call(() => native.fromObject(text, options?.validate === true, extra)));
}

/**
 * Check a value against every rule of message type `type` (its `type` may be absent);
 * throws {@link SchemaValidationError} with the located violations. Returns the message.
 */
export function validate<T extends MessageType>(value: unknown, type: T): MessageOf<T> {
  const text = messageText(value);
  return parsed<MessageOf<T>>(call(() => native.checkAs(text, type)));
}

/** Whether `value` passes every rule of message type `type`. */
export function isValid(value: unknown, type: MessageType): boolean {
  try {
    validate(value, type);
    return true;
  } catch (e) {
    if (e instanceof Error && 'code' in e) {
      return false;
    }
    throw e;
  }
}

/** The human-readable violation lines of `value` as message type `type` (empty: valid). */
export function iterErrors(value: unknown, type: MessageType): string[] {
  try {
    validate(value, type);
    return [];
  } catch (e) {
    const lines = (e as { lines?: string[] }).lines;
    if (Array.isArray(lines)) {
      return lines;
    }
    throw e;
  }
}

/** The pong answering `ping` (the core's rule: it echoes the ping's nonce). */
export function answerPing(ping: Ping): Pong {
  return parsed<Pong>(call(() => native.answerPing(messageText(ping))));
}

interface WireConstants {
  schema_version: number;
  protocol_version: number;
  message_types: MessageType[];
  sequenced_types: MessageType[];
  schema_files: Record<MessageType, string>;
  default_max_line_bytes: number;
}

const CONSTANTS = parsed<WireConstants>(native.wireConstants());

/** The version of this package (the crates' version: one version for everything). */
export const VERSION: string = native.version();
/** `schema_version` of every frame (1). */
export const SCHEMA_VERSION: number = CONSTANTS.schema_version;
/** The wire protocol version this package speaks (1). */
export const PROTOCOL_VERSION: number = CONSTANTS.protocol_version;
/** The message types that take part in per-task sequencing (the core's list). */
export const SEQUENCED_TYPES: ReadonlySet<MessageType> = new Set(CONSTANTS.sequenced_types);
/** The core's default bound of one line (frame) of the JSONL framer, in bytes. */
export const DEFAULT_MAX_LINE_BYTES: number = CONSTANTS.default_max_line_bytes;
/** Wire `type` → the file name of its JSON Schema (shipped in the package's `schemas/`). */
export const SCHEMA_FILES: Readonly<Record<MessageType, string>> = Object.freeze({ ...CONSTANTS.schema_files });

/** The seven message type names, in the protocol's order. */
export function messageTypes(): MessageType[] {
  return [...CONSTANTS.message_types];
}

/** Whether messages of this type belong to a per-task sequence. */
export function isSequenced(type: string): boolean {
  return call(() => native.isSequenced(type));
}

const SCHEMAS = new Map<string, Record<string, unknown>>();

/**
 * The JSON Schema (draft 2020-12) of message type `type`, parsed (and cached): the files
 * the core's rules correspond to, shipped in the package. An unknown type throws
 * `UnknownMessageError` (`unknown_type`, the core's error).
 */
export function loadSchema(type: string): Record<string, unknown> {
  const cached = SCHEMAS.get(type);
  if (cached !== undefined) return cached;
  // An unknown type throws the core's `unknown_type` error.
  const file = call(() => native.schemaFile(type));
  const schema = JSON.parse(readFileSync(join(__dirname, '..', 'schemas', file), 'utf8')) as Record<string, unknown>;
  SCHEMAS.set(type, schema);
  return schema;
}

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

function kind<T extends MessageType>(type: T): MessageKind<T> {
  return Object.freeze({
    type,
    sequenced: SEQUENCED_TYPES.has(type),
    schemaFile: SCHEMA_FILES[type],
    create: (fields: Record<string, unknown>, options?: BuildOptions) => fromObject({ ...fields, type }, options) as MessageOf<T>,
    validate: (value: unknown) => validate(value, type),
  });
}

/** Wire `type` → its {@link MessageKind}, in the protocol's order. */
export const MESSAGES: { readonly [T in MessageType]: MessageKind<T> } = Object.freeze({
  hello: kind('hello'),
  'task.assign': kind('task.assign'),
  'task.progress': kind('task.progress'),
  'task.report': kind('task.report'),
  'task.cancel': kind('task.cancel'),
  ping: kind('ping'),
  pong: kind('pong'),
});

// The message types the core lists are exactly the keys of MESSAGES (checked at load).
if (CONSTANTS.message_types.some((t) => !(t in MESSAGES)) || CONSTANTS.message_types.length !== Object.keys(MESSAGES).length) {
  throw new Error('stapel-runner-protocol: the native module lists other message types than this layer');
}
