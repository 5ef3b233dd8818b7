"""Every shared vector, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
import xxhash
from conftest import load_vectors, vector_input

from prefixgate import CanonicalError, Mode, build_json, canonicalize, routing_key
from prefixgate.canonical import canonicalize_full
from prefixgate.key import format_key, route_key_of

DATA = load_vectors()
VECTORS: list[dict[str, Any]] = DATA["vectors"]


def test_vector_count() -> None:
    assert len(VECTORS) >= 60


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(v: dict[str, Any]) -> None:
    data = vector_input(v)
    mode = Mode.parse(v["mode"])
    group = v.get("group", "")
    prefix = v.get("prefix_length", 0)
    try:
        if v["kind"] == "build":
            got = build_json(data)
        else:
            got = canonicalize(data, mode)
    except CanonicalError as e:
        assert "error" in v, f"unexpected error {e}"
        assert (e.offset, e.code) == (v["error"]["offset"], v["error"]["code"]), str(e)
        assert str(e).startswith(f"offset {e.offset}: ")
        return
    assert "error" not in v, f"accepted, want {v['error']}"
    assert got == v["canonical"].encode("utf-8")
    try:
        if v["kind"] == "build":
            ri = route_key_of(canonicalize_full(got, Mode.CHAT), group, prefix)
        else:
            ri = routing_key(data, mode, group, prefix)
    except CanonicalError as e:
        assert "key_error" in v, f"unexpected key error {e}"
        assert (e.offset, e.code) == (v["key_error"]["offset"], v["key_error"]["code"]), str(e)
        return
    assert "key_error" not in v
    assert ri.key_hex == v["key"]
    assert [format_key(k) for k in ri.spill_keys] == v.get("spill_keys", [])
    assert str(ri.mode) == v["key_mode"]
    assert ri.routing_text_length == v.get("routing_text_length", 0)


@pytest.mark.parametrize("h", DATA["xxh3"], ids=[str(h["length"]) for h in DATA["xxh3"]])
def test_xxh3(h: dict[str, Any]) -> None:
    n = h["length"]
    data = bytes((i * 7 + n) & 0xFF for i in range(n))
    assert format_key(xxhash.xxh3_64_intdigest(data)) == h["hash"]
