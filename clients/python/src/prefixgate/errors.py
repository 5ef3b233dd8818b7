"""Exceptions raised by the prefixgate SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectrpc.code import Code


class PrefixgateError(Exception):
    """Base class of every error this package raises."""


class CanonicalError(PrefixgateError, ValueError):
    """Input the canonical form rejects: ``offset N: reason``.

    ``offset`` is the 0-based byte offset into the input (into the canonical
    body for routing-key errors); ``code`` is the stable reason code shared
    with the Go reference, for example ``duplicate-member``.
    """

    def __init__(self, offset: int, code: str, reason: str) -> None:
        super().__init__(f"offset {offset}: {reason}")
        self.offset = offset
        self.code = code
        self.reason = reason


class OptionError(PrefixgateError, ValueError):
    """An out-of-range option: prefix length, group id or mode."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SpecError(PrefixgateError, ValueError):
    """A prompt spec the builder cannot render."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"prompt spec: {field}: {reason}")
        self.field = field
        self.reason = reason


class RPCError(PrefixgateError):
    """A failed call to the router.

    ``code`` is the Connect code (``connectrpc.code.Code``), for example
    ``Code.INVALID_ARGUMENT`` for a rejected body or ``Code.RESOURCE_EXHAUSTED``
    when every backend is at its bound.
    """

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
