"""The prompt builder: stable content first, volatile content last.

The layout (docs/sdk.md) is the same in every SDK: one system message with
the instructions and each document under the header
``## Document {id}: {title}``, separated by blank lines; then the history;
then the question as the final user message. Tools go to ``tools``,
metadata to ``metadata`` and the group to ``prompt_cache_key``, members the
canonical form sorts after the prompt (metadata and group last).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .canonical import JSONValue, Mode, Number, canonicalize_full, encode, parse
from .errors import SpecError
from .key import MAX_GROUP_BYTES, RouteInfo, route_key_of

RESERVED_MEMBERS = ("model", "messages", "tools", "metadata", "prompt_cache_key")
RESPONSES_RESERVED = ("model", "instructions", "tools", "input", "metadata", "prompt_cache_key")
MESSAGES_RESERVED = ("model", "system", "tools", "messages", "metadata", "prompt_cache_key")

# Each request shape a spec builds: the member of the system text ("" for
# chat's system message), the member of the turns, the members the builder
# sets itself.
_LAYOUTS: dict[Mode, tuple[str, str, tuple[str, ...]]] = {
    Mode.CHAT: ("", "messages", RESERVED_MEMBERS),
    Mode.RESPONSES: ("instructions", "input", RESPONSES_RESERVED),
    Mode.MESSAGES: ("system", "messages", MESSAGES_RESERVED),
}


def _build_mode(mode: Mode | str) -> Mode:
    """The build mode: chat (auto too), responses or messages."""
    m = Mode.parse(mode) if isinstance(mode, str) else Mode(mode)
    if m == Mode.AUTO:
        return Mode.CHAT
    if m not in _LAYOUTS:
        raise SpecError(
            "(mode)",
            f"a prompt spec builds chat, responses or messages requests, not {m.name.lower()}",
        )
    return m


@dataclass(frozen=True)
class Document:
    """A document rendered into the system message."""

    id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Message:
    """One turn of the conversation history."""

    role: str
    content: str


@dataclass
class PromptSpec:
    """What a chat prompt is made of.

    ``tools`` are OpenAI tool objects and ``parameters`` other request members
    (temperature, max_tokens, ...), both as JSON values: dicts, lists, str,
    int, float, bool, None or :class:`~prefixgate.canonical.Number`.
    """

    model: str
    question: str
    instructions: str = ""
    documents: Sequence[Document] = ()
    tools: Sequence[JSONValue] = ()
    history: Sequence[Message] = ()
    parameters: Mapping[str, JSONValue] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    group: str = ""

    def system_text(self) -> str:
        """The system message: instructions, then each document under its
        header, separated by blank lines; "" when there is neither."""
        parts = [self.instructions] if self.instructions else []
        for d in self.documents:
            header = f"## Document {d.id}" + (f": {d.title}" if d.title else "")
            parts.append(f"{header}\n\n{d.text}")
        return "\n\n".join(parts)

    def messages(self) -> list[Message]:
        """The rendered messages: system (if any), history, question."""
        out = []
        if sys := self.system_text():
            out.append(Message("system", sys))
        out.extend(self.history)
        out.append(Message("user", self.question))
        return out

    def validate(self, mode: Mode | str = Mode.CHAT) -> None:
        """Raise :class:`SpecError` for the first problem that keeps the spec
        from building a request of ``mode`` (chat, responses, messages)."""
        reserved = _LAYOUTS[_build_mode(mode)][2]
        _check_str("model", self.model, required=True)
        _check_str("question", self.question, required=True)
        _check_str("instructions", self.instructions)
        for i, d in enumerate(self.documents):
            _check_str(f"documents[{i}].id", d.id, required=True)
            _check_str(f"documents[{i}].title", d.title)
            _check_str(f"documents[{i}].text", d.text)
        for i, t in enumerate(self.tools):
            if not isinstance(t, dict):
                raise SpecError(f"tools[{i}]", "must be a JSON object")
            _check_json(f"tools[{i}]", t)
        for i, m in enumerate(self.history):
            _check_str(f"history[{i}].role", m.role, required=True)
            _check_str(f"history[{i}].content", m.content)
        for name in sorted(self.parameters):
            if name in reserved:
                raise SpecError(
                    f"parameters.{name}", "is set by the builder; use the spec's own field"
                )
            _check_str("parameters", name)
            _check_json(f"parameters.{name}", self.parameters[name])
        for k in sorted(self.metadata):
            _check_str("metadata", k)
            _check_str(f"metadata.{k}", self.metadata[k])
        _check_group(self.group)

    def request(self, mode: Mode | str = Mode.CHAT) -> dict[str, JSONValue]:
        """The request of ``mode`` (chat, responses, messages) as a JSON
        value (before canonicalization)."""
        m = _build_mode(mode)
        self.validate(m)
        system, turns_member, _ = _LAYOUTS[m]
        body: dict[str, JSONValue] = {"model": self.model}
        turns = self.messages()
        if system:
            turns = [*self.history, Message("user", self.question)]
            if sys := self.system_text():
                body[system] = sys
        if self.tools:
            body["tools"] = list(self.tools)
        body[turns_member] = [{"role": t.role, "content": t.content} for t in turns]
        body.update(self.parameters)
        if self.metadata:
            body["metadata"] = dict(self.metadata)
        if self.group:
            body["prompt_cache_key"] = self.group
        return body


COMPLETION_RESERVED = ("model", "prompt", "prompt_cache_key")


@dataclass
class CompletionSpec:
    """An OpenAI completion request: the model and one prompt string (the
    routing text), other request members in ``parameters`` (JSON values) and
    the group, which goes to ``prompt_cache_key`` and the request's group."""

    model: str
    prompt: str
    parameters: Mapping[str, JSONValue] = field(default_factory=dict)
    group: str = ""

    def validate(self) -> None:
        """Raise :class:`SpecError` for the first problem."""
        _check_str("model", self.model, required=True)
        _check_str("prompt", self.prompt)
        for name in sorted(self.parameters):
            if name in COMPLETION_RESERVED:
                raise SpecError(
                    f"parameters.{name}", "is set by the builder; use the spec's own field"
                )
            _check_str("parameters", name)
            _check_json(f"parameters.{name}", self.parameters[name])
        _check_group(self.group)

    def extra(self) -> dict[str, JSONValue]:
        """The members that travel in ``CompletionInput.extra_json``."""
        extra: dict[str, JSONValue] = dict(self.parameters)
        if self.group:
            extra["prompt_cache_key"] = self.group
        return extra

    def request(self) -> dict[str, JSONValue]:
        """The request as a JSON value (before canonicalization)."""
        self.validate()
        body: dict[str, JSONValue] = {"model": self.model, "prompt": self.prompt}
        body.update(self.extra())
        return body


def build_completion(spec: CompletionSpec) -> bytes:
    """Render a completion spec as an OpenAI completion request, canonical
    (completion mode): the body the router forwards for ``complete``."""
    return canonicalize_full(encode(spec.request()), Mode.COMPLETION).body


def build_completion_key(spec: CompletionSpec, prefix_length: int = 0) -> tuple[bytes, RouteInfo]:
    """The built completion request and its routing key: the key the router
    reports for ``complete``."""
    c = canonicalize_full(encode(spec.request()), Mode.COMPLETION)
    return c.body, route_key_of(c, "", prefix_length)


def _check_group(g: object) -> None:
    if not isinstance(g, str):
        raise SpecError("group", "must be a string")
    gb = g.encode("utf-8", "surrogatepass")
    if len(gb) > MAX_GROUP_BYTES:
        raise SpecError("group", f"is {len(gb)} bytes, over {MAX_GROUP_BYTES}")
    for i, c in enumerate(gb):
        if c < 0x20 or c > 0x7E:
            raise SpecError("group", f"has a non-printable byte 0x{c:02x} at {i}")


def _check_str(field_name: str, v: object, required: bool = False) -> None:
    if not isinstance(v, str):
        raise SpecError(field_name, "must be a string")
    if required and not v:
        raise SpecError(field_name, "is required")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError(field_name, "is not valid UTF-8 (lone surrogate)") from None


def _check_json(field_name: str, v: JSONValue) -> None:
    try:
        text = encode(v)
        text.encode("utf-8")
    except (TypeError, ValueError) as e:
        raise SpecError(field_name, str(e)) from None


def build(spec: PromptSpec) -> bytes:
    """Render the spec as an OpenAI chat completion request, canonical."""
    return canonicalize_full(encode(spec.request()), Mode.CHAT).body


def build_key(spec: PromptSpec, prefix_length: int = 0) -> tuple[bytes, RouteInfo]:
    """The built request and its routing key (chat mode)."""
    c = canonicalize_full(encode(spec.request()), Mode.CHAT)
    return c.body, route_key_of(c, "", prefix_length)


def build_as(spec: PromptSpec, mode: Mode | str) -> bytes:
    """Render the spec as a request of ``mode``, canonical: chat (as
    :func:`build`), responses (:func:`build_responses`) or messages
    (:func:`build_messages`)."""
    m = _build_mode(mode)
    return canonicalize_full(encode(spec.request(m)), m).body


def build_key_as(
    spec: PromptSpec, mode: Mode | str, prefix_length: int = 0
) -> tuple[bytes, RouteInfo]:
    """The request of ``mode`` and its routing key in that mode: the key the
    router reports for the request on its path."""
    m = _build_mode(mode)
    c = canonicalize_full(encode(spec.request(m)), m)
    return c.body, route_key_of(c, "", prefix_length)


def build_responses(spec: PromptSpec) -> bytes:
    """Render the spec as an OpenAI Responses request, canonical: the system
    text (instructions, then the documents) in ``instructions``, the tools
    as given in ``tools``, the history and then the question as message
    items of ``input``; parameters, metadata and group as :func:`build`
    places them."""
    return build_as(spec, Mode.RESPONSES)


def build_messages(spec: PromptSpec) -> bytes:
    """Render the spec as an Anthropic Messages request, canonical: the
    system text in ``system``, the tools as given in ``tools``, the history
    and then the question in ``messages``; parameters (the API requires
    ``max_tokens``), metadata and group as :func:`build` places them."""
    return build_as(spec, Mode.MESSAGES)


_SPEC_FIELDS = (
    "model",
    "instructions",
    "documents",
    "tools",
    "history",
    "question",
    "parameters",
    "metadata",
    "group",
)


def parse_spec(src: bytes | str) -> PromptSpec:
    """Read a prompt spec from JSON (the ``build`` command's input).

    Syntax errors raise :class:`~prefixgate.errors.CanonicalError` with the
    byte offset; unknown members and wrong types raise :class:`SpecError`.
    Tool and parameter numbers keep their exact spelling.
    """
    v = parse(src)
    if not isinstance(v, dict):
        raise SpecError("(spec)", "must be a JSON object")
    for k in v:
        if k not in _SPEC_FIELDS:
            raise SpecError(k, "unknown member")

    def s(name: str, obj: Mapping[str, JSONValue], where: str) -> str:
        x = obj.get(name, "")
        if x is None:
            return ""
        if not isinstance(x, str):
            raise SpecError(where + name, "must be a string")
        return x

    def arr(name: str) -> list[JSONValue]:
        x = v.get(name)
        if x is None:
            return []
        if not isinstance(x, list):
            raise SpecError(name, "must be an array")
        return x

    def obj(name: str) -> dict[str, JSONValue]:
        x = v.get(name)
        if x is None:
            return {}
        if not isinstance(x, dict):
            raise SpecError(name, "must be an object")
        return x

    docs = []
    for i, d in enumerate(arr("documents")):
        if not isinstance(d, dict):
            raise SpecError(f"documents[{i}]", "must be an object")
        for k in d:
            if k not in ("id", "title", "text"):
                raise SpecError(f"documents[{i}].{k}", "unknown member")
        w = f"documents[{i}]."
        docs.append(Document(id=s("id", d, w), title=s("title", d, w), text=s("text", d, w)))
    history = []
    for i, m in enumerate(arr("history")):
        if not isinstance(m, dict):
            raise SpecError(f"history[{i}]", "must be an object")
        for k in m:
            if k not in ("role", "content"):
                raise SpecError(f"history[{i}].{k}", "unknown member")
        w = f"history[{i}]."
        history.append(Message(role=s("role", m, w), content=s("content", m, w)))
    metadata = {}
    for k, x in obj("metadata").items():
        if not isinstance(x, str):
            raise SpecError(f"metadata.{k}", "must be a string")
        metadata[k] = x
    return PromptSpec(
        model=s("model", v, ""),
        question=s("question", v, ""),
        instructions=s("instructions", v, ""),
        documents=docs,
        tools=arr("tools"),
        history=history,
        parameters=obj("parameters"),
        metadata=metadata,
        group=s("group", v, ""),
    )


def build_json(src: bytes | str, mode: Mode | str = Mode.CHAT) -> bytes:
    """Parse a prompt spec from JSON and build its request of ``mode``."""
    return build_as(parse_spec(src), mode)


__all__ = [
    "CompletionSpec",
    "Document",
    "Message",
    "Number",
    "PromptSpec",
    "build",
    "build_as",
    "build_completion",
    "build_completion_key",
    "build_json",
    "build_key",
    "build_key_as",
    "build_messages",
    "build_responses",
    "parse_spec",
]
