"""rocketstore.broker.processors.send._send_header against a plain-Python reference: SEND headers (long and
one-letter names; strings and the C++ client's JSON numbers) and properties text."""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.processors.send._send_header import (
    SendHeaderError,
    decode_send_header,
    parse_properties_text,
)
from rocketstore.broker.processors.send._send_path import properties_and_refusal
from rocketstore.common.text import quote

LONG = {"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "3", "sysFlag": "1", "bornTimestamp": "1700000000000", "flag": "0",
        "properties": "TAGS\x01a\x02", "reconsumeTimes": "2", "unitMode": "false", "batch": "1"}
SHORT = dict(zip("abcdefghijkm", LONG.values(), strict=True))


def reference_long(value: object) -> int | None:
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,19}", value):
        number = int(value)
        return number if -(2**63) <= number < 2**63 else None
    return None


def reference_properties(text: str) -> dict[str, str]:
    out = {}
    for pair in text.split("\x02"):
        name, sep, value = pair.partition("\x01")
        if sep and name and value:
            out[name] = value
    return out


@pytest.mark.parametrize("ext,v2", [(LONG, False), (SHORT, True)])
def test_both_spellings(ext, v2) -> None:
    h = decode_send_header(dict(ext), v2)
    assert (h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums, h.queue_id,
            h.sys_flag, h.born_timestamp, h.flag, h.properties, h.reconsume_times, h.unit_mode,
            h.batch, h.max_reconsume_times) == ("PG", "T", "TBW102", 4, 3, 1, 1700000000000, 0,
                                               "TAGS\x01a\x02", 2, False, True, None)
    numbers = dict(ext)
    numbers["queueId" if not v2 else "e"] = 7          # the C++ client's JSON number
    assert decode_send_header(numbers, v2).queue_id == 7


@pytest.mark.parametrize("field,value,message", [
    ("queueId", None, "is missing"), ("topic", None, "is missing"), ("queueId", "1.5", "integer"),
    ("queueId", "¹", "integer"), ("queueId", "--1", "integer"), ("queueId", " 1", "integer"),
    ("bornTimestamp", "9223372036854775808", "long"), ("flag", 2**64, "long"),
    ("batch", "maybe", "true or false"), ("sysFlag", [1], "integer")])
def test_bad_fields_are_named(field, value, message) -> None:
    ext = dict(LONG)
    if value is None:
        del ext[field]
    else:
        ext[field] = value
    with pytest.raises(SendHeaderError, match=message) as info:
        decode_send_header(ext)
    assert info.value.field == field


@given(st.one_of(st.text(alphabet="0123456789+- x¹", max_size=22), st.integers(-(2**65), 2**65)))
def test_integers_as_java_reads_them(value) -> None:
    expected = reference_long(value)
    ext = dict(LONG, queueId=value)
    if expected is None:
        with pytest.raises(SendHeaderError):
            decode_send_header(ext)
    else:
        assert decode_send_header(ext).queue_id == expected


@given(st.text(alphabet="ab\x01\x02é", max_size=40))
def test_properties_as_rocketmq_reads_them(text) -> None:
    assert parse_properties_text(text) == reference_properties(text)
    assert parse_properties_text(None) == {} and parse_properties_text("") == {}


def reference_separator_pair(text: str) -> int:
    """Where the first pair with a non-empty name and a value holding another \\x01 starts, or -1."""
    start = 0
    for segment in text.split("\x02"):
        name, one, value = segment.partition("\x01")
        if one and name and value and "\x01" in value:
            return start
        start += len(segment) + 1
    return -1


@given(st.text(alphabet="ab\x01\x02éÿ", max_size=40), st.booleans())
def test_one_byte_and_wide_texts_read_alike(text: str, wide: bool) -> None:
    """Latin-1 texts take a memchr walk of their own (with kept name strs); wider ones the
    generic walk: both as the reference, the separator's pair included."""
    if wide:
        text += "\x02\u4e2d\x01x"       # a pair no Latin-1 text holds, last: nothing else moves
    properties, refusal = properties_and_refusal(text)
    expected = reference_properties(text)
    assert properties == expected
    assert parse_properties_text(text) == expected
    at = reference_separator_pair(text)
    if at == -1:
        assert refusal is None
    else:
        name = text[at:text.index("\x01", at)]
        assert refusal is not None and f"the value of property {quote(name, 100)} contains" in refusal
