"""SEND_BATCH_MESSAGE's native put (rocketstore._native.batch_put) against the Message path it
stands in for (a Message per message, the reference): for every batch, the same reply (code,
remark, msgIds, queue offset) and the same records (every field, the properties text in the
same order), or, where the native reader declines, the Message path's own answer."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any
from unittest import mock

import broker_helpers
import pytest
from broker_helpers import cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore._native.batch_put import read_batch_body
from rocketstore.broker.processors.send import batch as batch_module
from rocketstore.broker.processors.send._send_header import decode_request_header
from rocketstore.common.batch import encode_batch_body
from rocketstore.remoting import RemotingCommand, RequestCode, ResponseCode, create_request

arun = broker_helpers.arun
MAX_MESSAGE_SIZE = 2048
_GENERATED = re.compile("[0-9A-F]{32}")


class _Peer:
    remote_address = "10.1.2.3:40123"
    received_at = float("inf")      # never waited in the send queue: no fast failure


def _fields(topic: str, queue_id: int, properties: str | None, born: int = 1700000000000,
            reconsume: int = 0) -> dict[str, str]:
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
              "g": str(born), "h": "0", "j": str(reconsume), "m": "true"}
    if properties is not None:
        fields["i"] = properties
    return fields


def _send(cl: Any, fields: dict[str, str], body: bytes, *, native: bool) -> RemotingCommand:
    """The reply to a batch: through the broker's SEND_BATCH_MESSAGE handler (native: read and
    put natively when it can), or straight to the processor's send_batch (the Message path for
    every batch)."""
    request = create_request(RequestCode.SEND_BATCH_MESSAGE, fields, body)
    header = decode_request_header(request.ext_fields, True)
    header.batch = True
    processor = cl.broker.send_processor
    if native:
        return processor._send_batch.send(_Peer(), request, header)
    return batch_module.send_batch(processor, processor._send_v2, _Peer(), request, header,
                                   header.queue_id, 0)


def _records(cl: Any, start: int, given_uniq: list[bool]) -> list[tuple[Any, ...]]:
    """The records from CommitLog offset ``start``, store timestamps left out, a generated
    UNIQ_KEY as "generated" (the test's own begin with U)."""
    out = []
    for msg in cl.broker.store.scan(start):
        properties = [(k, "generated" if k == "UNIQ_KEY" and _GENERATED.fullmatch(v) else v)
                      for k, v in msg.properties.items()]
        out.append((msg.topic, msg.queue_id, msg.queue_offset, msg.commitlog_offset, msg.body,
                    msg.flag, msg.sys_flag, msg.born_timestamp, msg.born_host, msg.reconsume_times,
                    properties))
    return out


@contextlib.asynccontextmanager
async def _pair(tmp_path: Path) -> Any:
    store = {"max_message_size": MAX_MESSAGE_SIZE}
    async with cluster(tmp_path / "native", store) as native, \
            cluster(tmp_path / "reference", store) as reference:
        yield native, reference


def _ports_out(fields: dict[str, str] | None) -> dict[str, str] | None:
    """The reply's fields with every msgId's store port left out (the brokers' differ)."""
    if not fields or "msgId" not in fields:
        return fields
    ids = ",".join(i[:8] + i[16:] for i in fields["msgId"].split(","))
    return dict(fields, msgId=ids)


def _same_outcome(native: Any, reference: Any, fields: dict[str, str], body: bytes,
                  given_uniq: list[bool]) -> RemotingCommand:
    starts = (native.broker.store.get_max_phy_offset(), reference.broker.store.get_max_phy_offset())
    assert starts[0] == starts[1]
    got = _send(native, fields, body, native=True)
    want = _send(reference, fields, body, native=False)
    assert (got.code, got.remark, _ports_out(got.ext_fields)) == \
        (want.code, want.remark, _ports_out(want.ext_fields))
    assert _records(native, starts[0], given_uniq) == _records(reference, starts[1], given_uniq)
    return got


_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "TRAN_MSG", "CLUSTER", "x",
                          "y", "__STARTDELIVERTIME"])
_ODD_TEXT = st.text(alphabet="ab\x00\x01\x02é\u4e2d\U0001F600", max_size=4)
_VALUES = st.one_of(st.sampled_from(["true", "false", "0", "3", "v", "k1 k2"]), _ODD_TEXT)


@st.composite
def _properties_text(draw: Any) -> str:
    pairs = draw(st.lists(st.tuples(st.one_of(_NAMES, _ODD_TEXT), _VALUES), max_size=5))
    text = "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    if draw(st.booleans()):
        text += "\x02"      # RocketMQ's clients end every pair with one
    return text


@st.composite
def _batches(draw: Any) -> tuple[dict[str, str], bytes, list[bool]]:
    entries = []
    given_uniq = []
    for _ in range(draw(st.integers(0, 4))):
        text = draw(_properties_text())
        if draw(st.booleans()):
            text = f"UNIQ_KEY\x01U{draw(st.integers(0, 10**9))}\x02" + text
        given_uniq.append("UNIQ_KEY\x01" in text)
        body = draw(st.binary(max_size=40)) if draw(st.integers(0, 20)) else b"b" * (MAX_MESSAGE_SIZE + 1)
        raw = text.encode() if draw(st.integers(0, 7)) else draw(st.binary(max_size=12))
        entries.append((draw(st.integers(-2**31, 2**31 - 1)), body, raw))
    body = encode_batch_body(entries)
    cut = draw(st.integers(0, 30))
    if cut == 1 and body:
        body = body[:-draw(st.integers(1, len(body)))]
    elif cut == 2 and body:
        at = draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([draw(st.integers(0, 255))]) + body[at + 1:]
    outer = draw(st.one_of(st.none(), _properties_text()))
    fields = _fields("batched", draw(st.integers(0, 3)), outer, draw(st.integers(0, 2**42)),
                     draw(st.integers(-1, 3)))
    return fields, body, given_uniq


def test_native_batches_store_what_the_message_path_stores(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with _pair(tmp_path) as (native, reference):
            @settings(max_examples=500, deadline=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(_batches())
            def check(case: tuple[dict[str, str], bytes, list[bool]]) -> None:
                _same_outcome(native, reference, *case)

            check()

    arun(main(), timeout=300)


def test_common_batches_take_the_native_path(arun, tmp_path: Path) -> None:
    """What the Java client sends (UNIQ_KEY and WAIT in every message, WAIT in the request)
    is read natively and stored as the Message path stores it; refusals answer the same."""
    java = encode_batch_body([(0, b"m%d" % i, f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i}\x02WAIT\x01true\x02".encode())
                              for i in range(32)])
    assert read_batch_body(java, {"WAIT": "true", "CLUSTER": "c"}, "10.1.2.3:1", 0, 0, 0) is not None
    utf8 = encode_batch_body([(0, b"a", "TAGS\x01é中\U0001F600\x02KEYS\x01\u07ff\uffff".encode())])
    assert read_batch_body(utf8, {"CLUSTER": "c"}, "10.1.2.3:1", 0, 0, 0) is not None
    no_uniq = encode_batch_body([(0, b"a", b"TAGS\x01t"), (0, b"b", b"")])
    big_properties = encode_batch_body([(0, b"a", b"x\x01" + b"v" * 32700)])

    async def main() -> None:
        async with _pair(tmp_path) as (native, reference):
            # the broker's handler puts it without the processor's Message path
            with mock.patch.object(native.broker.send_processor, "send_batch",
                                   side_effect=AssertionError("not the native path")):
                reply = _same_outcome(native, reference, _fields("batched", 1, "WAIT\x01true\x02"),
                                      java, [True] * 32)
            assert reply.code == ResponseCode.SUCCESS
            assert len(reply.ext_fields["msgId"].split(",")) == 32
            reply = _same_outcome(native, reference, _fields("batched", 2, None), no_uniq, [False] * 2)
            assert reply.code == ResponseCode.SUCCESS
            reply = _same_outcome(native, reference, _fields("batched", 0, "y\x01" + "w" * 100),
                                  big_properties, [False])
            assert reply.code == ResponseCode.MESSAGE_ILLEGAL
            assert "properties of" in reply.remark
            for text in (b"TAGS\x01\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", b"k\x01\xff\xc3", b"k\x01\xed\xa0\x80"):
                body = encode_batch_body([(0, b"a", text)])
                reply = _same_outcome(native, reference, _fields("batched", 0, None), body, [False])
                assert reply.code == ResponseCode.SUCCESS, text
            for text in (b"DELAY\x012", b"TRAN_MSG\x01true", b"k\x01v\x01w", b"k\x01\x00"):
                body = encode_batch_body([(0, b"a", b"TAGS\x01t"), (0, b"b", text)])
                reply = _same_outcome(native, reference, _fields("batched", 0, None), body, [False] * 2)
                assert reply.code == ResponseCode.MESSAGE_ILLEGAL, text

    arun(main(), timeout=120)


@pytest.mark.parametrize("text", [b"k\x01v\x01w", b"DELAY\x013", b"TRAN_MSG\x01true", b"k\x01v\x02k\x01w",
                                  b"\x01v", b"k\x01", b"k", b"k\x01\xff", b"k\x01\xc3", b"k\x01\xc0\x80",
                                  b"k\x01\xed\xa0\x80", b"k\x01\xf4\x90\x80\x80", b"k\x01\xe2\x82"])
def test_the_native_reader_leaves_the_unusual_to_the_message_path(text: bytes) -> None:
    body = encode_batch_body([(0, b"a", text)])
    assert read_batch_body(body, {"CLUSTER": "c"}, "10.1.2.3:1", 0, 0, 0) is None


def test_the_native_reader_checks_every_length() -> None:
    body = encode_batch_body([(0, b"abc", b"k\x01v"), (0, b"", b"")])
    assert read_batch_body(body, {}, "10.1.2.3:1", 0, 0, 0).count == 2
    first = 20 + 3 + 2 + 3     # the first message alone is a batch
    for cut in range(1, len(body)):
        read = read_batch_body(body[:cut], {}, "10.1.2.3:1", 0, 0, 0)
        assert (read is None) == (cut != first), cut
    assert read_batch_body(b"", {}, "10.1.2.3:1", 0, 0, 0) is None
