from __future__ import annotations

import subprocess
import sys

import pytest


def run(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "prefixgate", *args], input=stdin, capture_output=True, check=False
    )


@pytest.mark.parametrize(
    ("args", "stdin", "code", "out", "err"),
    [
        (
            ["canonicalize"],
            b'{ "b":1.0, "a":"\\u00e9" }',
            0,
            '{"a":"\u00e9","b":1}\n'.encode(),
            b"",
        ),
        (
            ["canonicalize", "--mode", "chat"],
            b'{"user":"u","messages":[],"model":"m"}',
            0,
            b'{"model":"m","messages":[],"user":"u"}\n',
            b"",
        ),
        (
            ["build"],
            b'{"model":"m","question":"q"}',
            0,
            b'{"model":"m","messages":[{"content":"q","role":"user"}]}\n',
            b"",
        ),
        (["canonicalize"], b'{"a":1,"a":2}', 1, b"", b'offset 7: duplicate member name "a"\n'),
        (
            ["key", "--mode", "chat"],
            b"{}",
            1,
            b"",
            b"offset 0: a chat request needs a messages array\n",
        ),
        (["build"], b'{"model":"m"}', 1, b"", b"prompt spec: question: is required\n"),
        (
            ["build", "--mode", "responses"],
            b'{"model":"m","instructions":"s","question":"q"}',
            0,
            b'{"model":"m","instructions":"s","input":[{"content":"q","role":"user"}]}\n',
            b"",
        ),
        (
            ["build", "--mode", "messages"],
            b'{"model":"m","instructions":"s","question":"q"}',
            0,
            b'{"model":"m","system":"s","messages":[{"content":"q","role":"user"}]}\n',
            b"",
        ),
        (["build", "--mode", "pooling"], b'{"model":"m","question":"q"}', 2, b"", None),
        (["key", "--prefix-length", "5"], b"{}", 2, b"", None),
        (["canonicalize", "--mode", "x"], b"{}", 2, b"", None),
        (["frobnicate"], b"", 2, b"", None),
    ],
)
def test_cli(args: list[str], stdin: bytes, code: int, out: bytes, err: bytes | None) -> None:
    p = run(args, stdin)
    assert p.returncode == code, p.stderr
    assert p.stdout == out
    if err is not None:
        assert p.stderr == err


def test_cli_key() -> None:
    p = run(["key", "--group", "g", "--prefix-length", "2048"], b'{"model":"m","prompt":"hello"}')
    assert p.returncode == 0
    assert len(p.stdout.strip()) == 16
