// @prefixgate/client: Connect clients for prefixgate, the canonical form and
// routing key computed locally (byte for byte as the router and the Go and
// Python SDKs), and a prompt builder whose stable content always precedes
// its volatile content.
//
// This is the Node entry: PrefixgateClient defaults to the connect-node
// transports (Connect, gRPC, gRPC-Web). Bundlers for the browser resolve the
// package to web.ts instead (the "browser" export condition), whose
// PrefixgateClient uses connect-web over fetch.

export * from "./core.js";
export { PrefixgateClient, createNodeTransport } from "./transport-node.js";
