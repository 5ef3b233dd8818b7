// Connect clients for the router's three services, independent of the
// runtime: BaseClient takes any Transport. The entry points add the default
// transport: PrefixgateClient in index.ts uses @connectrpc/connect-node, the
// one in web.ts (the "browser" export condition and "@prefixgate/client/web")
// uses @connectrpc/connect-web, on fetch.
//
// Errors are ConnectError (re-exported with Code): branch on err.code, e.g.
// Code.InvalidArgument for a rejected body, Code.ResourceExhausted when every
// backend is at its bound, Code.Unavailable when none serves the model;
// retryAfter and isRetryable read them.

import { create } from "@bufbuild/protobuf";
import { CallOptions, Client, Code, ConnectError, Transport, createClient } from "@connectrpc/connect";

import { CompletionSpec, PromptSpec, completionExtra, renderMessages, validateCompletion, validateSpec } from "./builder.js";
import { JSONValue, Mode, encode, isObject, newObject, quoteName } from "./canonical.js";
import { SpecError } from "./errors.js";
import { FlowCallOptions, withFlow } from "./flow.js";
import { AdminService, ExplainResponse, ListBackendsResponse } from "./gen/prefixgate/v1/admin_pb.js";
import {
  ChatInput,
  ChatInputSchema,
  ChatResponse,
  ChatStreamResponse,
  CompleteResponse,
  CompleteStreamResponse,
  CompletionInput,
  CompletionInputSchema,
  InferenceService,
  InvokeResponse,
  Tool,
  ToolSchema,
} from "./gen/prefixgate/v1/inference_pb.js";
import { LintResponse, NormalizeResponse, NormalizeService } from "./gen/prefixgate/v1/normalize_pb.js";
import { RequestMode } from "./gen/prefixgate/v1/routing_pb.js";

export { Code, ConnectError, type CallOptions, type Transport };

export type Protocol = "connect" | "grpc" | "grpc-web";

export interface ClientOptions {
  /** Wire protocol of the default transport; default "connect". */
  protocol?: Protocol;
  /** A transport of your own; overrides protocol. */
  transport?: Transport;
}

export interface BodyOptions {
  mode?: Mode;
  group?: string;
  prefixLength?: number;
}

export interface InvokeOptions {
  group?: string;
  /** The JSON path the body is for (/v1/responses, /v1/messages, /rerank, ...); /invocations when empty. */
  path?: string;
}

export interface LintOptions {
  /** Read every body in this mode; Mode.Auto (default) detects each. */
  mode?: Mode;
  /** Routing window, 1024..65536; 0 (default) is the router's. */
  prefixLength?: number;
  /** Replicas the traffic spreads over, for the hot-key rule; 0 skips it. */
  replicas?: number;
  /** The traffic reaches a byte-prefix router without prefixgate's normalizer. */
  direct?: boolean;
}

const MODES: Record<Mode, RequestMode> = {
  [Mode.Auto]: RequestMode.UNSPECIFIED,
  [Mode.Chat]: RequestMode.CHAT,
  [Mode.Completion]: RequestMode.COMPLETION,
  [Mode.Native]: RequestMode.NATIVE,
  [Mode.Responses]: RequestMode.RESPONSES,
  [Mode.Messages]: RequestMode.MESSAGES,
  [Mode.Pooling]: RequestMode.POOLING,
};

function bytesOf(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? new TextEncoder().encode(body) : body;
}

/**
 * A client for a prefixgate router on a given transport: one method per RPC
 * of the three services. Every method takes connect's CallOptions last
 * (signal, timeoutMs, headers); the inference calls and explain also take the
 * call's flow there (FlowCallOptions: fairnessId, objective), checked before
 * anything is sent. The generated clients are fields.
 */
export class BaseClient {
  readonly inference: Client<typeof InferenceService>;
  readonly normalizeService: Client<typeof NormalizeService>;
  readonly admin: Client<typeof AdminService>;

  constructor(transport: Transport) {
    this.inference = createClient(InferenceService, transport);
    this.normalizeService = createClient(NormalizeService, transport);
    this.admin = createClient(AdminService, transport);
  }

  // InferenceService

  /** Send the prompt the spec describes; wait for the answer. */
  chat(spec: PromptSpec, options?: FlowCallOptions): Promise<ChatResponse> {
    const input = chatInput(spec);
    return this.inference.chat({ input }, withFlow(options));
  }

  /** Send the prompt the spec describes; the first chunk carries the routing. */
  chatStream(spec: PromptSpec, options?: FlowCallOptions): AsyncIterable<ChatStreamResponse> {
    const input = chatInput(spec);
    return this.inference.chatStream({ input }, withFlow(options));
  }

  /** Send the completion the spec describes; routing.key equals buildCompletionKey's. */
  complete(spec: CompletionSpec, options?: FlowCallOptions): Promise<CompleteResponse> {
    const input = completionInput(spec);
    return this.inference.complete({ input }, withFlow(options));
  }

  /** Send the completion the spec describes; the first chunk carries the routing. */
  completeStream(spec: CompletionSpec, options?: FlowCallOptions): AsyncIterable<CompleteStreamResponse> {
    const input = completionInput(spec);
    return this.inference.completeStream({ input }, withFlow(options));
  }

  /**
   * Send a raw JSON body to one of the router's JSON paths (opts.path;
   * /invocations when empty), normalized and routed as that REST path does;
   * body of the answer is the backend's raw JSON.
   */
  invoke(body: Uint8Array | string, opts: InvokeOptions = {}, options?: FlowCallOptions): Promise<InvokeResponse> {
    return this.inference.invoke({ body: bytesOf(body), group: opts.group ?? "", path: opts.path ?? "" }, withFlow(options));
  }

  // NormalizeService

  /** The router's canonical form and key of a body (canonicalize and routingKey compute the same locally). */
  normalize(body: Uint8Array | string, opts: BodyOptions = {}, options?: CallOptions): Promise<NormalizeResponse> {
    return this.normalizeService.normalize(
      {
        body: bytesOf(body),
        mode: MODES[opts.mode ?? Mode.Auto],
        group: opts.group ?? "",
        prefixLength: opts.prefixLength ?? 0,
      },
      options,
    );
  }

  /**
   * Lint a corpus of request bodies (one JSON body each, in order) with the
   * engine of `prefixgate lint`: findings (rule id, severity, request index,
   * JSON path, offset, hint) and a summary. A body that is not JSON is an
   * invalid-json finding, not an error.
   */
  lint(requests: Iterable<Uint8Array | string>, opts: LintOptions = {}, options?: CallOptions): Promise<LintResponse> {
    if (typeof requests === "string") throw new TypeError("lint takes a list of bodies, not one body");
    return this.normalizeService.lint(
      {
        requests: Array.from(requests, bytesOf),
        mode: MODES[opts.mode ?? Mode.Auto],
        prefixLength: opts.prefixLength ?? 0,
        replicas: opts.replicas ?? 0,
        direct: opts.direct ?? false,
      },
      options,
    );
  }

  // AdminService

  /** The router's backends, policy and load factor. */
  listBackends(options?: CallOptions): Promise<ListBackendsResponse> {
    return this.admin.listBackends({}, options);
  }

  /** Where a body would go and why, without sending it. */
  explain(body: Uint8Array | string, opts: BodyOptions = {}, options?: FlowCallOptions): Promise<ExplainResponse> {
    const callOptions = withFlow(options);
    return this.admin.explain(
      {
        body: bytesOf(body),
        mode: MODES[opts.mode ?? Mode.Auto],
        group: opts.group ?? "",
        prefixLength: opts.prefixLength ?? 0,
      },
      callOptions,
    );
  }
}

/**
 * Seconds the router asked the caller to wait (its Retry-After, sent with
 * ResourceExhausted when every backend is at its bound); undefined when it
 * did not ask or err is not a ConnectError.
 */
export function retryAfter(err: unknown): number | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const v = err.metadata.get("retry-after");
  if (v === null || !/^\s*\d+(\.\d+)?\s*$/.test(v)) return undefined;
  return Number(v);
}

/**
 * Whether the same call may succeed later: Unavailable, or ResourceExhausted
 * with a Retry-After (a body over the size limit is ResourceExhausted
 * without one, and is not retryable). NotFound, a model no backend serves,
 * is not retryable.
 */
export function isRetryable(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  if (err.code === Code.Unavailable) return true;
  return err.code === Code.ResourceExhausted && retryAfter(err) !== undefined;
}

/** Convert a completion spec to the API's CompletionInput. */
export function completionInput(spec: CompletionSpec): CompletionInput {
  validateCompletion(spec);
  const extra = completionExtra(spec);
  return create(CompletionInputSchema, {
    model: spec.model,
    prompt: spec.prompt,
    group: spec.group ?? "",
    extraJson: Object.keys(extra).length > 0 ? encode(extra) : "",
  });
}

function toolOf(i: number, t: JSONValue): Tool {
  const where = `tools[${i}]`;
  if (!isObject(t)) throw new SpecError(where, "must be a JSON object");
  for (const k of Object.keys(t)) {
    if (k !== "type" && k !== "function") throw new SpecError(where, `member ${quoteName(k)} cannot be sent through ChatInput`);
  }
  const typ = t["type"];
  const fn = t["function"];
  if (typeof typ !== "string" || typ === "") throw new SpecError(where, "type must be a non-empty string");
  if (!isObject(fn)) throw new SpecError(where, "function must be an object");
  for (const k of Object.keys(fn)) {
    if (!["name", "description", "parameters"].includes(k)) {
      throw new SpecError(where, `function member ${quoteName(k)} cannot be sent through ChatInput`);
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
