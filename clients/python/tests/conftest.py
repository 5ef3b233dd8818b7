from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from prefixgate import CanonicalError, Mode, build_json, canonicalize, routing_key
from prefixgate.canonical import canonicalize_full
from prefixgate.key import format_key, route_key_of

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors.json"


def load_vectors() -> dict[str, Any]:
    with VECTORS.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def vector_input(v: dict[str, Any]) -> bytes:
    if "input_base64" in v:
        return base64.b64decode(v["input_base64"])
    return str(v.get("input", "")).encode("utf-8")


def _error_of(e: CanonicalError) -> dict[str, Any]:
    return {"offset": e.offset, "code": e.code, "message": e.reason}


def check_vector(v: dict[str, Any]) -> None:
    """Assert that this SDK gives exactly what the vector expects: the
    verdict, canonical bytes, error code, offset and message, keys."""
    data = vector_input(v)
    mode = Mode.parse(v["mode"])
    group = v.get("group", "")
    prefix = v.get("prefix_length", 0)
    try:
        if v["kind"] == "build":
            got = build_json(data, mode)
        else:
            got = canonicalize(data, mode)
    except CanonicalError as e:
        assert "error" in v, f"unexpected error {e}"
        assert _error_of(e) == v["error"], str(e)
        assert str(e) == f"offset {e.offset}: {e.reason}"
        return
    assert "error" not in v, f"accepted, want {v['error']}"
    assert got == v["canonical"].encode("utf-8")
    try:
        if v["kind"] == "build":
            built = Mode.CHAT if mode == Mode.AUTO else mode
            ri = route_key_of(canonicalize_full(got, built), group, prefix)
        else:
            ri = routing_key(data, mode, group, prefix)
    except CanonicalError as e:
        assert "key_error" in v, f"unexpected key error {e}"
        assert _error_of(e) == v["key_error"], str(e)
        return
    assert "key_error" not in v
    assert ri.key_hex == v["key"]
    assert [format_key(k) for k in ri.spill_keys] == v.get("spill_keys", [])
    assert str(ri.mode) == v["key_mode"]
    assert ri.routing_text_length == v.get("routing_text_length", 0)
