"""Java .properties syntax, camelCase keys and typed values (rocketstore.common.java_properties)."""
from __future__ import annotations

import io

import pytest

from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    escape_value,
    java_trim,
    parse_properties,
    read_properties_text,
    snake_case,
)


def test_syntax_as_java_reads_it() -> None:
    text = ("# comment\n! also a comment\n  key1 = value one \nkey2:v2\nkey3 v3\n"
            "multi = a\\\n    b\\\n  c\nesc\\=key=x\\ty\\u0041\nempty\nlast=1\nlast=2\n")
    assert parse_properties(text) == {
        "key1": "value one ", "key2": "v2", "key3": "v3", "multi": "abc", "esc=key": "x\tyA",
        "empty": "", "last": "2"}


@pytest.mark.parametrize("value", ["plain", " leading space", "tab\there", "new\nline", "a=b:c#d!e",
                                   "back\\slash", "ünïcödé", "emoji 😀", "", "trailing "])
def test_escaped_values_read_back(value: str) -> None:
    assert parse_properties(f"k={escape_value(value)}\n") == {"k": value}


def test_malformed_unicode_escape_raises() -> None:
    with pytest.raises(ValueError, match="uxxxx"):
        parse_properties("k=\\u12G4\n")


def test_camel_and_snake_case() -> None:
    assert camel_case("flush_disk_type") == "flushDiskType"
    assert camel_case("listen_port") == "listenPort" and camel_case("port") == "port"
    assert camel_case("duration_s", {"s": "Seconds"}) == "durationSeconds"
    assert snake_case("flushDiskType") == "flush_disk_type"
    assert snake_case(camel_case("max_message_size")) == "max_message_size"


def test_typed_values() -> None:
    assert convert_value(bool, "TRUE") is True and convert_value("bool", "false") is False
    assert convert_value(int, "-42") == -42 and convert_value("int", "+7") == 7
    assert convert_value(float, "1.5") == 1.5
    assert convert_value(str, " kept ") == " kept "
    for kind, text, message in ((bool, "yes", "true or false"), (int, "1.0", "decimal integer"),
                                (int, "¹", "decimal integer"), (float, "x", "number")):
        with pytest.raises(ValueError, match=message):
            convert_value(kind, text)


def test_java_trim_and_reading() -> None:
    assert java_trim("\x00\t a b \x1f") == "a b" and java_trim(" ") == ""
    assert read_properties_text(io.StringIO("a=1")) == "a=1"
