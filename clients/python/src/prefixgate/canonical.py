"""Strict I-JSON validation and the canonical form, implemented locally.

The rules are the Go reference's (package normalize, docs/normalize.md):
RFC 8785 strings and numbers, UTF-16 member order inside objects, a
schema-aware order at the top level, integers beyond a double kept as
written, every rejection reported with its byte offset and reason code.
Numbers are read from the raw text by this module's own parser, never through
``json.loads`` floats, so that ``9007199254740993`` stays exact.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from .errors import CanonicalError, OptionError

MAX_BODY_BYTES = 8 << 20
MAX_DEPTH = 128
MAX_STRING_BYTES = 4 << 20


class Mode(IntEnum):
    """The request schema; the values are the routing key's mode byte."""

    AUTO = 0
    CHAT = 1
    COMPLETION = 2
    NATIVE = 3
    RESPONSES = 4
    MESSAGES = 5
    POOLING = 6

    @classmethod
    def parse(cls, name: str) -> Mode:
        """Parse ``auto``, ``chat``, ``completion``, ``native``,
        ``responses``, ``messages`` or ``pooling``."""
        if name not in _MODE_NAMES:
            raise OptionError(
                "invalid-mode",
                f"unknown mode {name!r} (want auto, chat, completion, native, "
                "responses, messages or pooling)",
            )
        return cls[name.upper()]

    def __str__(self) -> str:
        return self.name.lower()


_MODE_NAMES = ("auto", "chat", "completion", "native", "responses", "messages", "pooling")


@dataclass(frozen=True)
class Number:
    """A JSON number, kept as its literal so no digit is lost."""

    literal: str

    @property
    def is_integer_literal(self) -> bool:
        return not any(c in self.literal for c in ".eE")


JSONValue = Union[None, bool, str, Number, int, float, "list[JSONValue]", "dict[str, JSONValue]"]

# Top-level member lists, the same as the reference's: prompt-defining
# members first in rendering order, volatile metadata last, everything else
# between in JCS order.
CHAT_PROMPT = (
    "model",
    "chat_template",
    "chat_template_kwargs",
    "tools",
    "documents",
    "messages",
    "add_generation_prompt",
    "continue_final_message",
)
COMPLETION_PROMPT = ("model", "prompt", "suffix")
NATIVE_PROMPT = ("inputs", "parameters")
RESPONSES_PROMPT = ("model", "instructions", "tools", "input", "previous_response_id")
MESSAGES_PROMPT = ("model", "system", "tools", "messages")
POOLING_PROMPT = ("model", "query", "text_1", "input", "messages", "documents", "text_2")
# Volatile in one schema only: a Responses body's "background" and a
# Messages body's top-level "cache_control".
_MODE_VOLATILE = {4: "background", 5: "cache_control"}
VOLATILE_MEMBERS = frozenset(
    {
        "user",
        "metadata",
        "stream",
        "stream_options",
        "store",
        "prompt_cache_key",
        "safety_identifier",
        "request_id",
        "service_tier",
        "priority",
        "kv_transfer_params",
    }
)
_RANK_PARAM = 1000
_RANK_VOLATILE = 2000

_WS = b" \t\n\r"
# A run of bytes a string holds without a closer look: printable ASCII other
# than '"' and '\\', and well-formed UTF-8 sequences (no overlong forms, no
# surrogates, nothing above U+10FFFF).
_PLAIN = re.compile(
    rb"(?:[\x20\x21\x23-\x5b\x5d-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]"
    rb"|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
    rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*"
)
# Noncharacters as UTF-8, which I-JSON (RFC 7493 section 2.1) forbids:
# U+FDD0..U+FDEF (EF B7 90..AF), U+FFFE and U+FFFF (EF BF BE/BF), and the
# last two code points of planes 1 to 16 (a 4-byte sequence whose second
# byte ends in F, then BF, then BE or BF). Searched only inside runs that
# _PLAIN has already found well-formed, where a lead byte cannot be taken
# for a continuation byte.
_NONCHAR = re.compile(
    rb"\xef\xb7[\x90-\xaf]|\xef\xbf[\xbe\xbf]|[\xf0-\xf4][\x8f\x9f\xaf\xbf]\xbf[\xbe\xbf]"
)
_HEX = b"0123456789abcdefABCDEF"
# A number literal whose value is not zero: a non-zero digit before any
# exponent.
_NONZERO_MANTISSA = re.compile(r"[^eE]*[1-9]")


def _is_noncharacter(cp: int) -> bool:
    return 0xFDD0 <= cp <= 0xFDEF or cp & 0xFFFE == 0xFFFE


def _noncharacter_error(off: int, cp: int) -> CanonicalError:
    return CanonicalError(off, "noncharacter", f"noncharacter U+{cp:04X} is not allowed in I-JSON")


_SIMPLE_ESCAPES = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}


def _describe(c: int) -> str:
    if 0x20 <= c < 0x7F:
        return f"'{chr(c)}'"
    return f"byte 0x{c:x}"


def _is_ident(c: int) -> bool:
    return 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39 or c == 0x5F  # a-z A-Z 0-9 _


class _Parser:
    """A recursive-descent validator that builds Python values.

    Objects are dicts in document order; numbers are :class:`Number`.
    """

    def __init__(self, src: bytes) -> None:
        self.s = src
        self.n = len(src)

    def ws(self, i: int) -> int:
        s, n = self.s, self.n
        while i < n and s[i] in _WS:
            i += 1
        return i

    def err(self, off: int, code: str, reason: str) -> CanonicalError:
        return CanonicalError(off, code, reason)

    def unexpected(self, i: int, want: str) -> CanonicalError:
        if i >= self.n:
            return self.err(i, "unexpected-end", f"unexpected end of input, want {want}")
        c = self.s[i]
        if c == 0x2F:
            return self.err(i, "comment", "comments are not allowed")
        if c == 0x27:
            return self.err(i, "single-quote", "single-quoted strings are not allowed")
        if c >= 0x80:
            return self.err(
                i, "invalid-character", f"unexpected non-ASCII {_describe(c)}, want {want}"
            )
        return self.err(i, "invalid-character", f"unexpected {_describe(c)}, want {want}")

    def parse(self) -> tuple[JSONValue, int]:
        if self.n > MAX_BODY_BYTES:
            raise self.err(
                MAX_BODY_BYTES,
                "size-limit",
                f"body of {self.n} bytes is over the limit of {MAX_BODY_BYTES} bytes",
            )
        start = self.ws(0)
        v, i = self.value(start, 0)
        i = self.ws(i)
        if i < self.n:
            raise self.err(
                i,
                "trailing-data",
                f"unexpected data after the top-level value: {_describe(self.s[i])}",
            )
        return v, start

    def value(self, i: int, depth: int) -> tuple[JSONValue, int]:
        if i >= self.n:
            raise self.unexpected(i, "a value")
        c = self.s[i]
        if c == 0x7B:
            return self.obj(i, depth + 1)
        if c == 0x5B:
            return self.arr(i, depth + 1)
        if c == 0x22:
            return self.string(i)
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self.number(i)
        if c == 0x74:
            return self.literal(i, b"true", True)
        if c == 0x66:
            return self.literal(i, b"false", False)
        if c == 0x6E:
            return self.literal(i, b"null", None)
        if c in (0x4E, 0x49):
            raise self.err(i, "invalid-literal", "NaN and Infinity are not JSON numbers")
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            raise self.err(
                i,
                "invalid-literal",
                f"unknown literal starting with {_describe(c)} (want true, false or null)",
            )
        if c in (0x2B, 0x2E):
            raise self.err(i, "invalid-number", "a number must start with '-' or a digit")
        raise self.unexpected(i, "a value")

    def literal(self, i: int, word: bytes, val: JSONValue) -> tuple[JSONValue, int]:
        s, n = self.s, self.n
        for j, w in enumerate(word):
            if i + j >= n:
                raise self.err(
                    i + j, "unexpected-end", f"unexpected end of input in literal {word.decode()}"
                )
            if s[i + j] != w:
                raise self.err(i, "invalid-literal", f"invalid literal, want {word.decode()}")
        end = i + len(word)
        if end < n and _is_ident(s[end]):
            raise self.err(i, "invalid-literal", f"invalid literal, want {word.decode()}")
        return val, end

    def arr(self, i: int, depth: int) -> tuple[JSONValue, int]:
        if depth > MAX_DEPTH:
            raise self.err(i, "depth-limit", f"nesting deeper than {MAX_DEPTH}")
        s = self.s
        out: list[JSONValue] = []
        i = self.ws(i + 1)
        if i < self.n and s[i] == 0x5D:
            return out, i + 1
        while True:
            if i < self.n and s[i] == 0x5D:
                raise self.err(i, "trailing-comma", "trailing comma in array")
            v, i = self.value(i, depth)
            out.append(v)
            i = self.ws(i)
            if i >= self.n:
                raise self.unexpected(i, "',' or ']'")
            if s[i] == 0x2C:
                i = self.ws(i + 1)
                continue
            if s[i] == 0x5D:
                return out, i + 1
            raise self.unexpected(i, "',' or ']'")

    def obj(self, i: int, depth: int) -> tuple[JSONValue, int]:
        if depth > MAX_DEPTH:
            raise self.err(i, "depth-limit", f"nesting deeper than {MAX_DEPTH}")
        s = self.s
        out: dict[str, JSONValue] = {}
        dup: int | None = None
        dup_name = ""
        i = self.ws(i + 1)
        if i < self.n and s[i] == 0x7D:
            return out, i + 1
        count = 0
        while True:
            if i >= self.n or s[i] != 0x22:
                if i < self.n and s[i] == 0x7D and count > 0:
                    raise self.err(i, "trailing-comma", "trailing comma in object")
                raise self.unexpected(i, "a member name string")
            key_at = i
            key, i = self.string(i)
            assert isinstance(key, str)
            i = self.ws(i)
            if i >= self.n or s[i] != 0x3A:
                raise self.unexpected(i, "':' after member name")
            i = self.ws(i + 1)
            v, i = self.value(i, depth)
            count += 1
            if key in out:
                if dup is None:
                    dup, dup_name = key_at, key
            else:
                out[key] = v
            i = self.ws(i)
            if i >= self.n:
                raise self.unexpected(i, "',' or '}'")
            if s[i] == 0x2C:
                i = self.ws(i + 1)
                continue
            if s[i] == 0x7D:
                break
            raise self.unexpected(i, "',' or '}'")
        if dup is not None:
            raise self.err(dup, "duplicate-member", f"duplicate member name {quote_name(dup_name)}")
        return out, i + 1

    def string(self, i: int) -> tuple[JSONValue, int]:
        s, n = self.s, self.n
        open_at = i
        i += 1
        start = i
        parts: list[str] = []
        while True:
            m = _PLAIN.match(s, i)
            assert m is not None
            if m.end() > i:
                bad = _NONCHAR.search(s, i, m.end())
                if bad is not None:
                    at = bad.start()
                    raise _noncharacter_error(at, ord(s[at : bad.end()].decode("utf-8")))
                parts.append(s[i : m.end()].decode("utf-8"))
                i = m.end()
            if i >= n:
                raise self.err(
                    i,
                    "unexpected-end",
                    f"unexpected end of input in string starting at offset {open_at}",
                )
            c = s[i]
            if c == 0x22:
                break
            if c == 0x5C:
                text, size = self.escape(i)
                parts.append(text)
                i += size
            elif c < 0x20:
                raise self.err(
                    i, "control-character", f"unescaped control character {_describe(c)} in string"
                )
            else:
                raise self.err(i, "invalid-utf8", f"invalid UTF-8 {_describe(c)} in string")
        if i - start > MAX_STRING_BYTES:
            raise self.err(
                open_at,
                "string-limit",
                f"string of {i - start} bytes is over the limit of {MAX_STRING_BYTES} bytes",
            )
        return "".join(parts), i + 1

    def escape(self, i: int) -> tuple[str, int]:
        s, n = self.s, self.n
        if i + 1 >= n:
            raise self.err(i, "unexpected-end", "unexpected end of input in escape")
        e = s[i + 1]
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], 2
        if e != 0x75:
            raise self.err(i, "invalid-escape", f"invalid escape sequence \\{chr(e)}")
        u = self.hex4(i)
        if 0xDC00 <= u <= 0xDFFF:
            raise self.err(
                i,
                "lone-surrogate",
                f"low surrogate \\u{u:04x} without a preceding high surrogate",
            )
        if 0xD800 <= u <= 0xDBFF:
            if i + 7 < n and s[i + 6] == 0x5C and s[i + 7] == 0x75:
                lo = self.hex4(i + 6)
                if 0xDC00 <= lo <= 0xDFFF:
                    cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                    if _is_noncharacter(cp):
                        raise _noncharacter_error(i, cp)
                    return chr(cp), 12
            raise self.err(
                i,
                "lone-surrogate",
                f"high surrogate \\u{u:04x} not followed by a low surrogate",
            )
        if _is_noncharacter(u):
            raise _noncharacter_error(i, u)
        return chr(u), 6

    def hex4(self, i: int) -> int:
        s, n = self.s, self.n
        if i + 6 > n:
            for j in range(i + 2, n):
                if s[j] not in _HEX:
                    raise self.err(i, "invalid-escape", "invalid \\u escape: want 4 hex digits")
            raise self.err(n, "unexpected-end", "unexpected end of input in \\u escape")
        digits = s[i + 2 : i + 6]
        if any(c not in _HEX for c in digits):
            raise self.err(i, "invalid-escape", "invalid \\u escape: want 4 hex digits")
        return int(digits, 16)

    def number(self, i: int) -> tuple[JSONValue, int]:
        s, n = self.s, self.n
        start = i
        frac = False
        if s[i] == 0x2D:
            i += 1
        if i >= n:
            raise self.err(i, "unexpected-end", "unexpected end of input in number")
        if s[i] == 0x30:
            i += 1
            if i < n and 0x30 <= s[i] <= 0x39:
                raise self.err(start, "leading-zero", "number with a leading zero")
        elif 0x31 <= s[i] <= 0x39:
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
        else:
            raise self.err(start, "invalid-number", "want a digit after '-'")
        if i < n and s[i] == 0x2E:
            frac = True
            i += 1
            d = i
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
            if i == d:
                raise self.err(start, "invalid-number", "want a digit after the decimal point")
        exp_at = -1
        if i < n and s[i] in (0x65, 0x45):
            frac = True
            exp_at = i
            i += 1
            if i < n and s[i] in (0x2B, 0x2D):
                i += 1
            d = i
            while i < n and 0x30 <= s[i] <= 0x39:
                i += 1
            if i == d:
                raise self.err(start, "invalid-number", "want a digit in the exponent")
        if i < n and (_is_ident(s[i]) or s[i] == 0x2E):
            raise self.err(
                start, "invalid-number", f"invalid character {_describe(s[i])} in number"
            )
        if i - start > MAX_STRING_BYTES:
            raise self.err(
                start,
                "string-limit",
                f"number literal of {i - start} bytes is over the limit of {MAX_STRING_BYTES} bytes",
            )
        lit = s[start:i].decode("ascii")
        # The range rule (docs/normalize.md): a literal must neither overflow
        # a double nor turn a non-zero value into zero. Only a literal with
        # an exponent, one over 300 characters, or an integer of 309 or more
        # digits can break it; float() reads it in linear time.
        digits = i - start - (1 if s[start] == 0x2D else 0)
        if (frac and (exp_at >= 0 or i - start > 300)) or (not frac and digits >= 309):
            f = float(lit)
            if not math.isfinite(f):
                raise self.err(
                    start,
                    "number-range",
                    f"number {quote_name(lit)} is outside the range of a double",
                )
            if f == 0 and _NONZERO_MANTISSA.match(lit):
                raise self.err(
                    start,
                    "number-range",
                    f"number {quote_name(lit)} is too small for a double: it would become 0",
                )
        return Number(lit), i


def quote_name(s: str) -> str:
    """Quote a member name or number literal for an error message, byte for
    byte as the Go reference does (docs/normalize.md, "Names in error
    messages"): at most the first 64 bytes of UTF-8, cut back to the start of
    a character, as Go's strconv.QuoteToASCII writes them, then "..." when
    cut."""
    b = s.encode("utf-8", "surrogatepass")
    cut = len(b) > 64
    if cut:
        n = 64
        while n > 0 and b[n] & 0xC0 == 0x80:
            n -= 1
        s = b[:n].decode("utf-8", "surrogatepass")
    return '"' + "".join(_quote_char(c) for c in s) + '"' + ("..." if cut else "")


_SHORT_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def _quote_char(ch: str) -> str:
    c = ord(ch)
    short = _SHORT_ESCAPES.get(c)
    if short is not None:
        return short
    if 0x20 <= c < 0x7F:
        return ch
    if c < 0x20 or c == 0x7F:
        return f"\\x{c:02x}"
    if c < 0x10000:
        return f"\\u{c:04x}"
    return f"\\U{c:08x}"


def parse(src: bytes | str) -> JSONValue:
    """Validate ``src`` as one I-JSON value and return it.

    Objects are dicts in document order, numbers :class:`Number`. Raises
    :class:`CanonicalError` with the byte offset of the first problem.
    """
    if isinstance(src, str):
        src = src.encode("utf-8", "surrogatepass")
    return _Parser(src).parse()[0]


# --- output -----------------------------------------------------------------

_ESCAPE_OUT = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    return _ESCAPE_OUT.get(c) or f"\\u{ord(c):04x}"


def encode_string(s: str) -> str:
    """A JSON string as RFC 8785 writes it: only '"', '\\' and control
    characters escaped, everything else raw."""
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, s) + '"'


def utf16_key(name: str) -> bytes:
    """Sort key that orders member names by UTF-16 code units (RFC 8785)."""
    return name.encode("utf-16-be", "surrogatepass")


def format_number(literal: str) -> str:
    """The canonical spelling of a valid JSON number literal.

    Integer literals stay as written ("-0" aside): within 2^53 that is the
    ECMAScript form already, and beyond it the written digits are the exact
    value. Other literals become the nearest double in ECMAScript form.
    """
    if not any(c in literal for c in ".eE"):
        return "0" if literal == "-0" else literal
    return format_double(float(literal))


def format_double(f: float) -> str:
    """ECMAScript Number::toString of a finite double, from the shortest
    round-trip digits that repr() gives."""
    if not math.isfinite(f):
        raise ValueError(f"{f} is not a JSON number")
    if f == 0:
        return "0"
    r = repr(abs(f))
    mant, _, exp_s = r.partition("e")
    exp = int(exp_s) if exp_s else 0
    whole, _, fraction = mant.partition(".")
    digits = whole + fraction
    point = len(whole) + exp  # value = 0.digits × 10^point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    d = stripped.rstrip("0")
    k, n = len(d), point
    sign = "-" if f < 0 else ""
    if k <= n <= 21:
        return sign + d + "0" * (n - k)
    if 0 < n <= 21:
        return sign + d[:n] + "." + d[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + d
    e = n - 1
    return (
        sign + d[0] + ("." + d[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    )


def encode(v: JSONValue) -> str:
    """Canonical JSON text of a value, nested-object (JCS) order throughout."""
    out: list[str] = []
    _emit(v, out)
    return "".join(out)


def _emit(v: JSONValue, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(encode_string(v))
    elif isinstance(v, Number):
        out.append(format_number(v.literal))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(format_double(v))
    elif isinstance(v, list | tuple):
        out.append("[")
        for j, e in enumerate(v):
            if j:
                out.append(",")
            _emit(e, out)
        out.append("]")
    elif isinstance(v, dict):
        out.append("{")
        for j, k in enumerate(sorted(v, key=utf16_key)):
            if j:
                out.append(",")
            out.append(encode_string(k))
            out.append(":")
            _emit(v[k], out)
        out.append("}")
    else:
        raise TypeError(f"cannot encode {type(v).__name__} as JSON")


def _items_input(v: JSONValue) -> bool:
    """Whether an input holds Responses items: a string, or a non-empty
    array of objects."""
    if isinstance(v, str):
        return True
    return isinstance(v, list) and len(v) > 0 and all(isinstance(e, dict) for e in v)


def detect_mode(root: JSONValue) -> Mode:
    """The schema auto mode picks (docs/normalize.md, "Schema detection"),
    else AUTO."""
    if not isinstance(root, dict):
        return Mode.AUTO
    if "messages" in root:
        if "max_tokens" in root and ("system" in root or "stop_sequences" in root):
            return Mode.MESSAGES
        return Mode.CHAT
    if "prompt" in root:
        return Mode.COMPLETION
    if "inputs" in root:
        return Mode.NATIVE
    if "input" in root:
        return Mode.RESPONSES if _items_input(root["input"]) else Mode.POOLING
    if ("query" in root and "documents" in root) or ("text_1" in root and "text_2" in root):
        return Mode.POOLING
    return Mode.AUTO


_PROMPTS = {
    Mode.CHAT: CHAT_PROMPT,
    Mode.COMPLETION: COMPLETION_PROMPT,
    Mode.NATIVE: NATIVE_PROMPT,
    Mode.RESPONSES: RESPONSES_PROMPT,
    Mode.MESSAGES: MESSAGES_PROMPT,
    Mode.POOLING: POOLING_PROMPT,
}


def _rank(mode: Mode, name: str) -> int:
    prompt = _PROMPTS[mode]
    if name in prompt:
        return prompt.index(name)
    if name in VOLATILE_MEMBERS or _MODE_VOLATILE.get(mode) == name:
        return _RANK_VOLATILE
    return _RANK_PARAM


@dataclass
class Canonical:
    """A canonicalized body: its bytes, its value and the schema used."""

    body: bytes
    value: JSONValue
    mode: Mode
    # Byte offset of each top-level member's value in body (objects only).
    offsets: dict[str, int]


def canonicalize_full(src: bytes | str, mode: Mode = Mode.AUTO) -> Canonical:
    """Validate ``src`` and return its canonical form with what the routing
    key needs. ``mode`` AUTO detects the schema."""
    if isinstance(src, str):
        src = src.encode("utf-8", "surrogatepass")
    root, root_at = _Parser(src).parse()
    if not isinstance(root, dict):
        if mode not in (Mode.AUTO, Mode.NATIVE):
            # The reference reports a string root at its first character,
            # inside the quotes.
            at = root_at + 1 if isinstance(root, str) else root_at
            raise CanonicalError(at, "schema", f"a {mode} request must be a JSON object")
        return Canonical(encode(root).encode("utf-8"), root, mode, {})
    used = detect_mode(root) if mode == Mode.AUTO else mode
    names = sorted(root, key=utf16_key)
    if used != Mode.AUTO:
        names.sort(key=lambda k: _rank(used, k))  # stable over the JCS order
    parts: list[bytes] = [b"{"]
    size = 1
    offsets: dict[str, int] = {}
    for j, k in enumerate(names):
        head = ("," if j else "") + encode_string(k) + ":"
        hb = head.encode("utf-8")
        vb = encode(root[k]).encode("utf-8")
        offsets[k] = size + len(hb)
        parts += (hb, vb)
        size += len(hb) + len(vb)
    parts.append(b"}")
    return Canonical(b"".join(parts), root, used, offsets)


def canonicalize(src: bytes | str, mode: Mode | str = Mode.AUTO) -> bytes:
    """The canonical form of a JSON request body.

    Raises :class:`CanonicalError` (``offset N: reason``) for input outside
    the rules; nothing is ever repaired.
    """
    if isinstance(mode, str):
        mode = Mode.parse(mode)
    return canonicalize_full(src, mode).body
