import { translate } from './errors';
import { native } from './native';

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
/** A frame as text or bytes. */
export type Frame = string | Uint8Array;

/** Options of {@link decode} and {@link encode}. */
export interface CodecOptions {
  /** Check every schema rule (default `false`: tolerant, defaults filled in). */
  validate?: boolean;
}

/** Run a native call, turning its thrown error into this package's typed error. */
export function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw translate(e);
  }
}

interface WellFormed {
  isWellFormed(): boolean;
}

/** The text of a string argument, refusing one the core could not receive intact. */
export function checkedText(text: string): string {
  if (!(text as unknown as WellFormed).isWellFormed()) {
    call(() => native.notUnicodeError());
  }
  return text;
}

/**
 * Decode one frame (text or UTF-8 bytes, without the newline) into a plain message
 * object with the wire field names. A plain, valid `task.progress` frame takes the core's
 * validating fast path and is parsed by V8 directly.
 */
export function decode(frame: Frame, options?: CodecOptions): Message {
  const validate = options?.validate ?? false;
  if (typeof frame === 'string') {
    if (!(frame as unknown as WellFormed).isWellFormed()) {
      call(() => native.notUnicodeError());
    }
    let out: string | null;
    try {
      out = native.decodeText(frame, validate);
    } catch (e) {
      throw translate(e);
    }
    return out === null ? (JSON.parse(frame) as Message) : fromDecoded(out);
  }
  const out = call(() => native.decodeBytes(frame, validate));
  if (out !== null) {
    return fromDecoded(out);
  }
  return JSON.parse(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8')) as Message;
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

function stringify(value: unknown): string {
  return checkedText(JSON.stringify(value));
}

/**
 * Encode a message object as its canonical frame (compact JSON, no newline): declared
 * fields in the protocol's order, then unknown fields.
 */
export function encode(message: Message | Record<string, unknown>, options?: CodecOptions): string {
  const text = stringify(message);
  const kept = (message as { [KEPT]?: Kept })[KEPT];
  if (kept !== undefined && kept.shape === text && options?.validate !== true) {
    return kept.frame;
  }
  return call(() => native.encode(text, options?.validate ?? false));
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
  const text = stringify(fields);
  const extra = options?.extra === undefined ? undefined : stringify(options.extra);
  return JSON.parse(call(() => native.fromObject(text, options?.validate ?? false, extra))) as Message;
}

/**
 * Check a value against every rule of message type `type` (its `type` may be absent);
 * throws {@link SchemaValidationError} with the located violations. Returns the message.
 */
export function validate(value: unknown, type: MessageType): Message {
  const text = stringify(value);
  return JSON.parse(call(() => native.checkAs(text, type))) as Message;
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

/** The seven message type names, in the protocol's order. */
export function messageTypes(): MessageType[] {
  return call(() => native.messageTypes()) as MessageType[];
}

/** Whether messages of this type belong to a per-task sequence. */
export function isSequenced(type: string): boolean {
  return call(() => native.isSequenced(type));
}

/** `schema_version` of every frame (1). */
export const SCHEMA_VERSION: number = native.schemaVersion();
/** The wire protocol version this package speaks (1). */
export const PROTOCOL_VERSION: number = native.protocolVersion();
