"""The properties text has one Python codec (rocketstore.common.properties); the native parsers
are fast paths of it: the broker's send path (parse_properties_text) agrees with it on every
input."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.processors.send._send_header import parse_properties_text
from rocketstore.common.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    decode_properties,
    encode_properties,
)

TEXT = st.text(alphabet="ab\x01\x02é ", max_size=40)
NAMES = st.text(alphabet="abKEYSTAG_é", min_size=1, max_size=8)
VALUES = st.text(alphabet="xyz é\x01", min_size=1, max_size=8)


@given(TEXT)
def test_the_send_path_parses_as_the_codec(text: str) -> None:
    assert parse_properties_text(text) == decode_properties(text)


@given(st.dictionaries(NAMES, VALUES, max_size=6))
def test_encode_then_decode_is_the_map(properties: dict[str, str]) -> None:
    text = encode_properties(properties)
    assert decode_properties(text) == properties
    assert decode_properties(text + PROPERTY_SEPARATOR) == properties
    assert parse_properties_text(text) == properties


def test_dropped_pairs() -> None:
    sep, nv = PROPERTY_SEPARATOR, NAME_VALUE_SEPARATOR
    text = f"a{nv}{sep}{nv}b{sep}c{sep}d{nv}1{nv}2{sep}d{nv}3"
    assert decode_properties(text) == parse_properties_text(text) == {"d": "3"}
    assert decode_properties("") == parse_properties_text("") == {}
