"""Command line: ``prefixgate-py canonicalize|key|build < input`` (or ``python -m prefixgate``).

Reads standard input and writes one result and a newline: the canonical
bytes, the routing key (16 hex digits) or the built request in canonical
form. Exit status 0 ok, 1 invalid input (``offset N: reason`` on standard
error), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from .builder import build_json
from .canonical import Mode, canonicalize
from .errors import OptionError, PrefixgateError
from .key import check_options, routing_key


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: {message}\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="prefixgate-py", description="Canonical JSON, routing keys and prompts.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    c = sub.add_parser("canonicalize", help="canonical form of a request body")
    c.add_argument(
        "--mode",
        default="auto",
        help="auto, chat, completion, native, responses, messages or pooling",
    )
    k = sub.add_parser("key", help="routing key, 16 hex digits")
    k.add_argument(
        "--mode",
        default="auto",
        help="auto, chat, completion, native, responses, messages or pooling",
    )
    k.add_argument("--group", default="", help="group id (default: the body's prompt_cache_key)")
    k.add_argument("--prefix-length", type=int, default=0, help="routing window N, 1024..65536")
    b = sub.add_parser("build", help="request built from a prompt spec, canonical")
    b.add_argument("--mode", default="chat", help="chat, responses or messages")
    args = p.parse_args(argv)
    try:
        mode = Mode.parse(args.mode)
        if args.command == "build" and mode not in (Mode.CHAT, Mode.RESPONSES, Mode.MESSAGES):
            raise OptionError(
                "invalid-mode",
                f"--mode {args.mode}: a prompt spec builds chat, responses or messages requests",
            )
        if args.command == "key":
            check_options(args.group, args.prefix_length)
    except OptionError as e:
        sys.stderr.write(f"prefixgate {args.command}: {e}\n")
        return 2
    data = sys.stdin.buffer.read()
    try:
        if args.command == "canonicalize":
            out = canonicalize(data, mode)
        elif args.command == "key":
            out = routing_key(data, mode, args.group, args.prefix_length).key_hex.encode()
        else:
            out = build_json(data, mode)
    except PrefixgateError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    sys.stdout.buffer.write(out + b"\n")
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
