"""SQL92 filter bitmaps in the ConsumeQueue extension (enableConsumeQueueExt with
enableCalcFilterBitMap): a pull never loses a matching message to the bloom filter, whatever
the groups, expressions, properties and the order of registrations and writes; it skips most
of the others without reading their records; and the ext units are RocketMQ's bytes."""

from __future__ import annotations

import itertools
import random
import signal
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql92_reference import random_expression, random_properties, reference_match
from store_faults import run_python

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig
from rocketstore.common.bloom import BloomFilter
from rocketstore.store import verify_store
from rocketstore.store.consume_queue_ext import (
    MAX_ADDR,
    ConsumeQueueExt,
    CqExtUnit,
    decorate,
    is_ext_addr,
    undecorate,
)

QUEUES = 2


def _config(root: str, **extra: object) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024,
                       mapped_file_size_consume_queue=20 * 64,
                       mapped_file_size_consume_queue_ext=2048,
                       enable_consume_queue_ext=True, **extra)


def _open(root: str) -> MessageStore:
    store = MessageStore.open(root, _config(root))
    store.enable_filter_bitmaps()
    return store


def _drain(store: MessageStore, topic: str, group: str, expression: str,
           expression_type: str | None = "SQL92", max_msgs: int = 32) -> tuple[list, int]:
    """(queue, offset) of every message the subscription gets, and the units the bloom
    filter skipped."""
    got, skipped = [], 0
    for q in range(QUEUES):
        offset, end = 0, store.get_max_offset_in_queue(topic, q)
        for _ in range(end + 2):
            if offset >= end:
                break
            r = store.get_message(group, topic, q, offset, max_msgs, expression, expression_type)
            assert r.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)
            got.extend((q, m.queue_offset) for m in r.messages)
            skipped += r.bloom_skipped
            assert r.next_begin_offset > offset
            offset = r.next_begin_offset
    return got, skipped


def _put(store: MessageStore, topic: str, props_list: list[dict[str, str]]) -> list:
    stored = []
    for i, props in enumerate(props_list):
        props = {k: v for k, v in props.items() if v}
        tags = props.pop("TAGS", None)
        r = store.put_message(Message(topic, f"m{i}".encode(), tags=tags, properties=props),
                              i % QUEUES)
        assert r.ok
        stored.append((i % QUEUES, r.queue_offset, {**props, **({"TAGS": tags} if tags else {})}))
    assert store.wait_dispatched(timeout_s=30)
    return stored


@pytest.fixture(scope="module")
def bloom_store(tmp_path_factory: pytest.TempPathFactory):
    root = str(tmp_path_factory.mktemp("bloom") / "store")
    store = _open(root)
    try:
        yield store
    finally:
        store.close()


_topics = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False), st.integers(1, 5), st.integers(0, 60))
def test_bloom_filter_never_drops_a_match(bloom_store, rng: random.Random, ngroups: int,
                                          split: int) -> None:
    """Groups with random expressions, some registered before the writes, some after `split`
    messages were dispatched, one changing its expression midway: each group's drain is
    exactly the reference evaluator's selection, as is a group without a filter."""
    store = bloom_store
    bitmaps = store.filter_bitmaps
    topic = f"h{next(_topics)}"
    groups = []
    for g in range(ngroups):
        expression = random_expression(rng)
        if reference_match(expression, {}) is None:
            continue        # refused by the parser: no filter
        groups.append((f"g{g}", expression, rng.random() < 0.5))
    for group, expression, early in groups:
        if early:
            bitmaps.register(topic, group, expression)
    messages = [random_properties(rng) for _ in range(60)]
    stored = _put(store, topic, messages[:split])
    for group, expression, early in groups:
        if not early:
            bitmaps.register(topic, group, expression)
    changed = None
    if groups and rng.random() < 0.3:
        group, _, _ = groups[0]
        changed = (group, random_expression(rng))
        if reference_match(changed[1], {}) is not None:
            bitmaps.register(topic, group, changed[1])
            groups[0] = (group, changed[1], True)
    stored += _put(store, topic, messages[split:])
    for group, expression, _ in groups:
        expected = sorted((q, off) for q, off, props in stored if reference_match(expression, props))
        got, _ = _drain(store, topic, group, expression, max_msgs=rng.choice((1, 4, 32)))
        assert got == expected, (group, expression)
        unfiltered, skipped = _drain(store, topic, "nobody", expression)
        assert unfiltered == expected and skipped == 0


def test_bloom_filter_skips_most_non_matching(tmp_path) -> None:
    """2,000 messages, a = i % 100, four groups: each gets exactly its messages, and the
    units the bloom filter skips (never reading their records) are most of the rest."""
    store = _open(str(tmp_path / "s"))
    try:
        subs = {"seven": "a = 7", "big": "a >= 90", "eu": "region = 'eu' AND a < 3",
                "none": "a > 1000"}
        for group, expression in subs.items():
            store.filter_bitmaps.register("t", group, expression)
        props = [{"a": str(i % 100), "region": ("eu", "us")[(i // 100) % 2]} for i in range(2000)]
        stored = _put(store, "t", props)
        for group, expression in subs.items():
            expected = sorted((q, o) for q, o, p in stored if reference_match(expression, p))
            got, skipped = _drain(store, "t", group, expression)
            assert got == expected
            non_matching = len(stored) - len(expected)
            assert skipped >= 0.9 * non_matching, (group, skipped, non_matching)
            # a tag subscription on the same store reads tags codes through the ext units
        tagged = store.get_message("x", "t", 0, 0, 32, "*")
        assert tagged.message_count == 32 and tagged.bloom_skipped == 0
        # the same expression from a group without a filter: every record evaluated
        got, skipped = _drain(store, "t", "other", "a = 7")
        assert len(got) == 20 and skipped == 0
    finally:
        store.close()


def test_filter_registered_after_dispatch_evaluates_older_records(tmp_path) -> None:
    """A group subscribing after messages were dispatched (their bitmaps lack it) still gets
    them; messages after its registration are skipped by the filter."""
    store = _open(str(tmp_path / "s"))
    try:
        store.filter_bitmaps.register("t", "early", "a = 1")     # so the units have bitmaps
        old = _put(store, "t", [{"a": str(i % 10)} for i in range(100)])
        store.filter_bitmaps.register("t", "late", "a = 3")
        got, skipped = _drain(store, "t", "late", "a = 3")
        assert len(got) == 10 and skipped == 0
        _put(store, "t", [{"a": str(i % 10)} for i in range(100)])
        got, skipped = _drain(store, "t", "late", "a = 3")
        assert len(got) == 20 and skipped >= 80
        assert len(old) == 100
    finally:
        store.close()


def test_filters_survive_a_restart(tmp_path) -> None:
    """config/consumerFilter.json keeps the filters: after a reopen the bitmaps on disk still
    skip; a changed expression starts again (nothing lost), and an unregistered filter is
    gone for good."""
    root = str(tmp_path / "s")
    store = _open(root)
    try:
        store.filter_bitmaps.register("t", "g", "a = 1")
        store.filter_bitmaps.register("t", "gone", "a = 2")
        _put(store, "t", [{"a": str(i % 10)} for i in range(200)])
        store.filter_bitmaps.unregister("t", "gone")
    finally:
        store.close()
    store = _open(root)
    try:
        assert store.filter_bitmaps.get("t", "gone") is None
        got, skipped = _drain(store, "t", "g", "a = 1")
        assert len(got) == 20 and skipped >= 170
        store.filter_bitmaps.register("t", "g", "a = 4")
        got, skipped = _drain(store, "t", "g", "a = 4")
        assert len(got) == 20 and skipped == 0
    finally:
        store.close()


def test_ext_unit_layout(tmp_path) -> None:
    """RocketMQ's CqExtUnit: size int16 | tagsCode int64 | msgStoreTime int64 | bitMapSize
    int16 | bitmap, big-endian; addresses are offsets + Long.MIN_VALUE (at most
    Integer.MIN_VALUE - 1); a unit that does not fit ends its file with int16 -1 and
    goes to the next file."""
    bitmap = bytes(range(14))
    unit = CqExtUnit(-123456, 1_700_000_000_123, bitmap)
    raw = unit.encode()
    assert raw == struct.pack(">hqqh", 34, -123456, 1_700_000_000_123, 14) + bitmap
    assert CqExtUnit.decode(raw) == unit
    assert CqExtUnit(7, 8).encode() == struct.pack(">hqqh", 20, 7, 8, 0)
    assert MAX_ADDR == -(1 << 31) - 1 and decorate(0) == -(1 << 63)
    assert not is_ext_addr(-(1 << 31)) and is_ext_addr(decorate(5)) and undecorate(decorate(5)) == 5
    ext = ConsumeQueueExt("t", 0, str(tmp_path), 100)
    ext.load()
    addresses = [ext.put(CqExtUnit(i, i * 10, bitmap)) for i in range(4)]
    # 34-byte units: two fit in 100 - 4 bytes, the third starts the next file
    assert [undecorate(a) for a in addresses] == [0, 34, 100, 134]
    files = sorted((tmp_path / "t" / "0").iterdir())
    assert [f.name for f in files] == ["00000000000000000000", "00000000000000000100"]
    first = files[0].read_bytes()
    assert first[:34] == CqExtUnit(0, 0, bitmap).encode()
    assert first[68:70] == b"\xff\xff"
    assert [ext.get(a) for a in addresses] == [CqExtUnit(i, i * 10, bitmap) for i in range(4)]
    ext.close()
    again = ConsumeQueueExt("t", 0, str(tmp_path), 100)
    again.load()
    again.recover()
    assert undecorate(again.max_address) == 168
    assert undecorate(again.put(CqExtUnit(9, 9))) == 168
    again.close()


def test_bloom_filter_positions() -> None:
    """RocketMQ's defaults (f=20, n=32): k=3, m=112; positions of group#topic as RocketMQ
    4.9.8's BloomFilter computes them (Guava murmur3_128; values from its Java classes, see
    tests/java/test_java_bloom_filter.py for the live comparison)."""
    bloom = BloomFilter(20, 32)
    assert (bloom.k, bloom.m) == (3, 112)
    assert bloom.bit_positions("g1#t") == (32, 7, 17)
    assert bloom.bit_positions("consumerGroup#TopicTest") == (23, 11, 111)
    assert bloom.bit_positions("组#トピック") == (64, 71, 63)
    assert bloom.generate("a-very-long-consumer-group-name-over-16", "topic").bit_pos == (21, 96, 59)
    with pytest.raises(ValueError, match="maxErrorRateOfBloomFilter"):
        BloomFilter(100, 32)


def test_readers_resolve_ext_addresses(tmp_path) -> None:
    """A store written with the extension: verify checks each unit's tags code through its
    ext unit (and reports one whose ext unit is gone); a read-only open without
    enable_consume_queue_ext still reads tag subscriptions right."""
    root = str(tmp_path / "s")
    store = _open(root)
    try:
        store.filter_bitmaps.register("t", "g", "a = 1")
        for i in range(50):
            assert store.put_message(Message("t", b"x", tags=f"T{i % 5}",
                                             properties={"a": str(i % 5)}), i % QUEUES).ok
        assert store.wait_dispatched(timeout_s=30)
        unit = store.consume_queues.find("t", 0).get_unit(0)
        assert is_ext_addr(unit[2])
    finally:
        store.close()
    report = verify_store(root, _config(root))
    assert report.ok and report.units_checked == 50, report.as_dict()
    with MessageStore.open(root, StoreConfig(store_path_root_dir=root,
                                             mapped_file_size_commit_log=256 * 1024,
                                             mapped_file_size_consume_queue=20 * 64),
                           read_only=True) as ro:
        got = ro.get_message("g", "t", 0, 0, 32, "T2")
        assert [m.tags for m in got.messages] == ["T2"] * 5
    # the ext files of queue 0 gone: its units' tags codes cannot be checked any more
    for f in (tmp_path / "s" / "consumequeue_ext" / "t" / "0").iterdir():
        f.write_bytes(bytes(f.stat().st_size))
    report = verify_store(root, _config(root))
    assert not report.ok and report.consume_queues.count >= 25
    assert all(p.startswith("t:0 unit") for p in report.consume_queues.listed)


def test_no_match_lost_after_a_crash(tmp_path) -> None:
    """A writer SIGKILLed while it writes and dispatches (filters registered, some of the
    CommitLog and extension not flushed): after recovery each group's drain is exactly the
    reference selection over the messages the store kept, and verify finds nothing wrong."""
    root = str(tmp_path / "s")
    code = f"""
        import os, signal
        from test_bloom_filter import _open
        from rocketstore import Message
        store = _open({root!r})
        for group, expression in {SUBS_CRASH!r}.items():
            store.filter_bitmaps.register("t", group, expression)
        for i in range(3000):
            store.put_message(Message("t", b"x", properties={{"a": str(i % 100), "b": str(i % 7)}}),
                              i % 2)
            if i == 1500:
                store.filter_bitmaps.register("t", "late", "b = 3")
        os.kill(os.getpid(), signal.SIGKILL)
    """
    result = run_python(code, timeout=300)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    store = _open(root)
    try:
        assert store.wait_dispatched(timeout_s=60)
        kept = []
        for q in range(QUEUES):
            offset, end = 0, store.get_max_offset_in_queue("t", q)
            while offset < end:
                r = store.get_message("all", "t", q, offset, 32, "*")
                kept.extend((q, m.queue_offset, dict(m.properties)) for m in r.messages)
                offset = r.next_begin_offset
        assert len(kept) > 1000
        for group, expression in {**SUBS_CRASH, "late": "b = 3"}.items():
            expected = sorted((q, o) for q, o, p in kept if reference_match(expression, p))
            got, _ = _drain(store, "t", group, expression)
            assert got == expected, group
    finally:
        store.close()
    assert verify_store(root, _config(root)).ok


SUBS_CRASH = {"seven": "a = 7", "high": "a > 80 AND b <> 2", "rare": "b IN ('1')"}
