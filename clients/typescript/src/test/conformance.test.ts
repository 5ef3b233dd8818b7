import assert from "node:assert/strict";
import { test } from "node:test";

import { formatKey, xxh3 } from "../index.js";
import { VECTORS, checkVector } from "./vectors.js";

test("at least 60 vectors", () => {
  assert.ok(VECTORS.vectors.length >= 60, `${VECTORS.vectors.length} vectors`);
});

for (const v of VECTORS.vectors) {
  test(`vector ${v.name}`, () => checkVector(v));
}

for (const h of VECTORS.xxh3) {
  test(`xxh3 length ${h.length}`, () => {
    const data = new Uint8Array(h.length);
    for (let i = 0; i < h.length; i++) data[i] = (i * 7 + h.length) & 0xff;
    assert.equal(formatKey(xxh3(data)), h.hash);
  });
}

test("xxh3 covers every length class", () => {
  const lengths = new Set(VECTORS.xxh3.map((h) => h.length));
  for (const [lo, hi] of [[0, 0], [1, 3], [4, 8], [9, 16], [17, 128], [129, 240], [241, 1 << 20]] as const) {
    assert.ok([...lengths].some((n) => n >= lo && n <= hi), `no vector in ${lo}..${hi}`);
  }
});
