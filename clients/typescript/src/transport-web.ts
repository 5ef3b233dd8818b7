// The fetch transports: @connectrpc/connect-web, for browsers and any
// runtime with fetch and streams (Node >= 18, Deno, Bun, workers). Browsers
// cannot speak gRPC (it needs HTTP/2 trailers): use Connect or gRPC-Web.

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { BaseClient, type Protocol } from "./client.js";

export type WebProtocol = "connect" | "grpc-web";

export interface WebTransportOptions {
  /** A fetch of your own (credentials, a polyfill); default globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
  interceptors?: Interceptor[];
}

export interface WebClientOptions extends WebTransportOptions {
  /** "connect" (default) or "grpc-web". */
  protocol?: WebProtocol;
  /** A transport of your own; overrides protocol. */
  transport?: Transport;
}

/** A fetch (connect-web) transport to the router at baseUrl. */
export function createWebTransport(
  baseUrl: string,
  protocol: WebProtocol = "connect",
  options: WebTransportOptions = {},
): Transport {
  const p = protocol as Protocol; // JS callers may pass "grpc"
  const common = { baseUrl, interceptors: options.interceptors, fetch: options.fetch };
  switch (p) {
    case "connect":
      return createConnectTransport(common);
    case "grpc-web":
      return createGrpcWebTransport(common);
    case "grpc":
      throw new TypeError('gRPC needs HTTP/2 trailers, which fetch does not expose: use "connect" or "grpc-web"');
  }
  throw new TypeError(`unknown protocol ${JSON.stringify(protocol)}: want "connect" or "grpc-web"`);
}

/**
 * A client for a prefixgate router over fetch (connect-web): what a browser
 * uses. { protocol: "connect" | "grpc-web" }, or { transport }.
 */
export class PrefixgateWebClient extends BaseClient {
  constructor(baseUrl: string, options: WebClientOptions = {}) {
    super(options.transport ?? createWebTransport(baseUrl, options.protocol ?? "connect", options));
  }
}
