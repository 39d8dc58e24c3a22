"""Typed ext-field reading: values as strings or numbers, errors naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rocketstore.remoting.headers import (
    HeaderFieldError,
    decode_header,
    encode_header,
    get_bool,
    get_int,
    get_str,
    require_int,
    require_str,
)


def test_getters() -> None:
    ext = {"topic": "T", "queueId": "3", "big": "-9000000000", "batch": "1", "unitMode": "false"}
    assert require_str(ext, "topic") == "T"
    assert require_int(ext, "queueId", maximum=2**31 - 1) == 3
    assert get_int(ext, "big") == -9000000000
    assert get_int(ext, "absent", 7) == 7
    assert get_bool(ext, "batch") is True and get_bool(ext, "unitMode") is False
    assert get_str(ext, "absent") is None


@pytest.mark.parametrize(
    ("ext", "call", "message"),
    [
        ({}, lambda e: require_str(e, "topic"), "'topic' is missing"),
        ({"queueId": "abc"}, lambda e: require_int(e, "queueId"), "'queueId' must be an integer, got 'abc'"),
        ({"queueId": " 1"}, lambda e: require_int(e, "queueId"), "must be an integer"),
        ({"queueId": "1_0"}, lambda e: require_int(e, "queueId"), "must be an integer"),
        ({"queueId": "٣"}, lambda e: require_int(e, "queueId"), "must be an integer"),
        ({"queueId": "5000000000"}, lambda e: require_int(e, "queueId", maximum=2**31 - 1), "must be in"),
        ({"batch": "yes"}, lambda e: get_bool(e, "batch"), "'batch' must be true or false"),
    ],
)
def test_errors_name_the_field(ext: dict[str, str], call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HeaderFieldError, match=message) as info:
        call(ext)
    assert isinstance(info.value, ValueError)


@dataclass
class SendHeaderV2:
    producer_group: str = field(metadata={"key": "a"})
    topic: str = field(metadata={"key": "b"})
    queue_id: int = field(metadata={"key": "e"})
    batch: bool | None = field(default=None, metadata={"key": "m"})


@dataclass
class RouteHeader:
    topic: str
    accept_standard_json_only: bool | None = None
    weight: float | None = None


def test_header_dataclasses() -> None:
    header = decode_header({"a": "PG", "b": "T", "e": "2", "zz": "ignored"}, SendHeaderV2)
    assert header == SendHeaderV2("PG", "T", 2, None)
    assert encode_header(header) == {"a": "PG", "b": "T", "e": "2"}
    route = decode_header({"topic": "T", "acceptStandardJsonOnly": "true", "weight": "0.5"}, RouteHeader)
    assert route == RouteHeader("T", True, 0.5)
    assert encode_header(route) == {"topic": "T", "acceptStandardJsonOnly": "true", "weight": "0.5"}
    with pytest.raises(HeaderFieldError, match="'e' must be an integer"):
        decode_header({"a": "PG", "b": "T", "e": "x"}, SendHeaderV2)
    with pytest.raises(HeaderFieldError, match="'topic' is missing"):
        decode_header({}, RouteHeader)


def test_unsupported_field_type_is_a_programming_error() -> None:
    @dataclass
    class Bad:
        items: list[str]

    with pytest.raises(TypeError, match="Bad.items"):
        decode_header({}, Bad)


def test_generated_decoder_fast_and_slow_paths() -> None:
    assert decode_header({"a": "PG", "b": "T", "e": "-3", "m": "TRUE"}, SendHeaderV2) == SendHeaderV2("PG", "T", -3, True)
    assert decode_header({"a": "PG", "b": "T", "e": 7, "m": "1"}, SendHeaderV2) == SendHeaderV2("PG", "T", 7, True)
    assert decode_header({"a": 5, "b": "T", "e": "+2", "m": ""}, SendHeaderV2) == SendHeaderV2("5", "T", 2, False)
    for bad, message in (({"e": "1.5"}, "'e' must be an integer"), ({"e": "99999999999999999999"}, "'e'"),
                         ({"e": "1", "m": "x"}, "'m' must be true or false")):
        with pytest.raises(HeaderFieldError, match=message):
            decode_header({"a": "PG", "b": "T", **bad}, SendHeaderV2)


# ---- the native decoder against the generated Python one ------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rocketstore.remoting.headers import _build_decoder, build_python_decoder  # noqa: E402


@dataclass
class EveryKind:
    topic: str
    queue_id: int
    batch: bool
    ratio: float
    name: str | None = None
    offset: int | None = None
    flag: bool | None = field(default=None, metadata={"key": "f"})
    weight: float = 1.0
    count: int = 7


@dataclass(frozen=True, slots=True)
class FrozenWithPostInit:
    a: int
    b: str = "x"

    def __post_init__(self) -> None:
        if self.a < 0:
            raise HeaderFieldError("a", "must not be negative")


text_values = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,22}", fullmatch=True),
    st.sampled_from(["", "true", "false", "TRUE", "1", "0", "yes", " 1", "1.5", "nan", "-", "+", "٣", "¹", "1e3"]),
    st.text(max_size=8),
)
any_values = st.one_of(st.none(), text_values, st.integers(min_value=-(2**70), max_value=2**70),
                       st.booleans(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))


def outcome(decoder, ext):  # type: ignore[no-untyped-def]
    try:
        # repr: equal for equal fields, NaN included ("nan" is a float RocketMQ's header may hold)
        return ("ok", repr(decoder(ext)))
    except HeaderFieldError as exc:
        return ("error", str(exc), exc.field)


@given(st.dictionaries(st.sampled_from(["topic", "queueId", "batch", "ratio", "name", "offset", "f", "flag",
                                        "weight", "count", "a", "b", "other"]), any_values, max_size=12))
@settings(max_examples=1500, deadline=None)
def test_native_decoder_matches_the_generated_one(ext: dict[str, object]) -> None:
    for cls in (EveryKind, FrozenWithPostInit):
        assert outcome(_build_decoder(cls), ext) == outcome(build_python_decoder(cls), ext)


def test_native_decoder_fills_frozen_and_slotted_classes() -> None:
    header = decode_header({"a": "12"}, FrozenWithPostInit)
    assert header == FrozenWithPostInit(12, "x")
    with pytest.raises(HeaderFieldError, match="'a' must not be negative"):
        decode_header({"a": "-1"}, FrozenWithPostInit)
    with pytest.raises(HeaderFieldError, match="'topic' is missing"):
        decode_header({"queueId": "1"}, EveryKind)
