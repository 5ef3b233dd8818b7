// Calls to a live router: set PREFIXGATE_URL (`make test-sdk` does, through
// internal/testfleet). Without it these tests skip.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code, ConnectError, PrefixgateClient, PromptSpec, buildKey, canonicalize, routingKey } from "../index.js";

const URL_ = process.env["PREFIXGATE_URL"] ?? "";
const skip = URL_ ? false : "PREFIXGATE_URL is not set; run `make test-sdk` to test against a live router";

const SPEC: PromptSpec = {
  model: "vllmsim/tiny",
  instructions: "Answer from the document.",
  documents: [{ id: "q3", title: "Report", text: "Revenue grew 12%. ".repeat(30) }],
  question: "What grew?",
  parameters: { max_tokens: 4, temperature: 0 },
  metadata: { request_id: "ts-1" },
  group: "sdk-typescript",
};

test("chat unary: the router's key is the SDK's", { skip }, async () => {
  const c = new PrefixgateClient(URL_);
  const { route } = buildKey(SPEC);
  const res = await c.chat(SPEC);
  assert.ok(res.content);
  assert.ok(res.routing?.backend);
  assert.equal(res.routing?.key, route.keyHex);
  const res2 = await c.chat({ ...SPEC, metadata: { request_id: "ts-2" } });
  assert.equal(res2.routing?.key, route.keyHex);
});

test("chat stream", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc-web" });
  const { route } = buildKey(SPEC);
  let text = "";
  let first = true;
  for await (const chunk of c.chatStream(SPEC)) {
    if (first) assert.equal(chunk.routing?.key, route.keyHex);
    first = false;
    text += chunk.delta;
  }
  assert.equal(first, false);
  assert.ok(text);
});

test("normalize matches local, invalid JSON is InvalidArgument", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc" });
  const body = '{ "messages":[{"role":"system","content":"S"},{"role":"user","content":"q"}], "model":"m" }';
  const res = await c.normalize(body);
  assert.deepEqual(Buffer.from(res.canonicalBody), Buffer.from(canonicalize(body)));
  assert.equal(res.key, routingKey(body).keyHex);
  await assert.rejects(c.normalize('{"a":1,}'), (e: unknown) => {
    const ce = ConnectError.from(e);
    return ce.code === Code.InvalidArgument && ce.rawMessage.includes("offset 7");
  });
});

test("admin", { skip }, async () => {
  const c = new PrefixgateClient(URL_);
  const { backends } = await c.listBackends();
  assert.ok(backends.length > 0);
  const ex = await c.explain('{"model":"vllmsim/tiny","messages":[{"role":"user","content":"q"}]}');
  assert.ok(backends.some((b) => b.name === ex.routing?.backend));
});
