#!/usr/bin/env node
// prefixgate-ts canonicalize|key|build: reads standard input, writes one result
// and a newline. Exit status 0 ok, 1 invalid input ("offset N: reason" on
// standard error), 2 usage error.

import { buildJSON } from "./builder.js";
import { Mode, canonicalize, parseMode } from "./canonical.js";
import { CanonicalError, OptionError, SpecError } from "./errors.js";
import { checkOptions, routingKey } from "./key.js";

const USAGE = `usage: prefixgate-ts COMMAND [flags] < input

commands:
  canonicalize [--mode M]                          canonical form of a request body
  key [--mode M] [--group G] [--prefix-length N]   routing key, 16 hex digits
  build [--mode M]                                 request built from a prompt spec, canonical:
                                                   chat (default), responses or messages

modes: auto (default), chat, completion, native, responses, messages, pooling
`;

async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return new Uint8Array(Buffer.concat(chunks));
}

function usage(msg: string): number {
  process.stderr.write(`prefixgate-ts: ${msg}\n${USAGE}`);
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === "-h" || cmd === "--help" || cmd === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const allowed: Record<string, string[]> = {
    canonicalize: ["--mode"],
    key: ["--mode", "--group", "--prefix-length"],
    build: ["--mode"],
  };
  if (cmd === undefined || !(cmd in allowed)) return usage(cmd === undefined ? "missing command" : `unknown command "${cmd}"`);
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i++) {
    let name = rest[i]!;
    let value: string | undefined;
    const eq = name.indexOf("=");
    if (eq > 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    if (name.startsWith("--") === false && name.startsWith("-")) name = "-" + name;
    if (!allowed[cmd]!.includes(name)) return usage(`${cmd}: unknown argument "${rest[i]}"`);
    if (value === undefined) {
      value = rest[++i];
      if (value === undefined) return usage(`${cmd}: ${name} needs a value`);
    }
    flags.set(name, value);
  }
  let mode;
  let prefixLength = 0;
  const group = flags.get("--group") ?? "";
  try {
    mode = parseMode(flags.get("--mode") ?? (cmd === "build" ? "chat" : "auto"));
    if (cmd === "build" && mode !== Mode.Chat && mode !== Mode.Responses && mode !== Mode.Messages) {
      throw new OptionError("invalid-mode", `--mode ${flags.get("--mode")}: a prompt spec builds chat, responses or messages requests`);
    }
    const pl = flags.get("--prefix-length");
    if (pl !== undefined) {
      if (!/^\d+$/.test(pl)) return usage(`${cmd}: invalid --prefix-length "${pl}"`);
      prefixLength = Number(pl);
    }
    if (cmd === "key") checkOptions(group, prefixLength);
  } catch (e) {
    if (e instanceof OptionError) {
      process.stderr.write(`prefixgate-ts ${cmd}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const input = await readStdin();
  let out: Uint8Array;
  try {
    if (cmd === "canonicalize") out = canonicalize(input, mode);
    else if (cmd === "key") out = new TextEncoder().encode(routingKey(input, { mode, group, prefixLength }).keyHex);
    else out = buildJSON(input, mode);
  } catch (e) {
    if (e instanceof CanonicalError || e instanceof SpecError || e instanceof OptionError) {
      process.stderr.write(`${e.message}\n`);
      return 1;
    }
    throw e;
  }
  process.stdout.write(Buffer.concat([out, Buffer.from("\n")]));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`prefixgate-ts: ${String(e)}\n`);
    process.exitCode = 1;
  },
);
