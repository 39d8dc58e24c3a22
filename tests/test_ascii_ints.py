"""Numbers in text (file names, properties, header fields, options) are ASCII digits only:
str.isdigit() also takes digits such as '¹' and '²' that int() refuses, so a check with it
let such text through to a ValueError (or worse) far from the field that held it."""
from __future__ import annotations

import pytest

from rocketstore.client.config import parse_namesrv_addr
from rocketstore.client.message import Message as ClientMessage
from rocketstore.common.text import is_ascii_int
from rocketstore.message import split_queue_key
from rocketstore.store import layout


@pytest.mark.parametrize("text, signed, expected", [
    ("0", False, True), ("123", False, True), ("-5", False, False), ("-5", True, True),
    ("--5", True, False), ("-", True, False), ("", False, False), ("¹", False, False),
    ("1²", False, False), ("٣", False, False), ("+1", True, False), (" 1", False, False),
])
def test_is_ascii_int(text: str, signed: bool, expected: bool) -> None:
    assert is_ascii_int(text, signed=signed) is expected
    if expected:
        int(text)


def test_a_delay_level_in_other_digits_is_no_delay() -> None:
    msg = ClientMessage("T", b"x")
    msg.properties["DELAY"] = "³"
    assert msg.delay_time_level == 0


def test_a_name_server_port_in_other_digits_names_the_field() -> None:
    with pytest.raises(ValueError, match="namesrv_addr"):
        parse_namesrv_addr("127.0.0.1:⁹⁸⁷⁶")


def test_a_queue_key_in_other_digits_is_refused() -> None:
    with pytest.raises(ValueError, match="topic:queueId"):
        split_queue_key("T:¹")
    assert split_queue_key("T:-1") == ("T", -1)


def test_file_names_in_other_digits_are_not_store_files(tmp_path) -> None:
    (tmp_path / ("0" * 19 + "¹")).write_bytes(b"")
    (tmp_path / ("0" * 20)).write_bytes(b"")
    assert not layout.is_segment_name("0" * 19 + "¹")
    assert [n.rsplit("/", 1)[-1] for n in layout.segment_files(tmp_path)] == ["0" * 20]
