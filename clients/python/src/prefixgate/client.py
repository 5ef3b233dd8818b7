"""Connect clients for the router's three services.

:class:`Client` wraps the generated synchronous clients and
:class:`AsyncClient` the asynchronous ones, with the same methods (``async``,
and async iterators for streams): one per RPC. Both turn ``ConnectError``
into :class:`~prefixgate.errors.RPCError`, which carries the Connect code and
the router's Retry-After. The inference calls and ``explain`` take the
call's flow as keyword arguments ``fairness_id`` and ``objective`` (see
:mod:`prefixgate.flow`). The generated clients stay reachable as attributes
for other headers and per-call options.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from connectrpc.client import ResponseMetadata
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType

from .builder import CompletionSpec, PromptSpec
from .canonical import Mode, encode, quote_name
from .errors import RPCError, SpecError
from .flow import flow_headers
from .gen.prefixgate.v1.admin_connect import AdminServiceClient, AdminServiceClientSync
from .gen.prefixgate.v1.admin_pb import (
    ExplainRequest,
    ExplainResponse,
    ListBackendsRequest,
    ListBackendsResponse,
)
from .gen.prefixgate.v1.inference_connect import (
    InferenceServiceClient,
    InferenceServiceClientSync,
)
from .gen.prefixgate.v1.inference_pb import (
    ChatInput,
    ChatRequest,
    ChatResponse,
    ChatStreamRequest,
    ChatStreamResponse,
    CompleteRequest,
    CompleteResponse,
    CompleteStreamRequest,
    CompleteStreamResponse,
    CompletionInput,
    InvokeRequest,
    InvokeResponse,
    Message,
    Tool,
)
from .gen.prefixgate.v1.normalize_connect import (
    NormalizeServiceClient,
    NormalizeServiceClientSync,
)
from .gen.prefixgate.v1.normalize_pb import (
    LintRequest,
    LintResponse,
    NormalizeRequest,
    NormalizeResponse,
)
from .gen.prefixgate.v1.routing_pb import RequestMode

if TYPE_CHECKING:
    from typing_extensions import Self

T = TypeVar("T")

_MODES = {
    Mode.AUTO: RequestMode.UNSPECIFIED,
    Mode.CHAT: RequestMode.CHAT,
    Mode.COMPLETION: RequestMode.COMPLETION,
    Mode.NATIVE: RequestMode.NATIVE,
    Mode.RESPONSES: RequestMode.RESPONSES,
    Mode.MESSAGES: RequestMode.MESSAGES,
    Mode.POOLING: RequestMode.POOLING,
}


def _retry_after(meta: ResponseMetadata) -> float | None:
    for h in (meta.headers, meta.trailers):
        v = h.get("retry-after")
        if v is not None:
            try:
                secs = float(v.strip())
            except ValueError:
                return None
            return secs if secs >= 0 else None
    return None


def _rpc_error(e: ConnectError, meta: ResponseMetadata) -> RPCError:
    return RPCError(e.code, e.message, _retry_after(meta))


def _call(fn: Callable[[], T]) -> T:
    with ResponseMetadata() as meta:
        try:
            return fn()
        except ConnectError as e:
            raise _rpc_error(e, meta) from e


def _stream(it: Iterator[T]) -> Iterator[T]:
    with ResponseMetadata() as meta:
        try:
            yield from it
        except ConnectError as e:
            raise _rpc_error(e, meta) from e


async def _acall(aw: Callable[[], Awaitable[T]]) -> T:
    with ResponseMetadata() as meta:
        try:
            return await aw()
        except ConnectError as e:
            raise _rpc_error(e, meta) from e


async def _astream(make: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
    with ResponseMetadata() as meta:
        it = make()
        try:
            async for x in it:
                yield x
        except ConnectError as e:
            raise _rpc_error(e, meta) from e
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


def _bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def completion_input(spec: CompletionSpec) -> CompletionInput:
    """Convert a completion spec to the API's CompletionInput; the router
    renders the request :func:`~prefixgate.builder.build_completion` renders."""
    spec.validate()
    extra = spec.extra()
    return CompletionInput(
        model=spec.model,
        prompt=spec.prompt,
        group=spec.group,
        extra_json=encode(extra) if extra else "",  # type: ignore[arg-type]
    )


def _normalize_request(
    body: bytes | str, mode: Mode, group: str, prefix_length: int
) -> NormalizeRequest:
    return NormalizeRequest(
        body=_bytes(body), mode=_MODES[mode], group=group, prefix_length=prefix_length
    )


def _explain_request(
    body: bytes | str, mode: Mode, group: str, prefix_length: int
) -> ExplainRequest:
    return ExplainRequest(
        body=_bytes(body), mode=_MODES[mode], group=group, prefix_length=prefix_length
    )


def _lint_request(
    requests: Sequence[bytes | str], mode: Mode, prefix_length: int, replicas: int, direct: bool
) -> LintRequest:
    if isinstance(requests, (bytes, str)):
        raise TypeError("lint takes a sequence of bodies, not one body")
    return LintRequest(
        requests=[_bytes(r) for r in requests],
        mode=_MODES[mode],
        prefix_length=prefix_length,
        replicas=replicas,
        direct=direct,
    )


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
            raise SpecError(where, f"member {quote_name(k)} cannot be sent through ChatInput")
    typ, fn = t.get("type"), t.get("function")
    if not isinstance(typ, str) or not typ:
        raise SpecError(where, "type must be a non-empty string")
    if not isinstance(fn, dict):
        raise SpecError(where, "function must be an object")
    for k in fn:
        if k not in ("name", "description", "parameters"):
            raise SpecError(
                where, f"function member {quote_name(k)} cannot be sent through ChatInput"
            )
    name, desc = fn.get("name"), fn.get("description", None)
    if not isinstance(name, str):
        raise SpecError(where, "function.name must be a string")
    if desc is not None and (not isinstance(desc, str) or not desc):
        raise SpecError(where, "function.description must be a non-empty string")
    params = encode(fn["parameters"]) if "parameters" in fn else ""
    return Tool(type=typ, name=name, description=desc or "", parameters_json=params)


class Client:
    """A synchronous client for a prefixgate router: one method per RPC.

    ``protocol`` is ``ProtocolType.CONNECT`` (default), ``GRPC`` or
    ``GRPC_WEB``. Use it as a context manager, or call :meth:`close`.
    Failed calls raise :class:`~prefixgate.errors.RPCError`.
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

    # InferenceService

    def chat(
        self, spec: PromptSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> ChatResponse:
        """Send the prompt the spec describes; wait for the answer."""
        req = ChatRequest(input=chat_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _call(lambda: self.inference.chat(req, headers=hd))

    def chat_stream(
        self, spec: PromptSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> Iterator[ChatStreamResponse]:
        """Send the prompt the spec describes; yield the answer's chunks.
        The first chunk carries the routing."""
        req = ChatStreamRequest(input=chat_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _stream(_call(lambda: self.inference.chat_stream(req, headers=hd)))

    def complete(
        self, spec: CompletionSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> CompleteResponse:
        """Send the completion the spec describes; wait for the answer.
        ``routing.key`` equals :func:`~prefixgate.builder.build_completion_key`'s."""
        req = CompleteRequest(input=completion_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _call(lambda: self.inference.complete(req, headers=hd))

    def complete_stream(
        self, spec: CompletionSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> Iterator[CompleteStreamResponse]:
        """Send the completion the spec describes; yield the answer's chunks.
        The first chunk carries the routing."""
        req = CompleteStreamRequest(input=completion_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _stream(_call(lambda: self.inference.complete_stream(req, headers=hd)))

    def invoke(
        self,
        body: bytes | str,
        group: str = "",
        path: str = "",
        *,
        fairness_id: str | None = None,
        objective: str | None = None,
    ) -> InvokeResponse:
        """Send a raw JSON body to one of the router's JSON paths (``path``:
        ``/v1/responses``, ``/v1/messages``, ``/rerank``, ...; the native
        ``/invocations`` when empty), normalized and routed as that REST path
        does; ``.body`` is the backend's raw JSON answer."""
        req = InvokeRequest(body=_bytes(body), group=group, path=path)
        hd = flow_headers(fairness_id, objective)
        return _call(lambda: self.inference.invoke(req, headers=hd))

    # NormalizeService

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
        req = _normalize_request(body, mode, group, prefix_length)
        return _call(lambda: self.normalize_service.normalize(req))

    def lint(
        self,
        requests: Sequence[bytes | str],
        *,
        mode: Mode = Mode.AUTO,
        prefix_length: int = 0,
        replicas: int = 0,
        direct: bool = False,
    ) -> LintResponse:
        """Lint a corpus of request bodies (one JSON body each, in order) with
        the engine of ``prefixgate lint``: ``.findings`` (rule id, severity,
        request index, JSON path, offset, hint) and ``.summary``. A body that
        is not JSON is an ``invalid-json`` finding, not an error.
        ``replicas`` feeds the hot-key rule; ``direct`` lints for a
        byte-prefix router without prefixgate's normalizer."""
        req = _lint_request(requests, mode, prefix_length, replicas, direct)
        return _call(lambda: self.normalize_service.lint(req))

    # AdminService

    def list_backends(self) -> ListBackendsResponse:
        """The router's backends, policy and load factor."""
        return _call(lambda: self.admin.list_backends(ListBackendsRequest()))

    def explain(
        self,
        body: bytes | str,
        mode: Mode = Mode.AUTO,
        group: str = "",
        prefix_length: int = 0,
        *,
        fairness_id: str | None = None,
        objective: str | None = None,
    ) -> ExplainResponse:
        """Where a body would go and why, without sending it."""
        req = _explain_request(body, mode, group, prefix_length)
        hd = flow_headers(fairness_id, objective)
        return _call(lambda: self.admin.explain(req, headers=hd))


# How long AsyncClient.close lets the HTTP runtime finish closing.
_CLOSE_GRACE_S = 0.05


class AsyncClient:
    """An asynchronous client for a prefixgate router, on the connectrpc
    async runtime: the methods of :class:`Client` as coroutines, and async
    iterators for the streams.

    ``protocol`` is ``ProtocolType.CONNECT`` (default), ``GRPC`` or
    ``GRPC_WEB``. Use it as an async context manager, or await
    :meth:`close`. Failed calls raise :class:`~prefixgate.errors.RPCError`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        protocol: ProtocolType = ProtocolType.CONNECT,
        timeout_ms: int | None = None,
    ) -> None:
        kw = {"protocol": protocol, "timeout_ms": timeout_ms}
        self.inference = InferenceServiceClient(base_url, **kw)  # type: ignore[arg-type]
        self.normalize_service = NormalizeServiceClient(base_url, **kw)  # type: ignore[arg-type]
        self.admin = AdminServiceClient(base_url, **kw)  # type: ignore[arg-type]

    async def close(self) -> None:
        await self.inference.close()
        await self.normalize_service.close()
        await self.admin.close()
        # The HTTP runtime's worker threads finish closing connections on
        # their own and then call back into this event loop; give them a
        # moment while the loop runs, so none calls into an interpreter
        # that is shutting down (the process would abort).
        await asyncio.sleep(_CLOSE_GRACE_S)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # InferenceService

    async def chat(
        self, spec: PromptSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> ChatResponse:
        """Send the prompt the spec describes; wait for the answer."""
        req = ChatRequest(input=chat_input(spec))
        hd = flow_headers(fairness_id, objective)
        return await _acall(lambda: self.inference.chat(req, headers=hd))

    def chat_stream(
        self, spec: PromptSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> AsyncIterator[ChatStreamResponse]:
        """Send the prompt the spec describes; an async iterator of the
        answer's chunks (``async for``). The first chunk carries the routing.
        The spec is checked here, before iteration."""
        req = ChatStreamRequest(input=chat_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _astream(lambda: self.inference.chat_stream(req, headers=hd))

    async def complete(
        self, spec: CompletionSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> CompleteResponse:
        """Send the completion the spec describes; wait for the answer."""
        req = CompleteRequest(input=completion_input(spec))
        hd = flow_headers(fairness_id, objective)
        return await _acall(lambda: self.inference.complete(req, headers=hd))

    def complete_stream(
        self, spec: CompletionSpec, *, fairness_id: str | None = None, objective: str | None = None
    ) -> AsyncIterator[CompleteStreamResponse]:
        """Send the completion the spec describes; an async iterator of the
        answer's chunks. The first chunk carries the routing."""
        req = CompleteStreamRequest(input=completion_input(spec))
        hd = flow_headers(fairness_id, objective)
        return _astream(lambda: self.inference.complete_stream(req, headers=hd))

    async def invoke(
        self,
        body: bytes | str,
        group: str = "",
        path: str = "",
        *,
        fairness_id: str | None = None,
        objective: str | None = None,
    ) -> InvokeResponse:
        """Send a raw JSON body to one of the router's JSON paths
        (``/invocations`` when ``path`` is empty)."""
        req = InvokeRequest(body=_bytes(body), group=group, path=path)
        hd = flow_headers(fairness_id, objective)
        return await _acall(lambda: self.inference.invoke(req, headers=hd))

    # NormalizeService

    async def normalize(
        self,
        body: bytes | str,
        mode: Mode = Mode.AUTO,
        group: str = "",
        prefix_length: int = 0,
    ) -> NormalizeResponse:
        """The router's canonical form and key of a body."""
        req = _normalize_request(body, mode, group, prefix_length)
        return await _acall(lambda: self.normalize_service.normalize(req))

    async def lint(
        self,
        requests: Sequence[bytes | str],
        *,
        mode: Mode = Mode.AUTO,
        prefix_length: int = 0,
        replicas: int = 0,
        direct: bool = False,
    ) -> LintResponse:
        """Lint a corpus of request bodies; see :meth:`Client.lint`."""
        req = _lint_request(requests, mode, prefix_length, replicas, direct)
        return await _acall(lambda: self.normalize_service.lint(req))

    # AdminService

    async def list_backends(self) -> ListBackendsResponse:
        """The router's backends, policy and load factor."""
        return await _acall(lambda: self.admin.list_backends(ListBackendsRequest()))

    async def explain(
        self,
        body: bytes | str,
        mode: Mode = Mode.AUTO,
        group: str = "",
        prefix_length: int = 0,
        *,
        fairness_id: str | None = None,
        objective: str | None = None,
    ) -> ExplainResponse:
        """Where a body would go and why, without sending it."""
        req = _explain_request(body, mode, group, prefix_length)
        hd = flow_headers(fairness_id, objective)
        return await _acall(lambda: self.admin.explain(req, headers=hd))
