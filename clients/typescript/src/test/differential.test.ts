// A differential fuzz against the Go reference. `go run
// ./clients/conformance/fuzzgen` generates documents from a seed (every
// schema, random whitespace, escapes and number spellings, the edges of the
// rules, some damaged byte by byte) with the Go reference's verdict,
// canonical bytes, error code, offset and message, and keys; this SDK must give the
// same for every one. The Python suite checks the same documents, so the
// three encoders are compared on each. PREFIXGATE_FUZZ_SEED and
// PREFIXGATE_FUZZ_N choose other documents (defaults: seed 1, 2000).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Vector, VectorFile, checkVector } from "./vectors.js";

// dist/test/*.js -> the repository root
const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const SEED = Number(process.env["PREFIXGATE_FUZZ_SEED"] ?? "1");
const N = Number(process.env["PREFIXGATE_FUZZ_N"] ?? "2000");

function hasGo(): boolean {
  try {
    execFileSync("go", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

test("generated documents agree with Go", { skip: hasGo() ? false : "needs the go command to generate documents with the Go reference" }, () => {
  const out = execFileSync("go", ["run", "./clients/conformance/fuzzgen", "-seed", String(SEED), "-n", String(N)], {
    cwd: ROOT,
    maxBuffer: 1 << 30,
    timeout: 600_000,
  });
  const vectors: Vector[] = (JSON.parse(out.toString("utf8")) as VectorFile).vectors;
  assert.equal(vectors.length, N);
  const failures: string[] = [];
  for (const v of vectors) {
    try {
      checkVector(v);
    } catch (e) {
      const shown = (v.input_base64 ?? v.input ?? "").slice(0, 300);
      failures.push(`${v.name} (mode ${v.mode}): ${(e as Error).message}\n  input: ${JSON.stringify(shown)}`);
    }
  }
  assert.equal(failures.length, 0, `${failures.length} of ${vectors.length} generated documents disagree with Go (seed ${SEED}):\n${failures.slice(0, 5).join("\n")}`);
});
