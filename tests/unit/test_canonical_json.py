"""RFC 8785 canonical JSON, checked against the RFC's own examples (sections 3.2.2, 3.2.3, appendix B)."""

from __future__ import annotations

import json

import pytest

from agentify._common.canonical_json import canonical


def test_the_rfcs_sample_object_comes_out_as_the_rfc_prints_it() -> None:
    data = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical(data) == expected.encode("utf-8")


def test_members_sort_by_utf16_code_units_not_code_points() -> None:
    data = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "\u00f6": 7}
    keys = list(json.loads(canonical(data)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize(
    ("number", "written"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740992, "9007199254740992"),
        (9007199254740993, "9007199254740992"),  # beyond 2**53: the double it reads as
        (295147905179352830000.0, "295147905179352830000"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (-1.5e-10, "-1.5e-10"),
        (12.0, "12"),
        (123.456, "123.456"),
    ],
)
def test_numbers_are_written_as_ecmascript_writes_them(number: float, written: str) -> None:
    assert canonical(number) == written.encode()


def test_the_same_value_written_differently_gives_the_same_bytes() -> None:
    one = json.loads('{ "b" : [1.0, "x"], "a": {"z": null, "y": 1e2} }')
    other = json.loads('{"a":{"y":100,"z":null},"b":[1,"x"]}')
    assert canonical(one) == canonical(other) == b'{"a":{"y":100,"z":null},"b":[1,"x"]}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1: "x"}, {"a": object()}])
def test_what_json_cannot_hold_is_refused(value: object) -> None:
    with pytest.raises(ValueError):
        canonical(value)
