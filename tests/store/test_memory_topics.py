"""MemoryMessageStore: memory topics' queues, the cap, eviction order (the topic's oldest, the
oldest of all when the topic holds nothing else), offsets and statuses as the disk store's,
records decoded as CommitLog records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore._native.record import decode_message
from rocketstore.message import GetMessageStatus, Message
from rocketstore.store import MEMORY_OFFSET_BASE, MemoryMessageStore, default_max_bytes


def _seq(msg) -> int:
    return int(bytes(msg.body[:8]))


def _held(store: MemoryMessageStore, topic: str, queues: int) -> list[int]:
    """Every sequence number a topic still holds, read queue by queue."""
    seqs = []
    for q in range(queues):
        offset = store.get_min_offset_in_queue(topic, q)
        while offset < store.get_max_offset_in_queue(topic, q):
            got = store.get_message("g", topic, q, offset, 32)
            assert got.status == GetMessageStatus.FOUND
            seqs.extend(_seq(m) for m in got.messages)
            offset = got.next_begin_offset
    return sorted(seqs)


def _put(store: MemoryMessageStore, topic: str, seq: int, queue: int, size: int = 100,
         tags: str | None = None) -> None:
    result = store.append_message(Message(topic, b"%08d" % seq + b"x" * size, tags=tags), queue)
    assert result.ok, result


def test_messages_come_back_as_records_with_queue_offsets() -> None:
    store = MemoryMessageStore(1 << 20, "10.0.0.7:10911")
    try:
        for i in range(10):
            _put(store, "M", i, i % 2, tags="even" if i % 2 == 0 else "odd")
        assert [store.get_max_offset_in_queue("M", q) for q in (0, 1)] == [5, 5]
        got = store.get_message("g", "M", 1, 0, 32)
        assert got.status == GetMessageStatus.FOUND and got.next_begin_offset == 5
        assert [_seq(m) for m in got.messages] == [1, 3, 5, 7, 9]
        for i, (m, record) in enumerate(zip(got.messages, got.buffers, strict=True)):
            again = decode_message(bytes(record), check_crc=True)      # a whole CommitLog record
            assert (again.topic, again.queue_id, again.queue_offset) == ("M", 1, i)
            assert again.commitlog_offset >= MEMORY_OFFSET_BASE
            assert again.store_host == "10.0.0.7:10911"
            assert struct.unpack(">i", bytes(record[:4]))[0] == len(record) == m.store_size
        assert [_seq(m) for m in store.get_message("g", "M", 0, 0, 32, "even").messages] == [0, 2, 4, 6, 8]
        assert store.get_message("g", "M", 0, 0, 32, "odd").status == GetMessageStatus.NO_MATCHED_MESSAGE
        sql = store.get_message("g", "M", 1, 0, 32, "TAGS = 'odd' AND KEYS IS NULL", "SQL92")
        assert [_seq(m) for m in sql.messages] == [1, 3, 5, 7, 9]
        assert store.get_message("g", "M", 0, 5, 32).status == GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert store.get_message("g", "M", 0, 9, 32).status == GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert store.get_message("g", "M", 7, 0, 32).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert store.get_message("g", "other", 0, 0, 32).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert len(store.get_message("g", "M", 0, 0, 2).messages) == 2
        first = store.get_message_store_timestamp("M", 0, 0)
        assert first > 0 and store.get_earliest_message_time("M", 0) == first
        assert store.get_message_store_timestamp("M", 0, 5) == -1
        assert store.get_offset_in_queue_by_time("M", 0, first) == 0
        assert store.get_offset_in_queue_by_time("M", 0, first + 10**9) == 4
        third = got.messages[2]
        assert _seq(store.look_message_by_offset(third.commitlog_offset)) == 5
        assert store.look_message_by_offset(third.commitlog_offset + 1) is None
        assert store.look_message_by_offset(MEMORY_OFFSET_BASE - 1) is None
    finally:
        store.close()


def test_the_cap_evicts_the_topics_oldest_first_and_offsets_move_on() -> None:
    cap = 200_000
    store = MemoryMessageStore(cap, "127.0.0.1:10911")
    try:
        for i in range(5000):
            _put(store, "A", i, i % 4)
            assert store.live_bytes <= cap
        held = _held(store, "A", 4)
        # exactly the newest messages, whatever their queue: eviction follows arrival
        assert held == list(range(5000 - len(held), 5000)) and len(held) > 100
        assert store.live_bytes > cap - 1000
        for q in range(4):
            low = store.get_min_offset_in_queue("A", q)
            assert low > 0 and store.get_max_offset_in_queue("A", q) == 1250
            below = store.get_message("g", "A", q, low - 1, 32)
            assert below.status == GetMessageStatus.OFFSET_TOO_SMALL
            assert below.next_begin_offset == low and below.min_offset == low
        figures = store.describe()
        assert figures["memoryTopicEvictedMessages"] == 5000 - len(held)
        # memory: the cap, one partly evicted segment and the one being filled
        assert store.segment_bytes_held <= cap + 2 * store.segment_bytes
    finally:
        store.close()


def test_a_topic_with_nothing_else_evicts_the_oldest_of_all() -> None:
    cap = 100_000
    store = MemoryMessageStore(cap, "127.0.0.1:10911")
    try:
        for i in range(2000):      # A and C fill the cap, A's messages older
            _put(store, "A" if i < 1000 else "C", i, 0)
        a_before, c_before = _held(store, "A", 1), _held(store, "C", 1)
        assert a_before and c_before
        _put(store, "B", 10_000, 0, size=3000)      # B is empty: the oldest overall go (A's)
        a_after, c_after = _held(store, "A", 1), _held(store, "C", 1)
        assert c_after == c_before
        assert a_after == a_before[len(a_before) - len(a_after):] and len(a_after) < len(a_before)
        assert _held(store, "B", 1) == [10_000]
        _put(store, "B", 10_001, 0, size=3000)      # B holds one: its own oldest goes
        assert _held(store, "B", 1) == [10_001]
        assert _held(store, "A", 1) == a_after and _held(store, "C", 1) == c_after
        assert store.live_bytes <= cap
    finally:
        store.close()


def test_batches_big_messages_and_deletion() -> None:
    store = MemoryMessageStore(1 << 20, "127.0.0.1:10911", max_message_size=300_000)
    try:
        result = store.put_messages([Message("B", b"%08d" % i) for i in range(100)], 2)
        assert result.ok and list(result.queue_offsets) == list(range(100))
        big = store.append_message(Message("B", b"%08d" % 100 + b"y" * 200_000), 2)   # > a segment
        assert big.ok and big.queue_offset == 100
        assert _held(store, "B", 3) == list(range(101))
        too_big = store.append_message(Message("B", b"z" * 400_000), 2)
        assert not too_big.ok
        assert store.delete_topic("B") and store.live_bytes == 0 and store.segment_bytes_held == 0
        assert store.get_max_offset_in_queue("B", 2) == 0
        assert store.append_message(Message("B", b"again"), 2).queue_offset == 0
    finally:
        store.close()


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match="memoryTopicMaxBytes"):
        MemoryMessageStore(0, "127.0.0.1:10911")
    store = MemoryMessageStore(1 << 20, "127.0.0.1:10911")
    with pytest.raises(ValueError, match="max_msgs"):
        store.get_message("g", "M", 0, 0, 0)
    store.close()
    assert not store.append_message(Message("M", b"x"), 0).ok     # closed
    assert 0 < default_max_bytes()


class _ReferenceCap:
    """The eviction rule, written plainly: records in arrival order per topic; over the cap,
    the putting topic's oldest go while it holds more than the new one, else the other topic
    whose oldest arrived first."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held: dict[str, list[tuple[int, int]]] = {}     # topic -> [(arrival, size)]
        self.total = 0

    def put(self, topic: str, arrival: int, size: int) -> None:
        mine = self.held.setdefault(topic, [])
        mine.append((arrival, size))
        self.total += size
        while self.total > self.cap:
            if len(mine) > 1:
                victim = mine
            else:
                others = [h for t, h in self.held.items() if t != topic and h]
                if not others:
                    return
                victim = min(others, key=lambda h: h[0][0])
            self.total -= victim.pop(0)[1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 3), st.integers(0, 6000)),
                min_size=1, max_size=300),
       st.integers(20_000, 80_000))
def test_eviction_follows_the_rule(puts: list[tuple[str, int, int]], cap: int) -> None:
    store = MemoryMessageStore(cap, "127.0.0.1:10911", segment_bytes=65_536)
    reference = _ReferenceCap(cap)
    try:
        for seq, (topic, queue, size) in enumerate(puts):
            result = store.append_message(Message(topic, b"%08d" % seq + b"p" * size), queue)
            assert result.ok
            reference.put(topic, seq, result.wrote_bytes)
            assert store.live_bytes == reference.total
        for topic in "ABC":
            assert _held(store, topic, 4) == [a for a, _ in reference.held.get(topic, [])]
        assert store.segment_bytes_held <= cap + 65_536 * 2 * 3 + 8192 + 65_536
    finally:
        store.close()
