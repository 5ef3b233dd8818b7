"""A differential fuzz against the Go reference.

``go run ./clients/conformance/fuzzgen`` generates documents from a seed (every
schema, random whitespace, escapes and number spellings, the edges of the
rules, some damaged byte by byte) with the Go reference's verdict, canonical
bytes, error code, offset and message, and keys; this SDK must give the same for every
one. The TypeScript suite checks the same documents, so the three encoders are
compared on each. PREFIXGATE_FUZZ_SEED and PREFIXGATE_FUZZ_N choose other
documents (defaults: seed 1, 2000 documents).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import check_vector

ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("PREFIXGATE_FUZZ_SEED", "1"))
N = int(os.environ.get("PREFIXGATE_FUZZ_N", "2000"))


def generated(seed: int, n: int) -> list[dict[str, Any]]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("needs the go command to generate documents with the Go reference")
    out = subprocess.run(
        [go, "run", "./clients/conformance/fuzzgen", "-seed", str(seed), "-n", str(n)],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=600,
    )
    vectors: list[dict[str, Any]] = json.loads(out.stdout)["vectors"]
    return vectors


def test_generated_documents_agree_with_go() -> None:
    vectors = generated(SEED, N)
    assert len(vectors) == N
    failures = []
    for v in vectors:
        try:
            check_vector(v)
        except AssertionError as e:
            shown = v.get("input_base64") or v.get("input", "")
            failures.append(f"{v['name']} (mode {v['mode']}): {e}\n  input: {shown[:300]!r}")
    assert not failures, (
        f"{len(failures)} of {len(vectors)} generated documents disagree with Go "
        f"(seed {SEED}):\n" + "\n".join(failures[:5])
    )
