"""The reference codec reproduces the real RocketMQ 4.9.8 fixture exactly."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest
from refcodec import (
    BLANK_MAGIC,
    RefDecodeError,
    RefRecord,
    body_crc,
    decode_record,
    encode_record,
    format_host,
    index_key_hash,
    iter_commitlog,
    java_hash,
    msg_id,
    parse_properties,
    read_checkpoint,
    read_consume_queue,
    read_index_file,
    ref_query,
    ref_query_offsets,
)
from rocketmq_fixture import FIXTURE_DIR

EXTRA_FIELDS = {"seq", "note", "inConsumeQueue", "indexed"}
STORE = FIXTURE_DIR / "store"


@pytest.fixture(scope="module")
def records(fixture_manifest: dict[str, Any]) -> list[RefRecord]:
    return list(iter_commitlog(STORE))


@pytest.fixture(scope="module")
def segments(fixture_manifest: dict[str, Any]) -> dict[int, bytes]:
    return {int(p.name): p.read_bytes() for p in (STORE / "commitlog").iterdir()}


def test_every_message_field(records: list[RefRecord], fixture_messages: list[dict]) -> None:
    assert len(records) == len(fixture_messages) == 600
    for rec, line in zip(records, fixture_messages, strict=True):
        expected = {k: v for k, v in line.items() if k not in EXTRA_FIELDS}
        assert rec.to_json_dict() == expected, f"seq {line['seq']}"
        assert list(rec.to_json_dict()["properties"]) == list(expected["properties"])
        assert rec.magic == 0xDAA320A7


def test_reencode_is_byte_exact(records: list[RefRecord], segments: dict[int, bytes]) -> None:
    seg_size = 65536
    for rec in records:
        base = rec.commitLogOffset - rec.commitLogOffset % seg_size
        pos = rec.commitLogOffset - base
        original = segments[base][pos : pos + rec.storeSize]
        assert rec.encode() == original, rec.commitLogOffset
        # the default CRC and a dict of properties give the same bytes
        again = encode_record(
            topic=rec.topic,
            queueId=rec.queueId,
            queueOffset=rec.queueOffset,
            commitLogOffset=rec.commitLogOffset,
            body=rec.body,
            properties=parse_properties(rec.propertiesString),
            flag=rec.flag,
            sysFlag=rec.sysFlag & ~0x30,
            bornTimestamp=rec.bornTimestamp,
            bornHost=rec.bornHost,
            storeTimestamp=rec.storeTimestamp,
            storeHost=rec.storeHost,
            reconsumeTimes=rec.reconsumeTimes,
            preparedTransactionOffset=rec.preparedTransactionOffset,
        )
        assert again == original
        assert decode_record(b"\0" * 7 + original, 7) == rec


def test_segments_and_blanks(
    records: list[RefRecord], segments: dict[int, bytes], fixture_manifest: dict[str, Any]
) -> None:
    for seg in fixture_manifest["commitlogFiles"]:
        base = seg["fromOffset"]
        mine = [r for r in records if base <= r.commitLogOffset < base + seg["fileSize"]]
        assert len(mine) == seg["records"]
        assert mine[-1].commitLogOffset + mine[-1].storeSize - base == seg["dataEndPos"]
    for blank in fixture_manifest["endFileBlankRecords"]:
        data = segments[int(blank["file"])]
        size, magic = struct.unpack_from(">iI", data, blank["posInFile"])
        assert (size, magic) == (blank["declaredSize"], BLANK_MAGIC)
    assert records[-1].commitLogOffset + records[-1].storeSize == fixture_manifest["maxPhyOffset"]


def test_consume_queues(fixture_consumequeue: list[dict]) -> None:
    assert len(fixture_consumequeue) == 6
    for q in fixture_consumequeue:
        units = read_consume_queue(STORE / "consumequeue" / q["topic"] / str(q["queueId"]))
        expected = [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in q["units"]]
        assert [u["queueOffset"] for u in q["units"]] == list(range(q["unitCount"]))
        assert units == expected
        assert len(units) == q["unitCount"] == q["maxOffset"] - q["minOffset"]


def test_consume_queue_matches_dispatch(
    records: list[RefRecord], fixture_messages: list[dict]
) -> None:
    for rec, line in zip(records, fixture_messages, strict=True):
        queue = read_consume_queue(STORE / "consumequeue" / rec.topic / str(rec.queueId))
        unit = (rec.commitLogOffset, rec.storeSize, rec.tagsCode)
        assert (queue[rec.queueOffset] == unit) is line["inConsumeQueue"]
        assert line["inConsumeQueue"] is (rec.sysFlag & 0xC in (0, 0x8))


def test_index_lookups(fixture_index_queries: list[dict], fixture_manifest: dict) -> None:
    cfg = fixture_manifest["config"]
    assert len(fixture_index_queries) == 49
    for q in fixture_index_queries:
        args = q["queryMessageArgs"]
        max_num = min(args["maxNum"], cfg["maxMsgsNumBatch"])
        got = ref_query(
            STORE / "index",
            q["topic"],
            q["key"],
            max_num,
            args["begin"],
            args["end"],
            cfg["maxHashSlotNum"],
            cfg["maxIndexNum"],
        )
        assert got == q["returnedOffsets"], q["indexKey"]
        raw = ref_query_offsets(
            STORE / "index",
            q["topic"],
            q["key"],
            max_num,
            args["begin"],
            args["end"],
            cfg["maxHashSlotNum"],
            cfg["maxIndexNum"],
        )
        assert sorted(raw) == got


def test_index_file_headers(fixture_manifest: dict[str, Any]) -> None:
    cfg = fixture_manifest["config"]
    files = sorted((STORE / "index").iterdir())
    assert [p.name for p in files] == [f["name"] for f in fixture_manifest["indexFiles"]]
    total_items = 0
    for path, want in zip(files, fixture_manifest["indexFiles"], strict=True):
        header, slots, items = read_index_file(path, cfg["maxHashSlotNum"], cfg["maxIndexNum"])
        assert os.path.getsize(path) == want["fileSize"] == cfg["indexFileSize"]
        assert header == {k: want[k] for k in header}
        assert len(items) == want["itemsUsed"] + 1 and items[0] == (0, 0, 0, 0)
        assert sum(1 for s in slots if s) == want["nonEmptySlots"]
        total_items += want["itemsUsed"]
        for key_hash, _phy, time_diff, prev in items[1:]:
            assert 0 <= key_hash and time_diff >= 0 and 0 <= prev < header["indexCount"]
    assert total_items == 1658


def test_checkpoint(fixture_manifest: dict[str, Any]) -> None:
    want = fixture_manifest["checkpoint"]
    assert os.path.getsize(STORE / "checkpoint") == want["fileSize"]
    assert read_checkpoint(STORE / "checkpoint") == {
        k: want[k] for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")
    }


def test_key_hashes(fixture_index_queries: list[dict], fixture_manifest: dict) -> None:
    for q in fixture_index_queries:
        assert java_hash(q["indexKey"]) == q["hashCode"]
        assert index_key_hash(q["indexKey"]) == q["keyHash"]
        assert q["keyHash"] % 200 == q["slot"]
    for c in fixture_manifest["engineeredKeyHashCollisions"]:
        assert (java_hash(c["a"]), java_hash(c["b"])) == (c["hashCodeA"], c["hashCodeB"])
        assert index_key_hash(c["a"]) == index_key_hash(c["b"]) == c["keyHash"]
    assert java_hash("audit#min-otqr6a0pt") == -(2**31)
    assert index_key_hash("audit#min-otqr6a0pt") == 0 == index_key_hash("audit#zero-kkc43ibeg")
    assert java_hash("") == 0 and java_hash("Aa") == java_hash("BB") == 2112
    assert java_hash("📦") == 1772617  # two UTF-16 surrogates


def test_helpers() -> None:
    assert parse_properties("a\x011\x02b\x01\x02\x01x\x02c\x013\x014\x02") == {
        "a": "1",
        "c": "3\x014",
    }
    assert parse_properties("") == {} and parse_properties("a\x011\x02a\x012") == {"a": "2"}
    assert format_host(bytes([192, 168, 0, 10]), 10911) == "192.168.0.10:10911"
    v6 = bytes.fromhex("20010db8000000000000000000000100")
    assert format_host(v6, 10911) == "[2001:db8::100]:10911"
    assert msg_id(bytes([192, 168, 0, 10]), 10911, 500) == "C0A8000A00002A9F00000000000001F4"
    assert body_crc(b"") == 0 and body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF


def test_decode_rejects_inconsistent_records(records: list[RefRecord]) -> None:
    good = records[1].encode()
    decode_record(good)
    bad_cases = [
        good[:4] + b"\xde\xad\xbe\xef" + good[8:],  # magic
        struct.pack(">i", 90) + good[4:],  # below the minimum size
        struct.pack(">i", len(good) + 1) + good[4:],  # beyond the buffer
        struct.pack(">i", len(good) - 1) + good[4:],  # parts overflow the record
        struct.pack(">i", len(good) + 1) + good[4:] + b"\0",  # parts shorter than TOTALSIZE
        good[:84] + struct.pack(">i", -1) + good[88:],  # negative body length
        good[:8] + struct.pack(">i", records[1].bodyCRC ^ 1) + good[12:],  # CRC
        good[:7],
    ]
    for bad in bad_cases:
        with pytest.raises(RefDecodeError):
            decode_record(bad)
    decode_record(bad_cases[6], check_crc=False)


def test_store_copy_is_private_and_writable(rocketmq_store: Path, records: list[RefRecord]) -> None:
    assert rocketmq_store != STORE and (rocketmq_store / "commitlog").is_dir()
    (rocketmq_store / "abort").write_bytes(b"")
    with open(rocketmq_store / "checkpoint", "r+b") as f:
        f.write(b"\0" * 8)
    assert [r.commitLogOffset for r in iter_commitlog(rocketmq_store)] == [
        r.commitLogOffset for r in records
    ]
