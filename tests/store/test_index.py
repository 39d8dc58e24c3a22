"""IndexFile / IndexService: RocketMQ 4.9.8's index, byte for byte, plus verified queries.

Checked against the real RocketMQ store in ../shared/fixtures/rocketmq-4.9.8 (its 3 index files
and 49 recorded lookups), against refcodec's independent reading of index files and RocketMQ's
lookup, and against brute-force scans of the records.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import refcodec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_fixture import require_fixture

from rocketstore._native import record
from rocketstore._native.hashes import utf8_java_hash
from rocketstore._native.index_build import build_index
from rocketstore._native.index_file import IndexFile, IndexFileCorruptError, index_file_size
from rocketstore._native.index_keys import index_key_hash, record_index_key_hashes
from rocketstore._native.mapped_file import MappedFile
from rocketstore.config import StoreConfig
from rocketstore.store.index_service import IndexService, index_file_name

SLOTS, ITEMS = 200, 800  # the fixture's maxHashSlotNum / maxIndexNum
SEG = 65536
LONG_MAX = 2**63 - 1
FIXTURE_CFG = dict(max_hash_slot_num=SLOTS, max_index_num=ITEMS)


# ---------------------------------------------------------------------------------- helpers


def _config(**changes: Any) -> StoreConfig:
    return StoreConfig(**{**FIXTURE_CFG, **changes})


def _fixture_index_files() -> list[Path]:
    return sorted((require_fixture() / "store" / "index").iterdir())


def _commitlog_batches(store: Path) -> list[SimpleNamespace]:
    """One dispatch batch per CommitLog segment of a store: (mapped_file, positions,
    phy_offsets) of its valid records, found with the native scanner."""
    batches = []
    for seg in sorted((store / "commitlog").iterdir()):
        mf = MappedFile(seg, SEG, create=False, read_only=True)
        mf.wrote_position = SEG
        r = record.scan_region(mf, 0, SEG)
        pos = np.asarray(r.offsets, dtype=np.int64)
        batches.append(SimpleNamespace(mapped_file=mf, positions=pos,
                                       phy_offsets=pos + mf.file_from_offset))
    return batches


def _split(batch: SimpleNamespace, size: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(mapped_file=batch.mapped_file, positions=batch.positions[i:i + size],
                            phy_offsets=batch.phy_offsets[i:i + size])
            for i in range(0, len(batch.positions), size)]


def _index_keys(msg: dict[str, Any]) -> list[str]:
    """The keys RocketMQ 4.9 puts for a record, in order: UNIQ_KEY, then each KEYS token."""
    keys = [msg["uniqKey"]] if msg["uniqKey"] else []
    keys += [k for k in (msg["keys"] or "").split(" ") if k]
    return keys


def _file_bytes(paths: list[Path] | list[str]) -> list[bytes]:
    return [Path(p).read_bytes() for p in paths]


def _built_service(root: Path, chunk: int | None = None, **cfg: Any) -> tuple[IndexService, list]:
    """An IndexService at root that dispatched the fixture's whole CommitLog."""
    svc = IndexService(_config(**cfg), root)
    svc.async_flush_full = False
    full: list[int] = []
    svc.on_file_full = full.append
    svc.load(True)
    for b in _commitlog_batches(require_fixture() / "store"):
        for part in _split(b, chunk) if chunk else [b]:
            svc.dispatch(part)
    svc.flush()
    return svc, full


@pytest.fixture(scope="module")
def messages() -> list[dict[str, Any]]:
    with (require_fixture() / "messages.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ------------------------------------------------------------------------------ hashing


def test_index_key_hash_matches_java_and_special_cases():
    assert index_key_hash("orders#coll-Aa-1") == index_key_hash("orders#coll-BB-1") == 1229595655
    assert index_key_hash("audit#min-otqr6a0pt") == 0  # hashCode MIN_VALUE -> 0, not 2**31
    assert index_key_hash("audit#zero-kkc43ibeg") == 0
    assert index_key_hash("orders#abs-pos-1") == index_key_hash("orders#abs-neg-7j0jn9xof")


@given(st.text(max_size=40), st.text(max_size=10))
def test_utf8_hash_of_valid_text_equals_java_hash(prefix, s):
    assert utf8_java_hash(s.encode()) == refcodec.java_hash(s)
    cont = utf8_java_hash(s.encode(), utf8_java_hash(prefix.encode()))
    assert cont == refcodec.java_hash(prefix + s)


# (UTF-8 bytes, Java 17 new String(bytes, UTF_8).hashCode()) including malformed input, where
# Java's decoder differs from Python's ("eda080" is one U+FFFD in Java, three in Python).
JAVA_UTF8_HASHES = [
    ("", 0), ("41", 65), ("c3a9", 233), ("e8aea2", 35746), ("f09f9491", 1772660), ("80", 65533),
    ("ff", 65533), ("c0af", 2097056), ("c2", 65533), ("e0", 65533), ("e080", 2097056),
    ("e0a0", 65533), ("e0a080", 2048), ("eda080", 65533), ("edbfbf", 65533), ("efbfbf", 65535),
    ("f0", 65533), ("f09f", 65533), ("f09f94", 65533), ("f08f8080", 2017367872),
    ("f4908080", 2017367872), ("f5808080", 2017367872), ("f880808080", -1886039875),
    ("e4b820", 2031555), ("f09f9820", 2031555), ("c320", 2031555), ("e4b8", 65533),
    ("41e4b8ad42", 682934), ("f4", 65533), ("f48f", 65533), ("8ff4f490", 2017367872),
    ("c0bf90f5bf", -1886039875), ("a0808f", 65074269), ("20eff4bf4190", -971936551),
    ("41f4", 67548), ("f4c090", 65074269), ("e0f5", 2097056), ("dff08f80", 2017367872),
    ("dfe1c290e041", -1948944172), ("9fe0ef80", 65074269), ("c020", 2031555),
    ("efeff080", 2017367872), ("c0dfe180e0", 2017367872), ("41f09f", 67548), ("c29f", 159),
    ("f5bf8fc0", 2017367872), ("90c0a0f0", 2017367872), ("ef9feff0c041", -1886105343),
    ("e041c0", 63044761), ("ef9f", 65533), ("f4df", 2097056), ("ef8080", 61440),
    ("c241ededf4", 458570233), ("f5a0", 2097056),
]


@pytest.mark.parametrize(("hexbytes", "java"), JAVA_UTF8_HASHES)
def test_utf8_hash_follows_javas_decoder_on_malformed_input(hexbytes, java):
    assert utf8_java_hash(bytes.fromhex(hexbytes)) == java


# --------------------------------------------------------------------- (a) the real fixture


def test_fixture_index_files_load_and_queries_match_rocketmq(
    rocketmq_store, fixture_index_queries, fixture_manifest
):
    svc = IndexService(_config(), rocketmq_store, read_only=True)
    svc.load(True)
    try:
        manifest_files = fixture_manifest["indexFiles"]
        assert [os.path.basename(f.file_name) for f in svc.files] == [
            m["name"] for m in manifest_files
        ]
        for f, m in zip(svc.files, manifest_files, strict=True):
            assert f.header() == {k: m[k] for k in f.header()}
            assert f.is_write_full == (m["indexCount"] >= ITEMS)
        assert len(fixture_index_queries) == 49
        index_dir = rocketmq_store / "index"
        for q in fixture_index_queries:
            a = q["queryMessageArgs"]
            got = svc.query_offsets(q["topic"], q["key"], a["maxNum"], a["begin"], a["end"])
            assert sorted(got) == q["returnedOffsets"], q["indexKey"]
            # RocketMQ's own order (newest file first, chains newest first), per refcodec
            ref = refcodec.ref_query_offsets(
                index_dir, q["topic"], q["key"], 64, a["begin"], a["end"], SLOTS, ITEMS
            )
            assert got == ref, q["indexKey"]
            assert index_key_hash(q["indexKey"]) == q["keyHash"]
        assert svc.index_last_update() == (1795313254118, 635170)
    finally:
        svc.shutdown()


def _verify_fn(by_offset: dict[int, dict[str, Any]], topic: str, key: str, begin=0, end=LONG_MAX):
    def verify(phy: int) -> bool:
        m = by_offset.get(phy)
        return (m is not None and m["topic"] == topic and key in _index_keys(m)
                and begin <= m["storeTimestamp"] <= end)

    return verify


def test_fixture_verified_query_returns_only_true_matches(
    rocketmq_store, fixture_index_queries, messages
):
    by_offset = {m["commitLogOffset"]: m for m in messages}
    svc = IndexService(_config(), rocketmq_store, read_only=True)
    svc.load(True)
    try:
        for q in fixture_index_queries:
            verify = _verify_fn(by_offset, q["topic"], q["key"])
            got = svc.query(q["topic"], q["key"], 64, 0, LONG_MAX, verify)
            indexed = [o for o in q["matchingOffsets"]
                       if by_offset[o]["sysFlag"] & 0xC != 0xC]  # ROLLBACK is not indexed
            assert got == sorted(set(indexed), reverse=True)[:64], q["indexKey"]
            assert not set(got) & {c["commitLogOffset"] for c in q["collidingReturned"]}
    finally:
        svc.shutdown()


def test_record_keys_in_rocketmq_order(messages):
    """UNIQ_KEY first, then each non-empty KEYS token, duplicates kept; ROLLBACK: none."""
    by_offset = {m["commitLogOffset"]: m for m in messages}
    seen = 0
    for b in _commitlog_batches(require_fixture() / "store"):
        for pos, phy in zip(b.positions.tolist(), b.phy_offsets.tolist(), strict=True):
            m = by_offset[phy]
            want = [] if m["sysFlag"] & 0xC == 0xC else [
                refcodec.index_key_hash(f"{m['topic']}#{k}") for k in _index_keys(m)
            ]
            assert record_index_key_hashes(b.mapped_file, pos) == want, phy
            seen += 1
    assert seen == 600
    dup = next(m for m in messages if m["keys"] == "dup-k dup-k")
    assert _index_keys(dup)[-2:] == ["dup-k", "dup-k"]


def _java_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties (4.9.8): the first \\x01 of a pair splits it,
    name and value non-empty, a later pair with the same name wins."""
    props, i = {}, 0
    while i < len(text):
        j = text.find("\x02", i)
        j = len(text) if j < 0 else j
        k = text.find("\x01", i)
        if i < k < j - 1:
            props[text[i:k]] = text[k + 1 : j]
        i = j + 1
    return props


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["KEYS", "UNIQ_KEY", "TAGS", "", "KEY", "KEYSX"]),
                          st.sampled_from(["\x01", "\x01\x01", ""]),
                          st.lists(st.sampled_from(["a", "Aa", "BB", "", "订", "🔑", "\x01"]),
                                   max_size=4).map(" ".join)),
                max_size=5),
       st.booleans())
def test_record_keys_follow_javas_properties_parser(tmp_path_factory, pairs, trailing):
    text = "\x02".join(n + sep + v for n, sep, v in pairs) + ("\x02" if trailing else "")
    if len(text.encode()) > 32767:
        return
    path = tmp_path_factory.mktemp("p") / "00000000000000000000"
    mf = MappedFile(path, 4096, file_from_offset=0)
    mf.append(refcodec.encode_record(
        topic="T", queueId=0, queueOffset=0, commitLogOffset=0, body=b"", properties=text,
        bornTimestamp=1, bornHost="10.0.0.1:1", storeTimestamp=2, storeHost="10.0.0.2:3"))
    props = _java_properties(text)
    keys = [props["UNIQ_KEY"]] if "UNIQ_KEY" in props else []
    keys += [k for k in props.get("KEYS", "").split(" ") if k]
    assert record_index_key_hashes(mf, 0) == [refcodec.index_key_hash(f"T#{k}") for k in keys]
    mf.close()


def test_record_with_thousands_of_keys_puts_them_all(tmp_path):
    keys = " ".join(f"k{i}" for i in range(5000))
    mf = MappedFile(tmp_path / "00000000000000000000", 65536, file_from_offset=0)
    mf.append(refcodec.encode_record(
        topic="T", queueId=0, queueOffset=0, commitLogOffset=0, body=b"",
        properties={"UNIQ_KEY": "u", "KEYS": keys}, bornTimestamp=1, bornHost="10.0.0.1:1",
        storeTimestamp=2, storeHost="10.0.0.2:3"))
    assert len(record_index_key_hashes(mf, 0)) == 5001
    f = IndexFile.create(tmp_path / "i", 64, 3000)
    assert build_index(f, mf, [0]) == (0, 2999)  # full after 2999 items: resume at key 2999
    g = IndexFile.create(tmp_path / "j", 64, 3000, f.end_phy_offset, f.end_timestamp)
    assert build_index(g, mf, [0], 0, 2999) == (1, 0)
    assert g.index_count == 1 + 5001 - 2999
    assert g.select_phy_offsets("T#k4999", 5, 0, LONG_MAX) == [0]
    assert f.select_phy_offsets("T#u", 5, 0, LONG_MAX) == [0]
    for x in (f, g, mf):
        x.close()


# ------------------------------------------------------------------- (b) rebuilding the index


def test_build_index_rebuilds_the_fixture_files_byte_for_byte(tmp_path, fixture_manifest):
    files: list[IndexFile] = []
    f = IndexFile.create(tmp_path / "idx0", SLOTS, ITEMS)
    files.append(f)
    splits = []
    for b in _commitlog_batches(require_fixture() / "store"):
        start = key_start = 0
        while True:
            start, key_start = build_index(f, b.mapped_file, b.positions, start, key_start)
            if start >= len(b.positions):
                break
            splits.append((int(b.phy_offsets[start]), key_start))
            f = IndexFile.create(tmp_path / f"idx{len(files)}", SLOTS, ITEMS,
                                 f.end_phy_offset, f.end_timestamp)
            files.append(f)
    assert len(files) == 3
    # the record at 256,822 ends file 1 and starts file 2; file 3 starts at a record boundary
    assert splits[0][0] == 256822 and splits[0][1] > 0
    assert splits[1][1] == 0
    for f in files:
        f.flush()
    for f, m in zip(files, fixture_manifest["indexFiles"], strict=True):
        assert f.header() == {k: m[k] for k in f.header()}
    expected = _fixture_index_files()
    for f, path in zip(files, expected, strict=True):
        h1, s1, i1 = refcodec.read_index_file(f.file_name, SLOTS, ITEMS)
        h2, s2, i2 = refcodec.read_index_file(path, SLOTS, ITEMS)
        assert (h1, s1) == (h2, s2)
        assert i1 == i2  # keyHash, phyOffset, timeDiff, prevIndex of every item
        assert Path(f.file_name).read_bytes() == path.read_bytes()
    for f in files:
        f.close()


@pytest.mark.parametrize("chunk", [None, 1, 7, 64])
def test_index_service_dispatch_rebuilds_fixture(tmp_path, chunk, fixture_manifest):
    svc, full = _built_service(tmp_path, chunk)
    try:
        assert _file_bytes([f.file_name for f in svc.files]) == _file_bytes(
            _fixture_index_files()
        )
        # the checkpoint's indexMsgTimestamp is the end of the last full file
        assert full == [m["endTimestamp"] for m in fixture_manifest["indexFiles"][:2]]
        assert full[-1] == fixture_manifest["checkpoint"]["indexMsgTimestamp"]
    finally:
        svc.shutdown()


def test_redispatch_is_idempotent_and_resumes_a_split_record(tmp_path):
    expected = _file_bytes(_fixture_index_files())
    svc, _ = _built_service(tmp_path)
    batches = _commitlog_batches(require_fixture() / "store")
    try:
        for b in batches:  # everything again: nothing is put twice
            svc.dispatch(b)
        svc.flush()
        assert _file_bytes([f.file_name for f in svc.files]) == expected
        # cut back to just after the split record (256,822 is then the newest indexed one,
        # its keys in files 1 and 2), then re-dispatch from the start
        after_split = min(int(o) for b in batches for o in b.phy_offsets if o > 256822)
        svc.truncate(after_split)
        assert len(svc.files) == 2 and svc.files[-1].end_phy_offset == 256822
        for b in batches:
            svc.dispatch(b)
        svc.flush()
        assert _file_bytes([f.file_name for f in svc.files]) == expected
    finally:
        svc.shutdown()


@pytest.mark.parametrize("cut", [256822, 0, 1000, 300000, 610638, 635170, 10**9])
def test_truncate_then_redispatch_gives_the_same_index(tmp_path, cut):
    expected = _file_bytes(_fixture_index_files())
    svc, _ = _built_service(tmp_path)
    try:
        svc.truncate(cut)
        for f in svc.files:
            assert f.end_phy_offset < cut or f.index_count == 1
            assert all(f.read_item(n)[1] < cut for n in range(1, f.index_count))
        for b in _commitlog_batches(require_fixture() / "store"):
            svc.dispatch(b)
        svc.flush()
        assert _file_bytes([f.file_name for f in svc.files]) == expected
    finally:
        svc.shutdown()


def test_message_index_disabled_skips_dispatch(tmp_path):
    svc = IndexService(_config(message_index_enable=False), tmp_path)
    svc.load(True)
    for b in _commitlog_batches(require_fixture() / "store"):
        svc.dispatch(b)
    assert svc.files == ()
    assert not (tmp_path / "index").exists()
    svc.shutdown()


# ------------------------------------------- (c) verified queries with forced hash collisions

TOKENS = ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "k1", "k2", "订单", "🔑x", "C#"]
TOPICS = ["T", "U"]
BASE_TS = 1_795_313_247_171


def _write_commitlog(path: Path, recs: list[dict[str, Any]]) -> MappedFile:
    mf = MappedFile(path, 1 << 18, file_from_offset=0)
    for i, r in enumerate(recs):
        props = {}
        if r["uniq"] is not None:
            props["UNIQ_KEY"] = r["uniq"]
        if r["keys"]:
            props["KEYS"] = r["keys"]
        r["offset"] = mf.wrote_position
        data = refcodec.encode_record(
            topic=r["topic"], queueId=0, queueOffset=i, commitLogOffset=r["offset"], body=b"b",
            properties=props, sysFlag=r["sys_flag"], bornTimestamp=r["ts"],
            bornHost="10.0.0.1:5000", storeTimestamp=r["ts"], storeHost="10.0.0.2:10911",
        )
        assert mf.append(data)
    return mf


record_st = st.fixed_dictionaries({
    "topic": st.sampled_from(TOPICS),
    "uniq": st.one_of(st.none(), st.sampled_from(TOKENS)),
    "keys": st.lists(st.sampled_from([*TOKENS, ""]), max_size=3).map(" ".join),
    "sys_flag": st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC]),
    "step": st.integers(0, 2500),
})


def _brute_force(recs, topic, key, max_num, begin, end) -> list[int]:
    hits = [r["offset"] for r in recs
            if r["sys_flag"] & 0xC != 0xC and r["topic"] == topic
            and (key == r["uniq"] or key in r["keys"].split(" ")) and key
            and begin <= r["ts"] <= end]
    return sorted(hits, reverse=True)[:max_num]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=st.lists(record_st, min_size=1, max_size=60),
    slots=st.integers(1, 7),
    items=st.integers(2, 40),
    chunk=st.integers(1, 20),
    queries=st.lists(
        st.tuples(st.sampled_from(TOPICS), st.sampled_from(TOKENS), st.integers(1, 12),
                  st.integers(-1000, 80_000), st.integers(0, 90_000)),
        min_size=1, max_size=12,
    ),
)
def test_verified_query_equals_brute_force(recs, slots, items, chunk, queries):
    ts = BASE_TS
    for r in recs:
        ts += r["step"]
        r["ts"] = ts
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "commitlog").mkdir()
        mf = _write_commitlog(root / "commitlog" / "00000000000000000000", recs)
        pos = np.asarray(record.scan_region(mf, 0, mf.wrote_position).offsets, dtype=np.int64)
        assert len(pos) == len(recs)
        svc = IndexService(StoreConfig(max_hash_slot_num=slots, max_index_num=items,
                                       max_msgs_num_batch=10), root)
        svc.load(True)
        batch = SimpleNamespace(mapped_file=mf, positions=pos, phy_offsets=pos)
        for part in _split(batch, chunk):
            svc.dispatch(part)
        by_offset = {r["offset"]: r for r in recs}
        for topic, key, max_num, b, span in queries:
            begin, end = BASE_TS + b, BASE_TS + b + span

            def verify(phy, topic=topic, key=key, begin=begin, end=end):
                r = by_offset[phy]
                return (r["topic"] == topic and (key == r["uniq"] or key in r["keys"].split(" "))
                        and begin <= r["ts"] <= end)

            got = svc.query(topic, key, max_num, begin, end, verify)
            assert got == _brute_force(recs, topic, key, min(max_num, 10), begin, end)
            raw = svc.query_offsets(topic, key, max_num, begin, end)
            assert raw == refcodec.ref_query_offsets(
                root / "index", topic, key, min(max_num, 10), begin, end, slots, items)
            assert set(raw) <= set(by_offset)
        svc.shutdown()
        mf.close()


# ----------------------------------------------------------------- (d) rolling to new files


class _StoppedClock:
    """A wall clock that stands still: every index file is made in one millisecond."""

    def wall_ms(self) -> int:
        return 1_795_313_247_186

    def monotonic_ms(self) -> float:
        return 0.0


def test_full_file_rolls_and_lookups_span_files(tmp_path):
    recs = [{"topic": "T", "uniq": None, "keys": f"hot k{i}", "sys_flag": 0,
             "ts": BASE_TS + 700 * i} for i in range(30)]
    (tmp_path / "commitlog").mkdir()
    mf = _write_commitlog(tmp_path / "commitlog" / "00000000000000000000", recs)
    pos = np.asarray(record.scan_region(mf, 0, mf.wrote_position).offsets, dtype=np.int64)
    svc = IndexService(StoreConfig(max_hash_slot_num=3, max_index_num=8), tmp_path,
                       clock=_StoppedClock())
    full: list[int] = []
    svc.on_file_full = full.append
    svc.load(True)
    svc.dispatch(SimpleNamespace(mapped_file=mf, positions=pos, phy_offsets=pos))
    svc.flush()
    names = [os.path.basename(f.file_name) for f in svc.files]
    assert len(names) == 9  # 60 items, 7 per file
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(len(n) == 17 and n.isdigit() for n in names)
    assert sorted(full) == [f.end_timestamp for f in svc.files[:-1]]  # flushed in threads
    offsets = [r["offset"] for r in recs]
    assert svc.query("T", "hot", 64, 0, LONG_MAX, lambda _: True) == offsets[::-1]
    assert sorted(svc.query_offsets("T", "hot", 64, 0, LONG_MAX)) == offsets
    assert svc.query_offsets("T", "k17", 64, 0, LONG_MAX) == [offsets[17]]
    # a window inside the middle files only
    by_ts = {r["offset"]: r["ts"] for r in recs}
    begin, end = recs[10]["ts"], recs[20]["ts"]
    got = svc.query("T", "hot", 64, begin, end, lambda p: begin <= by_ts[p] <= end)
    assert got == offsets[10:21][::-1]
    # delete_expired: the oldest files that end before min_phy_offset, never the newest one
    ends = [f.end_phy_offset for f in svc.files]
    doomed = next(i for i, e in enumerate(ends) if e >= offsets[16])
    assert doomed >= 3
    assert svc.delete_expired(offsets[16]) == doomed
    assert svc.files[0].end_phy_offset >= offsets[16]
    assert not any(os.path.exists(os.path.join(tmp_path, "index", n)) for n in names[:doomed])
    assert svc.query_offsets("T", "k17", 64, 0, LONG_MAX) == [offsets[17]]
    assert svc.query_offsets("T", "k2", 64, 0, LONG_MAX) == []
    assert svc.delete_expired(10**9) == 9 - doomed - 1
    assert len(svc.files) == 1
    svc.shutdown()
    mf.close()


def test_index_file_name_is_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert index_file_name(1_795_313_247_186) == "20261122020727186"
        monkeypatch.setenv("TZ", "Asia/Shanghai")
        time.tzset()
        assert index_file_name(1_795_313_247_186) == "20261122100727186"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_index_file_put_select_and_full(tmp_path):
    f = IndexFile.create(tmp_path / "i", 2, 4)
    assert f.index_count == 1 and not f.is_write_full
    assert f.put_key("T#a", 100, BASE_TS)
    assert f.put_key("T#b", 200, BASE_TS + 1500)
    assert f.put_key("T#a", 300, BASE_TS + 3000)
    assert not f.put_key("T#c", 400, BASE_TS + 4000)  # indexCount 4 >= indexNum 4
    assert f.is_write_full and f.index_count == 4
    assert f.select_phy_offsets("T#a", 10, 0, LONG_MAX) == [300, 100]
    assert f.select_phy_offsets("T#a", 1, 0, LONG_MAX) == [300]
    assert f.select_phy_offsets("T#a", 10, BASE_TS + 1000, LONG_MAX) == [300]
    assert f.read_item(2)[:3] == (index_key_hash("T#b"), 200, 1)
    assert f.header()["beginTimestamp"] == BASE_TS
    assert f.header()["endPhyOffset"] == 300
    assert f.is_time_matched(0, BASE_TS) and not f.is_time_matched(0, BASE_TS - 1)
    offs, nxt = f.walk(index_key_hash("T#a"), -1, 1, 0, LONG_MAX)
    assert offs == [300] and nxt > 0
    assert f.walk(index_key_hash("T#a"), nxt, 5, 0, LONG_MAX) == ([100], 0)
    with pytest.raises(FileExistsError):
        IndexFile.create(tmp_path / "i", 2, 4)
    g = IndexFile.create(tmp_path / "long", 3, 700)  # a chain longer than one walk step
    for i in range(650):
        assert g.put_key("T#hot" if i % 3 else "T#other", i, BASE_TS + i)
    hot = [i for i in range(650) if i % 3][::-1]
    assert g.select_phy_offsets("T#hot", 10**6, 0, LONG_MAX) == hot
    assert g.select_phy_offsets("T#hot", 300, 0, LONG_MAX) == hot[:300]
    g.close()
    with pytest.raises(ValueError, match="max_index_num"):
        IndexFile.create(tmp_path / "j", 2, 1)
    f.close()


# --------------------------------------------------------------- (e) corrupt files never crash


def _query_all(svc: IndexService, keys) -> None:
    for topic, key in keys:
        for begin, end in ((0, LONG_MAX), (BASE_TS, BASE_TS + 3000)):
            got = svc.query_offsets(topic, key, 64, begin, end)
            assert isinstance(got, list) and all(isinstance(o, int) for o in got)
            assert len(got) <= 64
            assert len(svc.query(topic, key, 64, begin, end, lambda p: p % 2 == 0)) <= 64


@pytest.fixture(scope="module")
def fixture_query_keys() -> list[tuple[str, str]]:
    with (require_fixture() / "index_queries.jsonl").open(encoding="utf-8") as f:
        qs = [json.loads(line) for line in f]
    return [(q["topic"], q["key"]) for q in qs] + [("orders", "Aa"), ("x", "")]


_SIZE = index_file_size(SLOTS, ITEMS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, 2),
    patches=st.lists(
        st.tuples(st.integers(40, _SIZE - 1), st.binary(min_size=1, max_size=24)),
        min_size=1, max_size=30,
    ),
)
def test_random_bytes_in_slots_and_items_never_crash(which, patches, fixture_query_keys):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        shutil.copytree(require_fixture() / "store" / "index", root / "index")
        path = sorted((root / "index").iterdir())[which]
        os.chmod(path, 0o644)
        data = bytearray(path.read_bytes())
        for at, raw in patches:
            data[at:at + len(raw)] = raw[: len(data) - at]
        path.write_bytes(bytes(data))
        for p in (root / "index").iterdir():
            os.chmod(p, 0o644)
        svc = IndexService(_config(), root)
        svc.load(True)
        _query_all(svc, fixture_query_keys)
        # cutting and writing into a corrupt file are bounded too
        svc.truncate(600000)
        _query_all(svc, fixture_query_keys)
        for b in _commitlog_batches(require_fixture() / "store")[-2:]:
            svc.dispatch(b)
        _query_all(svc, fixture_query_keys)
        svc.shutdown()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 2), header=st.binary(min_size=40, max_size=40))
def test_random_header_loads_or_raises_a_clear_error(which, header, fixture_query_keys):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        shutil.copytree(require_fixture() / "store" / "index", root / "index")
        for p in (root / "index").iterdir():
            os.chmod(p, 0o644)
        path = sorted((root / "index").iterdir())[which]
        data = bytearray(path.read_bytes())
        data[:40] = header
        path.write_bytes(bytes(data))
        slot_count, index_count = struct.unpack(">ii", header[32:])
        svc = IndexService(_config(), root)
        if not (0 <= index_count <= ITEMS and 0 <= slot_count <= SLOTS):
            with pytest.raises(IndexFileCorruptError, match=os.path.basename(path)):
                svc.load(True)
            svc.load(True, drop_corrupt=True)
            assert len(svc.files) == 2 and not path.exists()
        else:
            svc.load(True)
        _query_all(svc, fixture_query_keys)
        svc.shutdown()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [(36, 801, "indexCount 801"), (36, -1, "indexCount -1"), (32, 201, "hashSlotCount 201"),
     (32, -7, "hashSlotCount -7")],
)
def test_header_counters_out_of_range_raise(rocketmq_store, field, value, message):
    path = sorted((rocketmq_store / "index").iterdir())[0]
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, field, value)
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileCorruptError, match=message):
        IndexFile.load(path, SLOTS, ITEMS)
    svc = IndexService(_config(), rocketmq_store)
    with pytest.raises(IndexFileCorruptError):
        svc.load(True)
    assert svc.files == ()


def test_truncated_or_resized_file_raises(rocketmq_store):
    path = sorted((rocketmq_store / "index").iterdir())[1]
    with path.open("r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(IndexFileCorruptError, match="1000 bytes, expected 16840"):
        IndexFile.load(path, SLOTS, ITEMS)
    with pytest.raises(IndexFileCorruptError, match="expected"):
        IndexFile.load(sorted((rocketmq_store / "index").iterdir())[0], 100, 800)


def test_chains_with_out_of_range_or_cyclic_links_end(rocketmq_store):
    path = sorted((rocketmq_store / "index").iterdir())[0]
    items_at = 40 + SLOTS * 4
    data = bytearray(path.read_bytes())
    key = "orders#audit-hot"
    slot = index_key_hash(key) % SLOTS
    struct.pack_into(">i", data, 40 + slot * 4, ITEMS)  # indexCount is 800: slot -> past the end
    other = index_key_hash("audit#audit-hot") % SLOTS
    head = struct.unpack_from(">i", data, 40 + other * 4)[0]
    assert other != slot and 0 < head < ITEMS
    newer = min(head + 5, ITEMS - 1)
    struct.pack_into(">i", data, items_at + head * 20 + 16, newer)  # link to a newer item
    struct.pack_into(">i", data, items_at + newer * 20 + 16, head)  # ... and back: a cycle
    path.write_bytes(bytes(data))
    f = IndexFile.load(path, SLOTS, ITEMS)
    assert f.select_phy_offsets(key, 64, 0, LONG_MAX) == []
    got = f.select_phy_offsets("audit#audit-hot", 64, 0, LONG_MAX)
    assert 1 <= len(got) <= 64
    f.close()


def test_torn_put_does_not_make_a_self_loop(tmp_path):
    f = IndexFile.create(tmp_path / "i", 1, 10)
    for i in range(3):
        assert f.put_key("T#k", 100 * (i + 1), BASE_TS)
    f.close()
    data = bytearray((tmp_path / "i").read_bytes())
    struct.pack_into(">i", data, 40, 4)  # slot says item 4 (the next one), count says 4
    struct.pack_into(">iqii", data, 44 + 4 * 20, index_key_hash("T#k"), 999, 0, 3)
    (tmp_path / "i").write_bytes(bytes(data))
    f = IndexFile.load(tmp_path / "i", 1, 10)
    assert f.index_count == 4
    assert f.put_key("T#k", 400, BASE_TS)
    assert f.select_phy_offsets("T#k", 10, 0, LONG_MAX) == [400, 300, 200, 100]
    f.close()


# ---------------------------------------------------------------------------- (f) reopening


def test_reopen_keeps_the_index_and_continues(tmp_path, fixture_index_queries):
    batches = _commitlog_batches(require_fixture() / "store")
    svc = IndexService(_config(), tmp_path)
    svc.load(True)
    for b in batches[:6]:
        svc.dispatch(b)
    before = {q["indexKey"]: svc.query_offsets(q["topic"], q["key"], 64, 0, LONG_MAX)
              for q in fixture_index_queries}
    svc.shutdown()

    svc = IndexService(_config(), tmp_path)
    svc.load(True)
    for q in fixture_index_queries:
        got = svc.query_offsets(q["topic"], q["key"], 64, 0, LONG_MAX)
        assert got == before[q["indexKey"]]
    for b in batches:  # the first six again (skipped), then the rest
        svc.dispatch(b)
    svc.shutdown()
    assert _file_bytes(sorted((tmp_path / "index").iterdir())) == _file_bytes(
        _fixture_index_files())

    ro = IndexService(_config(), tmp_path, read_only=True)
    ro.load(True)
    for q in fixture_index_queries:
        a = q["queryMessageArgs"]
        got = ro.query_offsets(q["topic"], q["key"], a["maxNum"], a["begin"], a["end"])
        assert sorted(got) == q["returnedOffsets"]
    with pytest.raises(PermissionError):
        ro.dispatch(batches[0])
    ro.shutdown()


def test_unclean_exit_drops_files_after_the_checkpoint(rocketmq_store, fixture_manifest):
    checkpoint = fixture_manifest["checkpoint"]["indexMsgTimestamp"]
    svc = IndexService(_config(), rocketmq_store)
    svc.async_flush_full = False
    svc.load(False, checkpoint)
    assert len(svc.files) == 2  # the third ends after the checkpoint
    assert len(list((rocketmq_store / "index").iterdir())) == 2
    for b in _commitlog_batches(require_fixture() / "store"):  # recovery re-dispatches
        svc.dispatch(b)
    svc.shutdown()
    assert _file_bytes(sorted((rocketmq_store / "index").iterdir())) == _file_bytes(
        _fixture_index_files())


# ------------------------------------------------------------------------- concurrency


def test_queries_while_dispatching_see_only_written_items(tmp_path):
    rng = random.Random(5)
    recs = [{"topic": "T", "uniq": f"u{i}", "keys": f"hot k{rng.randrange(50)}", "sys_flag": 0,
             "ts": BASE_TS + 10 * i} for i in range(1500)]
    (tmp_path / "commitlog").mkdir()
    mf = _write_commitlog(tmp_path / "commitlog" / "00000000000000000000", recs)
    pos = np.asarray(record.scan_region(mf, 0, mf.wrote_position).offsets, dtype=np.int64)
    svc = IndexService(StoreConfig(max_hash_slot_num=7, max_index_num=300), tmp_path)
    svc.load(True)
    offsets = {r["offset"] for r in recs}
    errors: list[BaseException] = []
    done = threading.Event()

    def reader():
        try:
            while not done.is_set():
                for k in ("hot", "k3", "u7"):
                    got = svc.query_offsets("T", k, 64, 0, LONG_MAX)
                    assert set(got) <= offsets
                    assert got == sorted(got, reverse=True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    batch = SimpleNamespace(mapped_file=mf, positions=pos, phy_offsets=pos)
    for part in _split(batch, 13):
        svc.dispatch(part)
    done.set()
    for t in threads:
        t.join()
    assert not errors
    assert len(svc.files) == -(-4500 // 299)  # 4500 items, 299 per file
    hot = sorted(offsets, reverse=True)[:64]
    assert svc.query("T", "hot", 64, 0, LONG_MAX, lambda _: True) == hot
    svc.shutdown()
    mf.close()


def test_utf8_hash_ascii_runs_at_every_alignment():
    """hash_utf8 takes ASCII four bytes a step: every run length and position of multi-byte
    characters around it must give Java's hashCode, also continued from a prefix."""
    for head in range(0, 10):
        for mid in ("", "é", "€", "😀", "é€😀"):
            for tail in range(0, 10):
                text = "k" * head + mid + "0123456789"[:tail]
                assert utf8_java_hash(text.encode()) == refcodec.java_hash(text), text
                cont = utf8_java_hash(text.encode(), utf8_java_hash(b"topic#"))
                assert cont == refcodec.java_hash("topic#" + text), text
