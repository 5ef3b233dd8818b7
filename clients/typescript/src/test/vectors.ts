import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { CanonicalError, Mode, buildJSON, canonicalize, canonicalizeFull, formatKey, modeName, parseMode, routeKeyOf, routingKey } from "../index.js";

export interface ExpectedError {
  offset: number;
  code: string;
  message: string;
}

export interface Vector {
  name: string;
  kind: "canonicalize" | "build";
  mode: string;
  group?: string;
  prefix_length?: number;
  input?: string;
  input_base64?: string;
  error?: ExpectedError;
  canonical?: string;
  key_error?: ExpectedError;
  key?: string;
  spill_keys?: string[];
  key_mode?: string;
  routing_text_length?: number;
}

export interface VectorFile {
  vectors: Vector[];
  xxh3: { length: number; hash: string }[];
}

// dist/test/*.js -> clients/conformance/vectors.json
export const VECTORS: VectorFile = JSON.parse(
  readFileSync(new URL("../../../conformance/vectors.json", import.meta.url), "utf8"),
) as VectorFile;

export function inputOf(v: Vector): Uint8Array {
  if (v.input_base64 !== undefined) return new Uint8Array(Buffer.from(v.input_base64, "base64"));
  return new TextEncoder().encode(v.input ?? "");
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

/**
 * Assert that this SDK gives exactly what the vector expects: the verdict,
 * canonical bytes, error code, offset and message, keys.
 */
export function checkVector(v: Vector): void {
  const data = inputOf(v);
  const mode = parseMode(v.mode);
  const group = v.group ?? "";
  const prefixLength = v.prefix_length ?? 0;
  let got: Uint8Array;
  try {
    got = v.kind === "build" ? buildJSON(data, mode) : canonicalize(data, mode);
  } catch (e) {
    if (!(e instanceof CanonicalError)) throw e;
    assert.ok(v.error, `unexpected error ${e.message}`);
    assert.deepEqual({ offset: e.offset, code: e.code, message: e.reason }, v.error, e.message);
    assert.equal(e.message, `offset ${e.offset}: ${e.reason}`);
    return;
  }
  assert.equal(v.error, undefined, `accepted, want ${JSON.stringify(v.error)}`);
  // Compare bytes, so one differing byte fails with its position.
  assert.equal(hex(got), hex(new TextEncoder().encode(v.canonical)));
  let ri;
  try {
    const built = mode === Mode.Auto ? Mode.Chat : mode;
    ri = v.kind === "build" ? routeKeyOf(canonicalizeFull(got, built), group, prefixLength) : routingKey(data, { mode, group, prefixLength });
  } catch (e) {
    if (!(e instanceof CanonicalError)) throw e;
    assert.ok(v.key_error, `unexpected key error ${e.message}`);
    assert.deepEqual({ offset: e.offset, code: e.code, message: e.reason }, v.key_error, e.message);
    return;
  }
  assert.equal(v.key_error, undefined);
  assert.equal(ri.keyHex, v.key);
  assert.deepEqual(ri.spillKeys.map(formatKey), v.spill_keys ?? []);
  assert.equal(modeName(ri.mode), v.key_mode);
  assert.equal(ri.routingTextLength, v.routing_text_length ?? 0);
}
