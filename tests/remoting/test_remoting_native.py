"""The native frame codec (_frames) against the plain-Python reference (frame_codec): the same
commands, errors and bytes for well-formed and hostile input alike (random bytes, lengths up
to 2^31, broken JSON, wrong types in every header field), and the frame writer's batching."""

from __future__ import annotations

import json
import struct
import textwrap
from typing import Any

import frame_codec
import pytest
from helpers import run_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FrameError,
    HeaderError,
    RemotingCommand,
    codec,
    create_request,
    create_response,
)
from rocketstore.remoting.codes import DEFAULT_LANGUAGE, ROCKETMQ_VERSION_4_9_8

FIELDS = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "serialize_type")
int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)
field_values = {
    "code": st.one_of(int32, json_values, st.sampled_from(["105", "-3", "x", "99999999999"])),
    "language": st.one_of(st.sampled_from(["JAVA", "CPP", "GO", "KLINGON", ""]), st.integers(-3, 300), json_values),
    "version": st.one_of(int32, json_values),
    "opaque": st.one_of(int32, st.integers(min_value=2**31, max_value=2**40), st.sampled_from(["7", "-7", "1e3"]), json_values),
    "flag": st.one_of(st.integers(0, 3), json_values),
    "remark": st.one_of(st.none(), st.text(max_size=20), json_values),
    "extFields": st.one_of(
        st.none(),
        st.dictionaries(st.text(max_size=10), st.one_of(st.text(max_size=10), json_values), max_size=5),
        json_values,
    ),
}


@st.composite
def json_headers(draw: st.DrawFn) -> bytes:
    """A JSON header whose fields are right, missing, or of any wrong type."""
    header = {}
    for name, values in field_values.items():
        if draw(st.booleans()) or name in ("code", "opaque"):
            header[name] = draw(values)
    text = json.dumps(header, ensure_ascii=False).encode()  # any int, unlike orjson
    if draw(st.integers(0, 9)) == 0:  # broken JSON: cut, or a byte changed
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.binary(max_size=3))
    if draw(st.booleans()):
        text += b"\n"  # the C++ client's trailing newline
    return text


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def snapshot(item: Any) -> tuple[Any, ...]:
    if isinstance(item, HeaderError):
        return ("error", str(item), item.opaque, item.flag, item.serialize_type)
    assert type(item) is RemotingCommand, type(item)
    return ("command", *(getattr(item, name) for name in FIELDS), item.body_bytes())


def feed_both(chunks: list[bytes], max_frame_bytes: int = 1 << 20) -> None:
    """Feed the same chunks to both decoders: same commands, same errors, same leftovers."""
    native, reference = codec.FrameDecoder(max_frame_bytes), frame_codec.FrameDecoder(max_frame_bytes)
    for chunk in chunks:
        try:
            expected = reference.feed(chunk)
        except FrameError as exc:
            with pytest.raises(FrameError) as raised:
                native.feed(chunk)
            assert str(raised.value) == str(exc)
            return
        got = native.feed(chunk)
        assert [snapshot(item) for item in got] == [snapshot(item) for item in expected]
        assert native.buffered == reference.buffered


SEND_V2_NAMES = "abcdefghijklm"
SEND_V1_NAMES = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                 "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch")
ext_values = st.one_of(st.text(max_size=8), st.sampled_from(["0", "-1", "true", "false", "9" * 20]), json_values)


@st.composite
def send_headers(draw: st.DrawFn) -> bytes:
    """SEND_MESSAGE_V2 / SEND_MESSAGE headers that start as the Java client's do (the frame
    decoder's typed path), with their fields right, missing, null, of a wrong type, or extra."""
    v2 = draw(st.booleans())
    names = SEND_V2_NAMES if v2 else SEND_V1_NAMES
    ext: dict[str, Any] = {}
    for name in names:
        choice = draw(st.integers(0, 9))
        if choice < 7:
            ext[name] = draw(st.text(max_size=8)) if choice else "0"
        elif choice == 7:
            ext[name] = draw(ext_values)
        elif choice == 8:
            ext[name] = None
    for key in draw(st.lists(st.text(max_size=4), max_size=2)):
        ext[key] = draw(ext_values)
    header: dict[str, Any] = {"code": 310 if v2 else 10, "extFields": ext}
    for name, values in field_values.items():
        if name not in ("code", "extFields") and draw(st.integers(0, 3)):
            header[name] = draw(st.sampled_from(["JAVA", "CPP"])) if name == "language" and draw(st.booleans()) \
                else draw(int32) if name in ("opaque", "version", "flag") and draw(st.booleans()) else draw(values)
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.binary(max_size=3))
    return text


@given(st.lists(send_headers(), min_size=1, max_size=4), st.binary(max_size=20))
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_send_headers_decode_as_the_reference_does(headers: list[bytes], body: bytes) -> None:
    feed_both([b"".join(frame(h, body) for h in headers)])


@pytest.mark.parametrize("header", [
    b'{"code":310,"extFields":{"a":"\xc3"}}',          # a string value cut inside a 2-byte sequence
    b'{"code":310,"extFields":{"a":"PG","b":"\xe2\x82"',  # cut inside a 3-byte one, header cut
    b'{"code":10,"extFields":{"topic":"\xc3"}}',       # SEND_MESSAGE's long names
    b'{"code":310,"extFields":{"a":"\xed\xa0\x80"}}',  # an encoded surrogate
    b'{"code":310,"extFields":{"a":"\xc0\x80"}}',      # an overlong encoding
    b'{"code":310,"extFields":{"a":"PG","a":"\xff"}}',  # a repeated key, its value not UTF-8
    b'{"code":310,"extFields":{"a":"PG","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"17",'
    b'"h":"0"},"language":"JAVA","zz":' + b"[" * 1100 + b"]" * 1100 + b"}",  # msgspec's recursion limit
    # msgspec takes these whole (it skips unknown fields unchecked); orjson refuses their bytes
    b'{"code":310,"extFields":{"a":"PG","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"17",'
    b'"h":"0","zz":"\xc3"},"language":"JAVA"}',
    b'{"code":10,"extFields":{"producerGroup":"PG","topic":"T","defaultTopic":"TBW102",'
    b'"defaultTopicQueueNums":"4","queueId":"1","sysFlag":"0","bornTimestamp":"17","flag":"0"},'
    b'"language":"JAVA","\xe2\x82":1}',
])
def test_send_headers_msgspec_rejects_otherwise_decode_as_the_reference_does(header: bytes) -> None:
    """The typed SEND path's decode failures other than msgspec.DecodeError (UnicodeDecodeError,
    RecursionError) leave the header to the orjson path: a per-frame HeaderError or the same
    command as the reference, never an exception out of feed."""
    feed_both([frame(header, b"body") + frame(b'{"code":11,"opaque":3}')])


@pytest.mark.parametrize("code", [310, 10, 11, 320])
def test_an_ext_value_nested_deeper_than_orjson_writes_is_a_header_error(code: int) -> None:
    """orjson reads nesting it cannot write back (dumps stops at 255 levels): such an
    extFields value is a HeaderError carrying opaque and flag, for SEND, PULL and any header."""
    deep = b"[" * 300 + b"]" * 300
    for header in (b'{"code":%d,"extFields":{"a":%s},"language":"JAVA","opaque":9,"flag":0}' % (code, deep),
                   b'{"code":%d,"extFields":{"a":"x","b":%s},"opaque":9}' % (code, deep)):
        feed_both([frame(header) + frame(b'{"code":11,"opaque":3}')])
        error, after = codec.FrameDecoder().feed(frame(header) + frame(b'{"code":11,"opaque":3}'))
        assert isinstance(error, HeaderError) and (error.opaque, error.flag) == (9, 0)
        assert type(after) is RemotingCommand and after.opaque == 3


@pytest.mark.parametrize("code", [310, 11, 30])
def test_a_header_nested_200000_deep_is_a_header_error_not_a_crash(code: int) -> None:
    """A 400 KB header of nested arrays (well under the 16 MiB frame limit): orjson before 3.9.15
    overflowed its stack on it and killed the process; it is one request's HeaderError. Run in
    a child so that a crash fails this test instead of the run."""
    script = textwrap.dedent(f"""
        import struct
        from rocketstore.remoting import codec, HeaderError, RemotingCommand
        def frame(header):
            return struct.pack(">ii", 4 + len(header), len(header)) + header
        deep = b"[" * 200_000 + b"]" * 200_000
        header = b'{{"code":{code},"extFields":{{"a":' + deep + b'}},"opaque":9,"flag":0}}'
        error, after = codec.FrameDecoder(max_frame_bytes=16 << 20).feed(
            frame(header) + frame(b'{{"code":11,"opaque":3}}'))
        assert isinstance(error, HeaderError), error
        assert type(after) is RemotingCommand and after.opaque == 3
        print("ok")
    """)
    proc = run_python(script)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])


def test_java_send_headers_take_the_typed_path_and_others_do_not() -> None:
    java = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "17", "h": "0",
            "i": "TAGS\x01t\x02", "j": "0", "k": "false", "m": "false", "x-extra": "kept"}
    cmd = codec.decode(codec.encode(create_request(310, java, b"body")))
    assert cmd.send_header == ("PG", "T", "TBW102", "4", "1", "0", "17", "0", "TAGS\x01t\x02", "0", "false", None,
                               "false")
    assert cmd.ext_fields == java
    cpp = dict(java, d=4, e=1)      # the C++ client's JSON numbers
    cmd = codec.decode(codec.encode(create_request(310, cpp, b"body")))
    assert cmd.send_header is None and cmd.ext_fields == java
    cmd = codec.decode(codec.encode(create_request(10, {"producerGroup": "PG", "topic": "T"}, b"")))
    assert cmd.send_header is None and cmd.ext_fields == {"producerGroup": "PG", "topic": "T"}
    cmd.ext_fields = {"replaced": "1"}
    assert cmd.ext_fields == {"replaced": "1"}


@given(st.lists(json_headers(), min_size=1, max_size=5), st.binary(max_size=40))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_json_headers_of_any_shape_decode_as_the_reference_does(headers: list[bytes], body: bytes) -> None:
    feed_both([b"".join(frame(h, body) for h in headers)])


@given(st.binary(max_size=600), st.integers(1, 64))
@settings(max_examples=600, deadline=None)
def test_random_bytes(data: bytes, step: int) -> None:
    feed_both([data[i : i + step] for i in range(0, len(data), step)], max_frame_bytes=4096)


@given(st.integers(min_value=0, max_value=2**32 - 1), st.binary(max_size=64),
       st.sampled_from([8, 1024, 1 << 24, 2**31, 2**31 + 7]))
@settings(max_examples=400, deadline=None)
def test_any_length_up_to_2_pow_31_and_beyond(length: int, rest: bytes, limit: int) -> None:
    """Lengths are checked before anything is buffered: a frame over the limit (up to 2^31
    and past it) fails at once, one under it only waits for its bytes."""
    feed_both([struct.pack(">I", length) + rest], max_frame_bytes=limit)
    decoder = codec.FrameDecoder(limit)
    try:
        decoder.feed(struct.pack(">I", length))
    except FrameError:
        assert length < 4 or length + 4 > limit
    else:
        assert 4 <= length and length + 4 <= limit
        assert decoder.buffered == 4  # nothing reserved for the announced length


@st.composite
def binary_headers(draw: st.DrawFn) -> bytes:
    """RocketMQ binary headers with honest or lying lengths."""
    fixed = struct.pack(">hBhii", draw(int16), draw(st.integers(0, 255)), draw(int16), draw(int32), draw(int32))
    remark = draw(st.binary(max_size=10))
    remark_length = draw(st.one_of(st.just(len(remark)), int32))
    entries = b""
    for _ in range(draw(st.integers(0, 3))):
        key, value = draw(st.binary(max_size=8)), draw(st.binary(max_size=8))
        key_length = draw(st.one_of(st.just(len(key)), int16))
        value_length = draw(st.one_of(st.just(len(value)), int32))
        entries += struct.pack(">h", key_length) + key + struct.pack(">i", value_length) + value
    entries += draw(st.binary(max_size=3))
    ext_length = draw(st.one_of(st.just(len(entries)), int32))
    header = fixed + struct.pack(">i", remark_length) + remark + struct.pack(">i", ext_length) + entries
    return header[: draw(st.integers(0, len(header)))] if draw(st.integers(0, 5)) == 0 else header


@given(st.lists(binary_headers(), min_size=1, max_size=4), st.binary(max_size=20))
@settings(max_examples=600, deadline=None)
def test_binary_headers_with_lying_lengths(headers: list[bytes], body: bytes) -> None:
    feed_both([b"".join(frame(h, body, serialize_type=1) for h in headers)])
    for header in headers:
        for decode_native, decode_reference in (
            (codec.decode_binary_header, frame_codec.decode_binary_header),
            (codec.decode_frame, frame_codec.decode_frame),
        ):
            data = header if decode_native is codec.decode_binary_header else frame(header, body, 1)[4:]
            try:
                expected = snapshot(decode_reference(data))
            except HeaderError as exc:
                expected = snapshot(exc)
            try:
                got = snapshot(decode_native(data))
            except HeaderError as exc:
                got = snapshot(exc)
            assert got == expected


@given(st.integers(0, 255), st.binary(max_size=30))
@settings(max_examples=200, deadline=None)
def test_unknown_serialize_types_and_header_lengths(serialize_type: int, header: bytes) -> None:
    word = struct.pack(">I", (serialize_type << 24) | len(header))
    feed_both([struct.pack(">I", 4 + len(header)) + word + header])
    # a header length past the frame's end
    feed_both([struct.pack(">II", 4 + len(header), (serialize_type << 24) | (len(header) + 1)) + header])


# ---- encoding --------------------------------------------------------------------------------

commands = st.builds(
    RemotingCommand,
    code=int32,
    language=st.integers(min_value=-5, max_value=300),
    version=int32,
    opaque=int32,
    flag=int32,
    remark=st.one_of(st.none(), st.text(max_size=30)),
    ext_fields=st.dictionaries(st.text(max_size=12), st.one_of(st.text(max_size=12), st.integers(), st.none()), max_size=6),
    body=st.one_of(
        st.none(),
        st.binary(max_size=200),
        st.binary(max_size=200).map(bytearray),
        st.binary(max_size=200).map(memoryview),
        st.lists(st.binary(max_size=50), max_size=4),
        st.lists(st.binary(min_size=9000, max_size=9000), min_size=2, max_size=3),  # over JOIN_BODY_BELOW
    ),
    serialize_type=st.sampled_from([0, 1]),
)


def encoded_by(module: Any, cmd: RemotingCommand) -> bytes | str:
    try:
        return b"".join(module.encode_frame(cmd))
    except (ValueError, TypeError, OverflowError, struct.error) as exc:
        return f"{type(exc).__name__}"


@given(commands)
@settings(max_examples=600, deadline=None)
def test_encoding_is_the_reference_byte_for_byte(cmd: RemotingCommand) -> None:
    native, reference = encoded_by(codec, cmd), encoded_by(frame_codec, cmd)
    if isinstance(reference, str):
        assert isinstance(native, str)  # both refuse (ValueError against struct.error)
    else:
        assert native == reference
        assert codec.encode(cmd) == native
    try:
        json_header: bytes | str = frame_codec.encode_json_header(cmd)
    except TypeError as exc:  # orjson: an int over 64 bits
        json_header = type(exc).__name__
        with pytest.raises(TypeError):
            codec.encode_json_header(cmd)
    else:
        assert codec.encode_json_header(cmd) == json_header


@given(st.lists(commands, min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_frame_writer_queues_what_encode_frame_makes(cmds: list[RemotingCommand]) -> None:
    writer = codec.FrameWriter()
    expected = b""
    for cmd in cmds:
        before = writer.nbytes
        try:
            frame_bytes = b"".join(frame_codec.encode_frame(cmd))
        except (ValueError, TypeError, struct.error):
            with pytest.raises((ValueError, TypeError, OverflowError)):
                writer.add(cmd)
            assert writer.nbytes == before  # a refused command leaves nothing behind
            continue
        assert writer.add(cmd) == before + len(frame_bytes)
        expected += frame_bytes
    assert b"".join(writer.take()) == expected
    assert writer.nbytes == 0 and writer.take() == []


def test_frame_writer_joins_small_frames_and_passes_large_buffers_through() -> None:
    big = memoryview(bytearray(b"m" * (codec.JOIN_BODY_BELOW + 1)))
    records = [memoryview(b"r" * 9000), memoryview(b"s" * 9000)]
    writer = codec.FrameWriter()
    for _ in range(3):
        writer.add(create_response(create_request(10), body=b"small"))
    writer.add(create_response(create_request(11), body=big))
    writer.add(create_response(create_request(11), body=records))
    writer.add(create_response(create_request(10), body=b"tail"))
    parts = writer.take()
    # [small frames + big's header] big [records' header] record record [tail frame]
    assert len(parts) == 6
    assert parts[1] is big and parts[3] is records[0] and parts[4] is records[1]
    frames = codec.FrameDecoder().feed(b"".join(parts))
    assert [f.body_bytes() for f in frames] == [b"small"] * 3 + [bytes(big), b"r" * 9000 + b"s" * 9000, b"tail"]


def test_a_body_that_is_not_buffers_is_refused_and_leaves_the_writer_as_it_was() -> None:
    writer = codec.FrameWriter()
    writer.add(create_request(1, body=b"ok"))
    before = writer.nbytes
    for body in ("text", [b"a", "b"], 42, [b"x", 7]):
        with pytest.raises(TypeError):
            writer.add(create_request(1, body=body))  # type: ignore[arg-type]
        assert writer.nbytes == before
    with pytest.raises(TypeError):
        writer.add(create_request(1, {"k": object()}))  # type: ignore[dict-item]
    assert b"".join(writer.take()) == codec.encode(create_request(1, body=b"ok"))


def test_non_contiguous_views_are_refused() -> None:
    strided = memoryview(b"abcdef")[::2]
    with pytest.raises(BufferError):
        codec.encode_frame(create_request(1, body=[strided, b"x"]))


# ---- the command ----------------------------------------------------------------------------


def test_command_defaults_and_flags_match_the_codes() -> None:
    cmd = RemotingCommand(5)
    assert (cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.body, cmd.serialize_type) == (
        DEFAULT_LANGUAGE, ROCKETMQ_VERSION_4_9_8, 0, 0, None, {}, None, 0)
    cmd.mark_oneway()
    assert cmd.flag == FLAG_ONEWAY and cmd.is_oneway and not cmd.is_response
    cmd.mark_response()
    assert cmd.flag == FLAG_ONEWAY | FLAG_RESPONSE and cmd.is_response
    assert create_request(3, oneway=True).flag == FLAG_ONEWAY
    request = create_request(3, serialize_type=1)
    request.opaque = 77
    reply = create_response(request, 17, "no", {"a": "b"}, b"x")
    assert (reply.code, reply.opaque, reply.flag, reply.serialize_type, reply.remark, reply.ext_fields, reply.body) == (
        17, 77, FLAG_RESPONSE, 1, "no", {"a": "b"}, b"x")
    assert RemotingCommand(1, ext_fields=None).ext_fields == {}
    assert "request code=5" not in repr(cmd) and "code=5" in repr(cmd)


def test_command_fields_are_int32() -> None:
    cmd = RemotingCommand(1)
    cmd.opaque = 2**31 - 1
    cmd.code = -(2**31)
    with pytest.raises(OverflowError):
        cmd.opaque = 2**31
    with pytest.raises(TypeError):
        cmd.code = "10"  # type: ignore[assignment]


def test_body_length_and_bytes() -> None:
    assert RemotingCommand(1, body=[b"ab", memoryview(b"cde"), bytearray(b"f")]).body_length == 6
    assert RemotingCommand(1, body=[b"ab", memoryview(b"cde")]).body_bytes() == b"abcde"
    assert RemotingCommand(1, body=memoryview(b"xy")).body_bytes() == b"xy"
    assert RemotingCommand(1).body_length == 0 and RemotingCommand(1).body_bytes() == b""
