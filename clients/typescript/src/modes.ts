// The routing text of Responses, Messages and pooling bodies, and the schema
// checks that reject the bodies that do not fit them, as the Go reference
// lays them out (docs/normalize.md): offsets into the canonical body.

import { Canonical, JSONObject, JSONValue, Mode, compareNames, encode, encodeString, isObject } from "./canonical.js";
import { CanonicalError } from "./errors.js";

const US = 0x1f;
const RS = 0x1e;
const encoder = new TextEncoder();

/** A pooling body's routing members, in routing text order. */
export const POOLING_ROUTING = ["query", "text_1", "input", "messages", "documents", "text_2"];

function has(o: object, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

/** v without members named cache_control, at any depth. */
function stripCacheControl(v: JSONValue): JSONValue {
  if (Array.isArray(v)) return v.map(stripCacheControl);
  if (!isObject(v)) return v;
  const out = Object.create(null) as JSONObject;
  for (const k of Object.keys(v)) if (k !== "cache_control") out[k] = stripCacheControl(v[k]!);
  return out;
}

function modeJSON(v: JSONValue, mode: Mode): string {
  return encode(mode === Mode.Messages ? stripCacheControl(v) : v);
}

function textPart(p: JSONObject, mode: Mode): string | undefined {
  const t = p["type"];
  const text = p["text"];
  if (typeof t !== "string" || typeof text !== "string") return undefined;
  if (t === "text" || (mode === Mode.Responses && (t === "input_text" || t === "output_text"))) return text;
  return undefined;
}

function modeContent(c: JSONValue, mode: Mode): string {
  if (typeof c === "string") return c;
  if (c === null) return "";
  if (!Array.isArray(c)) return modeJSON(c, mode);
  return c
    .map((p) => {
      if (typeof p === "string") return p;
      const t = isObject(p) ? textPart(p, mode) : undefined;
      return t ?? modeJSON(p, mode);
    })
    .join("\n");
}

function record(name: string, text: string): string {
  return name + String.fromCharCode(US) + text + String.fromCharCode(RS);
}

function itemRecord(item: JSONValue, mode: Mode): string {
  const role = isObject(item) ? item["role"] : undefined;
  if (!isObject(item) || typeof role !== "string") return record("", modeJSON(item, mode));
  return record(role, has(item, "content") ? modeContent(item["content"]!, mode) : "");
}

/**
 * The Responses or Messages routing text: instructions or system, tools, then every item but the
 * final one. The final item is the new question: it counts only when nothing comes before it.
 */
export function itemsText(root: JSONObject, mode: Mode): Uint8Array {
  let out = "";
  const head = mode === Mode.Messages ? "system" : "instructions";
  if (has(root, head) && root[head] !== null) out += record(head, modeContent(root[head]!, mode));
  if (has(root, "tools") && root["tools"] !== null) out += record("tools", modeJSON(root["tools"]!, mode));
  const items = root[mode === Mode.Messages ? "messages" : "input"]!;
  const lead = out.length > 0;
  if (typeof items === "string") return encoder.encode(lead ? out : record("user", items));
  const list = items as JSONValue[];
  for (let i = 0; i < list.length; i++) {
    if (i === list.length - 1 && (i > 0 || lead)) break; // the final item varies
    out += itemRecord(list[i]!, mode);
  }
  return encoder.encode(out);
}

/** The pooling routing text. */
export function poolingText(root: JSONObject): Uint8Array {
  let out = "";
  for (const name of POOLING_ROUTING) {
    if (!has(root, name)) continue;
    out += name + String.fromCharCode(US);
    const v = root[name]!;
    for (const e of Array.isArray(v) ? v : [v]) out += (typeof e === "string" ? e : encode(e)) + String.fromCharCode(RS);
  }
  return encoder.encode(out);
}

function size(v: JSONValue): number {
  return encoder.encode(encode(v)).length;
}

/** Offset of obj's member name's value, obj being at offset at. */
function memberAt(obj: JSONObject, at: number, name: string): number {
  let pos = at + 1;
  const names = Object.keys(obj).sort(compareNames);
  for (let j = 0; j < names.length; j++) {
    const k = names[j]!;
    pos += (j ? 1 : 0) + encoder.encode(encodeString(k)).length + 1;
    if (k === name) return pos;
    pos += size(obj[k]!);
  }
  throw new Error(`no member ${name}`);
}

function elemAt(arr: JSONValue[], at: number, i: number): number {
  let pos = at + 1;
  for (let j = 0; j < i; j++) pos += size(arr[j]!) + 1;
  return pos;
}

function fail(at: number, reason: string): CanonicalError {
  return new CanonicalError(at, "schema", reason);
}

function checkBlocks(arr: JSONValue[], at: number, path: string): void {
  arr.forEach((e, j) => {
    if (!isObject(e)) throw fail(elemAt(arr, at, j), `${path}[${j}]: expected an object`);
  });
}

function checkContent(m: JSONObject, at: number, path: string, required: boolean): void {
  if (!has(m, "content")) {
    if (required) throw fail(at, `${path}: a message needs content`);
    return;
  }
  const c = m["content"]!;
  const cAt = memberAt(m, at, "content");
  if (typeof c === "string") return;
  if (!Array.isArray(c)) throw fail(cAt, `${path}.content: expected a string or an array`);
  checkBlocks(c, cAt, path + ".content");
}

type Is = (v: JSONValue) => boolean;
const isStringOrNull: Is = (v) => typeof v === "string" || v === null;
const isArrayOrNull: Is = (v) => Array.isArray(v) || v === null;

function expect(c: Canonical, root: JSONObject, name: string, ok: Is, what: string): void {
  if (has(root, name) && !ok(root[name]!)) throw fail(c.offsets.get(name)!, `${name}: expected ${what}`);
}

function checkResponses(c: Canonical, root: JSONObject): void {
  expect(c, root, "instructions", isStringOrNull, "a string or null");
  expect(c, root, "previous_response_id", isStringOrNull, "a string or null");
  expect(c, root, "tools", isArrayOrNull, "an array or null");
  if (!has(root, "input")) throw fail(0, "a responses request needs an input");
  const items = root["input"]!;
  const at = c.offsets.get("input")!;
  if (typeof items === "string") return;
  if (!Array.isArray(items)) throw fail(at, "input: expected a string or an array");
  items.forEach((item, i) => {
    const iAt = elemAt(items, at, i);
    if (!isObject(item)) throw fail(iAt, `input[${i}]: expected an object`);
    if (has(item, "role")) {
      if (typeof item["role"] !== "string") throw fail(memberAt(item, iAt, "role"), `input[${i}].role: expected a string`);
      checkContent(item, iAt, `input[${i}]`, false);
    } else if (!has(item, "type")) {
      throw fail(iAt, `input[${i}]: an item needs a role or a type`);
    } else if (typeof item["type"] !== "string") {
      throw fail(memberAt(item, iAt, "type"), `input[${i}].type: expected a string`);
    }
  });
}

function checkMessages(c: Canonical, root: JSONObject): void {
  const system = root["system"];
  if (Array.isArray(system)) checkBlocks(system, c.offsets.get("system")!, "system");
  expect(c, root, "system", (v) => isStringOrNull(v) || Array.isArray(v), "a string, an array or null");
  expect(c, root, "tools", isArrayOrNull, "an array or null");
  if (!has(root, "messages")) throw fail(0, "a messages request needs a messages array");
  const msgs = root["messages"]!;
  const at = c.offsets.get("messages")!;
  if (!Array.isArray(msgs)) throw fail(at, "messages: expected an array");
  msgs.forEach((m, i) => {
    const mAt = elemAt(msgs, at, i);
    const path = `messages[${i}]`;
    if (!isObject(m)) throw fail(mAt, `${path}: expected an object`);
    if (!has(m, "role")) throw fail(mAt, `${path}: a message needs a role`);
    if (typeof m["role"] !== "string") throw fail(memberAt(m, mAt, "role"), `${path}.role: expected a string`);
    checkContent(m, mAt, path, true);
  });
}

/** Throws the reference's schema error for a body that does not fit mode. */
export function checkMode(c: Canonical, mode: Mode): void {
  const root = c.value;
  if (!isObject(root)) {
    throw fail(typeof root === "string" ? 1 : 0, `a ${Mode[mode].toLowerCase()} request must be a JSON object`);
  }
  if (mode === Mode.Responses) checkResponses(c, root);
  else if (mode === Mode.Messages) checkMessages(c, root);
  else if (!POOLING_ROUTING.some((n) => has(root, n))) {
    throw fail(0, "a pooling request needs query, text_1, input, messages, documents or text_2");
  }
}
