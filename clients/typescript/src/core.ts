// What both entry points export: everything but the default transport.
// index.ts (Node) and web.ts (browsers and other fetch runtimes) add it.

export {
  Mode,
  JSONNumber,
  type JSONValue,
  type JSONObject,
  type ModeName,
  canonicalize,
  canonicalizeFull,
  encode,
  formatNumber,
  parse,
  parseMode,
  modeName,
} from "./canonical.js";
export { type KeyOptions, type RouteInfo, formatKey, routingKey, routeKeyOf } from "./key.js";
export { xxh3 } from "./xxh3.js";
export {
  type CompletionSpec,
  type Document,
  type HistoryMessage,
  type PromptSpec,
  type BuildMode,
  build,
  buildAs,
  buildCompletion,
  buildCompletionKey,
  buildJSON,
  buildKey,
  buildKeyAs,
  buildMessages,
  buildResponses,
  parseSpec,
  renderMessages,
  systemText,
} from "./builder.js";
export { CanonicalError, OptionError, SpecError } from "./errors.js";
export {
  FAIRNESS_ID_HEADER,
  MAX_FLOW_VALUE_BYTES,
  OBJECTIVE_HEADER,
  checkFairnessId,
  checkObjective,
  flowHeaders,
  type FlowCallOptions,
} from "./flow.js";
export {
  BaseClient,
  Code,
  ConnectError,
  chatInput,
  completionInput,
  isRetryable,
  retryAfter,
  type BodyOptions,
  type CallOptions,
  type ClientOptions,
  type InvokeOptions,
  type LintOptions,
  type Protocol,
  type Transport,
} from "./client.js";
export {
  PrefixgateWebClient,
  createWebTransport,
  type WebClientOptions,
  type WebProtocol,
  type WebTransportOptions,
} from "./transport-web.js";
export {
  type ChatResponse,
  type ChatStreamResponse,
  type CompleteResponse,
  type CompleteStreamResponse,
  type InvokeResponse,
} from "./gen/prefixgate/v1/inference_pb.js";
export {
  Severity,
  type Finding,
  type LintResponse,
  type LintSummary,
  type NormalizeResponse,
} from "./gen/prefixgate/v1/normalize_pb.js";
export { Health, type Backend, type ExplainResponse, type ListBackendsResponse } from "./gen/prefixgate/v1/admin_pb.js";
export { Decision, RequestMode, type Routing, type Usage } from "./gen/prefixgate/v1/routing_pb.js";
