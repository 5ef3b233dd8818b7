from __future__ import annotations

import pytest

from prefixgate import CanonicalError, Mode, Number, OptionError, canonicalize, encode, routing_key
from prefixgate.canonical import format_double, format_number


@pytest.mark.parametrize(
    ("lit", "want"),
    [
        ("1.0", "1"),
        ("1e-7", "1e-7"),
        ("9007199254740993", "9007199254740993"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("0.000001", "0.000001"),
        ("123e-20", "1.23e-18"),
        ("-1.5E+300", "-1.5e+300"),
        ("0.1", "0.1"),
        ("4.35", "4.35"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
    ],
)
def test_number_forms(lit: str, want: str) -> None:
    assert format_number(lit) == want


def test_python_values_encode_canonically() -> None:
    v = {"b": [1, 2.5, 1e21, True, None, Number("1.0")], "a": "\u00e9\n", "\ue000": 1, "😀": 2}
    assert encode(v) == '{"a":"é\\n","b":[1,2.5,1e+21,true,null,1],"😀":2,"\ue000":1}'
    assert format_double(-0.0) == "0"
    with pytest.raises(ValueError):
        encode(float("nan"))


def test_idempotent_and_str_input() -> None:
    once = canonicalize('{ "z": [1.50, "\\u0041"], "a": {} }')
    assert canonicalize(once) == once == b'{"a":{},"z":[1.5,"A"]}'


def test_error_message() -> None:
    with pytest.raises(CanonicalError) as ei:
        canonicalize(b'{"a":1,"a":2}')
    assert str(ei.value) == 'offset 7: duplicate member name "a"'
    assert ei.value.code == "duplicate-member"


def test_options_rejected() -> None:
    with pytest.raises(OptionError):
        routing_key(b"{}", prefix_length=10)
    with pytest.raises(OptionError):
        routing_key(b"{}", group="tab\there")
    with pytest.raises(OptionError):
        Mode.parse("CHAT")
