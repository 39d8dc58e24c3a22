"""The SEND header scanner (remoting/_send_scan.pyx) against the library decoders it stands in
front of (msgspec, orjson: ``decode_json_header_library``): for every header it takes, the same
command (code, language, version, opaque, flag, remark, ext fields) and SEND field values equal
to the ext fields'; what it declines the library decodes or refuses, as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rocketstore.common.send_header import SEND_HEADER_FIELDS
from rocketstore.remoting import HeaderError, RemotingCommand, codec, create_request
from rocketstore.remoting._frames import decode_json_header, decode_json_header_library
from rocketstore.remoting._send_scan import scan_send_header

V1 = tuple(f.name for f in SEND_HEADER_FIELDS)
V2 = tuple(f.v2_name for f in SEND_HEADER_FIELDS)
JAVA_V2 = (b'{"code":310,"extFields":{"a":"please_rename_unique_group_name","b":"TopicTest",'
           b'"c":"TBW102","d":"4","e":"3","f":"0","g":"1700000000000","h":"0",'
           b'"i":"KEYS\\u0001k\\u0002UNIQ_KEY\\u0001AC1\\u0002WAIT\\u0001true\\u0002TAGS\\u0001TagA",'
           b'"j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":42,'
           b'"serializeTypeCurrentRPC":"JSON","version":395}')


def _snapshot(item: Any) -> tuple[Any, ...]:
    if isinstance(item, HeaderError):
        return ("error", str(item), item.opaque, item.flag)
    assert type(item) is RemotingCommand
    return (item.code, item.language, item.version, item.opaque, item.flag, item.remark,
            item.ext_fields)


def check(header: bytes) -> RemotingCommand | None:
    """The scanner's command for ``header`` is the library's; the full decoder answers as the
    library does whether or not the scanner took the header."""
    try:
        reference: Any = decode_json_header_library(header)
    except HeaderError as exc:
        reference = exc
    try:
        full: Any = decode_json_header(header)
    except HeaderError as exc:
        full = exc
    assert _snapshot(full) == _snapshot(reference)
    got = scan_send_header(header)
    if got is None:
        return None
    assert isinstance(reference, RemotingCommand), reference
    assert _snapshot(got) == _snapshot(reference)
    names = V1 if got.code == 10 else V2
    assert got.send_header == tuple(reference.ext_fields.get(name) for name in names)
    if reference.send_header is not None:
        assert got.send_header == reference.send_header
    return got


_TEXT = st.one_of(st.sampled_from(["0", "-1", "4", "true", "false", "TBW102", "9" * 20, ""]),
                  st.text(max_size=6), st.text(alphabet="a\\\"\x00\x01\x02é\u4e2d ", max_size=4))
_JSON_VALUE = st.one_of(_TEXT, st.integers(-2**40, 2**40), st.none(), st.booleans(),
                        st.floats(allow_nan=False, allow_infinity=False), st.just([1]))


def _dump(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))


@st.composite
def java_shaped(draw: Any) -> bytes:
    """A SEND header as fastjson writes it, or near it: fields missing, twice, of another type,
    unknown, reordered; strings with escapes, control characters, non-ASCII; cut or changed."""
    code = draw(st.sampled_from([10, 310, 320, 310, 11]))
    names = V1 if code == 10 else V2
    ascii_only = draw(st.booleans())
    clean = draw(st.integers(0, 2)) > 0     # as a client writes it, but for the mutation below
    pairs = []
    for name in names:
        choice = draw(st.integers(0, 8 if clean else 12))
        if choice < 9:
            pairs.append((name, draw(st.sampled_from(["0", "4", "PG", "T", "1700000000000"]))
                          if choice < 5 else draw(_TEXT)))
        elif choice < 11:
            pairs.append((name, draw(_JSON_VALUE)))
    if not clean:
        for name in draw(st.lists(st.one_of(st.sampled_from(names), st.text(max_size=3)), max_size=2)):
            pairs.append((name, draw(_JSON_VALUE)))
    if draw(st.booleans()):
        pairs = draw(st.permutations(pairs))
    ext = ",".join(f"{_dump(k, ascii_only)}:{_dump(v, ascii_only)}" for k, v in pairs)
    top = [("flag", draw(st.one_of(st.just(0), _JSON_VALUE))),
           ("language", draw(st.one_of(st.sampled_from(["JAVA", "CPP", "GO", "KLINGON"]), _JSON_VALUE))),
           ("opaque", draw(st.one_of(st.integers(-2**31, 2**31 - 1), _JSON_VALUE))),
           ("remark", draw(st.one_of(st.none(), _TEXT))),
           ("serializeTypeCurrentRPC", draw(st.one_of(st.just("JSON"), _JSON_VALUE))),
           ("version", draw(st.one_of(st.integers(-2**31, 2**31 - 1), _JSON_VALUE)))]
    if clean:
        top = [("flag", 0), ("language", "JAVA"), ("opaque", draw(st.integers(-2**31, 2**31 - 1))),
               ("remark", draw(st.one_of(st.none(), _TEXT))), ("serializeTypeCurrentRPC", "JSON"),
               ("version", 395)]
    else:
        top = [pair for pair in top if draw(st.integers(0, 5))]
        top += [(name, draw(_JSON_VALUE)) for name in draw(st.lists(st.sampled_from(
            ["flag", "opaque", "code", "extFields", "zz"]), max_size=1))]
    if draw(st.booleans()):
        top = draw(st.permutations(top))
    text = f'{{"code":{code},"extFields":{{{ext}}}' + "".join(
        f",{_dump(k, True)}:{_dump(v, ascii_only)}" for k, v in top) + "}"
    data = text.encode()
    mutation = draw(st.integers(0, 12))
    if mutation == 0:
        data = data[:draw(st.integers(0, len(data)))]
    elif mutation == 1:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    elif mutation == 2:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b" ", b"\n", b"\xc3", b"\\", b'"', b",", b"}"])) + data[at:]
    return data


@given(java_shaped())
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@example(JAVA_V2)
def test_the_scanner_decodes_as_the_library_does(header: bytes) -> None:
    check(header)


@given(st.binary(max_size=200))
@settings(max_examples=500, deadline=None)
def test_random_bytes_after_a_send_prefix(tail: bytes) -> None:
    for prefix in (b'{"code":310,"extFields":{', b'{"code":10,"extFields":{', b'{"code":320,"extFields":{'):
        check(prefix + tail)


def _java(code: int, ext: dict[str, str], **top: Any) -> bytes:
    """The header fastjson writes: code, extFields, then the rest in alphabetical order."""
    header = {"code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": 7,
              "serializeTypeCurrentRPC": "JSON", "version": 395, **top}
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()


V2_FIELDS = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "17", "h": "0",
             "i": "TAGS\x01t\x02", "j": "0", "k": "false", "m": "false"}


@pytest.mark.parametrize("header", [
    JAVA_V2,
    _java(310, dict(V2_FIELDS, i="TAGS\x01\x02\x00\t\n\\\"/é\u4e2d")),
    _java(320, dict(V2_FIELDS, i="WAIT", m="true")),
    _java(10, {n: V2_FIELDS.get(v, "x") for n, v in zip(V1, V2, strict=True)}),
    _java(310, dict(V2_FIELDS, b="主题", i="TAGS"), remark="r"),
    _java(310, dict(V2_FIELDS, i="TAGS", x="unknown")),
    codec.encode(create_request(310, dict(V2_FIELDS, i="TAGS")))[8:],     # rocketstore's own client
])
def test_what_clients_send_takes_the_scanner(header: bytes) -> None:
    got = check(header)
    assert got is not None, header


@pytest.mark.parametrize("header", [
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b"TAGS", b"TAGS\\ud83d\\ude00"),  # a surrogate pair
    _java(310, dict(V2_FIELDS, i="TAGS"), language="KLINGON"),
    _java(310, {k: v for k, v in V2_FIELDS.items() if k != "g"}),   # bornTimestamp missing
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"flag":0', b'"flag":0.0'),
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"opaque":7', b'"opaque":2147483648'),
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b',"flag"', b', "flag"'),
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"e":"1"', b'"e":1'),      # the C++ client
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"version":395', b'"version":395,"zz":1'),
    _java(310, dict(V2_FIELDS, i="TAGS")) + b"\n",
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"b":"T"', b'"b":"\xc3"'),
    _java(310, dict(V2_FIELDS, i="TAGS")).replace(b'"b":"T"', b'"b":"T","b":"U"'),
])
def test_what_the_scanner_leaves_to_the_library(header: bytes) -> None:
    assert check(header) is None


# Long values: each special byte at every position of a 40-byte value, in a field the scanner
# keeps (topic, properties) and in one it skips.
_SPECIALS = [b'"', b"\\", b"\\\\", b"\\u0001", b"\\n", b"\\x", b"\x00", b"\x1f", b"\x20", b"\x7f",
             b"\x80", b"\xc3\xa9", b"\xc3", b"\xff", b"!", b"#", b"[", b"]", b"\\ud83d"]


@pytest.mark.parametrize("special", _SPECIALS)
def test_a_special_byte_anywhere_in_a_long_value(special: bytes) -> None:
    plain = _java(310, dict(V2_FIELDS, b="T" * 40, i="P" * 40, x="X" * 40))
    assert check(plain) is not None
    for field in (b"T", b"P", b"X"):
        for at in range(40):
            value = field * at + special + field * (40 - at)
            check(plain.replace(field * 40, value))


@given(st.sampled_from(["b", "i", "x"]), st.binary(min_size=0, max_size=64))
@settings(max_examples=500, deadline=None)
def test_long_values_of_any_bytes(field: str, value: bytes) -> None:
    plain = _java(310, dict(V2_FIELDS, **{field: "@" * 8}))
    check(plain.replace(b"@" * 8, value))
