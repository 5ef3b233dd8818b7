"""Python SDK for prefixgate.

- :class:`Client` and :class:`AsyncClient`: every RPC of the router's
  InferenceService, NormalizeService and AdminService, synchronous or on
  asyncio, with errors as :class:`RPCError` (``.code``, ``.retry_after``).
- :func:`canonicalize` and :func:`routing_key`: the canonical form and the
  routing key computed locally, byte for byte as the router (and the Go and
  TypeScript SDKs) compute them.
- :class:`PromptSpec` and :func:`build`: a prompt builder whose stable
  content always precedes its volatile content; :class:`CompletionSpec` and
  :func:`build_completion` for completions.
"""

from .builder import (
    CompletionSpec,
    Document,
    Message,
    PromptSpec,
    build,
    build_as,
    build_completion,
    build_completion_key,
    build_json,
    build_key,
    build_key_as,
    build_messages,
    build_responses,
    parse_spec,
)
from .canonical import Mode, Number, canonicalize, encode, format_number, parse
from .client import AsyncClient, Client, chat_input, completion_input
from .errors import CanonicalError, OptionError, PrefixgateError, RPCError, SpecError
from .flow import (
    FAIRNESS_ID_HEADER,
    OBJECTIVE_HEADER,
    check_fairness_id,
    check_objective,
    flow_headers,
)
from .key import RouteInfo, format_key, routing_key

__all__ = [
    "FAIRNESS_ID_HEADER",
    "OBJECTIVE_HEADER",
    "AsyncClient",
    "CanonicalError",
    "Client",
    "CompletionSpec",
    "Document",
    "Message",
    "Mode",
    "Number",
    "OptionError",
    "PrefixgateError",
    "PromptSpec",
    "RPCError",
    "RouteInfo",
    "SpecError",
    "build",
    "build_as",
    "build_completion",
    "build_completion_key",
    "build_json",
    "build_key",
    "build_key_as",
    "build_messages",
    "build_responses",
    "canonicalize",
    "chat_input",
    "check_fairness_id",
    "check_objective",
    "completion_input",
    "encode",
    "flow_headers",
    "format_key",
    "format_number",
    "parse",
    "parse_spec",
    "routing_key",
]
