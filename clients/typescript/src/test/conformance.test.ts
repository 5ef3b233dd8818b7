import assert from "node:assert/strict";
import { test } from "node:test";

import { CanonicalError, Mode, buildJSON, canonicalize, canonicalizeFull, formatKey, parseMode, routeKeyOf, routingKey, xxh3 } from "../index.js";
import { VECTORS, inputOf } from "./vectors.js";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

test("at least 60 vectors", () => {
  assert.ok(VECTORS.vectors.length >= 60, `${VECTORS.vectors.length} vectors`);
});

for (const v of VECTORS.vectors) {
  test(`vector ${v.name}`, () => {
    const data = inputOf(v);
    const mode = parseMode(v.mode);
    const group = v.group ?? "";
    const prefixLength = v.prefix_length ?? 0;
    let got: Uint8Array;
    try {
      got = v.kind === "build" ? buildJSON(data) : canonicalize(data, mode);
    } catch (e) {
      if (!(e instanceof CanonicalError)) throw e;
      assert.ok(v.error, `unexpected error ${e.message}`);
      assert.deepEqual({ offset: e.offset, code: e.code }, v.error, e.message);
      assert.ok(e.message.startsWith(`offset ${e.offset}: `));
      return;
    }
    assert.equal(v.error, undefined, `accepted, want ${JSON.stringify(v.error)}`);
    // Compare bytes, so one differing byte fails with its position.
    assert.equal(hex(got), hex(new TextEncoder().encode(v.canonical)));
    let ri;
    try {
      ri = v.kind === "build" ? routeKeyOf(canonicalizeFull(got, Mode.Chat), group, prefixLength) : routingKey(data, { mode, group, prefixLength });
    } catch (e) {
      if (!(e instanceof CanonicalError)) throw e;
      assert.ok(v.key_error, `unexpected key error ${e.message}`);
      assert.deepEqual({ offset: e.offset, code: e.code }, v.key_error, e.message);
      return;
    }
    assert.equal(v.key_error, undefined);
    assert.equal(ri.keyHex, v.key);
    assert.deepEqual(ri.spillKeys.map(formatKey), v.spill_keys ?? []);
    assert.equal(["auto", "chat", "completion", "native"][ri.mode], v.key_mode);
    assert.equal(ri.routingTextLength, v.routing_text_length ?? 0);
  });
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
