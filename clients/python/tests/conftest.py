from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors.json"


def load_vectors() -> dict[str, Any]:
    with VECTORS.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def vector_input(v: dict[str, Any]) -> bytes:
    if "input_base64" in v:
        return base64.b64decode(v["input_base64"])
    return str(v.get("input", "")).encode("utf-8")
