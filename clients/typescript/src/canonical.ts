// Strict I-JSON validation and the canonical form, implemented locally with
// the Go reference's rules (package normalize, docs/normalize.md): RFC 8785
// strings and numbers, UTF-16 member order inside objects, a schema-aware
// order at the top level, integers beyond a double kept as written, every
// rejection reported with its byte offset and reason code. Numbers are read
// from the raw text by this module's parser, never through JSON.parse.

import { CanonicalError, OptionError } from "./errors.js";

export const MAX_BODY_BYTES = 8 << 20;
export const MAX_DEPTH = 128;
export const MAX_STRING_BYTES = 4 << 20;

/** The request schema; the values are the routing key's mode byte. */
export enum Mode {
  Auto = 0,
  Chat = 1,
  Completion = 2,
  Native = 3,
  Responses = 4,
  Messages = 5,
  Pooling = 6,
}

const MODE_NAMES = ["auto", "chat", "completion", "native", "responses", "messages", "pooling"] as const;
export type ModeName = (typeof MODE_NAMES)[number];

/** Parse "auto", "chat", "completion", "native", "responses", "messages" or "pooling". */
export function parseMode(name: string): Mode {
  const i = (MODE_NAMES as readonly string[]).indexOf(name);
  if (i < 0) {
    throw new OptionError(
      "invalid-mode",
      `unknown mode "${name}" (want auto, chat, completion, native, responses, messages or pooling)`,
    );
  }
  return i as Mode;
}

export function modeName(m: Mode): ModeName {
  return MODE_NAMES[m]!;
}

/** A JSON number, kept as its literal so that no digit is lost. */
export class JSONNumber {
  constructor(readonly literal: string) {}
  toString(): string {
    return this.literal;
  }
}

export type JSONObject = { [name: string]: JSONValue };
export type JSONValue = null | boolean | string | number | bigint | JSONNumber | JSONValue[] | JSONObject;

/** A new object without a prototype, so "__proto__" is an ordinary name. */
export function newObject(): JSONObject {
  return Object.create(null) as JSONObject;
}

function has(o: object, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

export function isObject(v: JSONValue | undefined): v is JSONObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof JSONNumber);
}

// Top-level member lists, the same as the reference's.
export const CHAT_PROMPT = [
  "model",
  "chat_template",
  "chat_template_kwargs",
  "tools",
  "documents",
  "messages",
  "add_generation_prompt",
  "continue_final_message",
];
export const COMPLETION_PROMPT = ["model", "prompt", "suffix"];
export const NATIVE_PROMPT = ["inputs", "parameters"];
export const RESPONSES_PROMPT = ["model", "instructions", "tools", "input", "previous_response_id"];
export const MESSAGES_PROMPT = ["model", "system", "tools", "messages"];
export const POOLING_PROMPT = ["model", "query", "text_1", "input", "messages", "documents", "text_2"];
// Volatile in one schema only: a Responses body's "background" and a
// Messages body's top-level "cache_control".
const MODE_VOLATILE: Partial<Record<Mode, string>> = { [Mode.Responses]: "background", [Mode.Messages]: "cache_control" };
export const VOLATILE_MEMBERS = new Set([
  "user",
  "metadata",
  "stream",
  "stream_options",
  "store",
  "prompt_cache_key",
  "safety_identifier",
  "request_id",
  "service_tier",
  "priority",
  "kv_transfer_params",
]);

const encoder = new TextEncoder();
// ignoreBOM keeps a leading U+FEFF: the decoder would otherwise drop it.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

function describe(c: number): string {
  return c >= 0x20 && c < 0x7f ? `'${String.fromCharCode(c)}'` : `byte 0x${c.toString(16)}`;
}

function isIdent(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function unhex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** Length of the well-formed UTF-8 sequence at s[i] (a lead byte >= 0x80), or 0. */
function utf8Len(s: Uint8Array, i: number): number {
  const b0 = s[i]!;
  const cont = (j: number, lo = 0x80, hi = 0xbf): boolean => {
    const b = s[i + j];
    return b !== undefined && b >= lo && b <= hi;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((b0 >= 0xe1 && b0 <= 0xec) || b0 === 0xee || b0 === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b0 === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (b0 === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xf1 && b0 <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/**
 * Whether cp is one of the 66 noncharacters I-JSON (RFC 7493 section 2.1)
 * forbids: U+FDD0..U+FDEF and the last two code points of every plane.
 */
function isNoncharacter(cp: number): boolean {
  return (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe;
}

/**
 * Whether the valid 3- or 4-byte UTF-8 sequence at s[i] encodes a
 * noncharacter: EF B7 90..AF, EF BF BE/BF, or a 4-byte sequence whose low
 * 16 bits are all ones but the last.
 */
function rawNoncharacter(s: Uint8Array, i: number, size: number): boolean {
  if (size === 3) {
    return s[i] === 0xef && ((s[i + 1] === 0xb7 && s[i + 2]! >= 0x90 && s[i + 2]! <= 0xaf) || (s[i + 1] === 0xbf && s[i + 2]! >= 0xbe));
  }
  return (s[i + 1]! & 0x0f) === 0x0f && s[i + 2] === 0xbf && s[i + 3]! >= 0xbe;
}

function noncharacterError(off: number, cp: number): CanonicalError {
  const hex = cp.toString(16).toUpperCase().padStart(4, "0");
  return new CanonicalError(off, "noncharacter", `noncharacter U+${hex} is not allowed in I-JSON`);
}

/**
 * Quote a member name or number literal for an error message, byte for byte
 * as the Go reference does (docs/normalize.md, "Names in error messages"): at
 * most the first 64 bytes of UTF-8, cut back to the start of a character, as
 * Go's strconv.QuoteToASCII writes them, then "..." when cut.
 */
export function quoteName(s: string): string {
  const b = encoder.encode(s);
  let n = b.length;
  if (n > 64) {
    n = 64;
    while (n > 0 && (b[n]! & 0xc0) === 0x80) n--;
  }
  let out = '"';
  for (const ch of decoder.decode(b.subarray(0, n))) out += quoteChar(ch.codePointAt(0)!, ch);
  return out + (n < b.length ? '"...' : '"');
}

const SHORT_ESCAPES: Record<number, string> = {
  0x07: "\\a",
  0x08: "\\b",
  0x09: "\\t",
  0x0a: "\\n",
  0x0b: "\\v",
  0x0c: "\\f",
  0x0d: "\\r",
  0x22: '\\"',
  0x5c: "\\\\",
};

function quoteChar(c: number, ch: string): string {
  const short = SHORT_ESCAPES[c];
  if (short !== undefined) return short;
  if (c >= 0x20 && c < 0x7f) return ch;
  if (c < 0x20 || c === 0x7f) return "\\x" + c.toString(16).padStart(2, "0");
  if (c < 0x10000) return "\\u" + c.toString(16).padStart(4, "0");
  return "\\U" + c.toString(16).padStart(8, "0");
}

class Parser {
  private readonly n: number;
  constructor(private readonly s: Uint8Array) {
    this.n = s.length;
  }

  private err(off: number, code: string, reason: string): CanonicalError {
    return new CanonicalError(off, code, reason);
  }

  ws(i: number): number {
    const s = this.s;
    while (i < this.n) {
      const c = s[i]!;
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
    return i;
  }

  private unexpected(i: number, want: string): CanonicalError {
    if (i >= this.n) return this.err(i, "unexpected-end", `unexpected end of input, want ${want}`);
    const c = this.s[i]!;
    if (c === 0x2f) return this.err(i, "comment", "comments are not allowed");
    if (c === 0x27) return this.err(i, "single-quote", "single-quoted strings are not allowed");
    if (c >= 0x80) return this.err(i, "invalid-character", `unexpected non-ASCII ${describe(c)}, want ${want}`);
    return this.err(i, "invalid-character", `unexpected ${describe(c)}, want ${want}`);
  }

  parse(): [JSONValue, number] {
    if (this.n > MAX_BODY_BYTES) {
      throw this.err(MAX_BODY_BYTES, "size-limit", `body of ${this.n} bytes is over the limit of ${MAX_BODY_BYTES} bytes`);
    }
    const start = this.ws(0);
    const [v, end] = this.value(start, 0);
    const i = this.ws(end);
    if (i < this.n) {
      throw this.err(i, "trailing-data", `unexpected data after the top-level value: ${describe(this.s[i]!)}`);
    }
    return [v, start];
  }

  private value(i: number, depth: number): [JSONValue, number] {
    if (i >= this.n) throw this.unexpected(i, "a value");
    const c = this.s[i]!;
    if (c === 0x7b) return this.object(i, depth + 1);
    if (c === 0x5b) return this.array(i, depth + 1);
    if (c === 0x22) return this.string(i);
    if (c === 0x2d || isDigit(c)) return this.number(i);
    if (c === 0x74) return this.literal(i, "true", true);
    if (c === 0x66) return this.literal(i, "false", false);
    if (c === 0x6e) return this.literal(i, "null", null);
    if (c === 0x4e || c === 0x49) throw this.err(i, "invalid-literal", "NaN and Infinity are not JSON numbers");
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a)) {
      throw this.err(i, "invalid-literal", `unknown literal starting with ${describe(c)} (want true, false or null)`);
    }
    if (c === 0x2b || c === 0x2e) throw this.err(i, "invalid-number", "a number must start with '-' or a digit");
    throw this.unexpected(i, "a value");
  }

  private literal(i: number, word: string, v: JSONValue): [JSONValue, number] {
    for (let j = 0; j < word.length; j++) {
      if (i + j >= this.n) throw this.err(i + j, "unexpected-end", `unexpected end of input in literal ${word}`);
      if (this.s[i + j] !== word.charCodeAt(j)) throw this.err(i, "invalid-literal", `invalid literal, want ${word}`);
    }
    const end = i + word.length;
    if (end < this.n && isIdent(this.s[end]!)) throw this.err(i, "invalid-literal", `invalid literal, want ${word}`);
    return [v, end];
  }

  private array(i: number, depth: number): [JSONValue, number] {
    if (depth > MAX_DEPTH) throw this.err(i, "depth-limit", `nesting deeper than ${MAX_DEPTH}`);
    const s = this.s;
    const out: JSONValue[] = [];
    i = this.ws(i + 1);
    if (i < this.n && s[i] === 0x5d) return [out, i + 1];
    for (;;) {
      if (i < this.n && s[i] === 0x5d) throw this.err(i, "trailing-comma", "trailing comma in array");
      const [v, e] = this.value(i, depth);
      out.push(v);
      i = this.ws(e);
      if (i >= this.n) throw this.unexpected(i, "',' or ']'");
      if (s[i] === 0x2c) {
        i = this.ws(i + 1);
        continue;
      }
      if (s[i] === 0x5d) return [out, i + 1];
      throw this.unexpected(i, "',' or ']'");
    }
  }

  private object(i: number, depth: number): [JSONValue, number] {
    if (depth > MAX_DEPTH) throw this.err(i, "depth-limit", `nesting deeper than ${MAX_DEPTH}`);
    const s = this.s;
    const out = newObject();
    let dup = -1;
    let dupName = "";
    let count = 0;
    i = this.ws(i + 1);
    if (i < this.n && s[i] === 0x7d) return [out, i + 1];
    for (;;) {
      if (i >= this.n || s[i] !== 0x22) {
        if (i < this.n && s[i] === 0x7d && count > 0) throw this.err(i, "trailing-comma", "trailing comma in object");
        throw this.unexpected(i, "a member name string");
      }
      const keyAt = i;
      const [k, ke] = this.string(i);
      const key = k as string;
      i = this.ws(ke);
      if (i >= this.n || s[i] !== 0x3a) throw this.unexpected(i, "':' after member name");
      const [v, ve] = this.value(this.ws(i + 1), depth);
      count++;
      if (has(out, key)) {
        if (dup < 0) {
          dup = keyAt;
          dupName = key;
        }
      } else {
        out[key] = v;
      }
      i = this.ws(ve);
      if (i >= this.n) throw this.unexpected(i, "',' or '}'");
      if (s[i] === 0x2c) {
        i = this.ws(i + 1);
        continue;
      }
      if (s[i] === 0x7d) break;
      throw this.unexpected(i, "',' or '}'");
    }
    if (dup >= 0) throw this.err(dup, "duplicate-member", `duplicate member name ${quoteName(dupName)}`);
    return [out, i + 1];
  }

  private string(i: number): [JSONValue, number] {
    const s = this.s;
    const open = i;
    i++;
    const start = i;
    let out = "";
    let run = i;
    for (;;) {
      if (i >= this.n) {
        throw this.err(i, "unexpected-end", `unexpected end of input in string starting at offset ${open}`);
      }
      const c = s[i]!;
      if (c === 0x22) break;
      if (c === 0x5c) {
        out += decoder.decode(s.subarray(run, i));
        const [text, size] = this.escape(i);
        out += text;
        i += size;
        run = i;
      } else if (c < 0x20) {
        throw this.err(i, "control-character", `unescaped control character ${describe(c)} in string`);
      } else if (c < 0x80) {
        i++;
      } else {
        const size = utf8Len(s, i);
        if (size === 0) throw this.err(i, "invalid-utf8", `invalid UTF-8 ${describe(c)} in string`);
        if (size >= 3 && rawNoncharacter(s, i, size)) throw noncharacterError(i, decoder.decode(s.subarray(i, i + size)).codePointAt(0)!);
        i += size;
      }
    }
    out += decoder.decode(s.subarray(run, i));
    if (i - start > MAX_STRING_BYTES) {
      throw this.err(open, "string-limit", `string of ${i - start} bytes is over the limit of ${MAX_STRING_BYTES} bytes`);
    }
    return [out, i + 1];
  }

  private escape(i: number): [string, number] {
    const s = this.s;
    if (i + 1 >= this.n) throw this.err(i, "unexpected-end", "unexpected end of input in escape");
    const e = s[i + 1]!;
    switch (e) {
      case 0x22:
        return ['"', 2];
      case 0x5c:
        return ["\\", 2];
      case 0x2f:
        return ["/", 2];
      case 0x62:
        return ["\b", 2];
      case 0x66:
        return ["\f", 2];
      case 0x6e:
        return ["\n", 2];
      case 0x72:
        return ["\r", 2];
      case 0x74:
        return ["\t", 2];
      case 0x75:
        break;
      default:
        throw this.err(i, "invalid-escape", `invalid escape sequence \\${String.fromCharCode(e)}`);
    }
    const u = this.hex4(i);
    const h4 = u.toString(16).padStart(4, "0");
    if (u >= 0xdc00 && u <= 0xdfff) {
      throw this.err(i, "lone-surrogate", `low surrogate \\u${h4} without a preceding high surrogate`);
    }
    if (u >= 0xd800 && u <= 0xdbff) {
      if (i + 7 < this.n && s[i + 6] === 0x5c && s[i + 7] === 0x75) {
        const lo = this.hex4(i + 6);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
          const cp = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
          if (isNoncharacter(cp)) throw noncharacterError(i, cp);
          return [String.fromCharCode(u, lo), 12];
        }
      }
      throw this.err(i, "lone-surrogate", `high surrogate \\u${h4} not followed by a low surrogate`);
    }
    if (isNoncharacter(u)) throw noncharacterError(i, u);
    return [String.fromCharCode(u), 6];
  }

  private hex4(i: number): number {
    const s = this.s;
    if (i + 6 > this.n) {
      for (let j = i + 2; j < this.n; j++) {
        if (unhex(s[j]!) < 0) throw this.err(i, "invalid-escape", "invalid \\u escape: want 4 hex digits");
      }
      throw this.err(this.n, "unexpected-end", "unexpected end of input in \\u escape");
    }
    let r = 0;
    for (let j = i + 2; j < i + 6; j++) {
      const h = unhex(s[j]!);
      if (h < 0) throw this.err(i, "invalid-escape", "invalid \\u escape: want 4 hex digits");
      r = (r << 4) | h;
    }
    return r;
  }

  private number(i: number): [JSONValue, number] {
    const s = this.s;
    const n = this.n;
    const start = i;
    let frac = false;
    if (s[i] === 0x2d) i++;
    if (i >= n) throw this.err(i, "unexpected-end", "unexpected end of input in number");
    if (s[i] === 0x30) {
      i++;
      if (i < n && isDigit(s[i]!)) throw this.err(start, "leading-zero", "number with a leading zero");
    } else if (s[i]! >= 0x31 && s[i]! <= 0x39) {
      while (i < n && isDigit(s[i]!)) i++;
    } else {
      throw this.err(start, "invalid-number", "want a digit after '-'");
    }
    if (i < n && s[i] === 0x2e) {
      frac = true;
      i++;
      const d = i;
      while (i < n && isDigit(s[i]!)) i++;
      if (i === d) throw this.err(start, "invalid-number", "want a digit after the decimal point");
    }
    let expAt = -1;
    if (i < n && (s[i] === 0x65 || s[i] === 0x45)) {
      frac = true;
      expAt = i;
      i++;
      if (i < n && (s[i] === 0x2b || s[i] === 0x2d)) i++;
      const d = i;
      while (i < n && isDigit(s[i]!)) i++;
      if (i === d) throw this.err(start, "invalid-number", "want a digit in the exponent");
    }
    if (i < n && (isIdent(s[i]!) || s[i] === 0x2e)) {
      throw this.err(start, "invalid-number", `invalid character ${describe(s[i]!)} in number`);
    }
    if (i - start > MAX_STRING_BYTES) {
      throw this.err(start, "string-limit", `number literal of ${i - start} bytes is over the limit of ${MAX_STRING_BYTES} bytes`);
    }
    const lit = decoder.decode(s.subarray(start, i));
    // The range rule (docs/normalize.md): a literal must neither overflow a
    // double nor turn a non-zero value into zero. Only a literal with an
    // exponent, one over 300 characters, or an integer of 309 or more digits
    // can break it; Number() rounds as the reference does.
    const digits = i - start - (s[start] === 0x2d ? 1 : 0);
    if ((frac && (expAt >= 0 || i - start > 300)) || (!frac && digits >= 309)) {
      const f = Number(lit);
      const shown = quoteName(lit);
      if (!Number.isFinite(f)) throw this.err(start, "number-range", `number ${shown} is outside the range of a double`);
      if (f === 0 && /^[^eE]*[1-9]/.test(lit)) {
        throw this.err(start, "number-range", `number ${shown} is too small for a double: it would become 0`);
      }
    }
    return [new JSONNumber(lit), i];
  }
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** UTF-8 bytes of a string input; a lone surrogate is rejected, not replaced. */
export function toBytes(src: Uint8Array | string): Uint8Array {
  if (typeof src !== "string") return src;
  const m = LONE_SURROGATE.exec(src);
  if (m) {
    const off = encoder.encode(src.slice(0, m.index)).length;
    throw new CanonicalError(off, "invalid-utf8", "lone surrogate in string input");
  }
  return encoder.encode(src);
}

/**
 * Validate src as one I-JSON value and return it. Objects have no prototype;
 * numbers are JSONNumber. Throws CanonicalError with the byte offset of the
 * first problem.
 */
export function parse(src: Uint8Array | string): JSONValue {
  return new Parser(toBytes(src)).parse()[0];
}

/** A JSON string as RFC 8785 writes it (JSON.stringify escapes exactly that). */
export function encodeString(s: string): string {
  if (LONE_SURROGATE.test(s)) throw new TypeError("string has a lone surrogate");
  return JSON.stringify(s);
}

/**
 * The canonical spelling of a valid JSON number literal. Integer literals stay
 * as written ("-0" aside); others become the nearest double in ECMAScript
 * form.
 */
export function formatNumber(literal: string): string {
  if (!/[.eE]/.test(literal)) return literal === "-0" ? "0" : literal;
  return formatDouble(Number(literal));
}

/** ECMAScript Number::toString, which is what RFC 8785 prescribes. */
export function formatDouble(f: number): string {
  if (!Number.isFinite(f)) throw new TypeError(`${f} is not a JSON number`);
  return String(f); // -0 prints as "0"
}

/** Compare member names by UTF-16 code units, as RFC 8785 orders them. */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Canonical JSON text of a value, JCS member order throughout. */
export function encode(v: JSONValue): string {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "string") return encodeString(v);
  if (typeof v === "number") return formatDouble(v);
  if (typeof v === "bigint") return v.toString();
  if (v instanceof JSONNumber) return formatNumber(v.literal);
  if (Array.isArray(v)) return "[" + v.map(encode).join(",") + "]";
  if (typeof v === "object") {
    const names = Object.keys(v).sort(compareNames);
    return "{" + names.map((k) => encodeString(k) + ":" + encode(v[k]!)).join(",") + "}";
  }
  throw new TypeError(`cannot encode ${typeof v} as JSON`);
}

/** The schema auto mode picks: chat, completion, native, else Auto. */
/** Whether an input holds Responses items: a string, or a non-empty array of objects. */
function itemsInput(v: JSONValue): boolean {
  if (typeof v === "string") return true;
  return Array.isArray(v) && v.length > 0 && v.every((e) => isObject(e));
}

/** The schema auto mode picks (docs/normalize.md, "Schema detection"), else Auto. */
export function detectMode(root: JSONValue): Mode {
  if (!isObject(root)) return Mode.Auto;
  if (has(root, "messages")) {
    return has(root, "max_tokens") && (has(root, "system") || has(root, "stop_sequences")) ? Mode.Messages : Mode.Chat;
  }
  if (has(root, "prompt")) return Mode.Completion;
  if (has(root, "inputs")) return Mode.Native;
  if (has(root, "input")) return itemsInput(root["input"]!) ? Mode.Responses : Mode.Pooling;
  if ((has(root, "query") && has(root, "documents")) || (has(root, "text_1") && has(root, "text_2"))) return Mode.Pooling;
  return Mode.Auto;
}

const PROMPTS: Record<Exclude<Mode, Mode.Auto>, string[]> = {
  [Mode.Chat]: CHAT_PROMPT,
  [Mode.Completion]: COMPLETION_PROMPT,
  [Mode.Native]: NATIVE_PROMPT,
  [Mode.Responses]: RESPONSES_PROMPT,
  [Mode.Messages]: MESSAGES_PROMPT,
  [Mode.Pooling]: POOLING_PROMPT,
};

function rank(mode: Exclude<Mode, Mode.Auto>, name: string): number {
  const i = PROMPTS[mode].indexOf(name);
  if (i >= 0) return i;
  return VOLATILE_MEMBERS.has(name) || MODE_VOLATILE[mode] === name ? 2000 : 1000;
}

/** A canonicalized body with what the routing key needs. */
export interface Canonical {
  body: Uint8Array;
  value: JSONValue;
  /** The schema used: the requested mode, or the detected one (Auto: none). */
  mode: Mode;
  /** Byte offset of each top-level member's value in body (objects only). */
  offsets: Map<string, number>;
}

/** Validate src and return its canonical form in mode (Auto detects it). */
export function canonicalizeFull(src: Uint8Array | string, mode: Mode = Mode.Auto): Canonical {
  const [root, rootAt] = new Parser(toBytes(src)).parse();
  if (!isObject(root)) {
    if (mode !== Mode.Auto && mode !== Mode.Native) {
      // The reference reports a string root at its first character, inside
      // the quotes.
      const at = typeof root === "string" ? rootAt + 1 : rootAt;
      throw new CanonicalError(at, "schema", `a ${modeName(mode)} request must be a JSON object`);
    }
    return { body: encoder.encode(encode(root)), value: root, mode, offsets: new Map() };
  }
  const used = mode === Mode.Auto ? detectMode(root) : mode;
  const names = Object.keys(root).sort(compareNames);
  if (used !== Mode.Auto) {
    // Array.prototype.sort is stable: JCS order is kept within a rank.
    names.sort((a, b) => rank(used, a) - rank(used, b));
  }
  const parts: Uint8Array[] = [encoder.encode("{")];
  let size = 1;
  const offsets = new Map<string, number>();
  names.forEach((k, j) => {
    const head = encoder.encode((j ? "," : "") + encodeString(k) + ":");
    const val = encoder.encode(encode(root[k]!));
    offsets.set(k, size + head.length);
    parts.push(head, val);
    size += head.length + val.length;
  });
  parts.push(encoder.encode("}"));
  return { body: concat(parts), value: root, mode: used, offsets };
}

/**
 * The canonical form of a JSON request body. Throws CanonicalError
 * ("offset N: reason") for input outside the rules; nothing is repaired.
 */
export function canonicalize(src: Uint8Array | string, mode: Mode | ModeName = Mode.Auto): Uint8Array {
  return canonicalizeFull(src, typeof mode === "string" ? parseMode(mode) : mode).body;
}

export function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
