"""Calls to a live router: set PREFIXGATE_URL (``make test-sdk`` does, through
internal/testfleet). Without it these tests skip."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest
from connectrpc.code import Code
from connectrpc.protocol import ProtocolType
from live_data import COMPLETION, LINT_CORPUS, NATIVE_BODY, SPEC, SYSTEM_WITH_TIME

from prefixgate import (
    Client,
    Mode,
    RPCError,
    build_completion_key,
    build_key,
    canonicalize,
    routing_key,
)
from prefixgate.gen.prefixgate.v1.admin_pb import Health
from prefixgate.gen.prefixgate.v1.normalize_pb import Severity
from prefixgate.gen.prefixgate.v1.routing_pb import Decision, RequestMode

URL = os.environ.get("PREFIXGATE_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="PREFIXGATE_URL is not set; run `make test-sdk` to test against a live router"
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


def wait_models(client: Client) -> None:
    """Wait until every backend has answered the router's model probe;
    before that the router sends any model anywhere."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        backends = client.list_backends().backends
        if backends and all(b.models for b in backends):
            return
        time.sleep(0.05)
    pytest.fail("backends never reported their models")


def test_complete(client: Client) -> None:
    _, ri = build_completion_key(COMPLETION)
    res = client.complete(COMPLETION)
    assert res.text and res.usage is not None and res.usage.completion_tokens > 0
    assert res.routing is not None and res.routing.backend
    assert res.routing.key == ri.key_hex
    chunks = list(client.complete_stream(COMPLETION))
    assert chunks[0].routing is not None and chunks[0].routing.key == ri.key_hex
    assert all(c.routing is None for c in chunks[1:])
    assert "".join(c.delta for c in chunks) == res.text
    assert any(c.usage is not None for c in chunks)


def test_unknown_model_is_not_found(client: Client) -> None:
    wait_models(client)
    with pytest.raises(RPCError) as ei:
        client.complete(dataclasses.replace(COMPLETION, model="no-such-model"))
    assert ei.value.code == Code.NOT_FOUND and not ei.value.retryable
    with pytest.raises(RPCError) as ei:
        list(client.chat_stream(dataclasses.replace(SPEC, model="no-such-model")))
    assert ei.value.code == Code.NOT_FOUND


def test_invoke_native() -> None:
    ri = routing_key(NATIVE_BODY, mode="native", group="sdk-python")
    with Client(URL, protocol=ProtocolType.GRPC_WEB, timeout_ms=30000) as c:
        res = c.invoke(NATIVE_BODY, group="sdk-python")
        out = json.loads(res.body)
        assert out["generated_text"] and out["details"]["generated_tokens"] == 3
        assert res.routing is not None and res.routing.key == ri.key_hex
        with pytest.raises(RPCError) as ei:
            c.invoke(b'{"inputs":')
        assert ei.value.code == Code.INVALID_ARGUMENT


def test_invoke_paths(client: Client) -> None:
    body = json.dumps(
        {
            "model": SPEC.model,
            "max_tokens": 3,
            "system": "You are terse.",
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    res = client.invoke(body, path="/v1/messages")
    assert json.loads(res.body)["type"] == "message"
    assert res.routing is not None and res.routing.backend
    first = client.invoke(
        json.dumps({"model": SPEC.model, "input": "hi", "max_output_tokens": 3}),
        path="/v1/responses",
    )
    assert first.routing is not None
    prev = json.loads(first.body)["id"]
    follow = client.invoke(
        json.dumps(
            {
                "model": SPEC.model,
                "input": "more",
                "max_output_tokens": 3,
                "previous_response_id": prev,
            }
        ),
        path="/v1/responses",
    )
    assert follow.routing is not None and follow.routing.backend == first.routing.backend
    with pytest.raises(RPCError) as ei:
        client.invoke(body, path="/v1/nope")
    assert ei.value.code == Code.INVALID_ARGUMENT and "/v1/messages" in str(ei.value)


def test_lint(client: Client) -> None:
    res = client.lint(LINT_CORPUS, prefix_length=1024, replicas=3)
    ts = [f for f in res.findings if f.rule_id == "volatile-timestamp"]
    assert ts, res.findings
    assert ts[0].request_index == 0 and ts[0].json_path == "messages[0].content"
    assert ts[0].offset == SYSTEM_WITH_TIME.index("2026")
    assert ts[0].severity == Severity.WARNING and ts[0].hint
    bad = [f for f in res.findings if f.rule_id == "invalid-json"]
    assert bad and bad[0].request_index == 1 and bad[0].severity == Severity.ERROR
    assert res.summary is not None
    assert res.summary.requests == 2 and res.summary.warnings >= 1 and res.summary.errors >= 1
    with pytest.raises(RPCError) as ei:
        client.lint([b"{}"], prefix_length=10)
    assert ei.value.code == Code.INVALID_ARGUMENT


def test_list_backends_and_explain(client: Client) -> None:
    lb = client.list_backends()
    names = {b.name for b in lb.backends}
    assert names and lb.policy
    assert all(b.health == Health.HEALTHY and b.address for b in lb.backends)
    body, ri = build_key(SPEC)
    ex = client.explain(body, mode=Mode.CHAT)
    assert ex.routing is not None and ex.routing.key == ri.key_hex
    assert ex.routing.backend in names and ex.home in names
    assert ex.mode == RequestMode.CHAT and ex.reason
    res = client.chat(SPEC)
    assert res.routing is not None
    if res.routing.decision == Decision.AFFINITY:
        assert res.routing.backend == ex.home


def test_flow_options_reach_the_router(client: Client) -> None:
    # A fairness id is taken on unary and streamed calls, over gRPC too.
    res = client.chat(SPEC, fairness_id="sdk-python-tenant")
    assert res.content
    assert list(client.chat_stream(SPEC, fairness_id="sdk-python-tenant"))
    with Client(URL, protocol=ProtocolType.GRPC, timeout_ms=30000) as g:
        assert g.chat(SPEC, fairness_id="sdk-python-tenant").content


def test_undefined_objective_is_invalid_argument(client: Client) -> None:
    # The router's configuration defines no objectives: it names the header.
    with pytest.raises(RPCError) as ei:
        client.chat(SPEC, objective="sdk-undefined-objective")
    assert ei.value.code == Code.INVALID_ARGUMENT
    assert "x-llm-d-inference-objective" in ei.value.message.lower()
    assert "sdk-undefined-objective" in ei.value.message
