// The routing key: seedless XXH3-64 over group, model and routing text.
// Byte layout (docs/normalize.md): one mode byte (1 chat, 2 completion,
// 3 native, 4 responses, 5 messages, 6 pooling), then the group, the model and the routing text cut to the
// window, each preceded by its length as a 32-bit little-endian integer.

import {
  CHAT_PROMPT,
  COMPLETION_PROMPT,
  Canonical,
  JSONValue,
  VOLATILE_MEMBERS,
  Mode,
  ModeName,
  canonicalizeFull,
  concat,
  encode,
  encodeString,
  isObject,
  parseMode,
} from "./canonical.js";
import { CanonicalError, OptionError } from "./errors.js";
import { checkMode, itemsText, poolingText } from "./modes.js";
import { xxh3 } from "./xxh3.js";

export const DEFAULT_PREFIX_LENGTH = 4096;
export const MIN_PREFIX_LENGTH = 1024;
export const MAX_PREFIX_LENGTH = 65536;
export const MAX_GROUP_BYTES = 64;
const SPILL_WINDOWS = 3;
const US = 0x1f; // between a name and its text
const RS = 0x1e; // after each record

const encoder = new TextEncoder();

/** A routing key and what it was computed from. */
export interface RouteInfo {
  key: bigint;
  /** 16 lowercase hex digits. */
  keyHex: string;
  /** Keys over the windows 2N, 4N, 8N while the routing text is longer. */
  spillKeys: bigint[];
  mode: Mode;
  model: string;
  group: string;
  /** Characters (bytes in native mode) under the key, at most N. */
  routingTextLength: number;
}

export interface KeyOptions {
  mode?: Mode | ModeName;
  /** Overrides the body's prompt_cache_key; at most 64 printable ASCII. */
  group?: string;
  /** The window N, 1024..65536; 0 or absent means 4096. */
  prefixLength?: number;
}

/** A key as 16 lowercase hex digits. */
export function formatKey(k: bigint): string {
  return k.toString(16).padStart(16, "0");
}

/** Validate the key options; return the window N. */
export function checkOptions(group = "", prefixLength = 0): number {
  const n = prefixLength || DEFAULT_PREFIX_LENGTH;
  if (!Number.isInteger(n) || n < MIN_PREFIX_LENGTH || n > MAX_PREFIX_LENGTH) {
    throw new OptionError("prefix-length", `prefix length ${n} is outside ${MIN_PREFIX_LENGTH}..${MAX_PREFIX_LENGTH}`);
  }
  const g = encoder.encode(group);
  if (g.length > MAX_GROUP_BYTES) {
    throw new OptionError("invalid-group", `group id of ${g.length} bytes is over ${MAX_GROUP_BYTES}`);
  }
  g.forEach((c, i) => {
    if (c < 0x20 || c > 0x7e) {
      throw new OptionError("invalid-group", `group id has a non-printable byte 0x${c.toString(16).padStart(2, "0")} at ${i}`);
    }
  });
  return n;
}

class Bytes {
  private parts: Uint8Array[] = [];
  text(s: string): void {
    this.parts.push(encoder.encode(s));
  }
  byte(b: number): void {
    this.parts.push(Uint8Array.of(b));
  }
  raw(b: Uint8Array): void {
    this.parts.push(b);
  }
  done(): Uint8Array {
    return concat(this.parts);
  }
}

function contentText(out: Bytes, c: JSONValue): void {
  if (typeof c === "string") return out.text(c);
  if (c === null) return;
  if (!Array.isArray(c)) return out.text(encode(c));
  c.forEach((p, i) => {
    if (i > 0) out.byte(0x0a);
    if (typeof p === "string") out.text(p);
    else if (isObject(p) && p["type"] === "text" && typeof p["text"] === "string") out.text(p["text"]);
    else out.text(encode(p));
  });
}

function chatText(root: { [k: string]: JSONValue }): Uint8Array {
  const out = new Bytes();
  if (Object.prototype.hasOwnProperty.call(root, "tools")) {
    out.text("tools");
    out.byte(US);
    out.text(encode(root["tools"]!));
    out.byte(RS);
  }
  const msgs = root["messages"] as JSONValue[];
  for (let i = 0; i < msgs.length; i++) {
    if (i === msgs.length - 1 && i > 0) break; // the final message varies; a lone one counts
    const m = msgs[i]!;
    const role = isObject(m) ? m["role"] : undefined;
    if (typeof role === "string") out.text(role);
    out.byte(US);
    if (isObject(m) && Object.prototype.hasOwnProperty.call(m, "content")) contentText(out, m["content"]!);
    out.byte(RS);
  }
  return out.done();
}

function promptText(c: Canonical): Uint8Array {
  const p = (c.value as { [k: string]: JSONValue })["prompt"]!;
  if (typeof p === "string") return encoder.encode(p);
  if (!Array.isArray(p)) throw new CanonicalError(c.offsets.get("prompt") ?? 0, "schema", "prompt must be a string or an array");
  const out = new Bytes();
  for (const e of p) {
    out.text(typeof e === "string" ? e : encode(e));
    out.byte(RS);
  }
  return out.done();
}

/** The routing members of a native body: its "parameters" are generation parameters. */
const NATIVE_ROUTING = ["inputs"];

/**
 * The native routing text: the canonical body with only its routing members,
 * chosen by the schema the members show (chat, completion, native inputs; any
 * other object: all but the volatile metadata).
 */
function nativeText(c: Canonical): Uint8Array {
  if (!isObject(c.value)) return c.body;
  const root = c.value;
  const hasOwn = (k: string): boolean => Object.prototype.hasOwnProperty.call(root, k);
  let keep: (k: string) => boolean;
  if (hasOwn("messages")) keep = (k) => CHAT_PROMPT.includes(k);
  else if (hasOwn("prompt")) keep = (k) => COMPLETION_PROMPT.includes(k);
  else if (hasOwn("inputs")) keep = (k) => NATIVE_ROUTING.includes(k);
  else keep = (k) => !VOLATILE_MEMBERS.has(k);
  // c.offsets holds the members in canonical order.
  const members: string[] = [];
  for (const k of c.offsets.keys()) {
    if (keep(k)) members.push(encodeString(k) + ":" + encode(root[k]!));
  }
  return encoder.encode("{" + members.join(",") + "}");
}

/** Byte length of the first n characters (bytes when native) and whether the text is longer. */
function cut(text: Uint8Array, n: number, native: boolean): [number, boolean] {
  if (text.length <= n) return [text.length, false];
  if (native) return [n, true];
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    if ((text[i]! & 0xc0) !== 0x80) {
      if (count === n) return [i, true];
      count++;
    }
  }
  return [text.length, false];
}

function countChars(text: Uint8Array): number {
  let count = 0;
  for (const b of text) if ((b & 0xc0) !== 0x80) count++;
  return count;
}

function u32le(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}

/** The routing key of a canonicalized body. */
export function routeKeyOf(c: Canonical, group = "", prefixLength = 0): RouteInfo {
  const n = checkOptions(group, prefixLength);
  const mode = c.mode === Mode.Auto ? Mode.Native : c.mode;
  const obj = isObject(c.value) ? c.value : undefined;
  let g = group;
  const pk = obj?.["prompt_cache_key"];
  if (!g && typeof pk === "string") g = pk;
  const m = obj?.["model"];
  const model = typeof m === "string" ? m : "";
  let text: Uint8Array;
  if (mode === Mode.Chat) {
    if (!obj || !Array.isArray(obj["messages"])) throw new CanonicalError(0, "schema", "a chat request needs a messages array");
    text = chatText(obj);
  } else if (mode === Mode.Completion) {
    if (!obj || !Object.prototype.hasOwnProperty.call(obj, "prompt")) {
      throw new CanonicalError(0, "schema", "a completion request needs a prompt");
    }
    text = promptText(c);
  } else if (mode === Mode.Responses || mode === Mode.Messages || mode === Mode.Pooling) {
    checkMode(c, mode);
    const root = c.value as { [k: string]: JSONValue };
    text = mode === Mode.Pooling ? poolingText(root) : itemsText(root, mode);
  } else {
    text = nativeText(c);
  }
  const native = mode === Mode.Native;
  const gb = encoder.encode(g);
  const mb = encoder.encode(model);
  const head = concat([Uint8Array.of(mode), u32le(gb.length), gb, u32le(mb.length), mb]);
  const hash = (end: number): bigint => xxh3(concat([head, u32le(end), text.subarray(0, end)]));
  let [end, longer] = cut(text, n, native);
  const length = longer ? n : native ? text.length : countChars(text);
  const key = hash(end);
  const spillKeys: bigint[] = [];
  let w = n;
  for (let i = 0; i < SPILL_WINDOWS && longer; i++) {
    w *= 2;
    [end, longer] = cut(text, w, native);
    spillKeys.push(hash(end));
  }
  return { key, keyHex: formatKey(key), spillKeys, mode, model, group: g, routingTextLength: length };
}

/**
 * Canonicalize body in opts.mode and compute its routing key, exactly as the
 * router does.
 */
export function routingKey(body: Uint8Array | string, opts: KeyOptions = {}): RouteInfo {
  const mode = typeof opts.mode === "string" ? parseMode(opts.mode) : (opts.mode ?? Mode.Auto);
  checkOptions(opts.group, opts.prefixLength);
  return routeKeyOf(canonicalizeFull(body, mode), opts.group, opts.prefixLength);
}
