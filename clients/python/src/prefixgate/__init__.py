"""Python SDK for prefixgate.

- :class:`Client`: the router's InferenceService, NormalizeService and
  AdminService, with errors as :class:`RPCError` (``.code``).
- :func:`canonicalize` and :func:`routing_key`: the canonical form and the
  routing key computed locally, byte for byte as the router (and the Go and
  TypeScript SDKs) compute them.
- :class:`PromptSpec` and :func:`build`: a prompt builder whose stable
  content always precedes its volatile content.
"""

from .builder import Document, Message, PromptSpec, build, build_json, build_key, parse_spec
from .canonical import Mode, Number, canonicalize, encode, format_number, parse
from .client import Client, chat_input
from .errors import CanonicalError, OptionError, PrefixgateError, RPCError, SpecError
from .key import RouteInfo, format_key, routing_key

__all__ = [
    "CanonicalError",
    "Client",
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
    "build_json",
    "build_key",
    "canonicalize",
    "chat_input",
    "encode",
    "format_key",
    "format_number",
    "parse",
    "parse_spec",
    "routing_key",
]
