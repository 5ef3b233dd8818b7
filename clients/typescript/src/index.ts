// @prefixgate/client: Connect clients for prefixgate, the canonical form and
// routing key computed locally (byte for byte as the router and the Go and
// Python SDKs), and a prompt builder whose stable content always precedes
// its volatile content.

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
  type Document,
  type HistoryMessage,
  type PromptSpec,
  build,
  buildJSON,
  buildKey,
  parseSpec,
  renderMessages,
  systemText,
} from "./builder.js";
export { CanonicalError, OptionError, SpecError } from "./errors.js";
export { Code, ConnectError, PrefixgateClient, chatInput, type ClientOptions, type Protocol } from "./client.js";
