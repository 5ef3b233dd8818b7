import assert from "node:assert/strict";
import { test } from "node:test";

import { CanonicalError, JSONNumber, Mode, OptionError, PromptSpec, SpecError, build, buildAs, buildKey, buildKeyAs, buildMessages, buildResponses, canonicalize, chatInput, encode, routingKey } from "../index.js";

const td = new TextDecoder();

function sample(): PromptSpec {
  return {
    model: "vllmsim/tiny",
    instructions: "Answer from the documents.",
    documents: [{ id: "q3", title: "Quarterly report", text: "Revenue grew. ".repeat(40) }],
    tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }],
    history: [
      { role: "user", content: "Hello" },
      { role: "assistant", content: "Hi." },
    ],
    question: "What grew?",
    parameters: { max_tokens: 4, temperature: 0 },
    metadata: { request_id: "r-1", ts: "2026-05-01T10:00:00Z" },
  };
}

test("layout", () => {
  const want =
    '{"model":"vllmsim/tiny","tools":[{"function":{"name":"lookup","parameters":{"type":"object"}},"type":"function"}],' +
    '"messages":[{"content":"Answer from the documents.\\n\\n## Document q3: Quarterly report\\n\\n' +
    "Revenue grew. ".repeat(40) +
    '","role":"system"},{"content":"Hello","role":"user"},{"content":"Hi.","role":"assistant"},{"content":"What grew?","role":"user"}],' +
    '"max_tokens":4,"temperature":0,"metadata":{"request_id":"r-1","ts":"2026-05-01T10:00:00Z"}}';
  assert.equal(td.decode(build(sample())), want);
});

test("metadata never changes the key", () => {
  const base = buildKey(sample()).route.key;
  const variants: Record<string, string>[] = [{}, { request_id: "r-2", ts: "2027-01-01T00:00:00Z" }, { a: "1", z: "x".repeat(5000), user: "u" }];
  for (const metadata of variants) {
    assert.equal(buildKey({ ...sample(), metadata }).route.key, base);
  }
});

test("group changes only its member", () => {
  const plain = buildKey(sample());
  const grouped = buildKey({ ...sample(), group: "tenant-a" });
  assert.notEqual(grouped.route.key, plain.route.key);
  assert.equal(td.decode(grouped.body), td.decode(plain.body).slice(0, -1) + ',"prompt_cache_key":"tenant-a"}');
  assert.equal(routingKey(plain.body, { mode: "chat", group: "tenant-a" }).key, grouped.route.key);
});

test("spec errors", () => {
  const cases: [Partial<PromptSpec>, string][] = [
    [{ model: "" }, "model"],
    [{ question: "" }, "question"],
    [{ parameters: { messages: [] } }, "parameters.messages"],
    [{ tools: [[1]] }, "tools[0]"],
    [{ documents: [{ id: "", text: "x" }] }, "documents[0].id"],
    [{ history: [{ role: "", content: "x" }] }, "history[0].role"],
    [{ group: "g".repeat(65) }, "group"],
    [{ group: "a\tb" }, "group"],
    [{ question: "\ud800" }, "question"],
  ];
  for (const [change, field] of cases) {
    assert.throws(() => build({ ...sample(), ...change }), (e: unknown) => e instanceof SpecError && e.field === field, field);
  }
});

test("chatInput carries what build renders", () => {
  const ci = chatInput({ ...sample(), group: "g" });
  assert.equal(ci.group, "g");
  assert.deepEqual(ci.messages.map((m) => m.role), ["system", "user", "assistant", "user"]);
  assert.equal(ci.tools[0]?.parametersJson, '{"type":"object"}');
  assert.equal(ci.extraJson, '{"max_tokens":4,"metadata":{"request_id":"r-1","ts":"2026-05-01T10:00:00Z"},"prompt_cache_key":"g","temperature":0}');
});

test("chatInput quotes names as the other SDKs do", () => {
  const cases: [PromptSpec["tools"], string][] = [
    [[{ type: "function", function: { name: "f" }, "x\u2028": 1 }], 'prompt spec: tools[0]: member "x\\u2028" cannot be sent through ChatInput'],
    [[{ type: "function", function: { name: "f", "é😀": 1 } }], 'prompt spec: tools[0]: function member "\\u00e9\\U0001f600" cannot be sent through ChatInput'],
  ];
  for (const [tools, want] of cases) {
    assert.throws(() => chatInput({ ...sample(), tools }), (e: unknown) => e instanceof SpecError && e.message === want, want);
  }
});

test("JS values encode canonically", () => {
  const o = Object.assign(Object.create(null) as object, { b: [1, 2.5, 1e21, true, null, new JSONNumber("1.0"), 12345678901234567890n], a: "é\n", "\ue000": 1, "😀": 2 });
  assert.equal(encode(o as never), '{"a":"é\\n","b":[1,2.5,1e+21,true,null,1,12345678901234567890],"😀":2,"\ue000":1}');
  assert.equal(encode(-0), "0");
  assert.throws(() => encode(NaN));
});

test("errors and options", () => {
  assert.throws(() => canonicalize('{"a":1,"a":2}'), (e: unknown) => e instanceof CanonicalError && e.message === 'offset 7: duplicate member name "a"');
  assert.throws(() => canonicalize("[\"\ud800\"]"), CanonicalError);
  assert.throws(() => routingKey("{}", { prefixLength: 10 }), OptionError);
  assert.throws(() => routingKey("{}", { group: "tab\there" }), OptionError);
  const once = canonicalize('{ "z": [1.50, "\\u0041"], "a": {} }');
  assert.equal(td.decode(canonicalize(once)), '{"a":{},"z":[1.5,"A"]}');
});

test("responses and messages: stable parts first, key of the shared prefix kept, own reserved members", () => {
  const td = new TextDecoder();
  for (const [mode, system, turns, reserved] of [
    [Mode.Responses, "instructions", "input", "input"],
    [Mode.Messages, "system", "messages", "system"],
  ] as const) {
    const spec = { ...sample(), tools: [] };
    const { body, route } = buildKeyAs(spec, mode);
    const text = td.decode(body);
    assert.ok(text.startsWith(`{"model":"vllmsim/tiny","${system}":"Answer from`), text);
    assert.ok(text.includes(`"${turns}":[{"content":"Hello","role":"user"}`), text);
    assert.ok(text.indexOf('"metadata"') > text.indexOf('"What grew?"'), text);
    assert.equal(td.decode(buildAs(spec, mode === Mode.Responses ? "responses" : "messages")), text);
    assert.equal(td.decode(mode === Mode.Responses ? buildResponses(spec) : buildMessages(spec)), text);
    assert.equal(buildKeyAs({ ...spec, metadata: { request_id: "r-2" }, question: "Else?" }, mode).route.key, route.key);
    assert.throws(
      () => buildAs({ ...spec, parameters: { [reserved]: "x" } }, mode),
      (e: unknown) => e instanceof SpecError && e.field === `parameters.${reserved}`,
    );
    build({ ...spec, parameters: { [reserved]: "x" } }); // chat does not set it
  }
  assert.throws(() => buildAs(sample(), Mode.Pooling), (e: unknown) => e instanceof SpecError && e.message.includes("pooling"));
});
