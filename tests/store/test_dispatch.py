"""The native dispatch pass (rocketstore._native.dispatch.Dispatcher) and the
ReputMessageService built on it.

What is checked:
- driven by hand over a CommitLog written by the store, a pass stops once per new queue
  (NEED_QUEUE, with the stop record's fields), per full ConsumeQueue file, per full or missing
  index file (NEED_INDEX) and per CommitLog file (NO_FILE), and the units and index items it
  writes are exactly what an independent scan (tests/refcodec.py) gives;
- re-dispatch from any offset changes no byte, whether the queue's max physical offset is
  known or forgotten; LIMIT, skipped queues, a corrupt record (CORRUPT, no progress, resumable
  past it) and bad arguments;
- follow() in a thread: request_offset from another thread re-dispatches, the stop flag ends it;
- through the store: tiny ConsumeQueue and index files (a roll every few records) give the
  independent scan's units and every key lookup; arrival listeners hear each queue's next
  offset (a failing listener stops nothing) and extra dispatchers get every record once.
"""

from __future__ import annotations

import random
import shutil
import struct
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import helpers
import numpy as np
import pytest
import refcodec
from test_consume_queue import expected_units, fill, store_units

from rocketstore import Message
from rocketstore._native import dispatch as native
from rocketstore._native.consume_queue import write_units
from rocketstore._native.index_file import IndexFile
from rocketstore._native.index_keys import record_index_key_hashes
from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.stop_flag import StopFlag

SEG = helpers.SEG
COMMIT, ROLLBACK, PREPARED = 0x8, 0xC, 0x4


class FakeQueue:
    """What the pass needs of a ConsumeQueue: an attribute for the written-back max offset."""

    def __init__(self) -> None:
        self.max_physic_offset = -1


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 2+ CommitLog files: two topics, three queues each, keys, transactions."""
    root = tmp_path_factory.mktemp("dispatch") / "store"
    rng = random.Random(7)
    with helpers.open_store(root) as store:
        for i in range(360):
            topic = ("alpha", "beta")[i % 2]
            m = Message(topic, rng.randbytes(rng.randrange(0, 400)),
                        tags=rng.choice([None, "TagA", "订单"]), keys=[f"k{i}", f"g{i % 5}"])
            assert store.put_message(m, i % 3).ok
        prepared = store.put_message(Message("alpha", b"p", keys=["tx"], sys_flag=PREPARED), 1)
        for end in (COMMIT, ROLLBACK):
            assert store.put_message(Message(
                "alpha", b"p", keys=["tx"], sys_flag=end,
                prepared_transaction_offset=prepared.commitlog_offset), 1).ok
        assert store.wait_dispatched()
    assert len(helpers.segment_paths(root)) >= 2
    return root


def segments(root: Path, scan: Path | None = None) -> list[MappedFile]:
    """The CommitLog files, read-only, with their write positions where the records end (as
    the store's recovery sets them; scan: where to read that end, when root is damaged)."""
    *_, last = refcodec.iter_commitlog(scan or root)
    end = last.commitLogOffset + last.storeSize
    files = [MappedFile(p, SEG, create=False, read_only=True)
             for p in helpers.segment_paths(root)]
    for mf in files:
        mf.wrote_position = max(0, min(SEG, end - mf.file_from_offset))
    return files


def units_of(files: list[MappedFile]) -> list[tuple[int, int, int]]:
    out = []
    for mf in files:
        data = bytes(mf.read(0, mf.wrote_position))
        out += [struct.unpack_from(">qiq", data, p) for p in range(0, len(data), 20)]
    return out


def expected(root: Path) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for r in refcodec.iter_commitlog(root):
        if r.sysFlag & 0xC in (0, COMMIT):
            out[(r.topic, r.queueId)].append((r.commitLogOffset, r.storeSize, r.tagsCode))
    return dict(out)


class Driver:
    """Runs passes by hand, doing what ReputMessageService does at each stop, and counts the
    stops. cq_units: units per ConsumeQueue file; index_num: items per index file (0: no
    index); scan: an undamaged copy of root to check against."""

    def __init__(self, root: Path, work: Path, cq_units: int, index_num: int = 0,
                 scan: Path | None = None) -> None:
        self.segs = segments(root, scan)
        self.work = work
        self.cq_units = cq_units
        self.d = native.Dispatcher(index_num > 0)
        self.index_num = index_num
        self.queues: dict[tuple[str, int], tuple[FakeQueue, list[MappedFile]]] = {}
        self.index_files: list[IndexFile] = []
        self.stops: Counter[int] = Counter()
        self.by_offset = {r.commitLogOffset: r for r in refcodec.iter_commitlog(scan or root)}

    def cq_file(self, key: tuple[str, int], n: int) -> MappedFile:
        """A queue's next file, with its blocks on disk (as ConsumeQueue.put_units gives)."""
        size = self.cq_units * 20
        mf = MappedFile(self.work / f"{key[0]}-{key[1]}-{n}", size, file_from_offset=n * size)
        mf.allocate_to(size)
        return mf

    def run(self, max_records: int = 1 << 30) -> None:
        d = self.d
        while True:
            status = d.run(max_records)
            self.stops[status] += 1
            if status in (native.CAUGHT_UP, native.CORRUPT):
                return
            if status == native.NO_FILE:
                nxt = [mf for mf in self.segs if mf.file_from_offset <= d.offset
                       < mf.file_from_offset + SEG]
                if not nxt:
                    return
                d.set_file(nxt[0], d.offset - nxt[0].file_from_offset)
            elif status == native.NEED_QUEUE:
                raw, qid, phy, size, tags, qoff = d.stop_record()
                rec = self.by_offset[d.offset]
                assert (raw.decode(), qid, phy, size, tags, qoff) == (
                    rec.topic, rec.queueId, rec.commitLogOffset, rec.storeSize, rec.tagsCode,
                    rec.queueOffset)
                key = (raw.decode(), qid)
                if key not in self.queues:
                    self.queues[key] = (FakeQueue(), [self.cq_file(key, 0)])
                elif qoff * 20 < len(self.queues[key][1]) * self.cq_units * 20:
                    # a unit past the queue's end in its last file: a gap, which Python
                    # judges (ConsumeQueue.put_units); here it is allowed
                    last = self.queues[key][1][-1]
                    write_units(last, np.array([phy], np.int64), np.array([size], np.int32),
                                np.array([tags], np.int64), np.array([qoff], np.int64), 0,
                                d.queue_max_phy(raw, qid, -1), True)
                    d.add_queue(raw, qid, self.queues[key][0], last, phy + size)
                    continue
                else:           # its last file is full: the next one
                    files = self.queues[key][1]
                    files.append(self.cq_file(key, len(files)))
                cq, files = self.queues[key]
                d.add_queue(raw, qid, cq, files[-1], d.queue_max_phy(raw, qid, -1))
            elif status == native.NEED_INDEX:
                n = len(self.index_files)
                self.index_files.append(IndexFile.create(self.work / f"index-{n}", 8,
                                                         self.index_num))
                d.set_index(self.index_files[-1], d.key_start, d.key_start_phy)
            else:
                assert status == native.LIMIT

    def units(self) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
        return {k: units_of(files) for k, (_, files) in self.queues.items()}


@pytest.mark.parametrize("cq_units", [1000, 5, 1])
def test_pass_writes_the_independent_scans_units(written: Path, tmp_path: Path,
                                                 cq_units: int) -> None:
    drv = Driver(written, tmp_path, cq_units)
    drv.d.set_file(drv.segs[0], 0)
    drv.run()
    records = list(refcodec.iter_commitlog(written))
    want = expected(written)
    assert drv.units() == want
    assert drv.d.records == len(records)
    assert drv.d.offset == records[-1].commitLogOffset + records[-1].storeSize
    assert drv.d.last_store_timestamp == records[-1].storeTimestamp
    # a stop per new queue and per full file; one per CommitLog file change
    rolls = sum((len(u) - 1) // cq_units for u in want.values())
    assert drv.stops[native.NEED_QUEUE] == len(want) + rolls
    assert drv.stops[native.NO_FILE] == len(drv.segs) - 1
    assert drv.stops[native.CAUGHT_UP] == 1
    # clear() writes each queue's max physical offset back and releases the files
    drv.d.clear()
    for key, (cq, _) in drv.queues.items():
        assert cq.max_physic_offset == want[key][-1][0] + want[key][-1][1]
    assert drv.d.file is None and drv.d.queue_count == 0


def test_a_unit_past_the_blocks_on_disk_waits_for_them(written: Path, tmp_path: Path) -> None:
    """A ConsumeQueue file without blocks where the next unit goes stops the pass (as a full
    file does) instead of writing into a page the disk may have no room for."""
    drv = Driver(written, tmp_path, 1000)
    d = drv.d
    d.set_file(drv.segs[0], 0)
    assert d.run() == native.NEED_QUEUE
    raw, qid = d.stop_record()[:2]
    mf = MappedFile(tmp_path / "sparse-cq", 1000 * 20, file_from_offset=0,
                    allocation_chunk=4096)
    assert mf.allocated_position == 0
    d.add_queue(raw, qid, FakeQueue(), mf, -1)
    assert d.run() == native.NEED_QUEUE and d.stop_record()[:2] == (raw, qid)
    assert mf.wrote_position == 0 and d.records == 0
    assert mf.allocate_to(20) == 4096           # a chunk, page-rounded
    status = d.run()
    assert 0 < mf.wrote_position <= mf.allocated_position == 4096 and d.records > 0
    if status == native.NEED_QUEUE and d.stop_record()[:2] == (raw, qid):
        assert mf.wrote_position == 4096 - 4096 % 20     # stopped at its blocks' end
    d.clear()
    mf.close()


@pytest.mark.parametrize("remember_max_phy", [True, False])
def test_redispatch_changes_nothing(written: Path, tmp_path: Path,
                                   remember_max_phy: bool) -> None:
    drv = Driver(written, tmp_path, 7)
    drv.d.set_file(drv.segs[0], 0)
    drv.run()
    before = {k: [bytes(mf.read(0, mf.file_size)) for mf in files]
              for k, (_, files) in drv.queues.items()}
    records = list(refcodec.iter_commitlog(written))
    for start in (0, records[len(records) // 2].commitLogOffset, records[-1].commitLogOffset):
        drv.d.clear()
        for (topic, qid), (cq, files) in drv.queues.items():
            drv.d.add_queue(topic.encode(), qid, cq, files[-1],
                            cq.max_physic_offset if remember_max_phy else -1)
        seen = drv.d.records
        drv.d.set_offset(start)
        assert drv.d.offset == start and drv.d.file is None
        drv.run()
        assert drv.d.records - seen == sum(1 for r in records if r.commitLogOffset >= start)
        after = {k: [bytes(mf.read(0, mf.file_size)) for mf in files]
                 for k, (_, files) in drv.queues.items()}
        assert after == before


def test_index_items_across_full_files(written: Path, tmp_path: Path) -> None:
    """Eight-item index files (seven keys each): a record's keys split over two files; every
    non-rolled-back record's keys are in, once, in log order."""
    drv = Driver(written, tmp_path, 1000, index_num=8)
    drv.d.set_file(drv.segs[0], 0)
    drv.run()
    items = []
    for f in drv.index_files:
        assert 1 <= f.index_count <= 8
        items += [f.read_item(n)[:2] for n in range(1, f.index_count)]
    want = []
    for mf in drv.segs:
        pos = 0
        for r in refcodec.iter_commitlog(written):
            if not mf.file_from_offset <= r.commitLogOffset < mf.file_from_offset + SEG:
                continue
            pos = r.commitLogOffset - mf.file_from_offset
            if r.sysFlag & 0xC != ROLLBACK:
                want += [(h, r.commitLogOffset) for h in record_index_key_hashes(mf, pos)]
    assert items == want
    assert drv.stops[native.NEED_INDEX] == len(drv.index_files) == -(-len(want) // 7)
    # every key of the first record is found by lookup
    first = next(refcodec.iter_commitlog(written))
    for key in first.keys.split(" ") + [first.uniqKey]:
        found = [o for f in drv.index_files
                 for o in f.select_phy_offsets(f"{first.topic}#{key}", 32, 0, 2**62)]
        assert first.commitLogOffset in found


def test_limit_and_skipped_queues(written: Path, tmp_path: Path) -> None:
    records = list(refcodec.iter_commitlog(written))
    d = native.Dispatcher(False)
    for topic in ("alpha", "beta"):
        for qid in range(3):
            d.add_queue(topic.encode(), qid, None, None, -1)     # no ConsumeQueue: no unit
    seg0 = segments(written)[0]
    d.set_file(seg0, 0)
    assert d.run(3) == native.LIMIT
    assert d.offset == records[3].commitLogOffset and d.records == 3
    assert d.run() == native.NO_FILE            # the END_FILE blank, without a stop before
    in_first = [r for r in records if r.commitLogOffset < SEG]
    assert d.records == len(in_first)
    assert d.touched() == []                    # skipped queues get no units
    with pytest.raises(ValueError, match="max_records"):
        d.run(0)


def test_corrupt_record_stops_until_moved_past(written: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(written, root)
    records = list(refcodec.iter_commitlog(written))
    bad = records[10]
    seg = helpers.segment_paths(root)[0]
    with open(seg, "r+b") as f:                 # the magic code of record 10
        f.seek(bad.commitLogOffset + 4)
        f.write(b"\xde\xad\xbe\xef")
    drv = Driver(root, tmp_path, 1000, scan=written)
    drv.d.set_file(drv.segs[0], 0)
    drv.run()
    assert drv.d.offset == bad.commitLogOffset and drv.d.records == 10
    assert drv.d.last_stop == native.CORRUPT
    assert drv.d.stop_reason
    assert drv.d.run() == native.CORRUPT and drv.d.offset == bad.commitLogOffset
    # moved past it (as an operator would), the rest is dispatched
    drv.d.set_offset(records[11].commitLogOffset)
    drv.run()
    assert drv.d.records == len(records) - 1
    # its queue keeps position = queue offset * 20: a blank unit where it would be
    blank = (0, 0x7FFFFFFF, 0)
    want = {k: [blank if u[0] == bad.commitLogOffset else u for u in v]
            for k, v in expected(written).items()}
    assert drv.units() == want


def test_bad_arguments_are_refused(written: Path, tmp_path: Path) -> None:
    d = native.Dispatcher()
    seg0 = segments(written)[0]
    with pytest.raises(ValueError, match="offset"):
        d.set_offset(-1)
    with pytest.raises(ValueError, match="offset"):
        d.request_offset(-5)
    with pytest.raises(ValueError, match="position"):
        d.set_file(seg0, SEG + 1)
    with pytest.raises(ValueError, match="topic"):
        d.add_queue(b"t" * 128, 0, None, None, -1)
    with pytest.raises(ValueError, match="last file"):
        d.add_queue(b"t", 0, FakeQueue(), None, -1)
    with pytest.raises(PermissionError):
        d.add_queue(b"t", 0, FakeQueue(), seg0, -1)          # a read-only file
    with pytest.raises(ValueError, match="interval"):
        d.follow(0, StopFlag(), lambda status: True)
    assert d.offset == 0 and d.queue_count == 0


def test_follow_in_a_thread_takes_requested_offsets(written: Path, tmp_path: Path) -> None:
    drv = Driver(written, tmp_path, 1000)
    d = drv.d
    total = sum(1 for _ in refcodec.iter_commitlog(written))
    stop = StopFlag()
    handled: list[int] = []

    def handler(status: int) -> bool:
        handled.append(status)
        d.take_request()
        if status == native.NO_FILE:
            nxt = [mf for mf in drv.segs
                   if mf.file_from_offset <= d.offset < mf.file_from_offset + SEG]
            if not nxt:
                return False
            d.set_file(nxt[0], d.offset - nxt[0].file_from_offset)
            return True
        if status == native.NEED_QUEUE:
            raw, qid = d.stop_record()[:2]
            key = (raw.decode(), qid)
            drv.queues.setdefault(key, (FakeQueue(), [drv.cq_file(key, 0)]))
            d.add_queue(raw, qid, drv.queues[key][0], drv.queues[key][1][-1], -1)
            return True
        return status == native.LIMIT

    def wait_for(records: int) -> None:
        deadline = time.monotonic() + 20
        while d.records < records:
            assert time.monotonic() < deadline, (d.records, records)
            time.sleep(0.005)

    t = threading.Thread(target=d.follow, args=(0.001, stop, handler, 50))
    t.start()
    try:
        wait_for(total)
        d.request_offset(0)
        wait_for(2 * total)
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
    assert d.records == 2 * total
    assert drv.units() == expected(written)
    assert native.LIMIT not in handled          # a LIMIT stop goes on without the GIL


@pytest.mark.slow
def test_store_with_tiny_queue_and_index_files(tmp_path: Path) -> None:
    """Five units per ConsumeQueue file and 20 items per index file: the service rolls both
    every few records while producers write; units and key lookups are exact."""
    root = tmp_path / "s"
    with helpers.open_store(root, mapped_file_size_commit_log=SEG,
                            mapped_file_size_consume_queue=5 * 20,
                            max_hash_slot_num=8, max_index_num=20) as store:
        fill(store, random.Random(3), 400)
        assert store.wait_dispatched()
        assert store_units(store) == expected_units(root)
        assert len(store.index_service.files) > 20
        by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        for r in refcodec.iter_commitlog(root):
            if r.sysFlag & 0xC != ROLLBACK:
                for key in (r.keys or "").split(" ") + [r.uniqKey]:
                    if key:
                        by_key[(r.topic, key)].append(r.commitLogOffset)
        for (topic, key), offsets in list(by_key.items())[::5]:
            got = store.query_message(topic, key, max_num=64).messages
            assert sorted(m.commitlog_offset for m in got) == sorted(set(offsets))[:64]


def test_listeners_and_extra_dispatchers(tmp_path: Path) -> None:
    heard: list[tuple[str, int, int]] = []
    batches: list[tuple[int, ...]] = []

    def failing(topic: str, queue_id: int, next_offset: int) -> None:
        raise RuntimeError("a listener that fails")

    with helpers.open_store(tmp_path / "s") as store:
        store.reput.add_arrival_listener(failing)
        store.reput.add_arrival_listener(lambda *a: heard.append(a))
        store.reput.add_dispatcher(lambda b: batches.append(tuple(b.phy_offsets.tolist())))
        results = [store.put_message(Message("t", b"x" * 100), i % 2) for i in range(400)]
        assert store.wait_dispatched()
        deadline = time.monotonic() + 10

        def heard_up_to() -> dict[int, int]:
            return {qid: max((h[2] for h in list(heard) if h[1] == qid), default=0)
                    for qid in (0, 1)}

        while heard_up_to() != {0: 200, 1: 200} and time.monotonic() < deadline:
            time.sleep(0.005)
    last: dict[int, int] = {}
    for topic, qid, next_offset in heard:
        assert topic == "t" and next_offset > last.get(qid, 0)
        last[qid] = next_offset
    assert last == {0: 200, 1: 200}
    assert [o for b in batches for o in b] == [r.commitlog_offset for r in results]
