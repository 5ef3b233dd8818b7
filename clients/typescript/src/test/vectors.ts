import { readFileSync } from "node:fs";

export interface ExpectedError {
  offset: number;
  code: string;
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
