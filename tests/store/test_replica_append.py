"""MessageStore.append_commit_log: a slave's store fed a master's CommitLog bytes in arbitrary
pieces (records split across calls and segment ends) ends byte-identical, dispatches the same
ConsumeQueue units and index keys, refuses puts, offsets that are not its end and bytes that
are not records, and restarts (cleanly or killed) at its last whole record."""

from __future__ import annotations

import random

import pytest
from helpers import SEG, make_config

from rocketstore import Message, MessageStore
from rocketstore.message import PutMessageStatus


def fill_master(root, count: int = 900, seed: int = 7) -> MessageStore:
    store = MessageStore.open(root, make_config(root))
    rnd = random.Random(seed)
    for i in range(count):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 400)))
        result = store.put_message(Message(topic=f"T{i % 3}", body=body, tags=f"t{i % 5}",
                                           keys=[f"k{i}"]), i % 4)
        assert result.ok
    assert store.wait_dispatched()
    return store


def master_bytes(store: MessageStore, start: int) -> bytes:
    out = bytearray()
    offset = start
    while offset < store.get_max_phy_offset():
        view = store.get_commitlog_data(offset)
        assert view is not None
        out += view
        offset += len(view)
    return bytes(out)


def open_slave(root) -> MessageStore:
    return MessageStore.open(root, make_config(root, broker_role="SLAVE"))


def feed(slave: MessageStore, start: int, data: bytes, rnd: random.Random) -> None:
    """data in pieces of random sizes, some calls given several pieces that follow each
    other (the frames of one read)."""
    pos = 0
    while pos < len(data):
        sizes = [rnd.choice([1, 7, 100, 1000, 32 * 1024, rnd.randrange(1, 5000)])
                 for _ in range(rnd.choice([1, 1, 3]))]
        pieces = []
        at = pos
        for n in sizes:
            pieces.append(memoryview(data)[at:at + n])
            at += len(pieces[-1])
        assert slave.append_commit_log(start + pos, pieces if len(pieces) > 1 else pieces[0]) \
            == slave.get_replica_offset()
        pos = at
        assert slave.get_replica_offset() == start + pos


def same_queues(master: MessageStore, slave: MessageStore, start: int) -> None:
    for topic in ("T0", "T1", "T2"):
        for queue_id in range(4):
            low = slave.get_min_offset_in_queue(topic, queue_id)
            high = master.get_max_offset_in_queue(topic, queue_id)
            assert slave.get_max_offset_in_queue(topic, queue_id) == high
            got = slave.get_message("g", topic, queue_id, low, 10_000)
            want = master.get_message("g", topic, queue_id, low, 10_000)
            assert [m.commitlog_offset for m in got.messages] == \
                [m.commitlog_offset for m in want.messages]
            assert all(m.commitlog_offset >= start for m in got.messages)
    for i in (1, 880, 899):     # the first key is before the copy when it starts later
        topic, key = f"T{i % 3}", f"k{i}"
        hits = [m.commitlog_offset for m in slave.query_message(topic, key).messages]
        want = [m.commitlog_offset for m in master.query_message(topic, key).messages]
        assert hits == [o for o in want if o >= start]
        assert want


@pytest.mark.parametrize("start_segment", [0, 2])
def test_slave_copy_is_identical(tmp_path, start_segment):
    master = fill_master(tmp_path / "m")
    try:
        assert master.get_max_phy_offset() > 4 * SEG
        start = start_segment * SEG
        data = master_bytes(master, start)
        slave = open_slave(tmp_path / "s")
        try:
            feed(slave, start, data, random.Random(start_segment))
            assert slave.wait_dispatched()
            assert slave.get_max_phy_offset() == master.get_max_phy_offset()
            assert master_bytes(slave, start) == data
            same_queues(master, slave, start)
            put = slave.put_message(Message(topic="T0", body=b"x"), 0)
            assert put.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        finally:
            slave.shutdown()
    finally:
        master.shutdown()


def test_offsets_and_garbage_refused(tmp_path):
    master = fill_master(tmp_path / "m", count=50)
    try:
        data = master_bytes(master, 0)
    finally:
        master.shutdown()
    with pytest.raises(ValueError, match="must be an int"):
        MessageStore.open(tmp_path / "x", make_config(tmp_path / "x", broker_role="SLAVE")
                          ).append_commit_log(-1, b"")
    with open_slave(tmp_path / "s") as slave:
        with pytest.raises(ValueError, match="segment start"):
            slave.append_commit_log(100, data[:10])
        slave.append_commit_log(0, data[:150])
        with pytest.raises(ValueError, match="not where the CommitLog ends"):
            slave.append_commit_log(0, data[:10])
        # the rest of the first record, then garbage where the second should start
        first = int.from_bytes(data[:4], "big")
        slave.append_commit_log(150, data[150:first])
        assert slave.get_max_phy_offset() == first
        with pytest.raises(ValueError, match=f"offset {first} are not a record"):
            slave.append_commit_log(first, b"\x00\x00\x01\x00" + b"garbage!" * 40)
        assert slave.get_replica_offset() == first
        slave.append_commit_log(first, data[first:])
        assert slave.get_max_phy_offset() == len(data)
    with MessageStore.open(tmp_path / "a", make_config(tmp_path / "a")) as master_store:
        with pytest.raises(ValueError, match="not a slave"):
            master_store.append_commit_log(0, data)


def test_restart_ends_at_last_whole_record(tmp_path):
    master = fill_master(tmp_path / "m", count=200)
    try:
        data = master_bytes(master, 0)
    finally:
        master.shutdown()
    with open_slave(tmp_path / "s") as slave:
        slave.append_commit_log(0, data[:5000])
        whole = slave.get_max_phy_offset()
        assert whole < 5000 == slave.get_replica_offset()
    with open_slave(tmp_path / "s") as slave:
        assert slave.get_replica_offset() == whole
        slave.append_commit_log(whole, data[whole:])
        assert master_bytes(slave, 0) == data
