// Flow call options: the headers each call sends (to a local HTTP server that
// records them) and the values refused before anything is sent.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import {
  FAIRNESS_ID_HEADER,
  OBJECTIVE_HEADER,
  OptionError,
  PrefixgateClient,
  PrefixgateWebClient,
  flowHeaders,
  type PromptSpec,
} from "../index.js";

const SPEC: PromptSpec = { model: "m", question: "q" };
const seen: IncomingHttpHeaders[] = [];
let url = "";
const recorder = createServer((req, res) => {
  seen.push(req.headers);
  req.resume();
  req.on("end", () => {
    res.writeHead(503, { "content-type": "application/json" });
    res.end(JSON.stringify({ code: "unavailable", message: "recorded" }));
  });
});
before(async () => {
  await new Promise<void>((r) => recorder.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
});
after(() => {
  recorder.close();
});

const lastFlow = (): [unknown, unknown] => [seen.at(-1)![FAIRNESS_ID_HEADER], seen.at(-1)![OBJECTIVE_HEADER]];

test("calls send the flow headers, on Node and fetch transports", async () => {
  for (const c of [new PrefixgateClient(url), new PrefixgateClient(url, { protocol: "grpc-web" }), new PrefixgateWebClient(url)]) {
    const calls = [
      (o?: object) => c.chat(SPEC, o),
      async (o?: object) => {
        for await (const _ of c.chatStream(SPEC, o));
      },
      (o?: object) => c.complete({ model: "m", prompt: "p" }, o),
      (o?: object) => c.invoke('{"inputs":"x"}', {}, o),
      (o?: object) => c.explain('{"inputs":"x"}', {}, o),
    ];
    for (const call of calls) {
      await assert.rejects(call({ fairnessId: "tenant-a", objective: "interactive", headers: { "x-other": "1" } }));
      assert.deepEqual(lastFlow(), ["tenant-a", "interactive"]);
      assert.equal(seen.at(-1)!["x-other"], "1", "the caller's own headers stay");
      await assert.rejects(call());
      assert.deepEqual(lastFlow(), [undefined, undefined]);
    }
  }
});

test("bad flow values are refused before sending", () => {
  const cases: [object, string, string][] = [
    [{ fairnessId: "" }, "invalid-fairness-id", "call option fairness id: is empty"],
    [{ fairnessId: "a".repeat(129) }, "invalid-fairness-id", "call option fairness id: is 129 bytes, over 128"],
    [{ fairnessId: "a\nb" }, "invalid-fairness-id", "call option fairness id: has a non-printable byte 0x0a at 1"],
    [{ fairnessId: "tenant " }, "invalid-fairness-id", "call option fairness id: starts or ends with a space"],
    [{ objective: "" }, "invalid-objective", "call option objective: is empty"],
    [{ objective: "caf\u00e9" }, "invalid-objective", "call option objective: byte 0xc3 at 3 is not a letter, digit, '-', '_' or '.'"],
    [{ objective: "big batch" }, "invalid-objective", "call option objective: byte 0x20 at 3 is not a letter, digit, '-', '_' or '.'"],
  ];
  const before = seen.length;
  const c = new PrefixgateClient(url);
  for (const [opts, code, message] of cases) {
    const isIt = (e: unknown): boolean => e instanceof OptionError && e.code === code && e.message === message;
    assert.throws(() => c.chat(SPEC, opts), isIt, message);
    assert.throws(() => c.chatStream(SPEC, opts), isIt, message);
    assert.throws(() => c.invoke("{}", {}, opts), isIt, message);
  }
  assert.equal(seen.length, before, "a refused option sends nothing");
});

test("flowHeaders for REST", () => {
  assert.deepEqual(flowHeaders("tenant-a"), { [FAIRNESS_ID_HEADER]: "tenant-a" });
  assert.deepEqual(flowHeaders(undefined, "interactive"), { [OBJECTIVE_HEADER]: "interactive" });
  assert.deepEqual(flowHeaders(), {});
  const longest = flowHeaders("t " + "x".repeat(126), "Batch-1_v2." + "o".repeat(117));
  assert.equal(longest[FAIRNESS_ID_HEADER]!.length, 128);
  assert.equal(longest[OBJECTIVE_HEADER]!.length, 128);
});
