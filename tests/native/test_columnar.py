"""Columnar decode (rocketstore._native.columnar, rocketstore.store.columnar): every column
against MessageExt / the reference codec, on the real RocketMQ 4.9.8 store and on
hypothesis-generated stores; range splitting; ConsumeQueue-style positions; corrupt bytes."""

from __future__ import annotations

import gc
import ipaddress
import random
import string
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import refcodec
from helpers import STORE_HOST, make_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import CorruptRecordError, Message, MessageStore, StoreConfig
from rocketstore._native import columnar, columnar_buffers, hosts, properties
from rocketstore._native.record import MessageExt, decode_message
from rocketstore.store import columnar as store_columnar

SETTINGS = settings(
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAMES = [f.name for f in columnar.SCHEMA]
TS_COLUMNS = ("born_timestamp", "store_timestamp")


# ---------------------------------------------------------------------------- expectations


def host_text(text: str) -> str:
    """A host as the columns print it: RFC 5952, IPv4-mapped IPv6 as ::ffff:a.b.c.d (what
    Python >= 3.13 prints; 3.10-3.12 print ::ffff:102:304 for those)."""
    addr_text, _, port = text.rpartition(":")
    addr = ipaddress.ip_address(addr_text.strip("[]"))
    if addr.version == 4:
        return f"{addr}:{port}"
    if addr.ipv4_mapped is not None:
        return f"[::ffff:{addr.ipv4_mapped}]:{port}"
    return f"[{addr.compressed}]:{port}"


def expected_row(ext: MessageExt) -> dict[str, Any]:
    """A row as the columns should hold it, from the object decoder."""
    d = ext.to_dict(body_b64=False)
    return {
        "topic": d["topic"],
        "queue_id": d["queueId"],
        "queue_offset": d["queueOffset"],
        "commitlog_offset": d["commitLogOffset"],
        "store_size": d["storeSize"],
        "sys_flag": d["sysFlag"],
        "flag": d["flag"],
        "born_timestamp": d["bornTimestamp"],
        "store_timestamp": d["storeTimestamp"],
        "born_host": host_text(d["bornHost"]),
        "store_host": host_text(d["storeHost"]),
        "reconsume_times": d["reconsumeTimes"],
        "msg_id": d["msgId"],
        "tags": d["tags"],
        "keys": ext.keys,
        # first-seen order, last value wins: MessageExt.properties is a dict built that way
        "properties": list(ext.properties.items()),
        "body": d["body"],
    }


def ref_row(rec: refcodec.RefRecord) -> dict[str, Any]:
    """A row from the independent reference decoder (properties compared as a dict)."""
    return {
        "topic": rec.topic,
        "queue_id": rec.queueId,
        "queue_offset": rec.queueOffset,
        "commitlog_offset": rec.commitLogOffset,
        "store_size": rec.storeSize,
        "sys_flag": rec.sysFlag,
        "flag": rec.flag,
        "born_timestamp": rec.bornTimestamp,
        "store_timestamp": rec.storeTimestamp,
        "born_host": host_text(rec.bornHost),
        "store_host": host_text(rec.storeHost),
        "reconsume_times": rec.reconsumeTimes,
        "msg_id": rec.msgId,
        "tags": rec.tags,
        "keys": [k for k in rec.keys.split(" ") if k] if rec.keys else [],
        "properties": dict(rec.properties),
        "body": rec.body,
    }


def rows(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Python rows with timestamps as int ms (no datetime conversion, any int64 fits)."""
    batch.validate(full=True)
    cols = {}
    for name in batch.schema.names:
        col = batch.column(name)
        if name in TS_COLUMNS:
            col = col.cast(pa.int64())
            if batch.schema.field(name).type.unit == "us":
                col = pa.array([None if v is None else v // 1000 for v in col.to_pylist()])
        cols[name] = col.to_pylist()
    n = batch.num_rows
    return [{name: cols[name][i] for name in batch.schema.names} for i in range(n)]


def as_ref(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "properties": dict(row["properties"])}


def fixture_config(root: Path, manifest: dict[str, Any]) -> StoreConfig:
    sizes = manifest["config"]
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=sizes["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=sizes["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=sizes["maxHashSlotNum"],
        max_index_num=sizes["maxIndexNum"],
        store_host=STORE_HOST,
    )


# ---------------------------------------------------------------------------- schema


def test_schema_is_the_spark_schema() -> None:
    expected = [
        ("topic", pa.string(), False),
        ("queue_id", pa.int32(), True),
        ("queue_offset", pa.int64(), True),
        ("commitlog_offset", pa.int64(), True),
        ("store_size", pa.int32(), True),
        ("sys_flag", pa.int32(), True),
        ("flag", pa.int32(), True),
        ("born_timestamp", pa.timestamp("ms"), True),
        ("store_timestamp", pa.timestamp("ms"), True),
        ("born_host", pa.string(), True),
        ("store_host", pa.string(), True),
        ("reconsume_times", pa.int32(), True),
        ("msg_id", pa.string(), True),
        ("tags", pa.string(), True),
        ("keys", pa.list_(pa.string()), True),
        ("properties", pa.map_(pa.string(), pa.string()), True),
        ("body", pa.binary(), True),
    ]
    assert [(f.name, f.type, f.nullable) for f in columnar.SCHEMA] == expected
    assert columnar.schema() == columnar.SCHEMA
    assert columnar.schema(False) == pa.schema(list(columnar.SCHEMA)[:-1])
    spark = columnar.schema(spark=True)
    assert spark.field("born_timestamp").type == pa.timestamp("us", tz="UTC")
    assert store_columnar.SCHEMA is columnar.SCHEMA
    empty = columnar.empty_batch()
    assert empty.num_rows == 0 and empty.schema == columnar.SCHEMA


def test_spark_schema_matches_pyspark_conversion() -> None:
    """schema(spark=True) is what PySpark's data source reader checks yielded batches
    against (to_arrow_schema(schema, timezone='UTC') and Schema.equals)."""
    types = pytest.importorskip("pyspark.sql.types")
    arrow_types = pytest.importorskip("pyspark.sql.pandas.types")
    t = types
    spark_schema = t.StructType([
        t.StructField("topic", t.StringType(), False),
        t.StructField("queue_id", t.IntegerType()),
        t.StructField("queue_offset", t.LongType()),
        t.StructField("commitlog_offset", t.LongType()),
        t.StructField("store_size", t.IntegerType()),
        t.StructField("sys_flag", t.IntegerType()),
        t.StructField("flag", t.IntegerType()),
        t.StructField("born_timestamp", t.TimestampType()),
        t.StructField("store_timestamp", t.TimestampType()),
        t.StructField("born_host", t.StringType()),
        t.StructField("store_host", t.StringType()),
        t.StructField("reconsume_times", t.IntegerType()),
        t.StructField("msg_id", t.StringType()),
        t.StructField("tags", t.StringType()),
        t.StructField("keys", t.ArrayType(t.StringType())),
        t.StructField("properties", t.MapType(t.StringType(), t.StringType())),
        t.StructField("body", t.BinaryType()),
    ])
    converted = arrow_types.to_arrow_schema(spark_schema, timezone="UTC")
    assert converted.equals(columnar.schema(spark=True))


# ---------------------------------------------------------------------------- the RocketMQ store


@pytest.fixture
def fixture_store(rocketmq_store: Path, fixture_manifest: dict[str, Any]):
    store = MessageStore.open(rocketmq_store, fixture_config(rocketmq_store, fixture_manifest),
                              read_only=True)
    yield store
    store.shutdown()


def test_rocketmq_fixture_every_column(
    fixture_store: MessageStore, fixture_messages: list[dict[str, Any]], rocketmq_store: Path
) -> None:
    table = store_columnar.read_range_table(fixture_store, 0)
    assert table.schema == columnar.SCHEMA
    got = rows(table)
    assert len(got) == len(fixture_messages) == 600
    # against the object decoder, field by field
    exts = list(fixture_store.scan(check_crc=True))
    assert got == [expected_row(m) for m in exts]
    # against the independent reference decoder
    refs = list(refcodec.iter_commitlog(rocketmq_store))
    assert [as_ref(r) for r in got] == [ref_row(r) for r in refs]
    # against RocketMQ's own values in messages.jsonl
    for row, line in zip(got, fixture_messages, strict=True):
        assert row["msg_id"] == line["msgId"]
        assert row["commitlog_offset"] == line["commitLogOffset"]
        assert row["store_size"] == line["storeSize"]
        assert row["tags"] == line["tags"]
        assert row["keys"] == ([k for k in line["keys"].split(" ") if k] if line["keys"] else [])
        assert dict(row["properties"]) == line["properties"]
        assert row["born_host"] == line["bornHost"] and row["store_host"] == line["storeHost"]
        assert row["born_timestamp"] == line["bornTimestamp"]
        assert row["store_timestamp"] == line["storeTimestamp"]
        assert row["sys_flag"] == line["sysFlag"]
        assert row["reconsume_times"] == line["reconsumeTimes"]
    # IPv6 hosts, transactions and the 40,000-byte body are in there
    assert any(r["born_host"].startswith("[") for r in got)
    assert any(r["store_host"] == "[2001:db8::100]:10911" for r in got)
    assert max(len(r["body"]) for r in got) == 40_000
    assert {r["sys_flag"] & 0xC for r in got} == {0, 4, 8, 12}


def test_rocketmq_fixture_per_segment(fixture_store: MessageStore) -> None:
    files = fixture_store.commit_log.queue.files
    assert len(files) == 10
    all_rows = rows(store_columnar.read_range_table(fixture_store, 0))
    by_offset = {r["commitlog_offset"]: r for r in all_rows}
    total = 0
    for i, mf in enumerate(files):
        res = columnar.decode_region(mf, 0, -1, base_offset=mf.file_from_offset)
        batch, next_pos, status = res
        assert status == ("blank" if i < 9 else "end"), (i, res)
        assert res.reason is None
        # the same bytes as a plain buffer decode the same
        data = mf.read(0, mf.read_position)
        again = columnar.decode_region(data, 0, len(data), base_offset=mf.file_from_offset)
        assert again[1:] == (next_pos, status)
        assert again[0].equals(batch)
        for r in rows(batch):
            assert by_offset[r["commitlog_offset"]] == r
        total += batch.num_rows
    assert total == 600


def test_include_body_false_drops_the_column(fixture_store: MessageStore) -> None:
    full = store_columnar.read_range_table(fixture_store, 0)
    nobody = store_columnar.read_range_table(fixture_store, 0, include_body=False)
    assert nobody.schema == columnar.schema(False)
    assert "body" not in nobody.schema.names
    assert nobody.equals(full.drop_columns(["body"]))


def test_spark_timestamps(fixture_store: MessageStore) -> None:
    ms = store_columnar.read_range_table(fixture_store, 0)
    us = store_columnar.read_range_table(fixture_store, 0, spark=True)
    assert us.schema == columnar.schema(spark=True)
    for name in TS_COLUMNS:
        assert us.column(name).cast(pa.int64()).to_pylist() == [
            v * 1000 for v in ms.column(name).cast(pa.int64()).to_pylist()]
    assert us.drop_columns(list(TS_COLUMNS)).equals(ms.drop_columns(list(TS_COLUMNS)))


# ---------------------------------------------------------------------------- generated stores

PROP_CHARS = st.characters(codec="utf-8", exclude_characters="\x00\x01\x02")
PROP_TEXT = st.text(PROP_CHARS, min_size=1, max_size=20)
TOPIC_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|"
TOPICS = st.text(st.sampled_from(TOPIC_ALPHABET), min_size=1, max_size=127)
PORTS = st.integers(0, 65535)


def _host(addr: Any, port: int) -> str:
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


HOSTS = st.one_of(
    st.none(),
    st.builds(_host, st.ip_addresses(v=4), PORTS),
    st.builds(_host, st.ip_addresses(v=6), PORTS),
    st.builds(_host, st.sampled_from([ipaddress.ip_address(a) for a in (
        "::", "::1", "::ffff:10.1.2.3", "2001:db8::100", "fe80::1:0:0:0", "1:0:0:1:0:0:0:1",
        "0:0:1::", "::1.2.3.4", "64:ff9b::1.2.3.4")]), PORTS),
)
KEYS = st.one_of(
    st.none(),
    st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02 "), max_size=12),
             max_size=4),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"), max_size=30),
)
BODIES = st.one_of(
    st.binary(max_size=300),
    st.just(b""),
    st.integers(1000, 300_000).map(lambda n: random.Random(n).randbytes(n)),
)


@st.composite
def messages(draw: st.DrawFn) -> tuple[Message, int]:
    msg = Message(
        draw(TOPICS),
        draw(BODIES),
        tags=draw(st.one_of(st.none(), st.text(PROP_CHARS, max_size=16))),
        keys=draw(KEYS),
        properties=draw(st.one_of(st.none(), st.dictionaries(PROP_TEXT, PROP_TEXT, max_size=6))),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        born_timestamp=draw(st.one_of(st.none(), st.integers(0, 2**63 - 1))),
        born_host=draw(HOSTS),
        store_host=draw(HOSTS),
        sys_flag=draw(st.sampled_from([0, 1, 2, 4, 8, 12])),
        reconsume_times=draw(st.integers(0, 2**31 - 1)),
    )
    return msg, draw(st.integers(0, 7))


def write_store(root: Path, msgs: list[tuple[Message, int]], seg: int) -> None:
    with MessageStore.open(root, make_config(root, mapped_file_size_commit_log=seg)) as store:
        for msg, queue_id in msgs:
            r = store.put_message(msg, queue_id)
            assert r.ok, r


TOPIC_CHARS = string.ascii_letters + string.digits + "%|_-"


@SETTINGS
@given(st.lists(messages(), min_size=1, max_size=30))
def test_generated_store_every_column(msgs: list[tuple[Message, int]]) -> None:
    with tempfile.TemporaryDirectory(prefix="rs-columnar-") as tmp:
        root = Path(tmp)
        write_store(root, msgs, 1 << 20)
        with MessageStore.open(root, make_config(root, mapped_file_size_commit_log=1 << 20),
                               read_only=True) as store:
            exts = list(store.scan(check_crc=True))
            assert len(exts) == len(msgs)
            expected = [expected_row(m) for m in exts]
            got = rows(store_columnar.read_range_table(store, 0))
            assert got == expected
            refs = list(refcodec.iter_commitlog(root))
            assert [as_ref(r) for r in got] == [ref_row(r) for r in refs]
            # small batches and alignment from arbitrary offsets give the same rows
            small = list(store_columnar.read_range(store, 0, batch_bytes=1000))
            assert all(b.num_rows for b in small)
            assert [r for b in small for r in rows(b)] == expected
            nobody = rows(store_columnar.read_range_table(store, 0, include_body=False))
            assert nobody == [{k: v for k, v in r.items() if k != "body"} for r in expected]


# ---------------------------------------------------------------------------- range splitting


@pytest.fixture(scope="module")
def multi_store(tmp_path_factory: pytest.TempPathFactory):
    """~40 segments of 64 KiB: varied record sizes, so blanks of all sizes."""
    root = tmp_path_factory.mktemp("columnar-multi")
    rng = random.Random(5)
    msgs = []
    for i in range(1500):
        size = rng.choice([0, 10, 100, 1000, 3000, 20_000])
        msgs.append((Message(f"topic{i % 3}", rng.randbytes(size), tags=f"t{i % 5}",
                             keys=[f"k{i}", f"o{i % 7}"],
                             born_host=rng.choice([None, "[fd00::a]:1234", "10.0.0.7:99"])),
                     i % 4))
    write_store(root, msgs, 64 * 1024)
    store = MessageStore.open(root, make_config(root), read_only=True)
    yield store
    store.shutdown()


def all_offsets(store: MessageStore) -> list[int]:
    return [m.commitlog_offset for m in store.scan()]


def test_multi_segment_read_equals_scan(multi_store: MessageStore) -> None:
    files = multi_store.commit_log.queue.files
    assert len(files) > 20
    table = store_columnar.read_range_table(multi_store, 0)
    assert rows(table) == [expected_row(m) for m in multi_store.scan()]


@pytest.mark.parametrize("threads", [2, 3])
def test_parallel_read_equals_serial(multi_store: MessageStore, threads: int) -> None:
    serial = store_columnar.read_range_table(multi_store, 0, batch_bytes=20_000)
    parallel = store_columnar.read_range_table(multi_store, 0, batch_bytes=20_000,
                                               threads=threads)
    assert parallel.equals(serial)
    mid = multi_store.get_max_phy_offset() // 3
    assert store_columnar.read_range_table(multi_store, mid, 2 * mid, threads=threads).equals(
        store_columnar.read_range_table(multi_store, mid, 2 * mid))


def test_align_to_record_contract(multi_store: MessageStore) -> None:
    offsets = all_offsets(multi_store)
    starts = set(offsets)
    lo, hi = multi_store.get_min_phy_offset(), multi_store.get_max_phy_offset()
    seg = 64 * 1024
    align = store_columnar.align_to_record
    assert align(multi_store, -5) == lo == 0
    assert align(multi_store, hi) == hi and align(multi_store, hi + 12345) == hi
    for off in offsets[:50]:
        assert align(multi_store, off) == off
    rng = random.Random(11)
    probes = sorted(rng.randrange(0, hi) for _ in range(300))
    probes += [seg * k - 1 for k in range(1, hi // seg)]     # inside END_FILE blanks
    prev = -1
    for x in sorted(probes):
        a = align(multi_store, x)
        assert a >= x and a >= prev
        # the first record start at or after x (a segment start after a blank), or the end
        nxt = min((o for o in offsets if o >= x), default=hi)
        assert a == nxt, (x, a, nxt)
        assert not any(x <= o < a for o in starts)
        prev = a


@SETTINGS
@given(st.lists(st.integers(0, 3_000_000), max_size=12), st.integers(1, 300_000))
def test_partitions_cover_every_record_once(multi_store: MessageStore, cuts: list[int],
                                            batch_bytes: int) -> None:
    offsets = all_offsets(multi_store)
    hi = multi_store.get_max_phy_offset()
    bounds = sorted({0, hi, *[c % (hi + 1) for c in cuts]})
    seen: list[int] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        # unaligned bounds: a partition owns the records that START in [a, b)
        part = [o for batch in store_columnar.read_range(multi_store, a, b,
                                                          batch_bytes=batch_bytes)
                for o in batch.column("commitlog_offset").to_pylist()]
        assert part == [o for o in offsets if a <= o < b]
        seen += part
    assert seen == offsets


def test_plan_ranges(multi_store: MessageStore) -> None:
    offsets = all_offsets(multi_store)
    hi = multi_store.get_max_phy_offset()
    for size in (1000, 5000, 100_000, 10**9):
        ranges = store_columnar.plan_ranges(multi_store, size)
        assert ranges[0][0] == 0 and ranges[-1][1] == hi
        assert all(a < b for a, b in ranges)
        assert all(r1[1] == r2[0] for r1, r2 in zip(ranges[:-1], ranges[1:], strict=True))
        got = []
        for a, b in ranges:
            assert a in set(offsets) or a % (64 * 1024) == 0
            got += [o for batch in store_columnar.read_range(multi_store, a, b, align=False)
                    for o in batch.column("commitlog_offset").to_pylist()]
        assert got == offsets
    sub = store_columnar.plan_ranges(multi_store, 30_000, 100_000, 400_000)
    got = [o for a, b in sub for batch in store_columnar.read_range(multi_store, a, b)
           for o in batch.column("commitlog_offset").to_pylist()]
    assert got == [o for o in offsets if 100_000 <= o < 400_000]
    assert store_columnar.plan_ranges(multi_store, 10, 500, 500) == []
    with pytest.raises(ValueError, match="partition_bytes"):
        store_columnar.plan_ranges(multi_store, 0)


def test_read_range_unaligned_start_without_align_is_corrupt(multi_store: MessageStore) -> None:
    offsets = all_offsets(multi_store)
    with pytest.raises(CorruptRecordError) as info:
        list(store_columnar.read_range(multi_store, offsets[1] + 3, align=False))
    assert info.value.offset == offsets[1] + 3
    got = store_columnar.read_range_table(multi_store, offsets[1] + 3, offsets[40])
    assert got.column("commitlog_offset").to_pylist() == offsets[2:40]
    empty = store_columnar.read_range_table(multi_store, offsets[5], offsets[5])
    assert empty.num_rows == 0 and empty.schema == columnar.SCHEMA


def test_a_log_cut_short_ends_there(multi_store: MessageStore) -> None:
    """A read-only CommitLog cut at an offset (as a Spark snapshot does) reads up to it."""
    offsets = all_offsets(multi_store)
    cut = offsets[len(offsets) // 2]
    with MessageStore.open(multi_store.root, make_config(multi_store.root),
                           read_only=True) as store:
        store.commit_log.set_end(cut, zero_tail=False)
        got = store_columnar.read_range_table(store, 0).column("commitlog_offset").to_pylist()
        assert got == [o for o in offsets if o < cut]
        assert store_columnar.align_to_record(store, cut + 1) == cut
        ranges = store_columnar.plan_ranges(store, 50_000)
        assert ranges[-1][1] == cut


# ---------------------------------------------------------------------------- positions


def test_decode_positions(multi_store: MessageStore) -> None:
    files = multi_store.commit_log.queue.files
    rng = random.Random(3)
    for mf in files[:5]:
        base = mf.file_from_offset
        full = columnar.decode_region(mf, 0, base_offset=base).batch
        pos = [o - base for o in full.column("commitlog_offset").to_pylist()]
        pick = [rng.randrange(len(pos)) for _ in range(30)]      # any order, repeats
        got = columnar.decode_positions(mf, [pos[i] for i in pick], base_offset=base)
        assert got.equals(full.take(pick))
        assert columnar.decode_positions(mf, [], base_offset=base).equals(full.slice(0, 0))
        nobody = columnar.decode_positions(mf, [pos[i] for i in pick], base_offset=base,
                                           include_body=False)
        assert nobody.equals(full.take(pick).drop_columns(["body"]))
        # a wrong position raises, naming its CommitLog offset
        blank = columnar.decode_region(mf, 0, base_offset=base)
        assert blank.stop_status == "blank"
        for bad in (pos[1] + 1, pos[-1] + 4, blank.next_position, mf.read_position, -1,
                    mf.file_size + 10):
            with pytest.raises(CorruptRecordError) as info:
                columnar.decode_positions(mf, [pos[0], bad], base_offset=base)
            assert info.value.offset == base + bad
            assert "positions[1]" in str(info.value)
        # base_offset must match the records' PHYSICALOFFSET; None takes it as stored
        with pytest.raises(CorruptRecordError, match="physical offset"):
            columnar.decode_positions(mf, [pos[0]], base_offset=base + 1)
        assert columnar.decode_positions(mf, [pos[0]], base_offset=None).equals(full.slice(0, 1))


def test_decode_positions_from_consume_queue_units(multi_store: MessageStore) -> None:
    """The ConsumeQueue-driven read: units -> (file, position) -> one batch per file."""
    exts = list(multi_store.scan())
    units = [(m.commitlog_offset, m.store_size) for m in exts if m.queue_id == 1
             and m.topic == "topic1"]
    files = multi_store.commit_log.queue.files
    size = files[0].file_size
    got = []
    for start in sorted({off - off % size for off, _ in units}):
        mf = files[start // size]
        positions = [off - start for off, _ in units if start <= off < start + size]
        got += rows(columnar.decode_positions(mf, positions, base_offset=start))
    assert got == [expected_row(m) for m in exts if m.queue_id == 1 and m.topic == "topic1"]


# ---------------------------------------------------------------------------- limits


def data_bytes(col: pa.Array) -> int:
    """Bytes of string/binary data in a column (list items and map keys/values included)."""
    if pa.types.is_list(col.type):
        return data_bytes(col.flatten())
    if pa.types.is_map(col.type):
        return max(data_bytes(col.keys), data_bytes(col.items))
    if pa.types.is_string(col.type) or pa.types.is_binary(col.type):
        return sum(len(v) for v in col.cast(pa.binary()).to_pylist() if v is not None)
    return 0


def test_max_batch_bytes_splits_and_resumes(multi_store: MessageStore) -> None:
    mf = multi_store.commit_log.queue.files[3]
    base = mf.file_from_offset
    whole = columnar.decode_region(mf, 0, base_offset=base).batch
    parts, pos = [], 0
    while True:
        batch, pos, status = columnar.decode_region(mf, pos, base_offset=base,
                                                    max_batch_bytes=4000)
        assert batch.num_rows >= 1
        # no column over the limit, except a single record bigger than it on its own
        if batch.num_rows > 1:
            assert max(data_bytes(col) for col in batch.columns) <= 4000
        parts.append(batch)
        if status != "limit":
            break
    assert status == "blank"
    assert pa.Table.from_batches(parts).equals(pa.Table.from_batches([whole]))
    # max_records
    batch, pos, status = columnar.decode_region(mf, 0, base_offset=base, max_records=3)
    assert (batch.num_rows, status) == (3, "limit") and batch.equals(whole.slice(0, 3))
    batch, pos2, status = columnar.decode_region(mf, 0, base_offset=base, max_records=0)
    assert (batch.num_rows, pos2, status) == (0, 0, "limit")
    # decode_positions says how many fit
    pos_list = [o - base for o in whole.column("commitlog_offset").to_pylist()]
    with pytest.raises(columnar.BatchTooLargeError) as info:
        columnar.decode_positions(mf, pos_list, base_offset=base, max_batch_bytes=4000)
    fits = info.value.fits
    assert 1 <= fits < len(pos_list)
    assert columnar.decode_positions(mf, pos_list[:fits], base_offset=base,
                                     max_batch_bytes=4000).equals(whole.slice(0, fits))
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError, match="max_batch_bytes"):
            columnar.decode_region(mf, 0, base_offset=base, max_batch_bytes=bad)


def test_argument_errors(multi_store: MessageStore) -> None:
    mf = multi_store.commit_log.queue.files[0]
    with pytest.raises(ValueError, match="start"):
        columnar.decode_region(mf, -1, base_offset=0)
    with pytest.raises(ValueError, match="start"):
        columnar.decode_region(mf, 10, 5, base_offset=0)
    with pytest.raises(ValueError, match="base_offset"):
        columnar.decode_region(mf, 0, base_offset=-3)
    with pytest.raises(TypeError, match="base_offset"):
        columnar.decode_region(mf, 0, base_offset="0")
    with pytest.raises(TypeError):
        columnar.decode_region(mf, 0)      # base_offset is required
    with pytest.raises(ValueError, match="1-D"):
        columnar.decode_positions(mf, [[0]], base_offset=0)
    res = columnar.decode_region(b"", 0, base_offset=0)
    assert res.batch.num_rows == 0 and res[1:] == (0, "end")
    with pytest.raises(ValueError, match="batch_bytes"):
        list(store_columnar.read_range(multi_store, 0, batch_bytes=0))


# ---------------------------------------------------------------------------- crafted records


def record(topic: bytes = b"T", props: bytes = b"", body: bytes = b"x", offset: int = 0,
           born: str = "10.0.0.1:1", store: str = STORE_HOST) -> bytes:
    """A v1 record whose topic and properties are raw bytes (invalid UTF-8 allowed)."""
    rec = refcodec.encode_record(
        topic="t" * len(topic), queueId=1, queueOffset=2, commitLogOffset=offset, body=body,
        properties="p" * len(props), bornTimestamp=3, bornHost=born, storeTimestamp=4,
        storeHost=store)
    end_topic = len(rec) - len(props) - 2
    return rec[:end_topic - len(topic)] + topic + rec[end_topic:len(rec) - len(props)] + props


def decode_all(data: bytes, **kw: Any) -> columnar.RegionResult:
    kw.setdefault("base_offset", 0)
    return columnar.decode_region(data, 0, len(data), **kw)


def check_against_object_decoder(data: bytes, batch: pa.RecordBatch, base: int | None = 0
                                 ) -> None:
    for row in rows(batch):
        pos = row["commitlog_offset"] - (base or 0)
        assert row == expected_row(decode_message(data, pos))


PROPERTY_CASES = [
    b"",
    b"TAGS\x01a",
    b"TAGS\x01a\x02TAGS\x01b",                     # a repeated name: the last value wins
    b"A\x011\x02B\x012\x02A\x013",                 # ... in the first one's place
    b"TAGS\x01\x02KEYS\x01",                       # empty values are dropped
    b"\x01v\x02n\x01\x02\x02x\x02KEYS\x01  a  b ",  # empty names, no \x01, blank KEYS tokens
    b"TAGS\x01a\x02",                              # a trailing \x02
    b"name\x01va\x01lue\x02TAGS\x01x\x01y",         # the value keeps a later \x01
    b"KEYS\x01   ",                                # KEYS of spaces only: an empty list
    b"\xff\x01\xfe\x02\xfe\x01x\x02TAGS\x01\xc3",   # invalid UTF-8: U+FFFD, names collide
    b"K\x01\xe2\x82\x02KEYS\x01a\xf0\x9f b\xed\xa0\x80",
    b"TAGS\x01\xf0\x9f\x93\xa6\x02KEYS\x01\xe8\xae\xa2 \xe5\x8d\x95",
]


@pytest.mark.parametrize("props", PROPERTY_CASES)
def test_properties_semantics(props: bytes) -> None:
    data = record(props=props)
    batch, pos, status = decode_all(data)
    assert (batch.num_rows, pos, status) == (1, len(data), "end")
    check_against_object_decoder(data, batch)
    row = rows(batch)[0]
    expected = refcodec.parse_properties(props.decode("utf-8", "replace"))
    assert dict(row["properties"]) == expected
    assert len(row["properties"]) == len(expected)        # unique names
    assert row["tags"] == expected.get("TAGS")
    keys = expected.get("KEYS")
    assert row["keys"] == ([k for k in keys.split(" ") if k] if keys else [])


# Properties as the decoder's two ways see them: ASCII without a repeated name goes straight
# into the columns, anything else through the pair table, over what the first way wrote.
PROP_NAME = st.sampled_from(["TAGS", "KEYS", "TAXS", "KEY", "K", "WAIT", "UNIQ_KEY", "T", ""])
PROP_VALUE = st.one_of(st.text("ab 12", max_size=40), st.sampled_from(["\u00e9", "x\u4e2d"]))


@SETTINGS
@given(st.lists(st.lists(st.tuples(PROP_NAME, PROP_VALUE), max_size=8), min_size=1,
                max_size=12))
def test_properties_fast_and_table_ways_agree(records: list[list[tuple[str, str]]]) -> None:
    data = b""
    for pairs in records:
        props = "\x02".join(f"{k}\x01{v}" for k, v in pairs).encode()
        data += record(props=props, offset=len(data))
    batch, pos, status = decode_all(data)
    assert (batch.num_rows, pos, status) == (len(records), len(data), "end")
    check_against_object_decoder(data, batch)
    for row, pairs in zip(rows(batch), records, strict=True):
        expected = refcodec.parse_properties("\x02".join(f"{k}\x01{v}" for k, v in pairs))
        assert list(row["properties"]) == list(expected.items())   # first place, last value
        assert row["tags"] == expected.get("TAGS")


@SETTINGS
@given(st.binary(max_size=300),
       st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=127).map(str.encode))
def test_invalid_utf8_is_replaced(props: bytes, topic: bytes) -> None:
    # sprinkle separators so the parser sees pairs (a record's topic is always a legal one:
    # any other is damage, see tests/store/test_integrity.py)
    props = props.replace(b"\x00", b"\x01").replace(b"\x03", b"\x02")
    data = record(topic=topic, props=props)
    batch = decode_all(data).batch
    assert batch.num_rows == 1
    check_against_object_decoder(data, batch)
    assert rows(batch)[0]["topic"] == topic.decode("utf-8", "replace")


@SETTINGS
@given(st.binary(max_size=64))
def test_sanitize_utf8_matches_python(data: bytes) -> None:
    assert properties.sanitize_utf8(data) == data.decode("utf-8", "replace").encode()


def test_sanitize_utf8_edge_cases() -> None:
    cases = [b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x8f\xbf\xbf",
             b"\xc0\xaf", b"\xe2\x82", b"\xe2\x82A", b"\xf0\x9f\x98", b"\x80\x80", b"\xff",
             b"a\xf5b", "€😀é".encode(), b"\xef\xbf\xbd"]
    for data in cases:
        assert properties.sanitize_utf8(data) == data.decode("utf-8", "replace").encode(), data


@SETTINGS
@given(st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), st.integers(-(2**31), 2**31 - 1))
def test_format_host(addr: Any, port: int) -> None:
    assert hosts.format_host(addr.packed, port) == host_text(_host(addr, port))


def test_hosts_and_base_offset_none() -> None:
    recs = [record(born="[::ffff:1.2.3.4]:80", store="[2001:db8::100]:10911", offset=777),
            record(born="[fe80::1:0:0:0]:1", store="10.0.0.9:7", offset=12)]
    data = b"".join(recs)
    res = decode_all(data)      # PHYSICALOFFSET 777 is not base_offset 0 + position 0
    assert (res.batch.num_rows, res.next_position, res.stop_status) == (0, 0, "corrupt")
    assert "physical offset" in res.reason
    batch, pos, status = decode_all(data, base_offset=None)
    assert (batch.num_rows, pos, status) == (2, len(data), "end")
    got = rows(batch)
    assert [r["commitlog_offset"] for r in got] == [777, 12]
    assert [r["born_host"] for r in got] == ["[::ffff:1.2.3.4]:80", "[fe80::1:0:0:0]:1"]
    assert [r["store_host"] for r in got] == ["[2001:db8::100]:10911", "10.0.0.9:7"]
    assert got[0]["msg_id"] == refcodec.msg_id(ipaddress.ip_address("2001:db8::100").packed,
                                               10911, 777)
    assert got[1]["msg_id"] == refcodec.msg_id(bytes([10, 0, 0, 9]), 7, 12)


# ---------------------------------------------------------------------------- corrupt bytes


@pytest.fixture(scope="module")
def segment(multi_store: MessageStore) -> tuple[bytes, int, list[dict[str, Any]], list[int]]:
    mf = multi_store.commit_log.queue.files[2]
    data = mf.read(0, mf.read_position)
    batch = columnar.decode_region(data, 0, base_offset=mf.file_from_offset).batch
    clean = rows(batch)
    ends = [r["commitlog_offset"] - mf.file_from_offset + r["store_size"] for r in clean]
    return data, mf.file_from_offset, clean, ends


@SETTINGS
@given(st.data())
def test_bit_flips_never_crash(segment: Any, data: st.DataObject) -> None:
    raw, base, clean, ends = segment
    buf = bytearray(raw)
    flips = data.draw(st.lists(st.integers(0, len(raw) * 8 - 1), min_size=1, max_size=4))
    for bit in flips:
        buf[bit // 8] ^= 1 << (bit % 8)
    first = min(flips) // 8
    check_crc = data.draw(st.booleans())
    res = columnar.decode_region(bytes(buf), 0, base_offset=base, check_crc=check_crc)
    got = rows(res.batch)
    intact = sum(1 for e in ends if e <= first)
    assert got[:intact] == clean[:intact]
    assert len(got) <= len(clean)
    assert res.stop_status in ("end", "blank", "corrupt")
    if res.stop_status == "corrupt":
        assert res.reason
    check_against_object_decoder(bytes(buf), res.batch, base)
    view = columnar.decode_region(bytes(buf), 0, base_offset=base, check_crc=check_crc,
                                  body_view=True)
    view.batch.validate(full=True)
    assert (view.next_position, view.stop_status) == (res.next_position, res.stop_status)
    assert as_copied(view.batch).equals(res.batch)
    # positions: a batch, or CorruptRecordError naming the bad one
    positions = [r["commitlog_offset"] - base for r in clean]
    try:
        batch = columnar.decode_positions(bytes(buf), positions, base_offset=base)
    except CorruptRecordError as e:
        assert e.offset is not None and e.offset - base in positions
    else:
        batch.validate(full=True)
        assert batch.num_rows == len(positions)


@SETTINGS
@given(st.data())
def test_truncation_never_crashes(segment: Any, data: st.DataObject) -> None:
    raw, base, clean, ends = segment
    cut = data.draw(st.integers(0, len(raw)))
    res = columnar.decode_region(raw[:cut], 0, base_offset=base)
    got = rows(res.batch)
    intact = sum(1 for e in ends if e <= cut)
    assert got == clean[:intact]
    left = cut - (ends[intact - 1] if intact else 0)
    if cut == len(raw):
        assert res.stop_status == "blank"
    elif left == 0 or left < 8:
        assert res.stop_status == "end"
    else:
        assert res.stop_status in ("corrupt", "blank")


@SETTINGS
@given(st.binary(max_size=2000), st.integers(0, 100))
def test_garbage_never_crashes(garbage: bytes, start: int) -> None:
    start = min(start, len(garbage))
    res = columnar.decode_region(garbage, start, base_offset=None, check_crc=True)
    res.batch.validate(full=True)
    assert start <= res.next_position <= len(garbage)
    with pytest.raises(CorruptRecordError):
        columnar.decode_positions(garbage, [start, 0, len(garbage)], base_offset=None)


def test_records_inside_a_bigger_valid_one_are_not_found() -> None:
    """A record stored as another message's body is data, never a record of its own."""
    inner = record(props=b"TAGS\x01inner", offset=100)
    outer = record(body=inner, props=b"TAGS\x01outer")
    data = outer + record(offset=len(outer))
    got = rows(decode_all(data).batch)
    assert [r["tags"] for r in got] == ["outer", None]
    assert got[0]["body"] == inner


# ---------------------------------------------------------------------------- memory


def test_batches_own_their_memory(multi_store: MessageStore) -> None:
    files = multi_store.commit_log.queue.files
    first = columnar.decode_region(files[0], 0, base_offset=0).batch
    keep = rows(first)
    body_only = columnar.decode_region(files[1], 0, base_offset=files[1].file_from_offset
                                       ).batch.column("body")
    body_values = body_only.to_pylist()
    for _ in range(3):      # churn through the recycled arenas
        for mf in files:
            columnar.decode_region(mf, 0, base_offset=mf.file_from_offset)
    assert rows(first) == keep
    assert body_only.to_pylist() == body_values
    old = columnar_buffers.set_buffer_cache(0)
    try:
        assert columnar_buffers.buffer_cache_info() == (0, 0)
    finally:
        columnar_buffers.set_buffer_cache(old)


def test_large_batches_recycle_memory() -> None:
    body = bytes(range(256)) * 8
    recs, off = [], 0
    for _ in range(1200):         # > 1 MiB of output: mapped, recycled buffers
        rec = record(body=body, props=b"TAGS\x01a\x02KEYS\x01k1 k2", offset=off)
        recs.append(rec)
        off += len(rec)
    data = b"".join(recs)
    columnar_buffers.set_buffer_cache(columnar_buffers.set_buffer_cache(0))     # empty the cache
    first = decode_all(data).batch
    del first
    arenas, cached = columnar_buffers.buffer_cache_info()
    assert arenas >= 1 and cached >= 1 << 20
    again = decode_all(data).batch
    assert columnar_buffers.buffer_cache_info()[0] < arenas     # taken from the cache
    assert again.num_rows == 1200
    again.validate(full=True)


def test_concurrent_decodes_agree(multi_store: MessageStore) -> None:
    files = multi_store.commit_log.queue.files
    expected = [columnar.decode_region(mf, 0, base_offset=mf.file_from_offset).batch
                for mf in files]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                for mf, exp in zip(files, expected, strict=True):
                    got = columnar.decode_region(mf, 0, base_offset=mf.file_from_offset).batch
                    assert got.equals(exp)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_memoryview_and_bytearray_sources(multi_store: MessageStore) -> None:
    mf = multi_store.commit_log.queue.files[0]
    data = mf.read(0, mf.read_position)
    expected = columnar.decode_region(mf, 0, base_offset=0).batch
    for source in (data, bytearray(data), memoryview(data), mf.view(0, mf.read_position)):
        assert columnar.decode_region(source, 0, base_offset=0).batch.equals(expected)
    assert struct.unpack_from(">i", data, 0)[0] == expected.column("store_size")[0].as_py()


# ---------------------------------------------------------------------------- body views


def as_copied(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A body_view=True batch with its body cast to binary: what body_view=False gives."""
    i = batch.schema.get_field_index("body")
    return batch.set_column(i, "body", batch.column(i).cast(pa.binary()))


def test_body_view_equals_copied_body() -> None:
    bodies = [b"", b"a", b"x" * 12, b"y" * 13, bytes(range(256)) * 3, b"z" * 100]
    recs, off = [], 0
    for body in bodies:
        rec = record(body=body, props=b"TAGS\x01t\x02KEYS\x01k1 k2", offset=off)
        recs.append(rec)
        off += len(rec)
    data = b"".join(recs)
    copied = decode_all(data).batch
    res = decode_all(data, body_view=True)
    view = res.batch
    assert (res.next_position, res.stop_status) == (len(data), "end")
    assert view.schema == columnar.schema(body_view=True)
    assert view.schema.field("body").type == pa.binary_view()
    view.validate(full=True)
    assert view.column("body").to_pylist() == bodies
    assert as_copied(view).equals(copied)
    positions = [0, *np.cumsum([len(r) for r in recs[:-1]])][::-1]
    got = columnar.decode_positions(data, positions, base_offset=0, body_view=True)
    got.validate(full=True)
    assert got.column("body").to_pylist() == bodies[::-1]
    none = decode_all(data, body_view=True, include_body=False).batch
    assert none.equals(decode_all(data, include_body=False).batch)
    assert columnar.empty_batch(body_view=True).schema == columnar.schema(body_view=True)
    with pytest.raises(ValueError, match="body_view"):
        decode_all(data, body_view=True, spark=True)
    with pytest.raises(ValueError, match="body_view"):
        columnar.schema(spark=True, body_view=True)


def test_body_view_read_range_holds_segments(multi_store: MessageStore) -> None:
    copied = store_columnar.read_range_table(multi_store, 0)
    files = multi_store.commit_log.queue.files
    before = [mf.ref_count for mf in files]
    view = store_columnar.read_range_table(multi_store, 0, body_view=True)
    assert view.schema == columnar.schema(body_view=True)
    assert [mf.ref_count for mf in files] > before     # the batches hold their segments
    view.validate(full=True)
    body = view.column("body").cast(pa.binary())
    assert view.set_column(view.schema.get_field_index("body"), "body", body).equals(copied)
    del view, body
    gc.collect()
    assert [mf.ref_count for mf in files] == before
    with pytest.raises(ValueError, match="body_view"):
        next(store_columnar.read_range(multi_store, 0, spark=True, body_view=True))


def test_topic_ascii_fast_path_lengths() -> None:
    """Topics of 1..20 bytes decode exactly (a record in the middle and one at the very end);
    a topic with a byte outside RocketMQ's topic characters (or none at all) makes its record
    damage: the decode stops there, at any length and position of the byte."""
    topics = [b"t" * n for n in range(1, 21)]
    recs, off = [], 0
    for topic in topics:
        rec = record(topic=topic, offset=off)
        recs.append(rec)
        off += len(rec)
    batch = decode_all(b"".join(recs)).batch
    assert batch.column("topic").to_pylist() == [t.decode() for t in topics]
    last = decode_all(recs[-1], base_offset=off - len(recs[-1])).batch     # near the end
    assert last.column("topic").to_pylist() == [topics[-1].decode()]
    bad_topics = [b""] + [b"t" * at + bad + b"t" * (n - at - len(bad))
                          for n in range(1, 21) for at in range(n)
                          for bad in (b"\xff", b"\xc3\xa9", b"!") if at + len(bad) <= n]
    for topic in bad_topics:
        good = record(topic=b"ok")
        res = decode_all(good + record(topic=topic, offset=len(good)))
        assert res.batch.num_rows == 1 and res.stop_status == "corrupt", topic
