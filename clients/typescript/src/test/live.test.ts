// Calls to a live router: set PREFIXGATE_URL (`make test-sdk` does, through
// internal/testfleet). Without it these tests skip.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BaseClient,
  Code,
  CompletionSpec,
  ConnectError,
  Decision,
  Health,
  Mode,
  PrefixgateClient,
  PromptSpec,
  RequestMode,
  Severity,
  buildCompletionKey,
  buildKey,
  canonicalize,
  isRetryable,
  routingKey,
} from "../index.js";
import { PrefixgateClient as WebPrefixgateClient } from "../web.js";

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

const COMPLETION: CompletionSpec = {
  model: "vllmsim/tiny",
  prompt: "Once upon a time there was a cache. ".repeat(20),
  parameters: { max_tokens: 4 },
  group: "sdk-typescript",
};
const NATIVE_BODY = '{"parameters": {"max_new_tokens": 3}, "inputs": "Tell me a story about caches."}';
const SYSTEM_WITH_TIME =
  "You are the support assistant. Shift log 2026-11-30T09:15:00Z. " + "Follow the refund policy carefully. ".repeat(20);
const LINT_CORPUS = [
  `{"model":"vllmsim/tiny","messages":[{"role":"system","content":"${SYSTEM_WITH_TIME}"},{"role":"user","content":"hi"}]}`,
  '{"model":"vllmsim/tiny",}',
];

// Wait until every backend has answered the router's model probe; before
// that the router sends any model anywhere.
async function waitModels(c: BaseClient): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { backends } = await c.listBackends();
    if (backends.length > 0 && backends.every((b) => b.models.length > 0)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail("backends never reported their models");
}

test("complete and completeStream: the router's key is the SDK's", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc" });
  const { route } = buildCompletionKey(COMPLETION);
  const res = await c.complete(COMPLETION);
  assert.ok(res.text);
  assert.ok((res.usage?.completionTokens ?? 0n) > 0n);
  assert.equal(res.routing?.key, route.keyHex);
  let text = "";
  let n = 0;
  let usage = false;
  for await (const chunk of c.completeStream(COMPLETION)) {
    if (n === 0) assert.equal(chunk.routing?.key, route.keyHex);
    else assert.equal(chunk.routing, undefined);
    n++;
    usage ||= chunk.usage !== undefined;
    text += chunk.delta;
  }
  assert.equal(text, res.text);
  assert.ok(usage);
});

test("a model no backend serves is NotFound, not retryable", { skip }, async () => {
  const c = new PrefixgateClient(URL_);
  await waitModels(c);
  await assert.rejects(c.complete({ ...COMPLETION, model: "no-such-model" }), (e: unknown) => {
    return e instanceof ConnectError && e.code === Code.NotFound && !isRetryable(e);
  });
  await assert.rejects(
    (async () => {
      for await (const _ of c.chatStream({ ...SPEC, model: "no-such-model" })) void _;
    })(),
    (e: unknown) => ConnectError.from(e).code === Code.NotFound,
  );
});

test("invoke a native body", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc-web" });
  const route = routingKey(NATIVE_BODY, { mode: "native", group: "sdk-typescript" });
  const res = await c.invoke(NATIVE_BODY, { group: "sdk-typescript" });
  const out = JSON.parse(new TextDecoder().decode(res.body));
  assert.ok(out.generated_text);
  assert.equal(out.details.generated_tokens, 3);
  assert.equal(res.routing?.key, route.keyHex);
  await assert.rejects(c.invoke('{"inputs":'), (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument);
});

test("invoke any JSON path: Messages, a Responses follow-up, an unknown path", { skip }, async () => {
  const c = new PrefixgateClient(URL_);
  const dec = (b: Uint8Array) => JSON.parse(new TextDecoder().decode(b));
  const body = JSON.stringify({ model: SPEC.model, max_tokens: 3, system: "You are terse.", messages: [{ role: "user", content: "hi" }] });
  const msg = await c.invoke(body, { path: "/v1/messages" });
  assert.equal(dec(msg.body).type, "message");
  const first = await c.invoke(JSON.stringify({ model: SPEC.model, input: "hi", max_output_tokens: 3 }), { path: "/v1/responses" });
  const prev = dec(first.body).id;
  const follow = await c.invoke(JSON.stringify({ model: SPEC.model, input: "more", max_output_tokens: 3, previous_response_id: prev }), {
    path: "/v1/responses",
  });
  assert.equal(follow.routing?.backend, first.routing?.backend);
  await assert.rejects(c.invoke(body, { path: "/v1/nope" }), (e: unknown) => {
    const ce = ConnectError.from(e);
    return ce.code === Code.InvalidArgument && ce.rawMessage.includes("/v1/messages");
  });
});

test("lint: volatile-timestamp and invalid-json findings, summary", { skip }, async () => {
  const c = new PrefixgateClient(URL_);
  const res = await c.lint(LINT_CORPUS, { prefixLength: 1024, replicas: 3 });
  const ts = res.findings.find((f) => f.ruleId === "volatile-timestamp");
  assert.ok(ts, JSON.stringify(res.findings.map((f) => f.ruleId)));
  assert.equal(ts.requestIndex, 0);
  assert.equal(ts.jsonPath, "messages[0].content");
  assert.equal(ts.offset, SYSTEM_WITH_TIME.indexOf("2026"));
  assert.equal(ts.severity, Severity.WARNING);
  assert.ok(ts.hint);
  const bad = res.findings.find((f) => f.ruleId === "invalid-json");
  assert.equal(bad?.requestIndex, 1);
  assert.equal(bad?.severity, Severity.ERROR);
  assert.equal(res.summary?.requests, 2);
  assert.ok((res.summary?.warnings ?? 0) >= 1 && (res.summary?.errors ?? 0) >= 1);
  await assert.rejects(c.lint(["{}"], { prefixLength: 10 }), (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument);
});

test("listBackends and explain", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc" });
  const lb = await c.listBackends();
  const names = new Set(lb.backends.map((b) => b.name));
  assert.ok(names.size > 0 && lb.policy);
  assert.ok(lb.backends.every((b) => b.health === Health.HEALTHY && b.address));
  const { body, route } = buildKey(SPEC);
  const ex = await c.explain(body, { mode: Mode.Chat });
  assert.equal(ex.routing?.key, route.keyHex);
  assert.ok(names.has(ex.routing?.backend ?? "") && names.has(ex.home));
  assert.equal(ex.mode, RequestMode.CHAT);
  assert.ok(ex.reason);
  const res = await c.chat(SPEC);
  if (res.routing?.decision === Decision.AFFINITY) assert.equal(res.routing.backend, ex.home);
});

// The browser client (connect-web over fetch), run on Node's fetch: the code
// path a browser takes, for both protocols a browser can speak.
for (const protocol of ["connect", "grpc-web"] as const) {
  test(`web client over fetch (${protocol}): every service`, { skip }, async () => {
    const c = new WebPrefixgateClient(URL_, { protocol });
    const { route } = buildKey(SPEC);
    assert.equal((await c.chat(SPEC)).routing?.key, route.keyHex);
    let text = "";
    for await (const chunk of c.completeStream(COMPLETION)) text += chunk.delta;
    assert.ok(text);
    const inv = await c.invoke(NATIVE_BODY);
    assert.ok(JSON.parse(new TextDecoder().decode(inv.body)).generated_text);
    const lint = await c.lint(LINT_CORPUS);
    assert.ok(lint.findings.some((f) => f.ruleId === "volatile-timestamp"));
    assert.ok((await c.listBackends()).backends.length > 0);
    await assert.rejects(c.normalize('{"a":1,}'), (e: unknown) => {
      return e instanceof ConnectError && e.code === Code.InvalidArgument && e.rawMessage.includes("offset 7");
    });
  });
}

test("flow call options reach the router, unary and streamed, Connect and gRPC", { skip }, async () => {
  for (const c of [new PrefixgateClient(URL_), new PrefixgateClient(URL_, { protocol: "grpc" })]) {
    const res = await c.chat(SPEC, { fairnessId: "sdk-typescript-tenant" });
    assert.ok(res.content);
    let n = 0;
    for await (const _ of c.chatStream(SPEC, { fairnessId: "sdk-typescript-tenant" })) n++;
    assert.ok(n > 0);
  }
});

test("an objective the router does not define is InvalidArgument naming the header", { skip }, async () => {
  const c = new PrefixgateClient(URL_, { protocol: "grpc" });
  await assert.rejects(c.chat(SPEC, { objective: "sdk-undefined-objective" }), (e: unknown) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.match(e.rawMessage.toLowerCase(), /x-llm-d-inference-objective/);
    return e.rawMessage.includes("sdk-undefined-objective");
  });
});
