import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../cli.js", import.meta.url));

function run(args: string[], input: string) {
  const p = spawnSync(process.execPath, [CLI, ...args], { input });
  return { code: p.status, out: p.stdout.toString("utf8"), err: p.stderr.toString("utf8") };
}

const cases: [string[], string, number, string, string | null][] = [
  [["canonicalize"], '{ "b":1.0, "a":"\\u00e9" }', 0, '{"a":"é","b":1}\n', ""],
  [["canonicalize", "--mode", "chat"], '{"user":"u","messages":[],"model":"m"}', 0, '{"model":"m","messages":[],"user":"u"}\n', ""],
  [["build"], '{"model":"m","question":"q"}', 0, '{"model":"m","messages":[{"content":"q","role":"user"}]}\n', ""],
  [["canonicalize"], '{"a":1,"a":2}', 1, "", 'offset 7: duplicate member name "a"\n'],
  [["key", "--mode=chat"], "{}", 1, "", "offset 0: a chat request needs a messages array\n"],
  [["build"], '{"model":"m"}', 1, "", "prompt spec: question: is required\n"],
  [["build", "--mode", "responses"], '{"model":"m","instructions":"s","question":"q"}', 0, '{"model":"m","instructions":"s","input":[{"content":"q","role":"user"}]}\n', ""],
  [["build", "--mode=messages"], '{"model":"m","instructions":"s","question":"q"}', 0, '{"model":"m","system":"s","messages":[{"content":"q","role":"user"}]}\n', ""],
  [["build", "--mode", "pooling"], '{"model":"m","question":"q"}', 2, "", null],
  [["key", "--prefix-length", "5"], "{}", 2, "", null],
  [["canonicalize", "--mode", "x"], "{}", 2, "", null],
  [["frobnicate"], "", 2, "", null],
];

for (const [args, input, code, out, err] of cases) {
  test(`cli ${args.join(" ")}`, () => {
    const p = run(args, input);
    assert.equal(p.code, code, p.err);
    assert.equal(p.out, out);
    if (err !== null) assert.equal(p.err, err);
  });
}

test("cli key", () => {
  const p = run(["key", "--group", "g", "--prefix-length", "2048"], '{"model":"m","prompt":"hello"}');
  assert.equal(p.code, 0);
  assert.match(p.out, /^[0-9a-f]{16}\n$/);
});
