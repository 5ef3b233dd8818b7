// The client layer without a router: the browser entry's import graph, the
// package's export conditions, completion specs and error mapping (against
// a stub Connect server that answers every call as a saturated router).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  Code,
  ConnectError,
  JSONNumber,
  PrefixgateClient,
  PrefixgateWebClient,
  SpecError,
  buildCompletion,
  buildCompletionKey,
  completionInput,
  createWebTransport,
  isRetryable,
  retryAfter,
  routingKey,
  type CompletionSpec,
} from "../index.js";
import * as web from "../web.js";

const here = dirname(fileURLToPath(import.meta.url));
const dist = resolve(here, "..");
const pkg = JSON.parse(readFileSync(resolve(dist, "..", "package.json"), "utf8"));

// Every module the file imports, transitively within dist, and the bare
// specifiers (packages, node: built-ins) it reaches.
function importGraph(entry: string): { files: Set<string>; bare: Set<string> } {
  const files = new Set<string>();
  const bare = new Set<string>();
  const re = /(?:^|[;\s])(?:import|export)\s*(?:[^'";]*?\sfrom\s*)?["']([^"']+)["']|import\s*\(\s*["']([^"']+)["']\s*\)/g;
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    for (const m of readFileSync(file, "utf8").matchAll(re)) {
      const spec = (m[1] ?? m[2])!;
      if (spec.startsWith(".")) visit(join(dirname(file), spec));
      else bare.add(spec);
    }
  };
  visit(entry);
  return { files, bare };
}

test("the browser entry imports no Node code", () => {
  const { files, bare } = importGraph(join(dist, "web.js"));
  assert.ok(files.has(join(dist, "transport-web.js")) && files.has(join(dist, "client.js")));
  assert.ok(!files.has(join(dist, "transport-node.js")), "web.js reaches transport-node.js");
  const pkgs = new Set([...bare].map((s) => (s.startsWith("@") ? s.split("/").slice(0, 2).join("/") : s.split("/")[0]!)));
  assert.deepEqual([...pkgs].sort(), ["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-web"]);
  // The Node entry does reach connect-node; the walker sees it.
  assert.ok(importGraph(join(dist, "index.js")).bare.has("@connectrpc/connect-node"));
});

test("export conditions: browser and ./web resolve to the fetch entry", () => {
  const root = pkg.exports["."];
  assert.equal(Object.keys(root)[0], "browser", "bundlers take the first matching condition");
  assert.equal(root.browser.default, "./dist/web.js");
  assert.equal(pkg.exports["./web"].import, "./dist/web.js");
  assert.equal(pkg.engines.node, ">=18");
  assert.equal(web.PrefixgateClient, PrefixgateWebClient);
  assert.equal(Object.keys(web).includes("createNodeTransport"), false);
});

test("createWebTransport rejects gRPC", () => {
  assert.throws(() => createWebTransport("http://127.0.0.1:1", "grpc" as "connect"), /HTTP\/2 trailers/);
  assert.ok(createWebTransport("http://127.0.0.1:1", "grpc-web"));
});

const COMPLETION: CompletionSpec = {
  model: "vllmsim/tiny",
  prompt: "Once upon a time",
  parameters: { temperature: new JSONNumber("1.0"), max_tokens: 4 },
};

test("buildCompletion", () => {
  const td = new TextDecoder();
  assert.equal(
    td.decode(buildCompletion(COMPLETION)),
    '{"model":"vllmsim/tiny","prompt":"Once upon a time","max_tokens":4,"temperature":1}',
  );
  const { body, route } = buildCompletionKey(COMPLETION);
  assert.equal(route.keyHex, routingKey(body, { mode: "completion" }).keyHex);
  const g = buildCompletionKey({ ...COMPLETION, group: "tenant-a" });
  assert.equal(td.decode(g.body), td.decode(body).slice(0, -1) + ',"prompt_cache_key":"tenant-a"}');
  assert.notEqual(g.route.keyHex, route.keyHex);
  const ci = completionInput({ ...COMPLETION, group: "tenant-a" });
  assert.deepEqual([ci.model, ci.prompt, ci.group], ["vllmsim/tiny", "Once upon a time", "tenant-a"]);
  assert.deepEqual(JSON.parse(ci.extraJson), { max_tokens: 4, prompt_cache_key: "tenant-a", temperature: 1 });
});

test("completion spec errors", () => {
  const cases: [CompletionSpec, string][] = [
    [{ model: "", prompt: "p" }, "model"],
    [{ model: "m", prompt: "p", parameters: { prompt: "x" } }, "parameters.prompt"],
    [{ model: "m", prompt: "p", group: "a\nb" }, "group"],
    [{ model: "m", prompt: "\ud800" }, "prompt"],
  ];
  for (const [spec, field] of cases) {
    assert.throws(() => completionInput(spec), (e: unknown) => e instanceof SpecError && e.field === field, field);
  }
});

test("retryAfter and isRetryable", () => {
  const busy = new ConnectError("saturated", Code.ResourceExhausted, { "retry-after": "2" });
  assert.equal(retryAfter(busy), 2);
  assert.ok(isRetryable(busy));
  const tooLarge = new ConnectError("too large", Code.ResourceExhausted);
  assert.equal(retryAfter(tooLarge), undefined);
  assert.ok(!isRetryable(tooLarge));
  assert.ok(isRetryable(new ConnectError("x", Code.Unavailable)));
  assert.ok(!isRetryable(new ConnectError("x", Code.InvalidArgument)));
  assert.ok(!isRetryable(new ConnectError("model not served", Code.NotFound)));
  assert.ok(!isRetryable(new Error("local")));
});

let stubUrl = "";
const stub = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(429, { "content-type": "application/json", "retry-after": "3" });
    res.end(JSON.stringify({ code: "resource_exhausted", message: "all saturated" }));
  });
});
before(async () => {
  await new Promise<void>((r) => stub.listen(0, "127.0.0.1", r));
  stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
});
after(() => {
  stub.close();
});

test("errors are ConnectError with the router's code and Retry-After, on Node and fetch transports", async () => {
  for (const c of [new PrefixgateClient(stubUrl), new PrefixgateWebClient(stubUrl), new web.PrefixgateClient(stubUrl)]) {
    for (const call of [
      () => c.complete(COMPLETION),
      () => c.invoke('{"inputs":"x"}'),
      () => c.lint(["{}"]),
      () => c.listBackends(),
    ]) {
      await assert.rejects(call(), (e: unknown) => {
        assert.ok(e instanceof ConnectError);
        assert.equal(e.code, Code.ResourceExhausted);
        assert.equal(e.rawMessage, "all saturated");
        assert.equal(retryAfter(e), 3);
        return isRetryable(e);
      });
    }
  }
});

test("spec errors are thrown before any call", () => {
  const c = new PrefixgateWebClient("http://127.0.0.1:1");
  assert.throws(() => c.completeStream({ model: "m", prompt: "p", parameters: { model: "x" } }), SpecError);
  assert.throws(() => c.lint("{}" as unknown as string[]), TypeError);
});
