// Flow call options. Every request the router queues belongs to a flow: a
// fairness id (whose share of the fleet it counts against) and an objective
// (a name the router's flow_control.objectives maps to a priority; negative
// is sheddable). The clients' inference calls and explain take them in their
// call options (fairnessId, objective) and send them as the headers below,
// on Connect, gRPC and gRPC-Web alike; flowHeaders gives the same headers for
// a REST call. A bad value throws OptionError before anything is sent.

import type { CallOptions } from "@connectrpc/connect";

import { OptionError } from "./errors.js";

export const FAIRNESS_ID_HEADER = "x-llm-d-inference-fairness-id";
export const OBJECTIVE_HEADER = "x-llm-d-inference-objective";
export const MAX_FLOW_VALUE_BYTES = 128;

/** connect's CallOptions plus the call's flow. */
export interface FlowCallOptions extends CallOptions {
  /** 1 to 128 bytes of printable ASCII, no space at either end. */
  fairnessId?: string;
  /** 1 to 128 bytes of ASCII letters, digits, '-', '_' and '.'. */
  objective?: string;
}

function utf8(what: string, code: string, v: string): Uint8Array {
  if (typeof v !== "string") throw new OptionError(code, `call option ${what}: is a ${typeof v}, not a string`);
  const b = new TextEncoder().encode(v);
  if (b.length === 0) throw new OptionError(code, `call option ${what}: is empty`);
  if (b.length > MAX_FLOW_VALUE_BYTES) {
    throw new OptionError(code, `call option ${what}: is ${b.length} bytes, over ${MAX_FLOW_VALUE_BYTES}`);
  }
  return b;
}

const hex = (c: number): string => "0x" + c.toString(16).padStart(2, "0");

/** Throws OptionError unless id is a valid fairness id (the router's rule for the header). */
export function checkFairnessId(id: string): void {
  const what = "fairness id";
  const code = "invalid-fairness-id";
  const b = utf8(what, code, id);
  b.forEach((c, i) => {
    if (c < 0x20 || c > 0x7e) throw new OptionError(code, `call option ${what}: has a non-printable byte ${hex(c)} at ${i}`);
  });
  if (b[0] === 0x20 || b[b.length - 1] === 0x20) {
    throw new OptionError(code, `call option ${what}: starts or ends with a space`);
  }
}

function objectiveByte(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f || c === 0x2e
  );
}

/** Throws OptionError unless name is a valid objective name (the rule of flow_control.objectives). */
export function checkObjective(name: string): void {
  const what = "objective";
  const code = "invalid-objective";
  const b = utf8(what, code, name);
  b.forEach((c, i) => {
    if (!objectiveByte(c)) {
      throw new OptionError(code, `call option ${what}: byte ${hex(c)} at ${i} is not a letter, digit, '-', '_' or '.'`);
    }
  });
}

/** The headers that carry a fairness id and an objective (undefined leaves that header out). */
export function flowHeaders(fairnessId?: string, objective?: string): Record<string, string> {
  const h: Record<string, string> = {};
  if (fairnessId !== undefined) {
    checkFairnessId(fairnessId);
    h[FAIRNESS_ID_HEADER] = fairnessId;
  }
  if (objective !== undefined) {
    checkObjective(objective);
    h[OBJECTIVE_HEADER] = objective;
  }
  return h;
}

/** connect's CallOptions for options: the flow moved into its headers. */
export function withFlow(options?: FlowCallOptions): CallOptions | undefined {
  if (options === undefined) return undefined;
  const { fairnessId, objective, ...rest } = options;
  if (fairnessId === undefined && objective === undefined) return rest;
  const headers = new Headers(rest.headers);
  for (const [k, v] of Object.entries(flowHeaders(fairnessId, objective))) headers.set(k, v);
  return { ...rest, headers };
}
