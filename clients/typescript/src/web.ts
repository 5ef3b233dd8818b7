// @prefixgate/client for browsers and other fetch runtimes (Deno, Bun,
// workers): the "browser" export condition of the package and the
// "@prefixgate/client/web" subpath. The same exports as the Node entry, but
// PrefixgateClient is the connect-web client (Connect or gRPC-Web over
// fetch), and nothing here imports connect-node or a Node built-in
// (web.test.ts walks the import graph).

export * from "./core.js";
export { PrefixgateWebClient as PrefixgateClient } from "./transport-web.js";
