// Connect clients for the router's three services. Errors are ConnectError
// (re-exported with Code): branch on err.code, e.g. Code.InvalidArgument for
// a rejected body or Code.ResourceExhausted when every backend is at its
// bound.

import { create } from "@bufbuild/protobuf";
import { Client, Code, ConnectError, Transport, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";

import { PromptSpec, renderMessages, validateSpec } from "./builder.js";
import { JSONValue, Mode, encode, isObject, newObject } from "./canonical.js";
import { SpecError } from "./errors.js";
import { AdminService, ExplainResponse, ListBackendsResponse } from "./gen/prefixgate/v1/admin_pb.js";
import {
  ChatInput,
  ChatInputSchema,
  ChatResponse,
  ChatStreamResponse,
  InferenceService,
  Tool,
  ToolSchema,
} from "./gen/prefixgate/v1/inference_pb.js";
import { NormalizeResponse, NormalizeService } from "./gen/prefixgate/v1/normalize_pb.js";
import { RequestMode } from "./gen/prefixgate/v1/routing_pb.js";

export { Code, ConnectError };

export type Protocol = "connect" | "grpc" | "grpc-web";

export interface ClientOptions {
  /** Wire protocol (Node transports); default "connect". */
  protocol?: Protocol;
  /** A transport of your own, e.g. connect-web's in a browser; overrides protocol. */
  transport?: Transport;
}

export interface BodyOptions {
  mode?: Mode;
  group?: string;
  prefixLength?: number;
}

const MODES: Record<Mode, RequestMode> = {
  [Mode.Auto]: RequestMode.UNSPECIFIED,
  [Mode.Chat]: RequestMode.CHAT,
  [Mode.Completion]: RequestMode.COMPLETION,
  [Mode.Native]: RequestMode.NATIVE,
};

function transportFor(baseUrl: string, protocol: Protocol): Transport {
  switch (protocol) {
    case "grpc":
      return createGrpcTransport({ baseUrl });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
    default:
      return createConnectTransport({ baseUrl, httpVersion: "1.1" });
  }
}

function bytesOf(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? new TextEncoder().encode(body) : body;
}

/** A client for a prefixgate router. The generated clients are fields. */
export class PrefixgateClient {
  readonly inference: Client<typeof InferenceService>;
  readonly normalizeService: Client<typeof NormalizeService>;
  readonly admin: Client<typeof AdminService>;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    const t = options.transport ?? transportFor(baseUrl, options.protocol ?? "connect");
    this.inference = createClient(InferenceService, t);
    this.normalizeService = createClient(NormalizeService, t);
    this.admin = createClient(AdminService, t);
  }

  /** Send the prompt the spec describes; wait for the answer. */
  chat(spec: PromptSpec): Promise<ChatResponse> {
    return this.inference.chat({ input: chatInput(spec) });
  }

  /** Send the prompt the spec describes; the first chunk carries the routing. */
  chatStream(spec: PromptSpec): AsyncIterable<ChatStreamResponse> {
    return this.inference.chatStream({ input: chatInput(spec) });
  }

  /** The router's canonical form and key of a body (canonicalize and routingKey compute the same locally). */
  normalize(body: Uint8Array | string, opts: BodyOptions = {}): Promise<NormalizeResponse> {
    return this.normalizeService.normalize({
      body: bytesOf(body),
      mode: MODES[opts.mode ?? Mode.Auto],
      group: opts.group ?? "",
      prefixLength: opts.prefixLength ?? 0,
    });
  }

  /** The router's backends, policy and load factor. */
  listBackends(): Promise<ListBackendsResponse> {
    return this.admin.listBackends({});
  }

  /** Where a body would go and why, without sending it. */
  explain(body: Uint8Array | string, opts: BodyOptions = {}): Promise<ExplainResponse> {
    return this.admin.explain({
      body: bytesOf(body),
      mode: MODES[opts.mode ?? Mode.Auto],
      group: opts.group ?? "",
      prefixLength: opts.prefixLength ?? 0,
    });
  }
}

function toolOf(i: number, t: JSONValue): Tool {
  const where = `tools[${i}]`;
  if (!isObject(t)) throw new SpecError(where, "must be a JSON object");
  for (const k of Object.keys(t)) {
    if (k !== "type" && k !== "function") throw new SpecError(where, `member "${k}" cannot be sent through ChatInput`);
  }
  const typ = t["type"];
  const fn = t["function"];
  if (typeof typ !== "string" || typ === "") throw new SpecError(where, "type must be a non-empty string");
  if (!isObject(fn)) throw new SpecError(where, "function must be an object");
  for (const k of Object.keys(fn)) {
    if (!["name", "description", "parameters"].includes(k)) {
      throw new SpecError(where, `function member "${k}" cannot be sent through ChatInput`);
    }
  }
  const name = fn["name"];
  const desc = fn["description"];
  if (typeof name !== "string") throw new SpecError(where, "function.name must be a string");
  if (desc !== undefined && (typeof desc !== "string" || desc === "")) {
    throw new SpecError(where, "function.description must be a non-empty string");
  }
  const params = fn["parameters"];
  return create(ToolSchema, {
    type: typ,
    name,
    description: desc ?? "",
    parametersJson: params === undefined ? "" : encode(params),
  });
}

/**
 * Convert a spec to the API's ChatInput, so that the router renders the
 * request build() renders and computes the same key. Tools must have the
 * shape ChatInput carries: {"type", "function": {"name", "description",
 * "parameters"}}.
 */
export function chatInput(spec: PromptSpec): ChatInput {
  validateSpec(spec);
  const extra = newObject();
  for (const [k, v] of Object.entries(spec.parameters ?? {})) extra[k] = v;
  const md = spec.metadata ?? {};
  if (Object.keys(md).length > 0) {
    const o = newObject();
    for (const [k, v] of Object.entries(md)) o[k] = v;
    extra["metadata"] = o;
  }
  if (spec.group) extra["prompt_cache_key"] = spec.group;
  return create(ChatInputSchema, {
    model: spec.model,
    tools: (spec.tools ?? []).map((t, i) => toolOf(i, t)),
    messages: renderMessages(spec).map((m) => ({ role: m.role, content: m.content })),
    group: spec.group ?? "",
    extraJson: Object.keys(extra).length > 0 ? encode(extra) : "",
  });
}
