"""quote: how log lines and error messages quote a client-supplied value."""

from __future__ import annotations

from rocketstore.common.text import QUOTE_LIMIT, quote


def test_a_short_value_is_its_repr() -> None:
    assert quote("topic") == "'topic'"
    assert quote(b"\x01") == "b'\\x01'"
    assert quote(None) == "None"


def test_a_long_value_is_cut_and_says_its_length() -> None:
    text = quote("a" * 5 * 1024 * 1024)
    assert text.startswith("'aaa") and text.endswith("... (5,242,880 chars)")
    assert len(text) <= QUOTE_LIMIT + 30
    assert quote(b"x" * 300, 10) == "b'xxxxxxxx... (300 bytes)"
    assert quote(list(range(1000)), 20) == repr(list(range(1000)))[:20] + "..."


def test_parsers_quote_a_bad_client_value_in_part() -> None:
    """A 5 MiB bad value makes an error message of a few hundred characters."""
    import pytest

    from rocketstore.common.fastjson import FastjsonError, loads_object_keys
    from rocketstore.common.subscription import NoTagError, parse_tags

    big = "x" * (5 * 1024 * 1024)
    with pytest.raises(NoTagError) as no_tag:
        parse_tags("||" * (len(big) // 2))
    with pytest.raises(FastjsonError) as bad_json:
        loads_object_keys('{"a" "' + big + '"}')
    for exc in (no_tag.value, bad_json.value):
        assert len(str(exc)) < 500 and " chars)" in str(exc)
