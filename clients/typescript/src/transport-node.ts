// The Node transports: @connectrpc/connect-node, over HTTP/1.1 for Connect
// and gRPC-Web, HTTP/2 for gRPC. Not part of the browser entry (web.ts).

import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";

import { BaseClient, type ClientOptions, type Protocol } from "./client.js";

/** A Node transport to the router at baseUrl. */
export function createNodeTransport(baseUrl: string, protocol: Protocol = "connect"): Transport {
  switch (protocol) {
    case "grpc":
      return createGrpcTransport({ baseUrl });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
    case "connect":
      return createConnectTransport({ baseUrl, httpVersion: "1.1" });
  }
  throw new TypeError(`unknown protocol ${JSON.stringify(protocol)}: want "connect", "grpc" or "grpc-web"`);
}

/**
 * A client for a prefixgate router, on Node's HTTP stack by default
 * ({ protocol: "connect" | "grpc" | "grpc-web" }); pass { transport } for
 * another, e.g. createWebTransport(baseUrl) for fetch.
 */
export class PrefixgateClient extends BaseClient {
  constructor(baseUrl: string, options: ClientOptions = {}) {
    super(options.transport ?? createNodeTransport(baseUrl, options.protocol ?? "connect"));
  }
}
