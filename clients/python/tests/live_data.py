"""Inputs shared by the sync and async live tests."""

from __future__ import annotations

from prefixgate import CompletionSpec, Document, PromptSpec

MODEL = "vllmsim/tiny"

SPEC = PromptSpec(
    model=MODEL,
    instructions="Answer from the document.",
    documents=[Document(id="q3", title="Report", text="Revenue grew 12%. " * 30)],
    question="What grew?",
    parameters={"max_tokens": 4, "temperature": 0},
    metadata={"request_id": "py-1"},
    group="sdk-python",
)

COMPLETION = CompletionSpec(
    model=MODEL,
    prompt="Once upon a time there was a cache. " * 20,
    parameters={"max_tokens": 4},
    group="sdk-python",
)

NATIVE_BODY = b'{"parameters": {"max_new_tokens": 3}, "inputs": "Tell me a story about caches."}'

SYSTEM_WITH_TIME = (
    "You are the support assistant. Shift log 2026-11-30T09:15:00Z. "
    + "Follow the refund policy carefully. " * 20
)
LINT_CORPUS = [
    (
        '{"model":"vllmsim/tiny","messages":[{"role":"system","content":"'
        + SYSTEM_WITH_TIME
        + '"},{"role":"user","content":"hi"}]}'
    ).encode(),
    b'{"model":"vllmsim/tiny",}',
]
