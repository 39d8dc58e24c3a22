"""Frame codec: round trips of both header serializations, streaming, limits, bad headers."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.remoting import (
    FrameDecoder,
    FrameError,
    HeaderError,
    RemotingCommand,
    SerializeType,
    create_request,
    create_response,
    decode,
    encode,
    encode_frame,
)
from rocketstore.remoting.codec import JOIN_BODY_BELOW, decode_binary_header, encode_binary_header

int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
text = st.text(max_size=40)
commands = st.builds(
    RemotingCommand,
    code=int16,
    language=st.integers(min_value=0, max_value=11),
    version=int16,
    opaque=int32,
    flag=st.integers(min_value=0, max_value=3),
    remark=st.one_of(st.none(), st.text(min_size=1, max_size=60)),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=20), text, max_size=8),
    body=st.one_of(st.none(), st.binary(min_size=1, max_size=300)),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)


def same(a: RemotingCommand, b: RemotingCommand) -> None:
    assert (a.code, a.language, a.version, a.opaque, a.flag) == (b.code, b.language, b.version, b.opaque, b.flag)
    assert a.remark == b.remark
    assert a.ext_fields == b.ext_fields
    assert a.body_bytes() == b.body_bytes()
    assert a.serialize_type == b.serialize_type


@given(commands)
@settings(max_examples=300, deadline=None)
def test_round_trip_both_serializations(cmd: RemotingCommand) -> None:
    same(decode(encode(cmd)), cmd)


@given(st.lists(commands, min_size=1, max_size=6), st.data())
@settings(max_examples=100, deadline=None)
def test_stream_split_anywhere(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode(cmd) for cmd in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    last = 0
    for cut in [*cuts, len(stream)]:
        got += decoder.feed(stream[last:cut])  # type: ignore[arg-type]
        last = cut
    assert decoder.buffered == 0
    assert len(got) == len(cmds)
    for a, b in zip(got, cmds, strict=True):
        same(a, b)


def test_byte_at_a_time() -> None:
    cmds = [
        create_request(105, {"topic": "TopicTest"}),
        create_request(10, {"topic": "T", "queueId": "3"}, b"x" * 1000, serialize_type=SerializeType.ROCKETMQ),
        create_request(34, body=b"{}", oneway=True),
    ]
    stream = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
        assert decoder.buffered <= len(stream)
    assert [c.code for c in got] == [105, 10, 34]
    assert got[1].body == b"x" * 1000 and got[1].serialize_type == SerializeType.ROCKETMQ
    assert got[2].is_oneway


def test_cpp_client_route_request_decodes() -> None:
    """The GET_ROUTEINFO_BY_TOPIC frame the C++ client sends (docs/remoting.md, section 9),
    byte for byte."""
    header = (
        b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":'
        b'"N/YT7X6tJe5UfutmW+uNwTTJ7Fc=","topic":"TopicTest"},"flag":0,"language":"CPP",'
        b'"opaque":0,"remark":"","version":63}\n'
    )
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    assert len(frame) == 197 and frame[:8].hex() == "000000c1000000bd"
    cmd = decode(frame)
    assert cmd.code == 105 and cmd.language == 1 and cmd.version == 63 and cmd.opaque == 0
    assert cmd.ext_fields["topic"] == "TopicTest" and cmd.remark == ""
    assert not cmd.is_response and not cmd.is_oneway


def test_numbers_in_ext_fields_become_strings() -> None:
    """The C++ client sends some extFields as JSON numbers; they arrive as their text."""
    header = orjson.dumps(
        {"code": 10, "extFields": {"queueId": 3, "sysFlag": 0, "batch": "0", "x": True, "n": None, "f": 1.5},
         "flag": 0, "language": "CPP", "opaque": 9, "version": 63}
    )
    cmd = decode(struct.pack(">II", 4 + len(header), len(header)) + header)
    assert cmd.ext_fields == {"queueId": "3", "sysFlag": "0", "batch": "0", "x": "true", "f": "1.5"}


def test_json_header_is_written_like_java() -> None:
    response = create_response(create_request(105), 17, "no route")
    frame = encode(response)
    header = orjson.loads(frame[8:])
    assert list(header) == ["code", "flag", "language", "opaque", "remark", "serializeTypeCurrentRPC", "version"]
    assert header["language"] == "JAVA" and header["flag"] == 1 and header["code"] == 17


def test_binary_header_layout() -> None:
    cmd = RemotingCommand(code=11, language=3, version=409, opaque=7, flag=2, remark="hi", ext_fields={"k": "vv"})
    header = encode_binary_header(cmd)
    assert header == (
        struct.pack(">hBhii", 11, 3, 409, 7, 2) + struct.pack(">i", 2) + b"hi"
        + struct.pack(">i", 2 + 1 + 4 + 2) + struct.pack(">h", 1) + b"k" + struct.pack(">i", 2) + b"vv"
    )
    same(decode_binary_header(header), RemotingCommand(**{**_fields(cmd), "serialize_type": 1}))


def _fields(cmd: RemotingCommand) -> dict[str, object]:
    return {name: getattr(cmd, name) for name in ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body", "serialize_type")}


def test_response_takes_the_request_serialize_type() -> None:
    request = create_request(10, serialize_type=SerializeType.ROCKETMQ)
    request.opaque = 42
    response = create_response(request, body=b"ok")
    assert response.serialize_type == SerializeType.ROCKETMQ and response.opaque == 42 and response.is_response
    assert decode(encode(response)).serialize_type == SerializeType.ROCKETMQ


def test_large_bodies_are_not_copied() -> None:
    big = memoryview(bytearray(b"a" * (JOIN_BODY_BELOW + 10)))
    second = b"b" * 100
    cmd = create_response(create_request(11), body=[big, second])
    parts = encode_frame(cmd)
    assert parts[1] is big and parts[2] is second
    assert decode(b"".join(parts)).body == bytes(big) + second
    small = encode_frame(create_response(create_request(11), body=b"c" * 10))
    assert len(small) == 1


# ---- limits and corrupt input ------------------------------------------------------------


def test_frame_over_limit_is_refused_before_it_arrives() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameError, match="over the 1024-byte limit"):
        decoder.feed(struct.pack(">I", 1021))  # 1025 with the length field
    ok = FrameDecoder(max_frame_bytes=1024)
    frame = encode(create_request(1, body=b"z" * (1024 - 8 - len(encode(create_request(1))) + 8)))
    assert len(frame) == 1024
    assert len(ok.feed(frame)) == 1


@pytest.mark.parametrize("length", [0, 1, 3, 2**31, 2**32 - 1])
def test_impossible_lengths(length: int) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">I", length) + b"\0" * 8)


def test_header_length_over_frame_is_a_header_error_and_the_stream_goes_on() -> None:
    bad = struct.pack(">II", 8, 500) + b"abcd"
    good = encode(create_request(105, {"topic": "T"}))
    items = FrameDecoder().feed(bad + good)
    assert isinstance(items[0], HeaderError) and items[0].opaque is None
    assert isinstance(items[1], RemotingCommand) and items[1].ext_fields == {"topic": "T"}


def _json_frame(header: bytes, serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header), (serialize_type << 24) | len(header)) + header


@pytest.mark.parametrize(
    ("header", "opaque"),
    [
        (b"{not json", None),
        (b"[1,2,3]", None),
        (b'"text"', None),
        (b'{"code":"abc","opaque":5}', 5),
        (b'{"code":10,"opaque":5,"extFields":[1]}', 5),
        (b'{"code":10,"opaque":5,"remark":{"a":1}}', 5),
        (b'{"code":10,"opaque":5,"language":[]}', 5),
        (b'{"code":10,"opaque":99999999999}', None),
        (b'{"code":10,"opaque":"x"}', None),
        (b'{"code":1e400,"opaque":7}', None),  # orjson refuses infinity outright
        (b'{"code":1.5,"opaque":7}', 7),
        (b'{"code":10,"opaque":"\xc2\xb9"}', None),  # a digit to str.isdigit, not to int()
        (b'{"code":10,"opaque":5,"flag":"--1"}', 5),
        (b'{"code":"\xef\xbc\x91","opaque":5}', 5),  # a full-width digit
    ],
)
def test_malformed_json_headers(header: bytes, opaque: int | None) -> None:
    (item,) = FrameDecoder().feed(_json_frame(header))
    if isinstance(item, RemotingCommand):
        pytest.fail(f"decoded {item}")
    assert isinstance(item, HeaderError)
    assert item.opaque == opaque


def test_lenient_json_headers() -> None:
    """What Java's fastjson accepts we accept: missing fields, numeric strings, unknown language."""
    cmd = decode(_json_frame(b'{"code":"105","opaque":"3","language":"KLINGON"}'))
    assert (cmd.code, cmd.opaque, cmd.language, cmd.flag, cmd.ext_fields) == (105, 3, 7, 0, {})


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"\x00" * 20,  # one short of the 21 fixed bytes
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", 100) + struct.pack(">i", 0),
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", -1) + struct.pack(">i", 0),
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", 0) + struct.pack(">i", 50),
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", 0) + struct.pack(">i", 3) + b"\x00\x05k",
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", 0) + struct.pack(">i", 7)
        + struct.pack(">h", 1) + b"k" + struct.pack(">i", 9),
        struct.pack(">hBhii", 10, 0, 1, 5, 0) + struct.pack(">i", 0) + struct.pack(">i", 1) + b"\x00",
    ],
)
def test_malformed_binary_headers(header: bytes) -> None:
    (item,) = FrameDecoder().feed(_json_frame(header, serialize_type=1))
    assert isinstance(item, HeaderError)
    if len(header) >= 21:
        assert item.opaque == 5 and item.serialize_type == 1


def test_unknown_serialize_type() -> None:
    (item,) = FrameDecoder().feed(_json_frame(b"{}", serialize_type=7))
    assert isinstance(item, HeaderError) and "serialize type 7" in str(item)


@given(st.binary(max_size=400))
@settings(max_examples=500, deadline=None)
def test_random_bytes_never_escape_as_other_errors(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    try:
        items = decoder.feed(data)
    except FrameError:
        return
    for item in items:
        assert isinstance(item, (RemotingCommand, HeaderError))
