"""MessageStore.get_message_records (the broker's pull path: the records gathered natively
into one body) gives get_message's answer: status, next begin offset, min/max offsets,
count, bytes, the slave suggestion and the records themselves, across CommitLog and
ConsumeQueue rolls, END_FILE blanks, transactions, the transfer limits in memory and on disk,
filters (the general path), and damaged units (the walk stops before one; the general path
repairs it)."""
from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from test_consume_queue import (
    TOPICS,
    UNIT_DAMAGE,
    copy_of,
    cq_files,
    expected_units,
    fill,
    make_config,
    open_store,
)

from rocketstore import GetMessageStatus, MessageStore


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("records") / "store"
    store = open_store(root)
    fill(store, random.Random(20261127), 1500)
    assert store.wait_dispatched()
    store.shutdown()
    return root


def answer(r: Any) -> tuple[Any, ...]:
    return (r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count,
            r.buffer_total_size, r.suggest_pulling_from_slave, b"".join(r.buffers))


def queues() -> list[tuple[str, int]]:
    return [(t, q) for t, n in TOPICS.items() for q in range(n)]


LIMITS = {
    "defaults": {},
    "small byte limit": {"max_transfer_bytes_on_message_in_memory": 3000},
    "on disk": {"access_message_in_memory_max_ratio": 0,
                "max_transfer_count_on_message_in_disk": 5},
    "large": {"max_transfer_count_on_message_in_memory": 2000,
              "max_transfer_bytes_on_message_in_memory": 8 << 20},
}


@pytest.mark.parametrize("limits", list(LIMITS))
def test_same_answer_as_get_message(pristine: Path, limits: str) -> None:
    native = 0
    with MessageStore.open(pristine, make_config(pristine, **LIMITS[limits]),
                           read_only=True) as store:
        for topic, qid in queues():
            end = store.get_max_offset_in_queue(topic, qid)
            for max_msgs in (1, 7, 32, 1000):
                offset = 0
                while offset < end:
                    want = store.get_message("g", topic, qid, offset, max_msgs)
                    got = store.get_message_records("g", topic, qid, offset, max_msgs)
                    assert answer(got) == answer(want), (limits, topic, qid, offset, max_msgs)
                    assert got.messages == [] or got.body is None
                    native += got.body is not None
                    assert want.next_begin_offset > offset
                    offset = want.next_begin_offset
            for offset in (end, end + 1, 0):
                want = store.get_message("g", topic, qid, offset, 32)
                got = store.get_message_records("g", topic, qid, offset, 32)
                assert answer(got) == answer(want), (topic, qid, offset)
    assert native > 100


def test_filters_take_the_general_path(pristine: Path) -> None:
    with MessageStore.open(pristine, make_config(pristine), read_only=True) as store:
        for expression in ("TagA", "TagA || 订单", "BB"):
            for topic, qid in queues():
                offset, end = 0, store.get_max_offset_in_queue(topic, qid)
                while offset < end:
                    want = store.get_message("g", topic, qid, offset, 32, expression)
                    got = store.get_message_records("g", topic, qid, offset, 32, expression)
                    assert got.body is None
                    assert answer(got) == answer(want)
                    offset = want.next_begin_offset


@pytest.mark.parametrize("kind", list(UNIT_DAMAGE))
def test_walk_stops_before_a_damaged_unit(pristine: Path, tmp_path: Path, kind: str) -> None:
    """Unit 5 of beta:0 does not point at its record: a pull from 0 answers units 0-4 and
    the next pull starts at 5, where get_message repairs the unit (as without the walk)."""
    root = copy_of(pristine, tmp_path)
    path = cq_files(root)[("beta", 0)][0]
    data = bytearray(path.read_bytes())
    u5, u6 = (struct.unpack_from(">qiq", data, i * 20) for i in (5, 6))
    change, _ = UNIT_DAMAGE[kind]
    struct.pack_into(">qiq", data, 5 * 20, *change(u5, u6))
    path.write_bytes(bytes(data))
    expected = expected_units(root)[("beta", 0)]
    with MessageStore.open(root, make_config(root), read_only=True) as store:
        first = store.get_message_records("g", "beta", 0, 0, 32)
        assert (first.status, first.message_count, first.next_begin_offset) == \
            (GetMessageStatus.FOUND, 5, 5)
        got, offset = [], 0
        end = store.get_max_offset_in_queue("beta", 0)
        while offset < end:
            r = store.get_message_records("g", "beta", 0, offset, 32)
            assert r.status == GetMessageStatus.FOUND
            got.append(b"".join(r.buffers))
            offset = r.next_begin_offset
    commitlog = b"".join(p.read_bytes() for p in sorted((root / "commitlog").iterdir()))
    size = make_config(root).mapped_file_size_commit_log
    assert all(len(p.read_bytes()) == size for p in sorted((root / "commitlog").iterdir())[:-1])
    assert b"".join(got) == b"".join(commitlog[phy:phy + n] for phy, n, _ in expected)


def test_units_read_in_place_match_units_read_as_array(pristine: Path) -> None:
    """gather_queue_records (the units read in place from the ConsumeQueue's segment) walks
    what gather_records walks over read_units' array, at every offset, ConsumeQueue rolls
    included; None where that offset is not readable (past the end, negative, no segment)."""
    import numpy as np

    from rocketstore._native.queue_read import gather_queue_records, gather_records

    with MessageStore.open(pristine, make_config(pristine), read_only=True) as store:
        log_queue = store.commit_log.queue
        for topic, qid in queues():
            cq = store.consume_queues.find(topic, qid)
            assert cq is not None and cq.overlay is None and not cq.corrections
            end = cq.max_offset
            common = (log_queue.files, log_queue.mapped_file_size, store.commit_log.min_offset(),
                      store.commit_log.max_offset(), 1 << 40, topic.encode(), qid)
            limits = (256 << 10, 32, 64 << 10, 8)
            for offset in range(end):
                for max_msgs in (1, 9, 32):
                    units = cq.read_units(offset, 16000)
                    assert units is not None
                    want = gather_records(units.view(np.uint8), *common, offset, max_msgs, *limits)
                    got = gather_queue_records(cq.queue.files, cq.queue.mapped_file_size, 16000,
                                               *common, offset, max_msgs, *limits)
                    assert got == want, (topic, qid, offset, max_msgs)
            for offset in (end, end + 1, end + 1000, -1, (1 << 63) - 1, (1 << 63) // 20 + 1):
                assert gather_queue_records(cq.queue.files, cq.queue.mapped_file_size, 16000,
                                            *common, offset, 32, *limits) is None
            assert gather_queue_records([], cq.queue.mapped_file_size, 16000, *common, 0, 32,
                                        *limits) is None
            # at most max_units units are looked at
            got = gather_queue_records(cq.queue.files, cq.queue.mapped_file_size, 3, *common, 0,
                                       32, *limits)
            assert got is not None and got[2] <= 3
