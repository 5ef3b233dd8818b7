"""Connect clients for the router's three services.

:class:`Client` wraps the generated synchronous clients and turns
``ConnectError`` into :class:`~prefixgate.errors.RPCError`, which carries the
Connect code. The generated clients stay reachable as attributes for every
RPC and option the wrapper does not cover.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType

from .builder import PromptSpec
from .canonical import Mode, encode
from .errors import RPCError, SpecError
from .gen.prefixgate.v1.admin_connect import AdminServiceClientSync
from .gen.prefixgate.v1.admin_pb import (
    ExplainRequest,
    ExplainResponse,
    ListBackendsRequest,
    ListBackendsResponse,
)
from .gen.prefixgate.v1.inference_connect import InferenceServiceClientSync
from .gen.prefixgate.v1.inference_pb import (
    ChatInput,
    ChatRequest,
    ChatResponse,
    ChatStreamRequest,
    ChatStreamResponse,
    Message,
    Tool,
)
from .gen.prefixgate.v1.normalize_connect import NormalizeServiceClientSync
from .gen.prefixgate.v1.normalize_pb import NormalizeRequest, NormalizeResponse
from .gen.prefixgate.v1.routing_pb import RequestMode

if TYPE_CHECKING:
    from typing_extensions import Self

T = TypeVar("T")

_MODES = {
    Mode.AUTO: RequestMode.UNSPECIFIED,
    Mode.CHAT: RequestMode.CHAT,
    Mode.COMPLETION: RequestMode.COMPLETION,
    Mode.NATIVE: RequestMode.NATIVE,
}


def _call(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except ConnectError as e:
        raise RPCError(e.code, e.message) from e


def _stream(it: Iterator[T]) -> Iterator[T]:
    try:
        yield from it
    except ConnectError as e:
        raise RPCError(e.code, e.message) from e


def chat_input(spec: PromptSpec) -> ChatInput:
    """Convert a spec to the API's ChatInput, so that the router renders the
    request :func:`~prefixgate.builder.build` renders and computes the same
    key. Tools must have the shape ChatInput carries:
    ``{"type", "function": {"name", "description", "parameters"}}``."""
    spec.validate()
    tools = []
    for i, t in enumerate(spec.tools):
        assert isinstance(t, dict)
        tools.append(_tool(i, t))
    extra: dict[str, object] = dict(spec.parameters)
    if spec.metadata:
        extra["metadata"] = dict(spec.metadata)
    if spec.group:
        extra["prompt_cache_key"] = spec.group
    return ChatInput(
        model=spec.model,
        tools=tools,
        messages=[Message(role=m.role, content=m.content) for m in spec.messages()],
        group=spec.group,
        extra_json=encode(extra) if extra else "",  # type: ignore[arg-type]
    )


def _tool(i: int, t: dict[str, object]) -> Tool:
    where = f"tools[{i}]"
    for k in t:
        if k not in ("type", "function"):
            raise SpecError(where, f"member {k!r} cannot be sent through ChatInput")
    typ, fn = t.get("type"), t.get("function")
    if not isinstance(typ, str) or not typ:
        raise SpecError(where, "type must be a non-empty string")
    if not isinstance(fn, dict):
        raise SpecError(where, "function must be an object")
    for k in fn:
        if k not in ("name", "description", "parameters"):
            raise SpecError(where, f"function member {k!r} cannot be sent through ChatInput")
    name, desc = fn.get("name"), fn.get("description", None)
    if not isinstance(name, str):
        raise SpecError(where, "function.name must be a string")
    if desc is not None and (not isinstance(desc, str) or not desc):
        raise SpecError(where, "function.description must be a non-empty string")
    params = encode(fn["parameters"]) if "parameters" in fn else ""
    return Tool(type=typ, name=name, description=desc or "", parameters_json=params)


class Client:
    """A synchronous client for a prefixgate router.

    ``protocol`` is ``ProtocolType.CONNECT`` (default), ``GRPC`` or
    ``GRPC_WEB``. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        protocol: ProtocolType = ProtocolType.CONNECT,
        timeout_ms: int | None = None,
    ) -> None:
        kw = {"protocol": protocol, "timeout_ms": timeout_ms}
        self.inference = InferenceServiceClientSync(base_url, **kw)  # type: ignore[arg-type]
        self.normalize_service = NormalizeServiceClientSync(base_url, **kw)  # type: ignore[arg-type]
        self.admin = AdminServiceClientSync(base_url, **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        self.inference.close()
        self.normalize_service.close()
        self.admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(self, spec: PromptSpec) -> ChatResponse:
        """Send the prompt the spec describes; wait for the answer."""
        req = ChatRequest(input=chat_input(spec))
        return _call(lambda: self.inference.chat(req))

    def chat_stream(self, spec: PromptSpec) -> Iterator[ChatStreamResponse]:
        """Send the prompt the spec describes; yield the answer's chunks.
        The first chunk carries the routing."""
        req = ChatStreamRequest(input=chat_input(spec))
        return _stream(_call(lambda: self.inference.chat_stream(req)))

    def normalize(
        self,
        body: bytes | str,
        mode: Mode = Mode.AUTO,
        group: str = "",
        prefix_length: int = 0,
    ) -> NormalizeResponse:
        """Ask the router for the canonical form and key of a body;
        :func:`~prefixgate.canonical.canonicalize` and
        :func:`~prefixgate.key.routing_key` compute the same locally."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        req = NormalizeRequest(
            body=body, mode=_MODES[mode], group=group, prefix_length=prefix_length
        )
        return _call(lambda: self.normalize_service.normalize(req))

    def list_backends(self) -> ListBackendsResponse:
        """The router's backends, policy and load factor."""
        return _call(lambda: self.admin.list_backends(ListBackendsRequest()))

    def explain(
        self,
        body: bytes | str,
        mode: Mode = Mode.AUTO,
        group: str = "",
        prefix_length: int = 0,
    ) -> ExplainResponse:
        """Where a body would go and why, without sending it."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        req = ExplainRequest(body=body, mode=_MODES[mode], group=group, prefix_length=prefix_length)
        return _call(lambda: self.admin.explain(req))
