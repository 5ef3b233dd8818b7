"""Calls to a live router: set PREFIXGATE_URL (``make test-sdk`` does, through
internal/testfleet). Without it these tests skip."""

from __future__ import annotations

import dataclasses
import os

import pytest
from connectrpc.code import Code
from connectrpc.protocol import ProtocolType

from prefixgate import Client, Document, PromptSpec, RPCError, build_key, canonicalize, routing_key

URL = os.environ.get("PREFIXGATE_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="PREFIXGATE_URL is not set; run `make test-sdk` to test against a live router"
)

SPEC = PromptSpec(
    model="vllmsim/tiny",
    instructions="Answer from the document.",
    documents=[Document(id="q3", title="Report", text="Revenue grew 12%. " * 30)],
    question="What grew?",
    parameters={"max_tokens": 4, "temperature": 0},
    metadata={"request_id": "py-1"},
    group="sdk-python",
)


@pytest.fixture
def client() -> Client:
    return Client(URL, timeout_ms=30000)


def test_chat_unary_key_matches(client: Client) -> None:
    _, ri = build_key(SPEC)
    res = client.chat(SPEC)
    assert res.content
    assert res.routing is not None and res.routing.backend
    assert res.routing.key == ri.key_hex
    # Only metadata changed: the same key, so the same home backend.
    res2 = client.chat(dataclasses.replace(SPEC, metadata={"request_id": "py-2"}))
    assert res2.routing is not None and res2.routing.key == ri.key_hex


def test_chat_stream(client: Client) -> None:
    _, ri = build_key(SPEC)
    chunks = list(client.chat_stream(SPEC))
    assert chunks
    assert chunks[0].routing is not None and chunks[0].routing.key == ri.key_hex
    assert "".join(c.delta for c in chunks)


def test_normalize_matches_local() -> None:
    body = b'{ "messages":[{"role":"system","content":"S"},{"role":"user","content":"q"}], "model":"m" }'
    with Client(URL, protocol=ProtocolType.GRPC) as c:
        res = c.normalize(body)
    assert res.canonical_body == canonicalize(body)
    assert res.key == routing_key(body).key_hex


def test_invalid_json_is_invalid_argument(client: Client) -> None:
    with pytest.raises(RPCError) as ei:
        client.normalize(b'{"a":1,}')
    assert ei.value.code == Code.INVALID_ARGUMENT
    assert "offset 7" in ei.value.message


def test_admin(client: Client) -> None:
    backends = client.list_backends().backends
    assert backends
    ex = client.explain(b'{"model":"vllmsim/tiny","messages":[{"role":"user","content":"q"}]}')
    assert ex.routing is not None and ex.routing.backend in {b.name for b in backends}
