"""Flow call options: the fairness id and objective of a call.

Every request the router queues belongs to a flow: a *fairness id* (whose
share of the fleet it counts against) and an *objective* (a name the
router's ``flow_control.objectives`` maps to a priority; negative is
sheddable). The clients' inference calls and ``explain`` take them as the
keyword arguments ``fairness_id`` and ``objective`` and send them as the
headers below, on Connect, gRPC and gRPC-Web alike; :func:`flow_headers`
gives the same headers for a REST call (for example the OpenAI SDK's
``extra_headers``). A bad value raises :class:`~prefixgate.errors.OptionError`
before anything is sent.
"""

from __future__ import annotations

from .errors import OptionError

FAIRNESS_ID_HEADER = "x-llm-d-inference-fairness-id"
OBJECTIVE_HEADER = "x-llm-d-inference-objective"
MAX_FLOW_VALUE_BYTES = 128

_OBJECTIVE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _utf8(what: str, code: str, v: str) -> bytes:
    if not isinstance(v, str):
        raise OptionError(code, f"call option {what}: is a {type(v).__name__}, not a string")
    b = v.encode("utf-8", "surrogatepass")
    if not b:
        raise OptionError(code, f"call option {what}: is empty")
    if len(b) > MAX_FLOW_VALUE_BYTES:
        raise OptionError(
            code, f"call option {what}: is {len(b)} bytes, over {MAX_FLOW_VALUE_BYTES}"
        )
    return b


def check_fairness_id(fairness_id: str) -> None:
    """Raise OptionError unless ``fairness_id`` is 1 to 128 bytes of
    printable ASCII (0x20-0x7e) with no space at either end, the rule the
    router applies to the header."""
    what, code = "fairness id", "invalid-fairness-id"
    b = _utf8(what, code, fairness_id)
    for i, c in enumerate(b):
        if c < 0x20 or c > 0x7E:
            raise OptionError(
                code, f"call option {what}: has a non-printable byte 0x{c:02x} at {i}"
            )
    if b[0] == 0x20 or b[-1] == 0x20:
        raise OptionError(code, f"call option {what}: starts or ends with a space")


def check_objective(objective: str) -> None:
    """Raise OptionError unless ``objective`` is 1 to 128 bytes of ASCII
    letters, digits, '-', '_' and '.', the rule of the router's
    ``flow_control.objectives`` names."""
    what, code = "objective", "invalid-objective"
    b = _utf8(what, code, objective)
    for i, c in enumerate(b):
        if c not in _OBJECTIVE_BYTES:
            raise OptionError(
                code,
                f"call option {what}: byte 0x{c:02x} at {i} is not a letter, digit, '-', '_' or '.'",
            )


def flow_headers(fairness_id: str | None = None, objective: str | None = None) -> dict[str, str]:
    """The headers that carry a fairness id and an objective (None leaves
    that header out). Raises OptionError naming a bad value."""
    h: dict[str, str] = {}
    if fairness_id is not None:
        check_fairness_id(fairness_id)
        h[FAIRNESS_ID_HEADER] = fairness_id
    if objective is not None:
        check_objective(objective)
        h[OBJECTIVE_HEADER] = objective
    return h
