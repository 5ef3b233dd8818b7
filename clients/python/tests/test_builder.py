from __future__ import annotations

import dataclasses

import pytest

from prefixgate import (
    Document,
    Message,
    Mode,
    PromptSpec,
    SpecError,
    build,
    build_as,
    build_key,
    build_key_as,
    build_messages,
    build_responses,
    chat_input,
    routing_key,
)


def sample() -> PromptSpec:
    return PromptSpec(
        model="vllmsim/tiny",
        instructions="Answer from the documents.",
        documents=[Document(id="q3", title="Quarterly report", text="Revenue grew. " * 40)],
        tools=[
            {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
        ],
        history=[Message("user", "Hello"), Message("assistant", "Hi.")],
        question="What grew?",
        parameters={"max_tokens": 4, "temperature": 0},
        metadata={"request_id": "r-1", "ts": "2026-05-01T10:00:00Z"},
    )


def test_layout() -> None:
    body = build(sample())
    want = (
        '{"model":"vllmsim/tiny","tools":[{"function":{"name":"lookup","parameters":{"type":"object"}},'
        '"type":"function"}],"messages":[{"content":"Answer from the documents.\\n\\n## Document q3: '
        "Quarterly report\\n\\n" + "Revenue grew. " * 40 + '","role":"system"},{"content":"Hello",'
        '"role":"user"},{"content":"Hi.","role":"assistant"},{"content":"What grew?","role":"user"}],'
        '"max_tokens":4,"temperature":0,"metadata":{"request_id":"r-1","ts":"2026-05-01T10:00:00Z"}}'
    )
    assert body.decode() == want


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"request_id": "r-2", "ts": "2027-01-01T00:00:00Z"},
        {"a": "1", "z": "x" * 5000, "user": "u"},
    ],
)
def test_metadata_never_changes_key(metadata: dict[str, str]) -> None:
    _, base = build_key(sample())
    _, other = build_key(dataclasses.replace(sample(), metadata=metadata))
    assert other.key == base.key


def test_group_changes_only_its_member() -> None:
    plain, k0 = build_key(sample())
    grouped, k1 = build_key(dataclasses.replace(sample(), group="tenant-a"))
    assert k1.key != k0.key
    assert grouped == plain[:-1] + b',"prompt_cache_key":"tenant-a"}'
    assert routing_key(plain, "chat", group="tenant-a").key == k1.key


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": ""}, "model"),
        ({"question": ""}, "question"),
        ({"parameters": {"messages": []}}, "parameters.messages"),
        ({"tools": [[1]]}, "tools[0]"),
        ({"documents": [Document(id="", text="x")]}, "documents[0].id"),
        ({"history": [Message("", "x")]}, "history[0].role"),
        ({"group": "g" * 65}, "group"),
        ({"group": "a\tb"}, "group"),
        ({"question": "\ud800"}, "question"),
    ],
)
def test_rejects(change: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as ei:
        build(dataclasses.replace(sample(), **change))  # type: ignore[arg-type]
    assert ei.value.field == field


def test_chat_input_round_trip() -> None:
    ci = chat_input(dataclasses.replace(sample(), group="g"))
    assert ci.group == "g"
    assert [m.role for m in ci.messages] == ["system", "user", "assistant", "user"]
    assert ci.tools[0].parameters_json == '{"type":"object"}'
    assert ci.extra_json == (
        '{"max_tokens":4,"metadata":{"request_id":"r-1","ts":"2026-05-01T10:00:00Z"},'
        '"prompt_cache_key":"g","temperature":0}'
    )


@pytest.mark.parametrize(
    ("tool", "want"),
    [
        (
            {"type": "function", "function": {"name": "f"}, "x\u2028": 1},
            'prompt spec: tools[0]: member "x\\u2028" cannot be sent through ChatInput',
        ),
        (
            {"type": "function", "function": {"name": "f", "é😀": 1}},
            'prompt spec: tools[0]: function member "\\u00e9\\U0001f600" cannot be sent through ChatInput',
        ),
    ],
)
def test_chat_input_quotes_names(tool: dict[str, object], want: str) -> None:
    # The same bytes as the Go and TypeScript SDKs: one quoting rule for names.
    with pytest.raises(SpecError) as ei:
        chat_input(dataclasses.replace(sample(), tools=[tool]))
    assert str(ei.value) == want


@pytest.mark.parametrize(
    ("mode", "system", "turns", "reserved"),
    [
        (Mode.RESPONSES, "instructions", "input", "input"),
        (Mode.MESSAGES, "system", "messages", "system"),
    ],
)
def test_responses_and_messages(mode: Mode, system: str, turns: str, reserved: str) -> None:
    spec = dataclasses.replace(sample(), tools=[])
    body, ri = build_key_as(spec, mode)
    assert body.startswith(f'{{"model":"vllmsim/tiny","{system}":"Answer from'.encode())
    assert f'"{turns}":[{{"content":"Hello","role":"user"}}'.encode() in body
    assert body.index(b'"metadata"') > body.index(b'"What grew?"')
    assert body == build_as(spec, mode.name.lower())
    assert body == (build_responses(spec) if mode == Mode.RESPONSES else build_messages(spec))
    other = dataclasses.replace(spec, metadata={"request_id": "r-2"}, question="Else?")
    assert build_key_as(other, mode)[1].key == ri.key
    with pytest.raises(SpecError) as ei:
        build_as(dataclasses.replace(spec, parameters={reserved: "x"}), mode)
    assert ei.value.field == f"parameters.{reserved}"
    build(dataclasses.replace(spec, parameters={reserved: "x"}))  # chat does not set it
    with pytest.raises(SpecError, match="pooling"):
        build_as(spec, Mode.POOLING)
