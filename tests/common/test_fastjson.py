"""fastjson's bare integer keys and object keys (rocketstore.common.fastjson)."""
from __future__ import annotations

import json

import orjson
import pytest

from rocketstore.common.fastjson import (
    dumps_object_keys,
    loads_fastjson,
    loads_object_keys,
    quote_bare_int_keys,
)


def test_bare_integer_keys_are_read() -> None:
    text = '{"offsetTable":{"t@g":{0:120,-1:5, 2 :7}}}'
    expected = {"offsetTable": {"t@g": {"0": 120, "-1": 5, "2": 7}}}
    assert loads_fastjson(text.encode()) == expected
    assert loads_fastjson(text, loads=json.loads) == expected
    assert quote_bare_int_keys(b"{0:1}") == b'{"0":1}' and quote_bare_int_keys("{0:1}") == '{"0":1}'


def test_standard_json_is_read_unchanged_and_garbage_still_fails() -> None:
    assert loads_fastjson(b'{"a":"{0:1}"}') == {"a": "{0:1}"}
    with pytest.raises(orjson.JSONDecodeError):
        loads_fastjson(b'{"a": ')
    with pytest.raises(ValueError):
        loads_fastjson('{"a": ', loads=json.loads)


def test_object_keys_round_trip() -> None:
    table = {(("brokerName", "b"), ("queueId", 1), ("topic", "t")): 5}
    data = dumps_object_keys({"offsetTable": table})
    assert loads_object_keys(data) == {"offsetTable": table}
