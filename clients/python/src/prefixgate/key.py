"""The routing key: seedless XXH3-64 over group, model and routing text.

Byte layout (docs/normalize.md): one mode byte (1 chat, 2 completion,
3 native), then the group, the model and the routing text cut to the window,
each preceded by its length as a 32-bit little-endian integer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import xxhash

from .canonical import (
    CHAT_PROMPT,
    COMPLETION_PROMPT,
    VOLATILE_MEMBERS,
    Canonical,
    JSONValue,
    Mode,
    canonicalize_full,
    encode,
    encode_string,
)
from .errors import CanonicalError, OptionError

DEFAULT_PREFIX_LENGTH = 4096
MIN_PREFIX_LENGTH = 1024
MAX_PREFIX_LENGTH = 65536
MAX_GROUP_BYTES = 64
SPILL_WINDOWS = 3

_US = b"\x1f"  # between a name and its text
_RS = b"\x1e"  # after each record


@dataclass(frozen=True)
class RouteInfo:
    """A routing key and what it was computed from."""

    key: int
    spill_keys: list[int] = field(default_factory=list)
    mode: Mode = Mode.NATIVE
    model: str = ""
    group: str = ""
    routing_text_length: int = 0

    @property
    def key_hex(self) -> str:
        return format_key(self.key)


def format_key(k: int) -> str:
    """A key as 16 lowercase hex digits."""
    return f"{k:016x}"


def check_options(group: str = "", prefix_length: int = 0) -> int:
    """Validate the key options; return the window N."""
    n = prefix_length or DEFAULT_PREFIX_LENGTH
    if not MIN_PREFIX_LENGTH <= n <= MAX_PREFIX_LENGTH:
        raise OptionError(
            "prefix-length",
            f"prefix length {n} is outside {MIN_PREFIX_LENGTH}..{MAX_PREFIX_LENGTH}",
        )
    g = group.encode("utf-8", "surrogatepass")
    if len(g) > MAX_GROUP_BYTES:
        raise OptionError("invalid-group", f"group id of {len(g)} bytes is over {MAX_GROUP_BYTES}")
    for i, c in enumerate(g):
        if c < 0x20 or c > 0x7E:
            raise OptionError(
                "invalid-group", f"group id has a non-printable byte 0x{c:02x} at {i}"
            )
    return n


def _canon(v: JSONValue) -> bytes:
    return encode(v).encode("utf-8")


def _content_text(c: JSONValue) -> bytes:
    if isinstance(c, str):
        return c.encode("utf-8")
    if c is None:
        return b""
    if not isinstance(c, list):
        return _canon(c)
    parts: list[bytes] = []
    for p in c:
        if isinstance(p, str):
            parts.append(p.encode("utf-8"))
        elif isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
            parts.append(str(p["text"]).encode("utf-8"))
        else:
            parts.append(_canon(p))
    return b"\n".join(parts)


def _chat_text(root: dict[str, JSONValue]) -> bytes:
    out = bytearray()
    if "tools" in root:
        out += b"tools" + _US + _canon(root["tools"]) + _RS
    msgs = root["messages"]
    assert isinstance(msgs, list)
    for i, m in enumerate(msgs):
        if i == len(msgs) - 1 and i > 0:
            break  # the final message varies; a lone message counts
        role = m.get("role") if isinstance(m, dict) else None
        if isinstance(role, str):
            out += role.encode("utf-8")
        out += _US
        if isinstance(m, dict) and "content" in m:
            out += _content_text(m["content"])
        out += _RS
    return bytes(out)


def _prompt_text(c: Canonical) -> bytes:
    assert isinstance(c.value, dict)
    p = c.value["prompt"]
    if isinstance(p, str):
        return p.encode("utf-8")
    if not isinstance(p, list):
        raise CanonicalError(c.offsets["prompt"], "schema", "prompt must be a string or an array")
    out = bytearray()
    for e in p:
        out += e.encode("utf-8") if isinstance(e, str) else _canon(e)
        out += _RS
    return bytes(out)


# The routing members of a native body: its "parameters" are generation
# parameters.
_NATIVE_ROUTING = ("inputs",)


def _native_text(c: Canonical) -> bytes:
    """The native routing text: the canonical body with only its routing
    members, chosen by the schema the members show (chat, completion, native
    inputs; any other object: all but the volatile metadata)."""
    root = c.value
    if not isinstance(root, dict):
        return c.body
    if "messages" in root:
        keep = set(CHAT_PROMPT)
    elif "prompt" in root:
        keep = set(COMPLETION_PROMPT)
    elif "inputs" in root:
        keep = set(_NATIVE_ROUTING)
    else:
        keep = {k for k in root if k not in VOLATILE_MEMBERS}
    # c.offsets lists the members in canonical order.
    members = [
        (encode_string(k) + ":").encode("utf-8") + _canon(root[k]) for k in c.offsets if k in keep
    ]
    return b"{" + b",".join(members) + b"}"


def _cut(text: bytes, n: int, native: bool) -> tuple[int, bool]:
    """Byte length of the first n characters (bytes in native mode) and
    whether the text is longer."""
    if len(text) <= n:
        return len(text), False
    if native:
        return n, True
    count = 0
    for i, b in enumerate(text):
        if b & 0xC0 != 0x80:
            if count == n:
                return i, True
            count += 1
    return len(text), False


def route_key_of(c: Canonical, group: str = "", prefix_length: int = 0) -> RouteInfo:
    """The routing key of a canonicalized body."""
    n = check_options(group, prefix_length)
    mode = c.mode if c.mode != Mode.AUTO else Mode.NATIVE
    root = c.value
    obj = root if isinstance(root, dict) else {}
    g = group
    if not g and isinstance(obj.get("prompt_cache_key"), str):
        g = str(obj["prompt_cache_key"])
    model = obj.get("model")
    model_b = model.encode("utf-8") if isinstance(model, str) else b""
    if mode == Mode.CHAT:
        if not isinstance(root, dict) or not isinstance(obj.get("messages"), list):
            raise CanonicalError(0, "schema", "a chat request needs a messages array")
        text = _chat_text(obj)
    elif mode == Mode.COMPLETION:
        if not isinstance(root, dict) or "prompt" not in obj:
            raise CanonicalError(0, "schema", "a completion request needs a prompt")
        text = _prompt_text(c)
    else:
        text = _native_text(c)
    native = mode == Mode.NATIVE
    gb = g.encode("utf-8")
    head = (
        bytes([mode]) + struct.pack("<I", len(gb)) + gb + struct.pack("<I", len(model_b)) + model_b
    )

    def h(end: int) -> int:
        return xxhash.xxh3_64_intdigest(head + struct.pack("<I", end) + text[:end])

    end, longer = _cut(text, n, native)
    if longer:
        length = n
    else:
        length = len(text) if native else len(text.decode("utf-8"))
    key = h(end)
    spills: list[int] = []
    w = n
    for _ in range(SPILL_WINDOWS):
        if not longer:
            break
        w *= 2
        end, longer = _cut(text, w, native)
        spills.append(h(end))
    model_s = model if isinstance(model, str) else ""
    return RouteInfo(key, spills, mode, model_s, g, length)


def routing_key(
    body: bytes | str,
    mode: Mode | str = Mode.AUTO,
    group: str = "",
    prefix_length: int = 0,
) -> RouteInfo:
    """Canonicalize ``body`` in ``mode`` and compute its routing key, exactly
    as the router does. ``group`` overrides the body's ``prompt_cache_key``;
    ``prefix_length`` 0 means 4096."""
    if isinstance(mode, str):
        mode = Mode.parse(mode)
    check_options(group, prefix_length)
    return route_key_of(canonicalize_full(body, mode), group, prefix_length)
