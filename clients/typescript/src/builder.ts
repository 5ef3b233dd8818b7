// The prompt builder: stable content first, volatile content last. The
// layout (docs/sdk.md) is the same in every SDK: one system message with the
// instructions and each document under "## Document {id}: {title}",
// separated by blank lines; then the history; then the question as the final
// user message. Tools go to "tools", metadata to "metadata" and the group to
// "prompt_cache_key", members the canonical form sorts after the prompt.

import { JSONObject, JSONValue, Mode, ModeName, canonicalizeFull, encode, isObject, modeName, newObject, parse, parseMode } from "./canonical.js";
import { SpecError } from "./errors.js";
import { MAX_GROUP_BYTES, RouteInfo, routeKeyOf } from "./key.js";

export const RESERVED_MEMBERS = ["model", "messages", "tools", "metadata", "prompt_cache_key"];
export const RESPONSES_RESERVED = ["model", "instructions", "tools", "input", "metadata", "prompt_cache_key"];
export const MESSAGES_RESERVED = ["model", "system", "tools", "messages", "metadata", "prompt_cache_key"];

/** The modes a spec builds: a chat, Responses or Anthropic Messages request. */
export type BuildMode = Mode.Chat | Mode.Responses | Mode.Messages;

// Each request shape a spec builds: the member of the system text ("" for
// chat's system message), the member of the turns, the members the builder
// sets itself.
const LAYOUTS: Record<BuildMode, { system: string; turns: string; reserved: string[] }> = {
  [Mode.Chat]: { system: "", turns: "messages", reserved: RESERVED_MEMBERS },
  [Mode.Responses]: { system: "instructions", turns: "input", reserved: RESPONSES_RESERVED },
  [Mode.Messages]: { system: "system", turns: "messages", reserved: MESSAGES_RESERVED },
};

/** The build mode of a Mode or its name: chat (auto too), responses or messages. */
function buildMode(mode: Mode | ModeName): BuildMode {
  const m = typeof mode === "string" ? parseMode(mode) : mode;
  if (m === Mode.Auto) return Mode.Chat;
  if (m !== Mode.Chat && m !== Mode.Responses && m !== Mode.Messages) {
    throw new SpecError("(mode)", `a prompt spec builds chat, responses or messages requests, not ${modeName(m)}`);
  }
  return m;
}

export interface Document {
  id: string;
  title?: string;
  text: string;
}

export interface HistoryMessage {
  role: string;
  content: string;
}

/** What a chat prompt is made of. */
export interface PromptSpec {
  model: string;
  instructions?: string;
  documents?: Document[];
  /** OpenAI tool objects. */
  tools?: JSONValue[];
  history?: HistoryMessage[];
  question: string;
  /** Other request members (temperature, max_tokens, ...). */
  parameters?: { [name: string]: JSONValue };
  /** Goes to "metadata"; never changes the routing key. */
  metadata?: { [name: string]: string };
  /** Goes to "prompt_cache_key": groups never share a key. */
  group?: string;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function checkStr(field: string, v: unknown, required = false): void {
  if (typeof v !== "string") throw new SpecError(field, "must be a string");
  if (required && v === "") throw new SpecError(field, "is required");
  if (LONE_SURROGATE.test(v)) throw new SpecError(field, "is not valid UTF-8 (lone surrogate)");
}

function checkJSON(field: string, v: JSONValue): void {
  try {
    encode(v);
  } catch (e) {
    throw new SpecError(field, (e as Error).message);
  }
}

/** The system message: instructions, then each document under its header. */
export function systemText(spec: PromptSpec): string {
  const parts = spec.instructions ? [spec.instructions] : [];
  for (const d of spec.documents ?? []) {
    const header = `## Document ${d.id}` + (d.title ? `: ${d.title}` : "");
    parts.push(`${header}\n\n${d.text}`);
  }
  return parts.join("\n\n");
}

/** The rendered messages: system (if any), history, question. */
export function renderMessages(spec: PromptSpec): HistoryMessage[] {
  const out: HistoryMessage[] = [];
  const sys = systemText(spec);
  if (sys) out.push({ role: "system", content: sys });
  out.push(...(spec.history ?? []));
  out.push({ role: "user", content: spec.question });
  return out;
}

/** Throw SpecError for the first problem that keeps the spec from building a request of mode. */
export function validateSpec(spec: PromptSpec, mode: Mode | ModeName = Mode.Chat): void {
  const reserved = LAYOUTS[buildMode(mode)].reserved;
  checkStr("model", spec.model, true);
  checkStr("question", spec.question, true);
  checkStr("instructions", spec.instructions ?? "");
  (spec.documents ?? []).forEach((d, i) => {
    checkStr(`documents[${i}].id`, d.id, true);
    checkStr(`documents[${i}].title`, d.title ?? "");
    checkStr(`documents[${i}].text`, d.text);
  });
  (spec.tools ?? []).forEach((t, i) => {
    if (!isObject(t)) throw new SpecError(`tools[${i}]`, "must be a JSON object");
    checkJSON(`tools[${i}]`, t);
  });
  (spec.history ?? []).forEach((m, i) => {
    checkStr(`history[${i}].role`, m.role, true);
    checkStr(`history[${i}].content`, m.content);
  });
  const params = spec.parameters ?? {};
  for (const name of Object.keys(params).sort()) {
    if (reserved.includes(name)) {
      throw new SpecError(`parameters.${name}`, "is set by the builder; use the spec's own field");
    }
    checkStr("parameters", name);
    checkJSON(`parameters.${name}`, params[name]!);
  }
  const md = spec.metadata ?? {};
  for (const k of Object.keys(md).sort()) {
    checkStr("metadata", k);
    checkStr(`metadata.${k}`, md[k]);
  }
  validateGroup(spec.group ?? "");
}

function validateGroup(g: unknown): void {
  if (typeof g !== "string") throw new SpecError("group", "must be a string");
  const gb = new TextEncoder().encode(g);
  if (gb.length > MAX_GROUP_BYTES) throw new SpecError("group", `is ${gb.length} bytes, over ${MAX_GROUP_BYTES}`);
  gb.forEach((c, i) => {
    if (c < 0x20 || c > 0x7e) {
      throw new SpecError("group", `has a non-printable byte 0x${c.toString(16).padStart(2, "0")} at ${i}`);
    }
  });
}

/** The request of mode (chat, responses, messages) as a JSON value, before canonicalization. */
export function requestOf(spec: PromptSpec, mode: Mode | ModeName = Mode.Chat): JSONObject {
  const m = buildMode(mode);
  validateSpec(spec, m);
  const { system, turns: turnsMember } = LAYOUTS[m];
  const body = newObject();
  body["model"] = spec.model;
  let turns = renderMessages(spec);
  if (system) {
    turns = [...(spec.history ?? []), { role: "user", content: spec.question }];
    const sys = systemText(spec);
    if (sys) body[system] = sys;
  }
  if (spec.tools && spec.tools.length > 0) body["tools"] = spec.tools;
  body[turnsMember] = turns.map((m) => {
    const o = newObject();
    o["role"] = m.role;
    o["content"] = m.content;
    return o;
  });
  for (const [k, v] of Object.entries(spec.parameters ?? {})) body[k] = v;
  const md = spec.metadata ?? {};
  if (Object.keys(md).length > 0) {
    const o = newObject();
    for (const [k, v] of Object.entries(md)) o[k] = v;
    body["metadata"] = o;
  }
  if (spec.group) body["prompt_cache_key"] = spec.group;
  return body;
}

/**
 * An OpenAI completion request: the model and one prompt string (the routing
 * text), other request members in parameters, and the group, which goes to
 * "prompt_cache_key" and the request's group.
 */
export interface CompletionSpec {
  model: string;
  prompt: string;
  /** Other members (max_tokens, temperature, ...); model, prompt and prompt_cache_key are rejected. */
  parameters?: Record<string, JSONValue>;
  group?: string;
}

export const COMPLETION_RESERVED = ["model", "prompt", "prompt_cache_key"];

/** Throw SpecError for the first problem of a completion spec. */
export function validateCompletion(spec: CompletionSpec): void {
  checkStr("model", spec.model, true);
  checkStr("prompt", spec.prompt);
  const params = spec.parameters ?? {};
  for (const name of Object.keys(params).sort()) {
    if (COMPLETION_RESERVED.includes(name)) {
      throw new SpecError(`parameters.${name}`, "is set by the builder; use the spec's own field");
    }
    checkStr("parameters", name);
    checkJSON(`parameters.${name}`, params[name]!);
  }
  validateGroup(spec.group ?? "");
}

/** The members of a completion spec that travel in CompletionInput.extraJson. */
export function completionExtra(spec: CompletionSpec): JSONObject {
  const extra = newObject();
  for (const [k, v] of Object.entries(spec.parameters ?? {})) extra[k] = v;
  if (spec.group) extra["prompt_cache_key"] = spec.group;
  return extra;
}

/** Render a completion spec as an OpenAI completion request, canonical (completion mode). */
export function buildCompletion(spec: CompletionSpec): Uint8Array {
  return buildCompletionKey(spec).body;
}

/** The built completion request and its routing key: the key the router reports for complete(). */
export function buildCompletionKey(spec: CompletionSpec, prefixLength = 0): { body: Uint8Array; route: RouteInfo } {
  validateCompletion(spec);
  const body = newObject();
  body["model"] = spec.model;
  body["prompt"] = spec.prompt;
  for (const [k, v] of Object.entries(completionExtra(spec))) body[k] = v;
  const c = canonicalizeFull(encode(body), Mode.Completion);
  return { body: c.body, route: routeKeyOf(c, "", prefixLength) };
}

/** Render the spec as an OpenAI chat completion request, canonical. */
export function build(spec: PromptSpec): Uint8Array {
  return canonicalizeFull(encode(requestOf(spec)), Mode.Chat).body;
}

/** The built request and its routing key (chat mode). */
export function buildKey(spec: PromptSpec, prefixLength = 0): { body: Uint8Array; route: RouteInfo } {
  const c = canonicalizeFull(encode(requestOf(spec)), Mode.Chat);
  return { body: c.body, route: routeKeyOf(c, "", prefixLength) };
}

/** Render the spec as a request of mode, canonical: chat (as build), responses (buildResponses) or messages (buildMessages). */
export function buildAs(spec: PromptSpec, mode: Mode | ModeName): Uint8Array {
  const m = buildMode(mode);
  return canonicalizeFull(encode(requestOf(spec, m)), m).body;
}

/** The request of mode and its routing key in that mode: the key the router reports for it on its path. */
export function buildKeyAs(spec: PromptSpec, mode: Mode | ModeName, prefixLength = 0): { body: Uint8Array; route: RouteInfo } {
  const m = buildMode(mode);
  const c = canonicalizeFull(encode(requestOf(spec, m)), m);
  return { body: c.body, route: routeKeyOf(c, "", prefixLength) };
}

/**
 * Render the spec as an OpenAI Responses request, canonical: the system text
 * (instructions, then the documents) in "instructions", the tools as given in
 * "tools", the history and then the question as message items of "input";
 * parameters, metadata and group as build places them.
 */
export function buildResponses(spec: PromptSpec): Uint8Array {
  return buildAs(spec, Mode.Responses);
}

/**
 * Render the spec as an Anthropic Messages request, canonical: the system
 * text in "system", the tools as given in "tools", the history and then the
 * question in "messages"; parameters (the API requires max_tokens), metadata
 * and group as build places them.
 */
export function buildMessages(spec: PromptSpec): Uint8Array {
  return buildAs(spec, Mode.Messages);
}

const SPEC_FIELDS = ["model", "instructions", "documents", "tools", "history", "question", "parameters", "metadata", "group"];

/**
 * Read a prompt spec from JSON (the build command's input). Syntax errors
 * throw CanonicalError with the byte offset; unknown members and wrong types
 * throw SpecError. Tool and parameter numbers keep their exact spelling.
 */
export function parseSpec(src: Uint8Array | string): PromptSpec {
  const v = parse(src);
  if (!isObject(v)) throw new SpecError("(spec)", "must be a JSON object");
  for (const k of Object.keys(v)) if (!SPEC_FIELDS.includes(k)) throw new SpecError(k, "unknown member");
  const str = (o: JSONObject, name: string, where: string): string => {
    const x = o[name];
    if (x === undefined || x === null) return "";
    if (typeof x !== "string") throw new SpecError(where + name, "must be a string");
    return x;
  };
  const arr = (name: string): JSONValue[] => {
    const x = v[name];
    if (x === undefined || x === null) return [];
    if (!Array.isArray(x)) throw new SpecError(name, "must be an array");
    return x;
  };
  const obj = (name: string): JSONObject => {
    const x = v[name];
    if (x === undefined || x === null) return newObject();
    if (!isObject(x)) throw new SpecError(name, "must be an object");
    return x;
  };
  const members = (o: JSONValue, where: string, allowed: string[]): JSONObject => {
    if (!isObject(o)) throw new SpecError(where, "must be an object");
    for (const k of Object.keys(o)) if (!allowed.includes(k)) throw new SpecError(`${where}.${k}`, "unknown member");
    return o;
  };
  const documents = arr("documents").map((d, i) => {
    const o = members(d, `documents[${i}]`, ["id", "title", "text"]);
    const w = `documents[${i}].`;
    return { id: str(o, "id", w), title: str(o, "title", w), text: str(o, "text", w) };
  });
  const history = arr("history").map((m, i) => {
    const o = members(m, `history[${i}]`, ["role", "content"]);
    const w = `history[${i}].`;
    return { role: str(o, "role", w), content: str(o, "content", w) };
  });
  const metadata: { [k: string]: string } = Object.create(null) as { [k: string]: string };
  for (const [k, x] of Object.entries(obj("metadata"))) {
    if (typeof x !== "string") throw new SpecError(`metadata.${k}`, "must be a string");
    metadata[k] = x;
  }
  return {
    model: str(v, "model", ""),
    question: str(v, "question", ""),
    instructions: str(v, "instructions", ""),
    documents,
    tools: arr("tools"),
    history,
    parameters: obj("parameters"),
    metadata,
    group: str(v, "group", ""),
  };
}

/** Parse a prompt spec from JSON and build its request of mode (chat by default). */
export function buildJSON(src: Uint8Array | string, mode: Mode | ModeName = Mode.Chat): Uint8Array {
  return buildAs(parseSpec(src), mode);
}
