"""The official OpenAI Python SDK, pointed at prefixgate's REST proxy.

These run against the live router that the README's test command starts
(PREFIXGATE_URL); they prove that existing OpenAI clients work unchanged.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
import urllib.request

import openai
import pytest

BASE = os.environ.get("PREFIXGATE_URL", "")
pytestmark = pytest.mark.skipif(
    not BASE, reason="PREFIXGATE_URL is not set: run through `make test`"
)

MODEL = "vllmsim/tiny"


def client() -> openai.OpenAI:
    return openai.OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0)


def test_chat_plain_reports_route() -> None:
    raw = client().chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You answer from the handbook. " * 40},
            {"role": "user", "content": "What is the refund window?"},
        ],
        max_tokens=4,
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert len(raw.headers["x-prefixgate-key"]) == 16
    assert raw.headers["x-prefixgate-decision"] in {"affinity", "spill", "spill-chain"}
    assert raw.headers["x-prefixgate-backend"]


def test_chat_streaming_with_usage() -> None:
    stream = client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Stream three words."}],
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    usage = None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    assert text
    assert usage is not None and usage.completion_tokens > 0


def test_same_document_different_questions_share_a_key() -> None:
    doc = "Section 1. Refunds are granted within 30 days of delivery. " * 30
    keys = set()
    for question in ("How long do refunds take?", "Who pays for return shipping?"):
        raw = client().chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "system", "content": doc}, {"role": "user", "content": question}],
            max_tokens=2,
        )
        keys.add(raw.headers["x-prefixgate-key"])
    assert len(keys) == 1


def test_bad_group_is_an_openai_error() -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client().chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Prefixgate-Group": "g" * 65},
        )
    assert "64" in str(info.value)


def _answered_404() -> float:
    """prefixgate_requests_total for chat completions answered 404."""
    with urllib.request.urlopen(BASE + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if (
            line.startswith("prefixgate_requests_total{")
            and 'route="chat_completions"' in line
            and 'code="404"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_unknown_model_is_not_found_and_not_retried() -> None:
    # The SDK retries 5xx and 429 on its own (503 "no healthy backend" used
    # to be retried); a 404 it raises at once: the router sees one request.
    before = _answered_404()
    with pytest.raises(openai.NotFoundError) as info:
        openai.OpenAI(
            base_url=BASE + "/v1", api_key="unused", max_retries=2
        ).chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=2,
        )
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"
    assert "vllmsim/tiny" in info.value.message
    assert _answered_404() == before + 1


def test_unknown_path_is_an_openai_error() -> None:
    with pytest.raises(openai.NotFoundError) as info:
        openai.OpenAI(base_url=BASE + "/v2", api_key="unused", max_retries=0).models.list()
    assert info.value.code == "unknown_url"


def test_oversized_body_reads_back_413() -> None:
    # http.client sends the whole body before it reads the answer; the router
    # must keep reading after its 413 so that this client sees it, not a reset.
    url = urllib.parse.urlsplit(BASE)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=b" " * (64 << 20),
            headers={"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413
    assert body["error"]["code"] == "body_too_large"
