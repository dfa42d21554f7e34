"""The redactor runs in linear time on hostile input, and cuts only after it has masked."""

from __future__ import annotations

import time

import pytest

from agentify.security.redact import MASK, Redactor

MB = 1_000_000

# The worst case of each pattern: a prefix that matches, followed by what makes it fail late,
# repeated or stretched to 1 MB. A backtracking pattern takes minutes here (the old URL pattern
# took 6 s on 80 kB); a linear one takes well under a second.
WORST_CASES = {
    "letters (URL scheme run)": "a" * MB,
    "scheme-like run": "a+b.c-" * (MB // 6),
    "URL without @": "x://user:" + "p" * MB,
    "many URLs without @": "x://u:p/" * (MB // 8),
    "bearer without token": "bearer " * (MB // 7),
    "bearer with spaces": "Bearer" + " " * MB,
    "short sk- keys": "sk-abc " * (MB // 7),
    "token assignments": "token = " * (MB // 8),
    "api keys without value": "api_key:" + " " * MB,
    "quotes": 'password"' * (MB // 9),
}


@pytest.mark.parametrize("text", WORST_CASES.values(), ids=WORST_CASES.keys())
def test_every_pattern_runs_in_linear_time_on_its_worst_case(text: str) -> None:
    redactor = Redactor(["a-known-secret-value"])
    started = time.process_time()
    redactor.text(text)
    # A safety bound in CPU seconds, not a performance figure: quadratic matching of 1 MB takes minutes.
    assert time.process_time() - started < 5.0


def test_secret_shapes_are_still_masked() -> None:
    redactor = Redactor()
    text = redactor.text(
        "Authorization: Bearer abcdefgh.ijk and sk-abcdefghijkl and token=hunter2222 "
        "and postgres://app:pa55word@db/x and API_KEY: 'zzzzzzzz'"
    )
    for secret in ("abcdefgh.ijk", "sk-abcdefghijkl", "hunter2222", "pa55word", "zzzzzzzz"):
        assert secret not in text
    assert "postgres://app:" + MASK + "@db/x" in text


def test_a_person_token_and_a_jwt_quoted_by_mistake_are_masked() -> None:
    person = "agt_Qx3-abcdefghijklmnopqrstuvwxyz012345"
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"
    text = Redactor().text(f"the client sent {person} then {jwt}.")
    assert "Qx3-abcdefghijklmnop" not in text and "eyJzdWIiOiJhbGljZSJ9" not in text and "c2lnbmF0dXJl" not in text
    assert text.startswith("the client sent agt_")


def test_a_secret_straddling_the_cut_leaks_no_part_of_it() -> None:
    secret = "ghp_" + "Z9" * 20
    redactor = Redactor([secret])
    text = "x" * 1990 + secret + "y" * 100
    cut = redactor.bounded(text, 2000)
    assert "ghp_" not in cut and "Z9Z9" not in cut
    assert cut.endswith("characters in all]")
    assert f"{len(text)} characters" in cut


def test_a_huge_text_is_cut_after_masking_and_says_how_long_it_was() -> None:
    redactor = Redactor(["s3cr3t-value"])
    text = "s3cr3t-value " + "z" * (5 * MB)
    cut = redactor.bounded(text, 100)
    assert cut.startswith(MASK) and len(cut) < 200 and str(len(text)) in cut


def test_short_texts_are_not_cut() -> None:
    assert Redactor().bounded("hello", 10) == "hello"


def test_a_secret_straddling_the_precut_is_not_shown_in_part_after_masking_shrinks_the_text() -> None:
    secret = "ghp_" + "Z" * 36
    redactor = Redactor([secret])
    # Masking the long token=... value pulls everything after it up, toward the cut.
    text = "token=" + "a" * 67_500 + "\nGH=" + secret
    cut = redactor.bounded(text, 2000)
    assert "ghp_" not in cut and "ZZZZ" not in cut


def test_keys_of_data_are_masked_and_bounded_too() -> None:
    redactor = Redactor(["session-token-123"])
    data = redactor.data({"session-token-123": 1, "k" * 5000: "v"}, limit=100)
    assert "session-token-123" not in str(data) and max(len(k) for k in data) < 200


def test_a_cut_result_is_masked_before_it_is_cut() -> None:
    import mcp_types as types

    from agentify.gateway.result_caps import cap_result

    secret = "ghp_" + "Q" * 36
    result = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 1990 + secret)])
    capped = cap_result(result, 2000, Redactor([secret]).text)
    assert "ghp_" not in str(capped.content[0])


def test_a_secret_is_masked_in_its_json_repr_and_url_forms() -> None:
    import json
    from urllib.parse import quote, quote_plus

    secret = 'pa"ss\\wo rd/é-4711'
    redactor = Redactor([secret])
    for form in (
        json.dumps(secret),
        json.dumps(secret, ensure_ascii=False),
        repr(secret),
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
    ):
        masked = redactor.text(f"the server said: {form}!", patterns=False)
        assert MASK in masked and form.strip("\"'") not in masked, (form, masked)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("BEARER   abcdefgh.ijk", "abcdefgh.ijk"),
        ("Api-Key = zzzzzzzz", "zzzzzzzz"),
        ("SECRET: hunter2222", "hunter2222"),
        ("PassWord='pa55word'", "pa55word"),
        ("the key sk-abcdefghijkl", "abcdefghijkl"),
        ("https://app:pa55word@db/x", "pa55word"),
        # Case-insensitive patterns take the long s for an s and the Kelvin sign for a k: non-ASCII text
        # is never let through on the quick test for the words the patterns need.
        ("ſecret=hunter2222", "hunter2222"),
        ("to\u212aen: hunter2222", "hunter2222"),
    ],
)
def test_a_secret_shape_is_masked_in_any_case_and_in_look_alike_letters(text: str, secret: str) -> None:
    assert secret not in Redactor().text(text)
