"""The client layer without a router: completion specs, request conversion
and error mapping (against a stub Connect server that answers every call
with one error)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from connectrpc.code import Code

from prefixgate import (
    AsyncClient,
    Client,
    CompletionSpec,
    Number,
    PromptSpec,
    RPCError,
    SpecError,
    build_completion,
    build_completion_key,
    completion_input,
    routing_key,
)

COMPLETION = CompletionSpec(
    model="vllmsim/tiny",
    prompt="Once upon a time",
    parameters={"temperature": Number("1.0"), "max_tokens": 4},
)


def test_build_completion() -> None:
    assert build_completion(COMPLETION) == (
        b'{"model":"vllmsim/tiny","prompt":"Once upon a time","max_tokens":4,"temperature":1}'
    )
    body, ri = build_completion_key(COMPLETION)
    assert ri.key_hex == routing_key(body, mode="completion").key_hex
    grouped = CompletionSpec(**{**COMPLETION.__dict__, "group": "tenant-a"})
    gbody, gri = build_completion_key(grouped)
    assert gbody == body[:-1] + b',"prompt_cache_key":"tenant-a"}'
    assert gri.key_hex != ri.key_hex
    ci = completion_input(grouped)
    assert (ci.model, ci.prompt, ci.group) == ("vllmsim/tiny", "Once upon a time", "tenant-a")
    assert json.loads(ci.extra_json) == {
        "max_tokens": 4,
        "prompt_cache_key": "tenant-a",
        "temperature": 1,
    }


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (CompletionSpec(model="", prompt="p"), "model"),
        (CompletionSpec(model="m", prompt="p", parameters={"prompt": "x"}), "parameters.prompt"),
        (CompletionSpec(model="m", prompt="p", group="a\nb"), "group"),
        (CompletionSpec(model="m", prompt="\ud800"), "prompt"),
    ],
)
def test_completion_spec_errors(spec: CompletionSpec, field: str) -> None:
    with pytest.raises(SpecError) as ei:
        completion_input(spec)
    assert ei.value.field == field


def test_rpc_error_retryable() -> None:
    assert RPCError(Code.RESOURCE_EXHAUSTED, "busy", 2.0).retryable
    assert not RPCError(Code.RESOURCE_EXHAUSTED, "too large").retryable
    assert RPCError(Code.UNAVAILABLE, "no backend").retryable
    assert not RPCError(Code.INVALID_ARGUMENT, "bad").retryable
    assert not RPCError(Code.NOT_FOUND, "model not served").retryable
    assert str(RPCError(Code.UNAVAILABLE, "x")) == "unavailable: x"


class _Busy(BaseHTTPRequestHandler):
    """Answers every Connect unary call as a saturated router does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps({"code": "resource_exhausted", "message": "all saturated"}).encode()
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "3")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def busy_url() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_sync_error_carries_code_and_retry_after(busy_url: str) -> None:
    with Client(busy_url, timeout_ms=5000) as c:
        for call in (
            lambda: c.complete(COMPLETION),
            lambda: c.invoke(b'{"inputs":"x"}'),
            lambda: c.lint([b"{}"]),
            c.list_backends,
        ):
            with pytest.raises(RPCError) as ei:
                call()
            assert ei.value.code == Code.RESOURCE_EXHAUSTED
            assert ei.value.retry_after == 3.0 and ei.value.retryable
            assert ei.value.message == "all saturated"


async def test_async_error_carries_code_and_retry_after(busy_url: str) -> None:
    async with AsyncClient(busy_url, timeout_ms=5000) as c:
        with pytest.raises(RPCError) as ei:
            await c.complete(COMPLETION)
        assert ei.value.code == Code.RESOURCE_EXHAUSTED and ei.value.retry_after == 3.0
        with pytest.raises(RPCError) as ei:
            await c.explain(b'{"inputs":"x"}')
        assert ei.value.retryable


async def test_async_unreachable_is_unavailable() -> None:
    async with AsyncClient("http://127.0.0.1:9", timeout_ms=5000) as c:
        with pytest.raises(RPCError) as ei:
            await c.list_backends()
        assert ei.value.code == Code.UNAVAILABLE
        with pytest.raises(RPCError) as ei:
            async for _ in c.chat_stream(PromptSpec(model="m", question="q")):
                pass
        assert ei.value.code == Code.UNAVAILABLE


async def test_async_spec_error_before_iteration() -> None:
    async with AsyncClient("http://127.0.0.1:9") as c:
        with pytest.raises(SpecError):
            c.chat_stream(PromptSpec(model="", question="q"))
        with pytest.raises(SpecError):
            c.complete_stream(CompletionSpec(model="m", prompt="p", parameters={"model": "x"}))
        with pytest.raises(TypeError):
            await c.lint(b"{}")  # type: ignore[arg-type]
