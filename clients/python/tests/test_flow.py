"""Flow call options: the headers each call sends (to a local HTTP server
that records them) and the values refused before anything is sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from connectrpc.protocol import ProtocolType

from prefixgate import (
    FAIRNESS_ID_HEADER,
    OBJECTIVE_HEADER,
    AsyncClient,
    Client,
    CompletionSpec,
    OptionError,
    PromptSpec,
    RPCError,
    flow_headers,
)

SPEC = PromptSpec(model="m", question="q")
SEEN: list[dict[str, str]] = []


class _Recorder(BaseHTTPRequestHandler):
    """Records each call's headers and answers it with a Connect error."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        SEEN.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps({"code": "unavailable", "message": "recorded"}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _last_flow() -> tuple[str | None, str | None]:
    h = SEEN[-1]
    return h.get(FAIRNESS_ID_HEADER), h.get(OBJECTIVE_HEADER)


def test_sync_calls_send_flow_headers(url: str) -> None:
    with Client(url, timeout_ms=5000) as c:
        calls = [
            lambda **kw: c.chat(SPEC, **kw),
            lambda **kw: list(c.chat_stream(SPEC, **kw)),
            lambda **kw: c.complete(CompletionSpec(model="m", prompt="p"), **kw),
            lambda **kw: c.invoke(b'{"inputs":"x"}', **kw),
            lambda **kw: c.explain(b'{"inputs":"x"}', **kw),
        ]
        for call in calls:
            with pytest.raises(RPCError):
                call(fairness_id="tenant-a", objective="interactive")
            assert _last_flow() == ("tenant-a", "interactive")
            with pytest.raises(RPCError):
                call()
            assert _last_flow() == (None, None)


async def test_async_calls_send_flow_headers(url: str) -> None:
    async with AsyncClient(url, timeout_ms=5000) as c:
        with pytest.raises(RPCError):
            await c.chat(SPEC, fairness_id="tenant-b", objective="batch")
        assert _last_flow() == ("tenant-b", "batch")
        with pytest.raises(RPCError):
            async for _ in c.complete_stream(
                CompletionSpec(model="m", prompt="p"), objective="x.y"
            ):
                pass
        assert _last_flow() == (None, "x.y")


@pytest.mark.parametrize(
    ("kw", "code", "message"),
    [
        ({"fairness_id": ""}, "invalid-fairness-id", "call option fairness id: is empty"),
        (
            {"fairness_id": "a" * 129},
            "invalid-fairness-id",
            "call option fairness id: is 129 bytes, over 128",
        ),
        (
            {"fairness_id": "a\nb"},
            "invalid-fairness-id",
            "call option fairness id: has a non-printable byte 0x0a at 1",
        ),
        (
            {"fairness_id": "tenant "},
            "invalid-fairness-id",
            "call option fairness id: starts or ends with a space",
        ),
        ({"objective": ""}, "invalid-objective", "call option objective: is empty"),
        (
            {"objective": "caf\u00e9"},
            "invalid-objective",
            "call option objective: byte 0xc3 at 3 is not a letter, digit, '-', '_' or '.'",
        ),
        (
            {"objective": "big batch"},
            "invalid-objective",
            "call option objective: byte 0x20 at 3 is not a letter, digit, '-', '_' or '.'",
        ),
    ],
)
def test_bad_flow_values_refused_before_sending(
    url: str, kw: dict[str, str], code: str, message: str
) -> None:
    before = len(SEEN)
    with Client(url, timeout_ms=5000, protocol=ProtocolType.GRPC) as c:
        with pytest.raises(OptionError) as ei:
            c.chat(SPEC, **kw)  # type: ignore[arg-type]
        assert (ei.value.code, str(ei.value)) == (code, message)
        with pytest.raises(OptionError):
            c.invoke(b"{}", **kw)  # type: ignore[arg-type]
    with pytest.raises(OptionError):
        flow_headers(**kw)
    assert len(SEEN) == before


def test_flow_headers_for_rest() -> None:
    assert flow_headers("tenant-a") == {FAIRNESS_ID_HEADER: "tenant-a"}
    assert flow_headers(objective="interactive") == {OBJECTIVE_HEADER: "interactive"}
    assert flow_headers() == {}
    longest = flow_headers("t " + "x" * 126, "Batch-1_v2." + "o" * 117)
    assert len(longest[FAIRNESS_ID_HEADER]) == 128 and len(longest[OBJECTIVE_HEADER]) == 128
