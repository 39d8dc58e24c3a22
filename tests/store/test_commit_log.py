"""CommitLog over MappedFileQueue: rolling with END_FILE blanks, finding, reopening, loading
checks, truncation, batches across files and records too large for a file."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
import refcodec
from helpers import SEG, open_store, segment_paths

from rocketstore import Message, MessageStore, PutMessageStatus
from rocketstore.store.layout import StoreFormatError, segment_name
from rocketstore.store.mapped_file_queue import MappedFileQueue

BLANK = struct.Struct(">iI")


def _walk_segment(data: bytes, base: int) -> tuple[list[refcodec.RefRecord], int]:
    """Records of one segment (reference decoder) and the position where they end."""
    pos, out = 0, []
    while pos + 8 <= len(data):
        size, magic = BLANK.unpack_from(data, pos)
        if magic != refcodec.MESSAGE_MAGIC:
            break
        rec = refcodec.decode_record(data, pos)
        assert rec.commitLogOffset == base + pos
        out.append(rec)
        pos += size
    return out, pos


def _fill(store: MessageStore, n: int, seed: int = 1) -> list:
    rng = random.Random(seed)
    results = []
    for i in range(n):
        body = rng.randbytes(rng.randint(0, 3000))
        msg = Message("roll", body, tags=f"t{i % 3}", keys=[f"k{i}"], properties={"i": str(i)})
        r = store.put_message(msg, i % 2)
        assert r.ok, r
        results.append(r)
    return results


def _check_segments(root: Path, results: list) -> None:
    """Every record where its result says; each segment ends with a correct END_FILE blank."""
    paths = segment_paths(root)
    assert [p.name for p in paths] == [segment_name(i * SEG) for i in range(len(paths))]
    assert all(p.stat().st_size == SEG for p in paths)
    found = []
    for i, p in enumerate(paths):
        data = p.read_bytes()
        recs, end = _walk_segment(data, i * SEG)
        found.extend(recs)
        if i < len(paths) - 1:
            remaining, magic = BLANK.unpack_from(data, end)
            assert magic == refcodec.BLANK_MAGIC == 0xCBD43194, p.name
            assert remaining == SEG - end, p.name
            # the blank is there because the next record (plus 8) did not fit
            nxt = [r for r in results if r.commitlog_offset == (i + 1) * SEG]
            assert nxt, f"no record at the start of segment {i + 1}"
            assert end + nxt[0].wrote_bytes + 8 > SEG
        else:
            assert data[end : end + 8] == bytes(8)
    assert [r.commitLogOffset for r in found] == [r.commitlog_offset for r in results]
    assert [r.storeSize for r in found] == [r.wrote_bytes for r in results]


def test_rollover_with_end_file_blanks(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        results = _fill(store, 160)
        assert store.get_max_phy_offset() == results[-1].commitlog_offset + results[-1].wrote_bytes
        assert store.get_min_phy_offset() == 0
        for prev, cur in zip(results, results[1:], strict=False):
            nxt = prev.commitlog_offset + prev.wrote_bytes
            assert cur.commitlog_offset == nxt or (
                cur.commitlog_offset % SEG == 0 and cur.commitlog_offset > prev.commitlog_offset
            )
        n_files = len(store.commit_log.queue.files)
    assert n_files >= 4
    _check_segments(tmp_path, results)


def test_find_by_offset_and_reads(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        results = _fill(store, 100, seed=2)
        queue = store.commit_log.queue
        for r in results:
            mf = queue.find_by_offset(r.commitlog_offset)
            assert mf is not None
            assert mf.file_from_offset == r.commitlog_offset - r.commitlog_offset % SEG
            raw = bytes(store.commit_log.get_message(r.commitlog_offset, r.wrote_bytes))
            rec = refcodec.decode_record(raw)
            assert rec.commitLogOffset == r.commitlog_offset
            m = store.look_message_by_offset(r.commitlog_offset)
            assert m is not None and bytes(m.record) == raw and m.msg_id == r.msg_id
        end = store.get_max_phy_offset()
        assert queue.find_by_offset(-1) is None
        assert queue.find_by_offset(len(queue.files) * SEG) is None
        assert queue.find_by_offset(10 * 2**40) is None
        assert queue.find_by_offset(10 * 2**40, True) is queue.files[0]
        assert store.look_message_by_offset(end) is None
        assert store.commit_log.get_message(end, 10) is None
        # a read running past what was written is refused, not padded
        last = results[-1]
        assert store.commit_log.get_message(last.commitlog_offset, last.wrote_bytes + 1) is None
        with pytest.raises(ValueError):
            store.look_message_by_offset(-1)
        # scan from any record boundary yields the suffix, in order
        k = 37
        suffix = [m.commitlog_offset for m in store.scan(results[k].commitlog_offset)]
        assert suffix == [r.commitlog_offset for r in results[k:]]


def test_reopen_reads_everything_and_continues(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        results = _fill(store, 120, seed=3)
        before = [m.to_dict() for m in store.scan(check_crc=True)]
        next_q = [store.next_queue_offset("roll", q) for q in (0, 1)]
        end = store.get_max_phy_offset()
    assert next_q == [60, 60]
    with open_store(tmp_path) as store:
        assert store.recovery is not None and not store.recovery.abnormal
        assert store.get_max_phy_offset() == end
        assert [m.to_dict() for m in store.scan(check_crc=True)] == before
        assert [store.next_queue_offset("roll", q) for q in (0, 1)] == next_q
        r = store.put_message(Message("roll", b"after reopen"), 1)
        assert r.ok and r.queue_offset == 60 and r.commitlog_offset >= end
        r2 = store.put_messages([Message("roll", b"a"), Message("roll", b"b")], [0, 0])
        assert r2.ok and list(r2.queue_offsets) == [60, 61]
        assert r2.commitlog_offsets[0] == r.commitlog_offset + r.wrote_bytes
    with open_store(tmp_path, read_only=True) as store:
        got = list(store.scan(check_crc=True))
        assert len(got) == len(results) + 3
        assert bytes(got[-3].body) == b"after reopen"
    _check_segments(tmp_path, [*results, r, *r2])


# ---------------------------------------------------------------------------- loading


def _make_segments(d: Path, starts: list[int], size: int = SEG) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for s in starts:
        (d / segment_name(s)).write_bytes(bytes(size))


def test_load_in_order_and_ignores_hidden(tmp_path: Path) -> None:
    d = tmp_path / "commitlog"
    _make_segments(d, [2 * SEG, 0, SEG])
    (d / ".nfs0001").write_bytes(b"x")
    (d / "subdir").mkdir()
    q = MappedFileQueue(d, SEG)
    q.load()
    try:
        assert [mf.file_from_offset for mf in q.files] == [0, SEG, 2 * SEG]
        assert q.min_offset() == 0
    finally:
        q.close()


def test_load_missing_directory(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path / "nope", SEG, read_only=True)
    q.load()
    assert q.files == [] and q.max_offset() == 0
    q2 = MappedFileQueue(tmp_path / "made", SEG)
    q2.load()
    assert (tmp_path / "made").is_dir() and q2.files == []


@pytest.mark.parametrize("case", ["foreign", "short_name", "too_long", "misaligned"])
def test_load_rejects_bad_sequences(tmp_path: Path, case: str) -> None:
    """Files that are not segments of this queue at all refuse the store, naming them."""
    d = tmp_path / "commitlog"
    _make_segments(d, [0, SEG])
    if case == "foreign":
        (d / "notes.txt").write_text("hello")
        culprit = "notes.txt"
    elif case == "short_name":
        (d / "131072").write_bytes(bytes(SEG))
        culprit = "131072"
    elif case == "too_long":
        (d / segment_name(SEG)).write_bytes(bytes(SEG + 1))
        culprit = segment_name(SEG)
    else:
        (d / segment_name(2 * SEG + 1)).write_bytes(bytes(SEG))
        culprit = segment_name(2 * SEG + 1)
    q = MappedFileQueue(d, SEG)
    with pytest.raises(StoreFormatError, match=culprit):
        q.load()
    assert issubclass(StoreFormatError, ValueError)
    # the store refuses to open it the same way, and releases its lock for a retry
    with pytest.raises(StoreFormatError, match=culprit):
        open_store(tmp_path)
    if case in ("foreign", "short_name", "misaligned"):
        os.remove(d / culprit)
    else:
        (d / culprit).write_bytes(bytes(SEG))
    with open_store(tmp_path) as store:
        assert store.get_max_phy_offset() == 0


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("case", ["gap", "short", "empty_file"])
def test_load_takes_damaged_sequences(tmp_path: Path, case: str, read_only: bool) -> None:
    """Segments cut short, empty or missing are damage, not a reason to refuse the store:
    a writer extends a short file to its size with zeros, a reader maps what is there; each
    is named in `problems` (and logged at ERROR)."""
    d = tmp_path / "commitlog"
    _make_segments(d, [0, SEG])
    if case == "gap":
        _make_segments(d, [3 * SEG])
        culprit = f"[{2 * SEG}, {3 * SEG})"
    elif case == "short":
        (d / segment_name(SEG)).write_bytes(bytes(SEG - 100))
        culprit = segment_name(SEG)
    else:
        (d / segment_name(2 * SEG)).write_bytes(b"")
        culprit = segment_name(2 * SEG)
    q = MappedFileQueue(d, SEG, read_only=read_only)
    q.load()
    try:
        assert len(q.problems) == 1 and culprit in q.problems[0]
        if case == "short":
            assert q.files[1].file_size == (SEG - 100 if read_only else SEG)
            assert (d / culprit).stat().st_size == (SEG - 100 if read_only else SEG)
            assert q.find_by_offset(2 * SEG - 50) is (None if read_only else q.files[1])
        if case == "gap":
            assert [mf.file_from_offset for mf in q.files] == [0, SEG, 3 * SEG]
            assert q.find_by_offset(3 * SEG + 5) is q.files[2]
            assert q.find_by_offset(2 * SEG + 5) is None
        if case == "empty_file" and read_only:
            assert [mf.file_from_offset for mf in q.files] == [0, SEG]
    finally:
        q.close()


def test_existing_store_opens_with_its_own_segment_size(tmp_path: Path) -> None:
    """A config whose segment size differs from the files' (or no config at all) opens the
    store as it was written: file sizes cannot change under an existing store."""
    with open_store(tmp_path) as store:
        _fill(store, 5)
        end = store.get_max_phy_offset()
    with open_store(tmp_path, mapped_file_size_commit_log=2 * SEG) as store:
        assert store.config.mapped_file_size_commit_log == SEG
        assert store.get_max_phy_offset() == end
    with MessageStore.open(tmp_path) as store:
        assert store.config.mapped_file_size_commit_log == SEG
        assert store.get_max_phy_offset() == end
        assert store.put_message(Message("t", b"x"), 0).status == PutMessageStatus.PUT_OK
    assert {os.path.getsize(p) for p in segment_paths(tmp_path)} == {SEG}


# ---------------------------------------------------------------------------- truncation


def _filled_queue(d: Path, n_files: int = 3) -> MappedFileQueue:
    q = MappedFileQueue(d, SEG)
    q.load()
    for i in range(n_files):
        mf = q.last_file_for_append(0)
        assert mf.file_from_offset == i * SEG
        assert mf.append(bytes([i + 1]) * SEG)
    assert q.max_offset() == n_files * SEG
    return q


@pytest.mark.parametrize("zero_tail", [True, False])
def test_truncate_dirty(tmp_path: Path, zero_tail: bool) -> None:
    d = tmp_path / "commitlog"
    q = _filled_queue(d)
    cut = SEG + 1000
    dropped = q.truncate_dirty(cut, zero_tail=zero_tail)
    assert dropped == (SEG - 1000 if zero_tail else 0) + SEG
    assert [mf.file_from_offset for mf in q.files] == [0, SEG]
    assert not (d / segment_name(2 * SEG)).exists()
    assert q.max_offset() == cut
    mid = q.files[1]
    assert mid.wrote_position == 1000 and mid.committed_position == 1000
    assert mid.flushed_position <= 1000
    assert mid.read(0, 1000) == b"\x02" * 1000
    assert mid.read(1000, SEG - 1000) == (
        bytes(SEG - 1000) if zero_tail else b"\x02" * (SEG - 1000)
    )
    assert q.files[0].read(0, SEG) == b"\x01" * SEG
    # appending continues at the cut
    assert q.last_file_for_append(0) is mid
    assert mid.append(b"new")
    assert q.max_offset() == cut + 3
    q.close()


def test_truncate_at_file_boundary_and_to_zero(tmp_path: Path) -> None:
    q = _filled_queue(tmp_path / "cl")
    q.truncate_dirty(2 * SEG)
    assert q.max_offset() == 2 * SEG
    assert all(mf.file_from_offset < 2 * SEG or mf.wrote_position == 0 for mf in q.files)
    q.truncate_dirty(0)
    assert q.max_offset() == 0
    assert q.files[0].read(0, 16) == bytes(16)
    q.close()


def test_truncated_store_reopens_clean(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        results = _fill(store, 90, seed=4)
        k = 50
        cut = results[k].commitlog_offset
        dropped = store.commit_log.queue.truncate_dirty(cut)
        assert dropped > 0
        assert store.get_max_phy_offset() == cut
        assert [m.commitlog_offset for m in store.scan(check_crc=True)] == [
            r.commitlog_offset for r in results[:k]
        ]
    with open_store(tmp_path) as store:
        assert store.get_max_phy_offset() == cut
        got = [m.commitlog_offset for m in store.scan(check_crc=True)]
        assert got == [r.commitlog_offset for r in results[:k]]


# ---------------------------------------------------------------------------- batches and sizes


def test_batch_spanning_files(tmp_path: Path) -> None:
    rng = random.Random(5)
    with open_store(tmp_path) as store:
        lead = store.put_message(Message("batch", b"x" * 1000), 0)
        msgs = [
            Message("batch", rng.randbytes(rng.randint(1500, 3500)), keys=[f"b{i}"])
            for i in range(80)
        ]
        res = store.put_messages(msgs, 0)
        assert res.ok and res.count == res.stored == 80
        offs = res.commitlog_offsets.tolist()
        assert len({o // SEG for o in offs}) >= 3  # really spans several files
        assert res.queue_offsets.tolist() == list(range(1, 81))
        assert offs[0] == lead.commitlog_offset + lead.wrote_bytes
        assert res.wrote_bytes == int(res.sizes.sum())
        for i, (r, msg) in enumerate(zip(res, msgs, strict=True)):
            m = store.look_message_by_offset(r.commitlog_offset)
            assert m is not None and bytes(m.body) == msg.body and m.keys == [f"b{i}"]
            assert r.msg_id == m.msg_id and r.queue_offset == i + 1
            assert r.wrote_bytes == m.store_size
        assert store.next_queue_offset("batch", 0) == 81
    _check_segments(tmp_path, [lead, *res])


def _sized_message(topic: str, total: int) -> Message:
    """A message whose record is exactly `total` bytes (IPv4 hosts, UNIQ_KEY 'U1')."""
    fixed = 91 + len(topic) + len("UNIQ_KEY\x01U1")
    return Message(topic, b"b" * (total - fixed), uniq_key="U1")


def test_record_filling_a_file_exactly(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        first = store.put_message(_sized_message("fit", 1000))
        assert first.ok and first.wrote_bytes == 1000
        # a record leaving exactly 8 bytes for the END_FILE blank goes in this file
        exact = store.put_message(_sized_message("fit", SEG - 1000 - 8))
        assert exact.ok and exact.commitlog_offset == 1000
        nxt = store.put_message(_sized_message("fit", 200))
        assert nxt.ok and nxt.commitlog_offset == SEG
        # one byte more does not: blank, then the next file
        over = store.put_message(_sized_message("fit", SEG - 200 - 8 + 1))
        assert over.ok and over.commitlog_offset == 2 * SEG
        # a record of the largest size a file can hold, alone in a file
        biggest = store.put_message(_sized_message("fit", SEG - 8))
        assert biggest.ok and biggest.commitlog_offset == 3 * SEG
    segs = [p.read_bytes() for p in segment_paths(tmp_path)]
    assert BLANK.unpack_from(segs[0], SEG - 8) == (8, refcodec.BLANK_MAGIC)
    assert BLANK.unpack_from(segs[1], 200) == (SEG - 200, refcodec.BLANK_MAGIC)
    assert BLANK.unpack_from(segs[2], SEG - 200 - 8 + 1) == (200 + 8 - 1, refcodec.BLANK_MAGIC)


def test_message_too_large_for_a_file(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.put_message(Message("big", b"small"))
        end = store.get_max_phy_offset()
        n_files = len(store.commit_log.queue.files)
        too_big = _sized_message("big", SEG - 8 + 1)
        r = store.put_message(too_big)
        assert r.status == PutMessageStatus.MESSAGE_ILLEGAL and not r.ok
        assert r.msg_id is None
        assert store.get_max_phy_offset() == end
        assert len(store.commit_log.queue.files) == n_files
        res = store.put_messages([Message("big", b"ok"), _sized_message("big", SEG)], 0)
        assert res.status == PutMessageStatus.MESSAGE_ILLEGAL and res.stored == 0
        assert store.get_max_phy_offset() == end
        assert store.next_queue_offset("big", 0) == 1
        assert len(list(store.scan(check_crc=True))) == 1
        # the store still works
        assert store.put_message(Message("big", b"again")).queue_offset == 1


# ---------------------------------------------------------------------------- recovery's end


def _store_with_corrupt_record(root: Path) -> list:
    """Four segments of records; record 5's body damaged (CRC mismatch); abort file present
    (abnormal recovery validates from the first segment)."""
    with open_store(root) as store:
        results = [store.put_message(Message("T", b"x" * 3000), 0) for _ in range(70)]
    assert len(segment_paths(root)) == 4
    seg0 = segment_paths(root)[0]
    data = bytearray(seg0.read_bytes())
    data[results[5].commitlog_offset + 100] ^= 1
    seg0.write_bytes(bytes(data))
    (root / "abort").write_bytes(b"")
    return results


def test_writer_open_keeps_the_records_after_damage(tmp_path: Path) -> None:
    """A damaged record in the middle of the log is damage, not the end: the writable open
    keeps every other record (before and after it), marks its bytes unreadable, and appends
    at the log's real end."""
    results = _store_with_corrupt_record(tmp_path)
    bad, after = results[5].commitlog_offset, results[6].commitlog_offset
    end = results[-1].commitlog_offset + results[-1].wrote_bytes
    with open_store(tmp_path) as store:
        rep = store.recovery
        assert rep.abnormal and rep.stop_status == "end" and rep.truncated_bytes == 0
        assert rep.end_offset == end == store.get_max_phy_offset()
        assert [(d["start"], d["end"]) for d in rep.damaged_ranges] == [(bad, after)]
        assert "CRC" in rep.damaged_ranges[0]["reason"]
        assert store.look_message_by_offset(results[60].commitlog_offset) is not None
        assert store.look_message_by_offset(bad) is None
        assert [m.commitlog_offset for m in store.scan(check_crc=True)] == [
            r.commitlog_offset for i, r in enumerate(results) if i != 5
        ]
        r = store.put_message(Message("T", b"next"), 0)
        assert r.commitlog_offset == end and r.queue_offset == 70


def test_read_only_open_keeps_the_records_after_damage(tmp_path: Path) -> None:
    results = _store_with_corrupt_record(tmp_path)
    bad = results[5].commitlog_offset
    end = results[-1].commitlog_offset + results[-1].wrote_bytes
    before = [p.read_bytes() for p in segment_paths(tmp_path)]
    with open_store(tmp_path, read_only=True) as store:
        assert store.recovery.end_offset == end == store.get_max_phy_offset()
        assert [d["start"] for d in store.recovery.damaged_ranges] == [bad]
        assert [m.commitlog_offset for m in store.scan(check_crc=True)] == [
            r.commitlog_offset for i, r in enumerate(results) if i != 5
        ]
        assert [p.read_bytes() for p in segment_paths(tmp_path)] == before  # untouched
        assert store.look_message_by_offset(results[60].commitlog_offset) is not None
        assert len(list(store.scan(results[40].commitlog_offset))) == 30


def test_prefault_service_runs_ahead_of_the_writer(tmp_path: Path) -> None:
    """The CommitLogPrefaultService faults pages in ahead of the write position (across
    rolls) while puts go on; every record reads back intact."""
    import time

    from helpers import open_store

    from rocketstore import Message

    s = open_store(tmp_path, mapped_file_size_commit_log=1024 * 1024,
                   commit_log_prefault_ahead=256 * 1024)
    try:
        service = s.commit_log.prefault_service
        assert service is not None and service.is_alive
        bodies = [bytes([i % 251]) * (100 + i % 900) for i in range(3000)]
        for i, body in enumerate(bodies):
            assert s.put_message(Message("pf", body), i % 4).ok
        deadline = time.monotonic() + 5
        while service.prefaulted_to == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.prefaulted_to > 0
        assert len(s.commit_log.queue.files) > 1           # rolled at least once
        assert [m.body for m in s.scan(check_crc=True)] == bodies
    finally:
        s.shutdown()
    assert not service.is_alive


@pytest.mark.parametrize("changes", [{"commit_log_prefault_ahead": 0},
                                     {"transient_store_pool_enable": True,
                                      "transient_store_pool_size": 2},
                                     {"flush_disk_type": "SYNC_FLUSH"}])     # write-through
def test_prefault_service_off(tmp_path: Path, changes: dict) -> None:
    from helpers import open_store

    s = open_store(tmp_path, **changes)
    try:
        assert s.commit_log.prefault_service is None
    finally:
        s.shutdown()
