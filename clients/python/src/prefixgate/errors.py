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
    """An out-of-range option: prefix length, group id, mode, or a call's
    fairness id or objective."""

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
    ``Code.INVALID_ARGUMENT`` for a rejected body, ``Code.RESOURCE_EXHAUSTED``
    when every backend is at its bound, ``Code.UNAVAILABLE`` when no
    healthy backend serves the model, or ``Code.NOT_FOUND`` when no backend
    serves it at all (not retryable). ``retry_after`` is the wait in seconds
    the router asked for (its Retry-After, sent with RESOURCE_EXHAUSTED when
    every backend is at its bound), or None.
    """

    def __init__(self, code: Code, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later: UNAVAILABLE, or
        RESOURCE_EXHAUSTED with a Retry-After (a body over the size limit is
        RESOURCE_EXHAUSTED without one, and is not retryable)."""
        from connectrpc.code import Code

        if self.code == Code.UNAVAILABLE:
            return True
        return self.code == Code.RESOURCE_EXHAUSTED and self.retry_after is not None
