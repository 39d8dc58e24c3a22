"""rocketstore.common.batch: a batch body's codec, the one the producer and the broker use."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.common.batch import BatchBodyError, decode_batch_body, encode_batch_body

PACKAGE = Path(__file__).resolve().parents[2] / "rocketstore"

entries = st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64),
                             st.text(max_size=32).map(lambda t: t.encode("utf-8"))), max_size=6)


@given(entries)
def test_round_trip(batch: list[tuple[int, bytes, bytes]]) -> None:
    body = encode_batch_body(batch)
    assert [tuple(e) for e in decode_batch_body(body)] == batch


def test_layout_is_rocketmqs() -> None:
    body = encode_batch_body([(7, b"xy", b"K\x01V")])
    assert body == struct.pack(">iiiii", 20 + 2 + 2 + 3, 0, 0, 7, 2) + b"xy" + b"\x00\x03K\x01V"


@given(entries, st.data())
def test_every_cut_is_refused_or_a_prefix(batch: list[tuple[int, bytes, bytes]], data: st.DataObject) -> None:
    body = encode_batch_body(batch)
    cut = data.draw(st.integers(0, len(body)))
    try:
        got = decode_batch_body(body[:cut])
    except BatchBodyError:
        return
    assert [tuple(e) for e in got] == batch[:len(got)]


def test_bad_lengths_are_refused() -> None:
    good = encode_batch_body([(0, b"body", b"")])
    for bad in (good[:10], struct.pack(">i", 10) + good[4:], good[:16] + struct.pack(">i", 99) + good[20:],
                good[:-2] + struct.pack(">h", -1)):
        with pytest.raises(BatchBodyError):
            decode_batch_body(bad)
    with pytest.raises(ValueError, match="at most 32767"):
        encode_batch_body([(0, b"", b"x" * 32768)])


def test_no_other_batch_codec() -> None:
    head = '">iiiii"'
    found = [str(p.relative_to(PACKAGE)) for ext in ("*.py", "*.pyx") for p in PACKAGE.rglob(ext)
             if head in p.read_text() and p != PACKAGE / "common" / "batch.py"]
    assert found == []
