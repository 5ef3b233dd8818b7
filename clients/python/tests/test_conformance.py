"""Every shared vector, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
import xxhash
from conftest import check_vector, load_vectors

from prefixgate.key import format_key

DATA = load_vectors()
VECTORS: list[dict[str, Any]] = DATA["vectors"]


def test_vector_count() -> None:
    assert len(VECTORS) >= 60


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(v: dict[str, Any]) -> None:
    check_vector(v)


@pytest.mark.parametrize("h", DATA["xxh3"], ids=[str(h["length"]) for h in DATA["xxh3"]])
def test_xxh3(h: dict[str, Any]) -> None:
    n = h["length"]
    data = bytes((i * 7 + n) & 0xFF for i in range(n))
    assert format_key(xxhash.xxh3_64_intdigest(data)) == h["hash"]
