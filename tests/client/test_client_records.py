"""The client's record decoder and batch encoder against records written by the store and by
Apache RocketMQ 4.9.8 itself, and against broken input."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_fixture import fixture_file

from rocketstore import Message as StoreMessage
from rocketstore import MessageStore, StoreConfig
from rocketstore.client import CorruptMessageError, Message, decode_messages, encode_batch
from rocketstore.client.message import (
    create_offset_msg_id,
    decode_offset_msg_id,
    decode_properties,
    encode_properties,
    java_hash_code,
    new_uniq_key,
)
from rocketstore.client.records import decode_batch, decode_messages_py


def test_decodes_every_record_rocketmq_wrote() -> None:
    expected = [json.loads(line) for line in fixture_file("messages.jsonl").read_text("utf-8").splitlines()]
    segments = sorted(fixture_file("store/commitlog").iterdir())
    data = b"".join(segment.read_bytes() for segment in segments)   # full segments: offsets line up
    by_offset = {e["commitLogOffset"]: e for e in expected}
    decoded = 0
    for offset, want in sorted(by_offset.items()):
        record = memoryview(data)[offset:offset + want["storeSize"]]
        msgs = decode_messages(record, decompress=False)
        assert len(msgs) == 1
        got = msgs[0]
        assert fields(got) == fields(decode_messages_py(record, decompress=False)[0])
        assert got.topic == want["topic"]
        assert got.queue_id == want["queueId"]
        assert got.queue_offset == want["queueOffset"]
        assert got.commit_log_offset == want["commitLogOffset"]
        assert got.store_size == want["storeSize"]
        assert got.offset_msg_id == want["msgId"]
        assert got.tags == want["tags"]
        assert got.properties == want["properties"]
        assert got.flag == want["flag"] and got.sys_flag == want["sysFlag"]
        assert got.reconsume_times == want["reconsumeTimes"]
        assert got.prepared_transaction_offset == want["preparedTransactionOffset"]
        assert got.born_timestamp == want["bornTimestamp"] and got.store_timestamp == want["storeTimestamp"]
        assert got.born_host == want["bornHost"] and got.store_host == want["storeHost"]
        assert got.body_crc == want["bodyCRC"]
        assert got.body == base64.b64decode(want["body_b64"])
        assert got.msg_id == (want["uniqKey"] or want["msgId"])
        assert decode_offset_msg_id(got.offset_msg_id) == (want["storeHost"], want["commitLogOffset"])
        decoded += 1
    assert decoded == len(expected) == 600


def test_round_trip_through_the_store(tmp_path: Path) -> None:
    big = bytes(range(256)) * 40
    with MessageStore.open(tmp_path / "store", StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        store.put_message(StoreMessage("orders", b"plain", tags="paid", keys=["o-1", "o-2"],
                                       properties={"prop": "v\u00e9"}), queue_id=1)
        store.put_message(StoreMessage("orders", zlib.compress(big), tags="big", sys_flag=1), queue_id=1)
        store.put_message(StoreMessage("orders", b"third", flag=7, reconsume_times=3), queue_id=1)
        records = b"".join(bytes(m.record) for m in store.scan())
        stored = list(store.scan())
    msgs = decode_messages(records, broker_name="broker-a")
    assert [m.body for m in msgs] == [b"plain", big, b"third"]
    assert msgs[0].tags == "paid" and msgs[0].keys == ["o-1", "o-2"]
    assert msgs[0].get_property("prop") == "v\u00e9"
    assert msgs[1].sys_flag & 1
    assert msgs[2].flag == 7 and msgs[2].reconsume_times == 3
    for got, want in zip(msgs, stored, strict=True):
        assert got.queue_offset == want.queue_offset and got.queue_id == 1
        assert got.commit_log_offset == want.commitlog_offset
        assert got.offset_msg_id == want.msg_id
        assert got.msg_id == want.uniq_key
        assert got.broker_name == "broker-a"
        assert got.message_queue.broker_name == "broker-a"


def test_truncated_and_corrupt_records_raise(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "store", StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        store.put_message(StoreMessage("t", b"x" * 10, tags="a"), queue_id=0)
        record = bytes(next(store.scan()).record)
    for cut in range(1, len(record)):
        with pytest.raises(CorruptMessageError):
            decode_messages(record[:cut])
    bad_magic = bytearray(record)
    bad_magic[4] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="MAGICCODE"):
        decode_messages(bytes(bad_magic))
    bad_body = bytearray(record)
    bad_body[84:88] = (10_000).to_bytes(4, "big")
    with pytest.raises(CorruptMessageError, match="BODYLENGTH"):
        decode_messages(bytes(bad_body))


def fields(msg) -> dict:
    names = ("topic", "body", "flag", "properties", "queue_id", "store_size", "queue_offset", "sys_flag",
             "born_timestamp", "born_host", "store_timestamp", "store_host", "commit_log_offset", "body_crc",
             "reconsume_times", "prepared_transaction_offset", "broker_name", "offset_msg_id", "msg_id")
    return {name: getattr(msg, name) for name in names}


def outcome(decode, data: bytes) -> object:
    try:
        return [fields(m) for m in decode(data, broker_name="b")]
    except CorruptMessageError as exc:
        return ("corrupt", str(exc))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_garbage_never_raises_anything_else(data: bytes) -> None:
    assert outcome(decode_messages, data) == outcome(decode_messages_py, data)


@pytest.fixture(scope="module")
def sample_records(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    with MessageStore.open(tmp_path_factory.mktemp("s") / "store", StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for i in range(3):
            store.put_message(StoreMessage("topic", b"b" * (i * 7), tags="t", keys=[f"k{i}"],
                                           properties={"p": "\u00e9" * (i + 1)}), queue_id=i)
        return b"".join(bytes(m.record) for m in store.scan())


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_native_and_reference_decoders_agree_on_damaged_records(sample_records: bytes, data: st.DataObject) -> None:
    damaged = bytearray(sample_records)
    for _ in range(data.draw(st.integers(0, 4))):
        index = data.draw(st.integers(0, len(damaged) - 1))
        damaged[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    assert outcome(decode_messages, bytes(damaged[:cut])) == outcome(decode_messages_py, bytes(damaged[:cut]))


def test_batch_round_trip() -> None:
    messages = [Message("orders", f"body-{i}".encode(), tags="t", keys=[f"k{i}"], flag=i) for i in range(5)]
    for msg in messages:
        msg.properties["UNIQ_KEY"] = new_uniq_key()
    back = decode_batch(encode_batch(messages))
    assert [(m.body, m.flag, m.properties) for m in back] == [(m.body, m.flag, m.properties) for m in messages]
    with pytest.raises(CorruptMessageError):
        decode_batch(encode_batch(messages)[:-3])


def test_properties_and_ids() -> None:
    props = {"TAGS": "a", "KEYS": "k1 k2", "x": "y"}
    text = encode_properties(props)
    assert not text.endswith("\x02")
    assert decode_properties(text) == props
    assert decode_properties(text + "\x02") == props
    assert decode_properties("a\x01\x02b\x01c") == {"b": "c"}
    key = new_uniq_key()
    assert len(key) == 32 and key == key.upper() and key != new_uniq_key()
    msg_id = create_offset_msg_id("192.168.0.10:10911", 123456)
    assert msg_id == "C0A8000A00002A9F000000000001E240"
    assert decode_offset_msg_id(msg_id) == ("192.168.0.10:10911", 123456)
    with pytest.raises(ValueError):
        decode_offset_msg_id("nothex")


def test_java_hash_codes() -> None:
    # values computed by Java's String.hashCode / Integer.hashCode / Long.hashCode
    assert java_hash_code("TagA") == 2598919
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("订单") == 0x8BA2 * 31 + 0x5355
    assert java_hash_code("") == 0
    assert java_hash_code(-7) == -7
    assert java_hash_code(2**40 + 5) == 261  # (int) (v ^ (v >>> 32))
