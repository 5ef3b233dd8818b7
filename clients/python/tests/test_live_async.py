"""AsyncClient against a live router: set PREFIXGATE_URL (``make test-sdk``
does). Without it these tests skip. Same calls as test_live.py, on asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import AsyncIterator

import pytest
from connectrpc.code import Code
from connectrpc.protocol import ProtocolType
from live_data import COMPLETION, LINT_CORPUS, NATIVE_BODY, SPEC, SYSTEM_WITH_TIME

from prefixgate import (
    AsyncClient,
    Mode,
    RPCError,
    build_completion_key,
    build_key,
    canonicalize,
    routing_key,
)
from prefixgate.gen.prefixgate.v1.normalize_pb import Severity

URL = os.environ.get("PREFIXGATE_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="PREFIXGATE_URL is not set; run `make test-sdk` to test against a live router"
)


@pytest.fixture
async def client() -> AsyncIterator[AsyncClient]:
    async with AsyncClient(URL, timeout_ms=30000) as c:
        yield c


async def test_chat_and_stream(client: AsyncClient) -> None:
    _, ri = build_key(SPEC)
    res = await client.chat(SPEC)
    assert res.content and res.routing is not None and res.routing.key == ri.key_hex
    chunks = [c async for c in client.chat_stream(SPEC)]
    assert chunks[0].routing is not None and chunks[0].routing.key == ri.key_hex
    assert "".join(c.delta for c in chunks)


async def test_concurrent_chats_share_a_key(client: AsyncClient) -> None:
    _, ri = build_key(SPEC)
    specs = [dataclasses.replace(SPEC, metadata={"request_id": f"py-async-{i}"}) for i in range(6)]
    results = await asyncio.gather(*(client.chat(s) for s in specs))
    assert {r.routing.key for r in results if r.routing} == {ri.key_hex}


async def test_complete_and_stream() -> None:
    _, ri = build_completion_key(COMPLETION)
    async with AsyncClient(URL, protocol=ProtocolType.GRPC, timeout_ms=30000) as c:
        res = await c.complete(COMPLETION)
        assert res.text and res.routing is not None and res.routing.key == ri.key_hex
        text, first = "", None
        async for chunk in c.complete_stream(COMPLETION):
            first = first or chunk
            text += chunk.delta
        assert first is not None and first.routing is not None
        assert first.routing.key == ri.key_hex
        assert text == res.text


async def test_stream_stops_early(client: AsyncClient) -> None:
    # Leaving the loop early closes the stream; the client stays usable.
    async for chunk in client.complete_stream(COMPLETION):
        assert chunk.routing is not None
        break
    assert (await client.list_backends()).backends


async def test_unknown_model_is_not_found(client: AsyncClient) -> None:
    for _ in range(200):
        backends = (await client.list_backends()).backends
        if backends and all(b.models for b in backends):
            break
        await asyncio.sleep(0.05)
    with pytest.raises(RPCError) as ei:
        await client.complete(dataclasses.replace(COMPLETION, model="no-such-model"))
    assert ei.value.code == Code.NOT_FOUND and not ei.value.retryable
    with pytest.raises(RPCError) as ei:
        async for _ in client.complete_stream(
            dataclasses.replace(COMPLETION, model="no-such-model")
        ):
            pass
    assert ei.value.code == Code.NOT_FOUND


async def test_invoke_native(client: AsyncClient) -> None:
    ri = routing_key(NATIVE_BODY, mode="native")
    res = await client.invoke(NATIVE_BODY)
    assert json.loads(res.body)["generated_text"]
    assert res.routing is not None and res.routing.key == ri.key_hex


async def test_normalize_and_lint(client: AsyncClient) -> None:
    body = b'{ "model":"m", "prompt":"p", "temperature":1.0 }'
    res = await client.normalize(body, mode=Mode.COMPLETION)
    assert res.canonical_body == canonicalize(body, "completion")
    lint = await client.lint(LINT_CORPUS, prefix_length=1024)
    ts = next(f for f in lint.findings if f.rule_id == "volatile-timestamp")
    assert ts.request_index == 0 and ts.offset == SYSTEM_WITH_TIME.index("2026")
    assert ts.severity == Severity.WARNING
    assert lint.summary is not None and lint.summary.requests == 2
    with pytest.raises(RPCError) as ei:
        await client.normalize(b'{"a":1,}')
    assert ei.value.code == Code.INVALID_ARGUMENT and "offset 7" in ei.value.message


async def test_list_backends_and_explain(client: AsyncClient) -> None:
    names = {b.name for b in (await client.list_backends()).backends}
    body, ri = build_key(SPEC)
    ex = await client.explain(body)
    assert ex.routing is not None and ex.routing.key == ri.key_hex
    assert ex.routing.backend in names and ex.home in names
