"""The routing key: seedless XXH3-64 over group, model and routing text.

Byte layout (docs/normalize.md): one mode byte (1 chat, 2 completion,
3 native, 4 responses, 5 messages, 6 pooling), then the group, the model and the routing text cut to the window,
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
    utf16_key,
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


_POOLING_ROUTING = ("query", "text_1", "input", "messages", "documents", "text_2")


def _strip_cache_control(v: JSONValue) -> JSONValue:
    """v without members named cache_control, at any depth."""
    if isinstance(v, dict):
        return {k: _strip_cache_control(e) for k, e in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip_cache_control(e) for e in v]
    return v


def _mode_json(v: JSONValue, mode: Mode) -> bytes:
    return _canon(_strip_cache_control(v) if mode == Mode.MESSAGES else v)


def _text_part(p: dict[str, JSONValue], mode: Mode) -> str | None:
    t, text = p.get("type"), p.get("text")
    if not isinstance(t, str) or not isinstance(text, str):
        return None
    if t == "text" or (mode == Mode.RESPONSES and t in ("input_text", "output_text")):
        return text
    return None


def _mode_content(c: JSONValue, mode: Mode) -> bytes:
    if isinstance(c, str):
        return c.encode("utf-8")
    if c is None:
        return b""
    if not isinstance(c, list):
        return _mode_json(c, mode)
    parts: list[bytes] = []
    for p in c:
        text = _text_part(p, mode) if isinstance(p, dict) else None
        if isinstance(p, str):
            parts.append(p.encode("utf-8"))
        elif text is not None:
            parts.append(text.encode("utf-8"))
        else:
            parts.append(_mode_json(p, mode))
    return b"\n".join(parts)


def _item_record(item: JSONValue, mode: Mode) -> bytes:
    role = item.get("role") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(role, str):
        return _US + _mode_json(item, mode) + _RS
    out = role.encode("utf-8") + _US
    if "content" in item:
        out += _mode_content(item["content"], mode)
    return out + _RS


def _items_text(root: dict[str, JSONValue], mode: Mode) -> bytes:
    """The Responses or Messages routing text: instructions or system,
    tools, then every item but the final one. The final item is the new
    question: it counts only when nothing comes before it (a lone item
    with no instructions, system or tools)."""
    out = bytearray()
    head = "system" if mode == Mode.MESSAGES else "instructions"
    if root.get(head) is not None:
        out += head.encode() + _US + _mode_content(root[head], mode) + _RS
    if root.get("tools") is not None:
        out += b"tools" + _US + _mode_json(root["tools"], mode) + _RS
    items = root["messages" if mode == Mode.MESSAGES else "input"]
    lead = len(out) > 0
    if isinstance(items, str):
        return bytes(out) if lead else b"user" + _US + items.encode("utf-8") + _RS
    assert isinstance(items, list)
    for i, item in enumerate(items):
        if i == len(items) - 1 and (i > 0 or lead):
            break
        out += _item_record(item, mode)
    return bytes(out)


def _pooling_element(v: JSONValue) -> bytes:
    return (v.encode("utf-8") if isinstance(v, str) else _canon(v)) + _RS


def _pooling_text(root: dict[str, JSONValue]) -> bytes:
    out = bytearray()
    for name in _POOLING_ROUTING:
        if name not in root:
            continue
        out += name.encode() + _US
        v = root[name]
        for e in v if isinstance(v, list) else [v]:
            out += _pooling_element(e)
    return bytes(out)


class _Checker:
    """Finds the first place a body does not fit the Responses, Messages or
    pooling schema, in the reference's order, at the offset of the value in
    the canonical body."""

    def __init__(self, c: Canonical) -> None:
        self.c = c

    def fail(self, at: int, reason: str) -> CanonicalError:
        return CanonicalError(at, "schema", reason)

    @staticmethod
    def member_at(obj: dict[str, JSONValue], at: int, name: str) -> int:
        pos = at + 1
        for j, k in enumerate(sorted(obj, key=utf16_key)):
            pos += (1 if j else 0) + len(encode_string(k).encode("utf-8")) + 1
            if k == name:
                return pos
            pos += len(_canon(obj[k]))
        raise KeyError(name)

    @staticmethod
    def elem_at(arr: list[JSONValue], at: int, i: int) -> int:
        return at + 1 + sum(len(_canon(e)) + 1 for e in arr[:i])

    def blocks(self, arr: list[JSONValue], at: int, path: str) -> None:
        for j, e in enumerate(arr):
            if not isinstance(e, dict):
                raise self.fail(self.elem_at(arr, at, j), f"{path}[{j}]: expected an object")

    def content(self, m: dict[str, JSONValue], at: int, path: str, required: bool) -> None:
        if "content" not in m:
            if required:
                raise self.fail(at, f"{path}: a message needs content")
            return
        c, c_at = m["content"], self.member_at(m, at, "content")
        if isinstance(c, str):
            return
        if not isinstance(c, list):
            raise self.fail(c_at, f"{path}.content: expected a string or an array")
        self.blocks(c, c_at, path + ".content")

    def check(self, mode: Mode) -> None:
        root = self.c.value
        if not isinstance(root, dict):
            at = 1 if isinstance(root, str) else 0
            raise self.fail(at, f"a {mode} request must be a JSON object")
        if mode == Mode.RESPONSES:
            self.responses(root)
        elif mode == Mode.MESSAGES:
            self.messages(root)
        elif not any(n in root for n in _POOLING_ROUTING):
            raise self.fail(
                0, "a pooling request needs query, text_1, input, messages, documents or text_2"
            )

    def expect(self, root: dict[str, JSONValue], name: str, ok: bool, what: str) -> None:
        if name in root and not ok:
            raise self.fail(self.c.offsets[name], f"{name}: expected {what}")

    def responses(self, root: dict[str, JSONValue]) -> None:
        for name, what in (
            ("instructions", "a string or null"),
            ("previous_response_id", "a string or null"),
        ):
            self.expect(root, name, isinstance(root.get(name), str | None), what)
        self.expect(root, "tools", isinstance(root.get("tools"), list | None), "an array or null")
        if "input" not in root:
            raise self.fail(0, "a responses request needs an input")
        items, at = root["input"], self.c.offsets["input"]
        if isinstance(items, str):
            return
        if not isinstance(items, list):
            raise self.fail(at, "input: expected a string or an array")
        for i, item in enumerate(items):
            i_at = self.elem_at(items, at, i)
            if not isinstance(item, dict):
                raise self.fail(i_at, f"input[{i}]: expected an object")
            if "role" in item:
                if not isinstance(item["role"], str):
                    raise self.fail(
                        self.member_at(item, i_at, "role"), f"input[{i}].role: expected a string"
                    )
                self.content(item, i_at, f"input[{i}]", False)
            elif "type" not in item:
                raise self.fail(i_at, f"input[{i}]: an item needs a role or a type")
            elif not isinstance(item["type"], str):
                raise self.fail(
                    self.member_at(item, i_at, "type"), f"input[{i}].type: expected a string"
                )

    def messages(self, root: dict[str, JSONValue]) -> None:
        system = root.get("system")
        if isinstance(system, list):
            self.blocks(system, self.c.offsets["system"], "system")
        self.expect(
            root, "system", isinstance(system, str | list | None), "a string, an array or null"
        )
        self.expect(root, "tools", isinstance(root.get("tools"), list | None), "an array or null")
        if "messages" not in root:
            raise self.fail(0, "a messages request needs a messages array")
        msgs, at = root["messages"], self.c.offsets["messages"]
        if not isinstance(msgs, list):
            raise self.fail(at, "messages: expected an array")
        for i, m in enumerate(msgs):
            m_at, path = self.elem_at(msgs, at, i), f"messages[{i}]"
            if not isinstance(m, dict):
                raise self.fail(m_at, f"{path}: expected an object")
            if "role" not in m:
                raise self.fail(m_at, f"{path}: a message needs a role")
            if not isinstance(m["role"], str):
                raise self.fail(self.member_at(m, m_at, "role"), f"{path}.role: expected a string")
            self.content(m, m_at, path, True)


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
    elif mode in (Mode.RESPONSES, Mode.MESSAGES, Mode.POOLING):
        _Checker(c).check(mode)
        text = _pooling_text(obj) if mode == Mode.POOLING else _items_text(obj, mode)
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
