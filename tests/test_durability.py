"""Durability: torn writes and recovery, group commit and FLUSH_DISK_TIMEOUT, checkpoint and
abort files, the transient store pool, the allocate service, the recovery report.

Torn writes are made on copies of one cleanly written store (``base_store``), whose records are
known from the reference codec (tests/refcodec.py) over the original bytes; recovery must keep
every intact record before the damage and nothing after it, and the ConsumeQueues and the
IndexFile must agree with what is kept. The damage is placed so that it changes bytes that
the record check covers (magic, sizes, physical offset, field lengths, body CRC, and a
NUL-ended properties text, which is how a torn tail reads); damage to the other bytes (the
middle of the properties text, timestamps, queue offset) is undetectable by that check, as in
RocketMQ.

Tests whose docstring says "Regression" reproduce bugs this suite found (they were marked
xfail until 06413a8 fixed them).
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import crash_writer as cw
import pytest
import refcodec

import rocketstore
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import GetMessageStatus, PutMessageStatus
from rocketstore.store.layout import StoreFormatError

TESTS = Path(__file__).resolve().parent
CL = 64 * 1024              # CommitLog segment
CQ = 20 * 50                # ConsumeQueue segment: 50 units
SLOTS = 97
INDEX_NUM = 4000            # large enough that the base store has no full IndexFile
HOST = "10.0.0.7:10911"
N_BASE = 300


def config(root, **changes: Any) -> StoreConfig:
    values: dict[str, Any] = {
        "store_path_root_dir": os.fspath(root),
        "mapped_file_size_commit_log": CL,
        "mapped_file_size_consume_queue": CQ,
        "max_hash_slot_num": SLOTS,
        "max_index_num": INDEX_NUM,
        "store_host": HOST,
    }
    values.update(changes)
    return StoreConfig(**values)


def open_store(root, progress=None, commit_log_flush=None, **changes: Any) -> MessageStore:
    return MessageStore.open(root, config(root, **changes), progress=progress,
                             commit_log_flush=commit_log_flush)


def message(wid: str, seq: int) -> tuple[Message, int, dict[str, Any]]:
    d = cw.derive(wid, 0, seq)
    return cw.make_message(d), d["queue_id"], d


def fill(store: MessageStore, wid: str, n: int) -> list[Any]:
    out = []
    for i in range(n):
        msg, qid, _ = message(wid, i)
        r = store.put_message(msg, qid)
        assert r.status == PutMessageStatus.PUT_OK, r.status
        out.append(r)
    return out


def segments(root) -> list[Path]:
    return sorted((Path(root) / "commitlog").iterdir())


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # the rocketstore this test imported (in CI the installed package, not the source tree)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(rocketstore.__file__).resolve().parents[1]),
                                         str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(TESTS))


def touch_abort(root) -> None:
    Path(root, "abort").touch()


# ---- the base store and damage helpers -----------------------------------------------------

@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> dict[str, Any]:
    """A cleanly shut down ASYNC_FLUSH store: N_BASE messages (2 topics x 4 queues, bodies
    0..8 KiB, keys), about four 64 KiB CommitLog files, several ConsumeQueue files each."""
    root = tmp_path_factory.mktemp("base") / "store"
    with open_store(root) as store:
        for i in range(N_BASE):
            msg, qid, _ = message("base", i)
            assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
            if i % 10 == 9:
                time.sleep(0.003)       # store timestamps differ from file to file
        assert store.wait_dispatched()
    records = list(refcodec.iter_commitlog(root))
    assert len(records) == N_BASE and len(segments(root)) >= 3
    return {"root": root, "records": records,
            "bytes": {p.name: p.read_bytes() for p in segments(root)}}


def copy_store(base: dict[str, Any], dst: Path) -> Path:
    root = dst / "store"
    shutil.copytree(base["root"], root)
    return root


def validated_ranges(rec: refcodec.RefRecord) -> list[tuple[int, int]]:
    """Absolute byte ranges of a record (IPv4 hosts) that the record check covers: TOTALSIZE,
    MAGICCODE, BODYCRC, PHYSICALOFFSET, BODYLENGTH, BODY, TOPICLENGTH, PROPERTIESLENGTH."""
    o, bl, tl = rec.commitLogOffset, rec.bodyLen, len(rec.topic.encode())
    return [(o, o + 12), (o + 28, o + 36), (o + 84, o + 88 + bl),
            (o + 88 + bl, o + 89 + bl), (o + 89 + bl + tl, o + 91 + bl + tl)]


def props_text_range(rec: refcodec.RefRecord) -> tuple[int, int]:
    o, bl, tl = rec.commitLogOffset, rec.bodyLen, len(rec.topic.encode())
    start = o + 91 + bl + tl
    return start, rec.commitLogOffset + rec.storeSize


def record_at(records: list[refcodec.RefRecord], pos: int) -> refcodec.RefRecord | None:
    for r in records:
        if r.commitLogOffset <= pos < r.commitLogOffset + r.storeSize:
            return r
    return None


def write_at(root: Path, offset: int, data: bytes) -> None:
    """Overwrite CommitLog bytes at an absolute offset (across segments, never past one)."""
    while data:
        seg = root / "commitlog" / f"{offset - offset % CL:020d}"
        n = min(len(data), CL - offset % CL)
        with open(seg, "r+b") as f:
            f.seek(offset % CL)
            f.write(data[:n])
        data, offset = data[n:], offset + n


def first_change(base: dict[str, Any], root: Path) -> int | None:
    """Absolute offset of the first CommitLog byte that differs from the base store."""
    for name, old in sorted(base["bytes"].items()):
        new = (root / "commitlog" / name).read_bytes()
        if new != old:
            n = min(len(new), len(old))
            i = next((i for i in range(n) if new[i] != old[i]), n)
            return int(name) + i
    return None


def check_store_matches(store: MessageStore, root: Path, kept: list[refcodec.RefRecord],
                        base: dict[str, Any], *, label: str, check_index: bool = True) -> None:
    """The store holds exactly `kept` (byte for byte), its ConsumeQueues and IndexFile agree."""
    end = kept[-1].commitLogOffset + kept[-1].storeSize if kept else 0
    # CommitLog: native scan and reference decode of the files both give exactly `kept`
    native = list(store.scan(check_crc=True))
    assert [m.commitlog_offset for m in native] == [r.commitLogOffset for r in kept], label
    for m, r in zip(native, kept, strict=True):
        o = r.commitLogOffset
        assert bytes(m.record) == base["bytes"][f"{o - o % CL:020d}"][o % CL:o % CL + r.storeSize]
    ref = list(refcodec.iter_commitlog(root))
    assert [r.commitLogOffset for r in ref] == [r.commitLogOffset for r in kept], label
    # nothing after the end: the rest of the end file is zero, no later file
    last_seg = end - end % CL
    for seg in segments(root):
        assert int(seg.name) <= max(last_seg, 0), f"{label}: {seg.name} after the end {end}"
    seg = root / "commitlog" / f"{last_seg:020d}"
    if seg.exists() and end % CL:
        tail = seg.read_bytes()[end % CL:]
        assert tail.count(0) == len(tail), f"{label}: bytes left after the end {end}"
    # ConsumeQueues: dense, every unit is its kept record
    queues: dict[tuple[str, int], list[refcodec.RefRecord]] = defaultdict(list)
    for r in kept:
        queues[(r.topic, r.queueId)].append(r)
    for topic in cw.TOPICS:
        for qid in range(cw.QUEUES):
            recs = queues.get((topic, qid), [])
            assert [r.queueOffset for r in recs] == list(range(len(recs)))
            assert store.get_max_offset_in_queue(topic, qid) == len(recs), (label, topic, qid)
            assert store.next_queue_offset(topic, qid) == len(recs), (label, topic, qid)
            units = []
            for k in range(len(recs)):
                units.append(store.consume_queues.find(topic, qid).get_unit(k))
            assert units == [(r.commitLogOffset, r.storeSize, r.tagsCode) for r in recs], (
                label, topic, qid)
            qdir = root / "consumequeue" / topic / str(qid)
            if qdir.is_dir():
                assert refcodec.read_consume_queue(qdir) == units, (label, topic, qid)
    # IndexFile: kept keys are found, the dropped ones are not
    kept_offsets = {r.commitLogOffset for r in kept}
    for r in base["records"] if check_index else []:
        for key in [*(r.keys or "").split(), r.uniqKey]:
            found = [m.commitlog_offset for m in store.query_message(r.topic, key, 64).messages]
            if r.commitLogOffset in kept_offsets:
                assert r.commitLogOffset in found, (label, key)
            else:
                assert r.commitLogOffset not in found, (label, key)
                assert all(o in kept_offsets for o in found), (label, key, found)


def put_after_recovery(store: MessageStore, kept: list[refcodec.RefRecord], label: str,
                       *, check_index: bool = True) -> None:
    """New puts get the next queue offsets, are dispatched, and (check_index) indexed."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for r in kept:
        counts[(r.topic, r.queueId)] += 1
    results = []
    for i in range(12):
        msg, qid, d = message("after", i)
        r = store.put_message(msg, qid)
        assert r.status == PutMessageStatus.PUT_OK
        assert r.queue_offset == counts[(d["topic"], qid)], (label, d["topic"], qid)
        counts[(d["topic"], qid)] += 1
        results.append((r, d))
    assert store.wait_dispatched()
    for r, d in results:
        cq = store.consume_queues.find(d["topic"], d["queue_id"])
        assert cq.get_unit(r.queue_offset)[0] == r.commitlog_offset
        if check_index:
            for key in [*d["keys"], d["uniq_key"]]:
                found = store.query_message(d["topic"], key, 64).messages
                assert r.commitlog_offset in [m.commitlog_offset for m in found], (label, key)


# ---- torn writes in the CommitLog ----------------------------------------------------------

MODES = ["zero_tail", "truncate_extend", "zero_hole", "bitflip", "garbage"]


def _damage_commitlog(base: dict[str, Any], root: Path, mode: str, where: str,
                      rng: random.Random) -> None:
    records = base["records"]
    segs = sorted(base["bytes"])
    target = int(segs[-1] if where == "last" else segs[-2])
    in_file = [r for r in records if target <= r.commitLogOffset < target + CL]
    data_end = in_file[-1].commitLogOffset + in_file[-1].storeSize
    if mode in ("zero_tail", "truncate_extend") or (mode == "garbage" and rng.random() < 0.7):
        pos = rng.randrange(target, min(target + CL, data_end + 300))
        rec = record_at(records, pos)
        if rec is not None and mode == "garbage":
            lo, hi = props_text_range(rec)
            if lo <= pos < hi:      # random bytes inside the properties text are not
                pos = lo - 2        # detectable: the PROPERTIESLENGTH field instead
        # (zeros from inside the properties text leave them NUL-ended: read as torn)
    else:
        rec = rng.choice(in_file[len(in_file) // 3:])
        old = base["bytes"][f"{target:020d}"]
        choices = [p for a, b in validated_ranges(rec) for p in range(a, b)
                   if mode != "zero_hole" or old[p - target]]
        pos = rng.choice(choices)
    seg = root / "commitlog" / f"{target:020d}"
    if mode == "zero_tail":
        write_at(root, pos, bytes(target + CL - pos))
    elif mode == "truncate_extend":     # the tail was never written: a sparse hole
        os.truncate(seg, pos - target)
        os.truncate(seg, CL)
    elif mode == "zero_hole":
        write_at(root, pos, bytes(min(rng.randint(1, 400), target + CL - pos)))
    elif mode == "bitflip":
        old = seg.read_bytes()[pos - target]
        write_at(root, pos, bytes([old ^ (1 << rng.randrange(8))]))
    elif mode == "garbage":
        old = seg.read_bytes()
        k = min(rng.randint(1, 300), target + CL - pos)
        junk = bytearray(rng.randbytes(k))
        if junk[0] == old[pos - target]:
            junk[0] ^= 0xFF
        write_at(root, pos, bytes(junk))


# tail damage (zero_tail, truncate_extend) goes to the last file; the others also to the one
# before it, after which everything (the whole last file) must be given up
CASES = [(m, w) for m in MODES for w in ("last", "previous")
         if w == "last" or m not in ("zero_tail", "truncate_extend")]


@pytest.mark.parametrize("abort", [True, False], ids=["abort", "clean"])
@pytest.mark.parametrize("mode,where", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_torn_commitlog(base_store, tmp_path, mode, where, abort, seed):
    rng = random.Random(f"{mode}/{where}/{abort}/{seed}")
    root = copy_store(base_store, tmp_path)
    _damage_commitlog(base_store, root, mode, where, rng)
    if abort:
        touch_abort(root)
    changed = first_change(base_store, root)
    records = base_store["records"]
    kept = [r for r in records
            if changed is None or r.commitLogOffset + r.storeSize <= changed]
    label = f"{mode}/{where}/{'abort' if abort else 'clean'}/{seed} at {changed}"
    with open_store(root) as store:
        rep = store.recovery
        assert rep.abnormal is abort
        end = kept[-1].commitLogOffset + kept[-1].storeSize
        assert rep.end_offset == store.get_max_phy_offset() == end, (label, rep)
        if len(kept) < len(records):
            assert rep.stop_status in ("corrupt", "end"), rep
        check_store_matches(store, root, kept, base_store, label=label)
        # new puts after recovery: next queue offsets, dispatched and indexed
        put_after_recovery(store, kept, label)


def test_torn_commitlog_literal_truncation(base_store, tmp_path):
    """A last CommitLog file cut short (not re-extended): the store refuses it with a
    StoreFormatError naming the file (as RocketMQ's MappedFileQueue.load does) or, if it
    accepts it, keeps exactly the records wholly before the cut. Never a crash."""
    root = copy_store(base_store, tmp_path)
    last = segments(root)[-1]
    cut = len(base_store["bytes"][last.name]) // 3 + 17
    os.truncate(last, cut)
    touch_abort(root)
    try:
        store = open_store(root)
    except StoreFormatError as exc:
        assert last.name in str(exc)
        return
    with store:
        kept = [r for r in base_store["records"]
                if r.commitLogOffset + r.storeSize <= int(last.name) + cut]
        check_store_matches(store, root, kept, base_store, label="literal truncation")


@pytest.mark.parametrize("abort", [True, False], ids=["abort", "clean"])
def test_torn_properties_tail_not_kept(base_store, tmp_path, abort):
    """Regression: a record torn inside its properties text (the writer wrote TOTALSIZE and
    MAGICCODE first; a SIGKILL while copying the properties left it with NULs for the rest of
    its properties, and recovery kept it) (found by this suite, fixed in 06413a8). Recovery must drop it."""
    root = copy_store(base_store, tmp_path)
    last = base_store["records"][-1]
    end = last.commitLogOffset + last.storeSize
    write_at(root, end - 5, bytes(5))       # the last 5 bytes of its properties text
    if abort:
        touch_abort(root)
    with open_store(root) as store:
        got = store.look_message_by_offset(last.commitLogOffset)
        assert got is None, f"torn record kept: properties {got.properties_string!r}"
        assert store.get_max_phy_offset() == last.commitLogOffset


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort-full-index-file"])
def test_index_truncated_with_commitlog_tail(tmp_path, abort):
    """Regression: recovery did not truncate the IndexFile at the recovered CommitLog end, so
    items of records given up stayed and new records below the stale endPhyOffset were never
    indexed (found by this suite, fixed in 06413a8)."""
    root = tmp_path / "store"
    with open_store(root, max_index_num=50) as store:      # 49 items per IndexFile
        results = fill(store, "idx", 100)
        assert store.wait_dispatched()
    # records 20.. are given up: the first full IndexFile (kept after a crash: its
    # endTimestamp is at or before the checkpoint's indexMsgTimestamp) holds some of them
    cut = results[20].commitlog_offset
    last = results[-1]
    write_at(root, cut, bytes(last.commitlog_offset + last.wrote_bytes - cut))
    if abort:
        touch_abort(root)
    with open_store(root, max_index_num=50) as store:
        assert store.get_max_phy_offset() == cut
        dropped = [message("idx", i)[2] for i in range(20, 100)]
        for d in dropped:
            raw = store.index_service.query_offsets(d["topic"], d["uniq_key"], 64, 0, 2**62)
            assert raw == [], f"stale index item for a dropped record: {raw}"
        put_after_recovery(store, list(refcodec.iter_commitlog(root)), "after index cut")


def test_zero_header_index_file_after_crash(tmp_path):
    """Regression: an IndexFile created (renamed in) but killed before its header was written
    was kept after the crash with endPhyOffset 0, and the replay indexed every record again
    into it: duplicated index items (found by this suite, fixed in 06413a8)."""
    root = tmp_path / "store"
    with open_store(root, max_index_num=60) as store:
        results = fill(store, "zh", 80)
    names = sorted(p.name for p in (root / "index").iterdir())
    size = (root / "index" / names[-1]).stat().st_size
    (root / "index" / str(int(names[-1]) + 1)).write_bytes(bytes(size))    # header never written
    touch_abort(root)
    with open_store(root, max_index_num=60) as store:
        for i, r in enumerate(results):
            d = message("zh", i)[2]
            raw = store.index_service.query_offsets(d["topic"], d["uniq_key"], 64, 0, 2**62)
            assert raw == [r.commitlog_offset], f"message {i}: index items {raw}"


# ---- torn ConsumeQueue files ---------------------------------------------------------------

@pytest.mark.parametrize("abort", [True, False], ids=["abort", "clean"])
@pytest.mark.parametrize("mode", ["zero_tail", "truncate_extend", "zero_units", "sign_flip",
                                  "delete_last_file"])
@pytest.mark.parametrize("seed", range(3))
def test_torn_consume_queue(base_store, tmp_path, mode, abort, seed):
    """Damage at unit boundaries (or a sign bit, which makes the unit invalid) of the last
    file of a few ConsumeQueues: the queues are rebuilt from the (intact) CommitLog."""
    rng = random.Random(f"cq/{mode}/{abort}/{seed}")
    root = copy_store(base_store, tmp_path)
    qdirs = sorted((root / "consumequeue").glob("*/*"))
    for qdir in rng.sample(qdirs, rng.randint(1, 3)):
        files = sorted(qdir.iterdir())
        seg = files[-1]
        data = seg.read_bytes()
        n_units = next((i for i in range(len(data) // 20) if data[i * 20:i * 20 + 20]
                        == bytes(20)), len(data) // 20)
        if n_units == 0:
            continue
        u = rng.randrange(n_units)
        if mode == "zero_tail":
            with open(seg, "r+b") as f:
                f.seek(u * 20)
                f.write(bytes(len(data) - u * 20))
        elif mode == "truncate_extend":
            os.truncate(seg, u * 20)
            os.truncate(seg, len(data))
        elif mode == "zero_units":
            with open(seg, "r+b") as f:
                f.seek(u * 20)
                f.write(bytes(20 * rng.randint(1, 3)))
        elif mode == "sign_flip":       # offset or size becomes negative: an invalid unit
            with open(seg, "r+b") as f:
                at = u * 20 + rng.choice([0, 8])
                f.seek(at)
                f.write(bytes([data[at] | 0x80]))
        elif mode == "delete_last_file":
            seg.unlink()
    if abort:
        touch_abort(root)
    with open_store(root) as store:
        assert store.recovery.end_offset == base_store["records"][-1].commitLogOffset + \
            base_store["records"][-1].storeSize
        check_store_matches(store, root, base_store["records"], base_store,
                            label=f"cq {mode}/{abort}/{seed}")
        put_after_recovery(store, base_store["records"], f"cq {mode}")


# ---- crash leftovers: a segment being created when the process died ----------------------

def _kill_during_creation(root: Path, target: str) -> None:
    """Run a writer that SIGKILLs itself while the second CommitLog file is being created:
    after posix_fallocate, just before the rename that puts it in place (MappedFile creates
    files as a hidden '.<name>.creating' file and renames it in)."""
    code = f"""
        import os, signal
        from test_durability import open_store, fill
        real_rename = os.rename
        def dying_rename(src, dst, *a, **kw):
            if os.path.basename(dst) == {target!r}:
                os.kill(os.getpid(), signal.SIGKILL)
            return real_rename(src, dst, *a, **kw)
        os.rename = dying_rename
        store = open_store({str(root)!r}, flush_disk_type="SYNC_FLUSH")
        fill(store, "kill", 30)
        import time; time.sleep(10)
    """
    proc = run_python(code)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_open_after_kill_during_segment_creation(tmp_path):
    root = tmp_path / "store"
    _kill_during_creation(root, f"{CL:020d}")
    leftover = root / "commitlog" / f".{CL:020d}.creating"
    assert leftover.exists() and not (root / "commitlog" / f"{CL:020d}").exists()
    assert (root / "abort").exists()
    with open_store(root) as store:
        assert store.recovery.abnormal
        got = list(store.scan(check_crc=True))
        # the allocate service prepares the second file at the first put: killed then
        assert len(got) <= 30
        for i, m in enumerate(got):
            assert bytes(m.body) == message("kill", i)[2]["body"]
        fill(store, "after", 60)    # rolls into the file that was being created
        assert len(store.commit_log.queue.files) >= 2


def test_creating_leftover_removed_at_open(tmp_path):
    """Regression: a full-size '.<name>.creating' file left by a kill during segment creation
    was never removed (a whole segment leaked per such crash) (found by this suite, fixed in 06413a8)."""
    root = tmp_path / "store"
    _kill_during_creation(root, f"{CL:020d}")
    leftover = root / "commitlog" / f".{CL:020d}.creating"
    assert leftover.stat().st_size == CL
    with open_store(root):
        pass
    assert not leftover.exists()


# ---- group commit and FLUSH_DISK_TIMEOUT ----------------------------------------------------

def test_flush_disk_timeout_when_msync_is_slow(tmp_path):
    root = tmp_path / "store"
    slow = threading.Event()
    slow.set()

    def slowed(queue, least_pages: int) -> bool:    # "msync slowed artificially"
        if slow.is_set():
            time.sleep(0.8)
        return queue.flush(least_pages)

    store = open_store(root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200,
                       commit_log_flush=slowed)
    try:
        msg, qid, d = message("slow", 0)
        t0 = time.monotonic()
        r = store.put_message(msg, qid)
        elapsed = time.monotonic() - t0
        assert r.status == PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert 0.19 <= elapsed < 0.75, elapsed      # the timeout, not the slow flush
        # the message is stored all the same
        got = store.look_message_by_offset(r.commitlog_offset)
        assert got is not None and bytes(got.body) == d["body"]
        assert store.wait_dispatched()
        res = store.get_message("g", d["topic"], qid, 0, 4)
        assert res.status == GetMessageStatus.FOUND
        assert res.messages[0].commitlog_offset == r.commitlog_offset
        # a batch times out the same way
        msgs = [message("slow", i) for i in range(1, 4)]
        t0 = time.monotonic()
        rb = store.put_messages([m for m, _, _ in msgs], [q for _, q, _ in msgs])
        assert rb.status == PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert time.monotonic() - t0 < 0.75
        assert rb.stored == 3
        # msync fast again: PUT_OK again
        slow.clear()
        time.sleep(0.9)
        msg, qid, _ = message("slow", 9)
        assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
    finally:
        store.shutdown()
    offsets = [rec.commitLogOffset for rec in refcodec.iter_commitlog(root)]
    assert r.commitlog_offset in offsets and len(offsets) == 5


@pytest.mark.parametrize("producers", [1, 8])
def test_group_commit_shares_msyncs(tmp_path, producers):
    """8 concurrent SYNC_FLUSH producers share flushes: far fewer msyncs than puts."""
    root = tmp_path / "store"
    per_thread = 240 // producers
    msyncs: list[int] = []

    def counting(queue, least_pages: int) -> bool:
        before = queue.flushed_where
        time.sleep(0.002)       # a disk that takes ~2 ms per msync
        done = queue.flush(least_pages)
        if queue.flushed_where != before:
            msyncs.append(queue.flushed_where)
        return done

    store = open_store(root, flush_disk_type="SYNC_FLUSH", commit_log_flush=counting)
    try:
        statuses: list[int] = []

        def produce(t: int) -> None:
            for i in range(per_thread):
                msg, qid, _ = message(f"gc{t}", i)
                statuses.append(store.put_message(msg, qid).status)

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        store.shutdown()
    puts = producers * per_thread
    assert statuses.count(PutMessageStatus.PUT_OK) == puts
    if producers == 1:
        assert len(msyncs) >= puts * 0.9        # each put waits for its own msync
    else:
        assert len(msyncs) * 3 <= puts, f"{len(msyncs)} msyncs for {puts} puts"
    assert len(list(refcodec.iter_commitlog(root))) == puts


def test_native_group_commit_board(tmp_path):
    """GroupCommit on its own: waiters released by publish, timeouts, close wakes everyone."""
    from rocketstore._native.group_commit import GroupCommit
    gc = GroupCommit(100)
    assert gc.wait_flushed(100, 0.0)            # already durable: no wait at all
    assert not gc.wait_flushed(101, 0.01)       # nobody flushes: the timeout answers
    results: dict[int, bool] = {}

    def waiter(offset: int) -> None:
        results[offset] = gc.wait_flushed(offset, 60.0)

    offsets = range(200, 1000, 25)
    threads = [threading.Thread(target=waiter, args=(o,)) for o in offsets]
    for t in threads:
        t.start()
    while gc.pending < len(threads):            # all asked (pending: since the last flush)
        time.sleep(0.001)
    assert gc.wait_requests(0.0)                # the flush thread sees them
    gc.publish(600, msyncs=1)                   # covers the first half only
    for o, t in zip(offsets, threads, strict=True):
        if o <= 600:
            t.join(30)
    assert all(results[o] for o in range(200, 601, 25))
    assert not any(o in results for o in range(625, 1000, 25))
    gc.close()                                  # shutdown: the rest get their answer now
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert sorted(o for o, ok in results.items() if not ok) == list(range(625, 1000, 25))
    assert gc.flushes == 1 and gc.flushed_where == 600
    assert not gc.wait_flushed(5000, 60.0)      # closed: answered at once, not after 60 s
    gc.reset(0)
    assert not gc.closed and gc.flushed_where == 0


def test_native_group_commit_run_flushes_a_file(tmp_path):
    """run(): producers waiting for offsets in a MappedFile are released by one msync round;
    RUN_FULL once the file is durable to its end; interrupt() brings it back to Python."""
    from rocketstore._native.group_commit import RUN_FULL, RUN_INTERRUPTED, GroupCommit
    from rocketstore._native.mapped_file import MappedFile
    size = 16 * 4096
    mf = MappedFile(tmp_path / f"{size:020d}", size)
    gc = GroupCommit(size)
    mf.wrote_position = 3000
    results: list[bool] = []
    waiters = [threading.Thread(target=lambda o=o: results.append(gc.wait_flushed(o, 60.0)))
               for o in (size + 100, size + 2000, size + 3000)]
    for t in waiters:
        t.start()
    while gc.pending < 3:
        time.sleep(0.001)
    gc.interrupt()                              # sticky: the next run() returns at once
    assert gc.run(mf, 10.0, 60.0) == RUN_INTERRUPTED
    assert mf.flushed_position == 0
    out: list[int] = []
    flusher = threading.Thread(target=lambda: out.append(gc.run(mf, 10.0, 60.0)))
    flusher.start()
    for t in waiters:
        t.join(30)
    assert results == [True, True, True]
    assert mf.flushed_position == 3000 and gc.flushed_where == size + 3000
    mf.wrote_position = size                    # the file filled up (END_FILE blank)
    assert gc.wait_flushed(2 * size, 60.0)
    flusher.join(30)
    assert out == [RUN_FULL] and mf.flushed_position == size
    assert gc.flushes == 2 and gc.msync_seconds > 0
    mf.close()


def test_sync_flush_many_producers_across_files(tmp_path):
    """32 SYNC_FLUSH producers through the native group commit, rolling over many 64 KiB
    CommitLog files: every put is PUT_OK, flushes are shared, and everything is on disk."""
    root = tmp_path / "store"
    producers, per_thread = 32, 25
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    statuses: list[int] = []
    sent: list[bytes] = []
    try:
        def produce(t: int) -> None:
            for i in range(per_thread):
                msg, qid, d = message(f"many{t}", i)
                statuses.append(store.put_message(msg, qid).status)
                sent.append(d["body"])

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        flushes = store.commit_log.flush_service.flushes
        assert store.commit_log.queue.flushed_where == store.get_max_phy_offset() or \
            store.commit_log.flush_service.group.flushed_where == store.get_max_phy_offset()
    finally:
        store.shutdown()
    puts = producers * per_thread
    assert statuses.count(PutMessageStatus.PUT_OK) == puts
    assert 0 < flushes <= puts
    records = list(refcodec.iter_commitlog(root))
    assert len(records) == puts
    assert sorted(bytes(r.body) for r in records) == sorted(sent)
    assert len(list((root / "commitlog").iterdir())) > 3     # it did roll


def test_sync_flush_shutdown_wakes_waiters(tmp_path):
    """A producer waiting for a flush that never comes is answered by shutdown (not after
    its 60 s timeout), and shutdown still makes its message durable."""
    root = tmp_path / "store"
    store = open_store(root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=60_000,
                       commit_log_flush=lambda queue, least_pages: False)   # never completes
    out: list[int] = []
    msg, qid, d = message("stuck", 0)
    producer = threading.Thread(target=lambda: out.append(store.put_message(msg, qid).status))
    producer.start()
    while store.commit_log.flush_service.group.pending < 1:
        time.sleep(0.001)
    store.shutdown()
    producer.join(30)
    assert not producer.is_alive()
    assert out == [PutMessageStatus.FLUSH_DISK_TIMEOUT]
    assert [bytes(r.body) for r in refcodec.iter_commitlog(root)] == [d["body"]]


def test_sync_flush_wait_false_does_not_wait(tmp_path):
    """WAIT=false: PUT_OK without waiting even when flushes hang; the flusher is kicked and
    the message is flushed once the disk is back."""
    root = tmp_path / "store"
    hang = threading.Event()
    hang.set()

    def maybe(queue, least_pages: int) -> bool:
        return False if hang.is_set() else queue.flush(least_pages)

    store = open_store(root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=60_000,
                       commit_log_flush=maybe)
    try:
        queue = store.commit_log.queue
        msg, qid, _ = message("nowait", 0)
        msg.properties["WAIT"] = "false"
        r = store.put_message(msg, qid)
        assert r.status == PutMessageStatus.PUT_OK
        end = r.commitlog_offset + r.wrote_bytes
        hang.clear()
        while queue.flushed_where < end:            # flushed by a later round, unasked
            time.sleep(0.005)
        msg, qid, _ = message("nowait", 1)
        assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
        assert store.commit_log.flush_service.group.flushed_where >= store.get_max_phy_offset()
    finally:
        store.shutdown()



def test_sync_flush_survives_failing_flushes(tmp_path):
    """A flush that raises (a failing disk) is logged and retried after a pause; producers
    get FLUSH_DISK_TIMEOUT meanwhile and PUT_OK once the disk is back."""
    root = tmp_path / "store"
    failing = threading.Event()
    failing.set()

    def flaky(queue, least_pages: int) -> bool:
        if failing.is_set():
            raise OSError("msync failed (simulated)")
        return queue.flush(least_pages)

    store = open_store(root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=100,
                       commit_log_flush=flaky)
    try:
        msg, qid, _ = message("flaky", 0)
        assert store.put_message(msg, qid).status == PutMessageStatus.FLUSH_DISK_TIMEOUT
        service = store.commit_log.flush_service
        assert service.errors > 0 and service.is_alive
        failing.clear()
        msg, qid, _ = message("flaky", 1)
        status = store.put_message(msg, qid).status
        while status != PutMessageStatus.PUT_OK:    # the first may still meet the pause
            status = store.put_message(msg, qid).status
    finally:
        store.shutdown()


# ---- checkpoint and abort files -------------------------------------------------------------

@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_checkpoint_after_shutdown(tmp_path, flush):
    root = tmp_path / "store"
    with open_store(root, flush_disk_type=flush, max_index_num=60) as store:
        fill(store, "cp", 150)
    raw = (root / "checkpoint").read_bytes()
    assert len(raw) == 4096
    cp = refcodec.read_checkpoint(root / "checkpoint")
    assert cp == dict(zip(["physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"],
                          struct.unpack_from(">qqq", raw, 0), strict=True))
    assert raw[24:] == bytes(4096 - 24)
    records = list(refcodec.iter_commitlog(root))
    newest = records[-1].storeTimestamp
    assert cp["physicMsgTimestamp"] == newest
    assert cp["logicsMsgTimestamp"] == newest
    full = []
    for f in sorted((root / "index").iterdir()):
        header, _, _ = refcodec.read_index_file(f, SLOTS, 60)
        if header["indexCount"] >= 60:
            full.append(header)
    assert full, "the test wants full IndexFiles"
    # the endTimestamp of a full IndexFile (the newest one: see
    # test_checkpoint_index_timestamp_is_the_newest_full_file)
    assert cp["indexMsgTimestamp"] == full[-1]["endTimestamp"]
    assert 0 < cp["indexMsgTimestamp"] <= newest


def test_checkpoint_index_timestamp_is_the_newest_full_file(tmp_path, monkeypatch):
    """Regression: full IndexFiles are flushed on their own threads; when an older file's
    msync finished last, the checkpoint's indexMsgTimestamp went back to its endTimestamp
    (found by this suite, fixed in 06413a8). Here the first full file's flush is slowed on purpose."""
    from rocketstore.store.index_service import IndexService
    real = IndexService._flush_full
    first: list[Any] = []

    def slow_first(self, f):        # the first full file's msync is slow
        if not first:
            first.append(f)
        if f is first[0]:
            time.sleep(0.3)
        return real(self, f)

    monkeypatch.setattr(IndexService, "_flush_full", slow_first)
    root = tmp_path / "store"
    with open_store(root, max_index_num=60) as store:
        for i in range(150):
            store.put_message(*message("cpi", i)[:2])
            if i % 20 == 0:
                time.sleep(0.02)    # the files fill at different store times
    cp = refcodec.read_checkpoint(root / "checkpoint")
    full = [refcodec.read_index_file(f, SLOTS, 60)[0] for f in sorted((root / "index").iterdir())]
    full = [h for h in full if h["indexCount"] >= 60]
    assert len({h["endTimestamp"] for h in full}) > 1
    assert cp["indexMsgTimestamp"] == full[-1]["endTimestamp"]


def test_abort_file_lifecycle(tmp_path):
    root = tmp_path / "store"
    store = open_store(root)
    assert (root / "abort").exists()
    assert store.recovery.abnormal is False
    fill(store, "ab", 3)
    store.shutdown()
    assert not (root / "abort").exists()
    store.shutdown()                        # idempotent
    with open_store(root) as store:
        assert (root / "abort").exists()
        assert store.recovery.abnormal is False
        assert store.recovery.records == 3
    assert not (root / "abort").exists()
    with pytest.raises(RuntimeError):       # an exception inside the block still shuts down
        with open_store(root) as store:
            raise RuntimeError("boom")
    assert not (root / "abort").exists() and not store.is_running
    touch_abort(root)
    with open_store(root) as store:
        assert store.recovery.abnormal is True and store.recovery.records == 3


@pytest.mark.parametrize("ending", ["return", "exception", "sys.exit", "os._exit", "SIGKILL"])
def test_interpreter_exit(tmp_path, ending):
    """A process that never calls shutdown: the atexit hook removes the abort file on every
    interpreter exit; os._exit and SIGKILL skip it and the next open is abnormal."""
    root = tmp_path / "store"
    tail = {"return": "", "exception": "raise RuntimeError('unhandled')",
            "sys.exit": "sys.exit(3)", "os._exit": "os._exit(0)",
            "SIGKILL": "os.kill(os.getpid(), signal.SIGKILL)"}[ending]
    code = f"""
        import os, signal, sys
        from test_durability import open_store, fill
        store = open_store({str(root)!r}, flush_disk_type="SYNC_FLUSH")
        fill(store, "exit", 5)
        assert os.path.exists(os.path.join({str(root)!r}, "abort"))
        {tail}
    """
    proc = run_python(code)
    clean = ending in ("return", "exception", "sys.exit")
    assert (root / "abort").exists() is not clean, proc.stderr
    with open_store(root) as store:
        assert store.recovery.abnormal is not clean
        assert len(list(store.scan(check_crc=True))) == 5


# ---- transient store pool ------------------------------------------------------------------

@pytest.mark.parametrize("changes,named", [
    ({"flush_disk_type": "SYNC_FLUSH"}, "SYNC_FLUSH"),
    ({"broker_role": "SLAVE"}, "SLAVE"),
])
def test_transient_pool_refused(tmp_path, changes, named):
    root = tmp_path / "store"
    with pytest.raises(ValueError, match="transient_store_pool_enable") as exc:
        open_store(root, transient_store_pool_enable=True, **changes)
    assert named in str(exc.value)
    assert not (root / "abort").exists()
    with open_store(root) as store:     # no lock left behind
        fill(store, "pool", 1)


def test_transient_pool_readers_see_committed_bytes_only(tmp_path):
    root = tmp_path / "store"
    store = open_store(root, transient_store_pool_enable=True, transient_store_pool_size=2,
                       commit_interval_commit_log=60_000,
                       commit_commit_log_thorough_interval=600_000)
    try:
        msg, qid, d = message("tp", 0)
        r = store.put_message(msg, qid)
        assert r.status == PutMessageStatus.PUT_OK
        time.sleep(0.2)
        # written to the pool buffer, less than commit_commit_log_least_pages: not committed
        assert store.get_max_phy_offset() == 0
        assert store.look_message_by_offset(r.commitlog_offset) is None
        assert store.get_commitlog_data(0) is None
        res = store.get_message("g", d["topic"], qid, 0, 4)
        assert res.status != GetMessageStatus.FOUND
        assert list(store.scan(check_crc=True)) == []
        assert (root / "commitlog" / f"{0:020d}").read_bytes()[:8] == bytes(8)
        # more than 4 pages: the commit service copies them into the file
        rs = [store.put_message(*message("tp", i)[:2]) for i in range(1, 40)]
        deadline = time.monotonic() + 5
        while store.look_message_by_offset(r.commitlog_offset) is None:
            assert time.monotonic() < deadline, "commit service did not commit"
            time.sleep(0.01)
        got = store.look_message_by_offset(r.commitlog_offset)
        assert bytes(got.body) == d["body"] and got.properties == d["properties"]
        assert store.wait_dispatched()
        res = store.get_message("g", d["topic"], qid, 0, 4)
        assert res.status == GetMessageStatus.FOUND
        assert res.messages[0].commitlog_offset == r.commitlog_offset
        assert store.get_max_phy_offset() <= rs[-1].commitlog_offset + rs[-1].wrote_bytes
    finally:
        store.shutdown()
    # shutdown commits and flushes the rest
    assert len(list(refcodec.iter_commitlog(root))) == 40


def test_wait_dispatched_waits_for_the_commit(tmp_path):
    """Regression: with the transient store pool, wait_dispatched returned True while puts
    still sat uncommitted in the pool buffer (found by this suite, fixed in 06413a8)."""
    root = tmp_path / "store"
    with open_store(root, transient_store_pool_enable=True,
                    commit_interval_commit_log=60_000,
                    commit_commit_log_thorough_interval=600_000) as store:
        msg, qid, d = message("wd", 0)
        store.put_message(msg, qid)
        # nothing commits it for 10 minutes: wait_dispatched must say it timed out
        assert store.wait_dispatched(0.5) is False
        assert store.get_message("g", d["topic"], qid, 0, 4).status != GetMessageStatus.FOUND
    with open_store(tmp_path / "store2", transient_store_pool_enable=True) as store:
        msg, qid, d = message("wd", 1)
        r = store.put_message(msg, qid)
        assert store.wait_dispatched(5.0)       # commits within commit intervals (200 ms)
        res = store.get_message("g", d["topic"], qid, 0, 4)
        assert res.status == GetMessageStatus.FOUND, (
            f"wait_dispatched returned True, the put at {r.commitlog_offset} is not "
            f"dispatched ({res.status.name})")


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "no-pool"])
def test_concurrent_readers_never_see_garbage(tmp_path, pool):
    """Readers racing a writer (and the commit service) see whole, valid records only."""
    root = tmp_path / "store"
    changes = dict(transient_store_pool_enable=True, transient_store_pool_size=2,
                   commit_interval_commit_log=5) if pool else {}
    store = open_store(root, **changes)
    stop = threading.Event()
    problems: list[str] = []
    seen = defaultdict(int)

    def check(m) -> None:
        wid, tid, seq = m.properties["X-SEQ"].split(":")
        d = cw.derive(wid, int(tid), int(seq))
        if bytes(m.body) != d["body"] or m.properties != d["properties"]:
            problems.append(f"garbage at {m.commitlog_offset}")

    def scanner() -> None:
        while not stop.is_set():
            try:
                n = 0
                for m in store.scan(check_crc=True):
                    check(m)
                    n += 1
                seen["scan"] = max(seen["scan"], n)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"scan: {exc!r}")
                return

    def queue_reader() -> None:
        next_off: dict[tuple[str, int], int] = defaultdict(int)
        while not stop.is_set():
            for topic in cw.TOPICS:
                for qid in range(cw.QUEUES):
                    res = store.get_message("g", topic, qid, next_off[(topic, qid)], 32)
                    for m in res.messages:
                        check(m)
                        if m.queue_offset != next_off[(topic, qid)]:
                            problems.append(f"queue {topic}/{qid}: {m.queue_offset}")
                        next_off[(topic, qid)] += 1
                        seen["get"] += 1

    readers = [threading.Thread(target=scanner), threading.Thread(target=queue_reader)]
    for t in readers:
        t.start()
    try:
        fill(store, "rd", 1500)
        time.sleep(0.3)
    finally:
        stop.set()
        for t in readers:
            t.join()
        store.shutdown()
    assert not problems, problems[:5]
    assert seen["scan"] > 0 and seen["get"] > 0


def test_transient_pool_buffers_are_reused(tmp_path):
    """A pool of 2 buffers serves many files: full files hand their buffer back."""
    root = tmp_path / "store"
    store = open_store(root, transient_store_pool_enable=True, transient_store_pool_size=2,
                       commit_interval_commit_log=5)
    borrowed: list[int] = []
    returned: list[int] = []
    try:
        pool = store.pool
        assert pool is not None
        real_borrow, real_return = pool.borrow, pool.return_buffer

        def borrow():
            buf = real_borrow()
            if buf is not None:
                borrowed.append(id(buf))
            return buf

        def give_back(buf) -> None:
            returned.append(id(buf))
            real_return(buf)

        pool.borrow, pool.return_buffer = borrow, give_back
        results = [store.put_message(*message("reuse", i)[:2]) for i in range(600)]
        assert all(r.status == PutMessageStatus.PUT_OK for r in results)
        assert len(store.commit_log.queue.files) >= 6
        end = results[-1].commitlog_offset + results[-1].wrote_bytes
        deadline = time.monotonic() + 5
        while store.get_max_phy_offset() < end:
            assert time.monotonic() < deadline, "not committed"
            time.sleep(0.01)
        assert 0 <= pool.available() <= 2
    finally:
        store.shutdown()
    assert len(set(borrowed)) <= 2
    assert len(borrowed) > 2, "the pool's buffers were never reused"
    assert len(returned) >= len(borrowed) - 2
    records = list(refcodec.iter_commitlog(root))
    assert [r.commitLogOffset for r in records] == [r.commitlog_offset for r in results]


# ---- AllocateMappedFileService -------------------------------------------------------------

@pytest.mark.parametrize("warm", [False, True], ids=["plain", "warm"])
def test_next_file_created_in_background(tmp_path, warm):
    root = tmp_path / "store"
    with open_store(root, warm_mapped_file_enable=warm, flush_disk_type="SYNC_FLUSH") as store:
        i = 0
        while len(store.commit_log.queue.files) < 2:
            store.put_message(*message("alloc", i)[:2])
            i += 1
        # rolled to the second file: the third is prepared without any put asking for it
        third = root / "commitlog" / f"{2 * CL:020d}"
        deadline = time.monotonic() + 3
        while not third.exists() or third.stat().st_size != CL \
                or store.allocate_service.created < 3:      # created: after the warm-up
            assert time.monotonic() < deadline, "the next file was not created in background"
            time.sleep(0.005)
        created_before = store.allocate_service.created
        while len(store.commit_log.queue.files) < 3:    # rolling to it uses the prepared file
            store.put_message(*message("alloc", i)[:2])
            i += 1
        assert str(store.commit_log.queue.files[2].file_name).endswith(third.name)
        assert store.allocate_service.created >= created_before
    records = list(refcodec.iter_commitlog(root))
    assert len(records) == i
    # the prepared file nobody used is removed at shutdown (RocketMQ does the same)
    assert not (root / "commitlog" / f"{4 * CL:020d}").exists()


def _failing_mapped_file(monkeypatch, fail: threading.Event):
    import rocketstore.store.services.allocate as alloc
    real = alloc.MappedFile

    def maybe_fail(path, size, **kw):
        if fail.is_set():
            raise OSError(28, "No space left on device (simulated)", path)
        return real(path, size, **kw)

    monkeypatch.setattr(alloc, "MappedFile", maybe_fail)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_create_mapped_file_failed(tmp_path, monkeypatch, flush):
    """Files that can not be created: puts return CREATE_MAPPED_FILE_FAILED (never raise),
    nothing stored is damaged, failed puts use no queue offset, and puts succeed again once
    files can be created."""
    fail = threading.Event()
    _failing_mapped_file(monkeypatch, fail)
    root = tmp_path / "store"
    fail.set()
    with open_store(root, flush_disk_type=flush) as store:
        msg, qid, d = message("fail", 0)
        assert store.put_message(msg, qid).status == PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        rb = store.put_messages([msg], [qid])
        assert rb.status == PutMessageStatus.CREATE_MAPPED_FILE_FAILED and rb.stored == 0
        fail.clear()
        r = store.put_message(msg, qid)
        assert r.status == PutMessageStatus.PUT_OK and r.queue_offset == 0 \
            and r.commitlog_offset == 0
        i = 1

        def put_ok() -> None:
            nonlocal i
            s = store.put_message(*message("fail", i)[:2]).status
            assert s == PutMessageStatus.PUT_OK     # no stale failure after the outage
            i += 1

        while len(store.commit_log.queue.files) < 2:
            put_ok()
        time.sleep(0.3)             # the next file is prepared before the outage
        # an outage at a roll: the file after the prepared one can not be created
        fail.set()
        statuses = []
        for _ in range(200):
            s = store.put_message(*message("fail", i)[:2]).status
            statuses.append(s)
            if s == PutMessageStatus.PUT_OK:
                i += 1
        assert PutMessageStatus.CREATE_MAPPED_FILE_FAILED in statuses
        assert set(statuses) <= {PutMessageStatus.PUT_OK,
                                 PutMessageStatus.CREATE_MAPPED_FILE_FAILED}
        fail.clear()
        for _ in range(60):
            put_ok()
        assert store.wait_dispatched()
        assert len(list(store.scan(check_crc=True))) == i
        # failed puts did not use queue offsets: every queue is dense
        per_queue = defaultdict(list)
        for m in store.scan():
            per_queue[(m.topic, m.queue_id)].append(m.queue_offset)
        for offs in per_queue.values():
            assert offs == list(range(len(offs)))
    assert len(list(refcodec.iter_commitlog(root))) == i


def test_no_stale_create_failure_after_outage(tmp_path, monkeypatch):
    """Regression: a background allocation that failed during an outage kept its error and
    handed it to the roll that asked for the file later, after the outage (found by this suite, fixed in 06413a8)."""
    fail = threading.Event()
    _failing_mapped_file(monkeypatch, fail)
    root = tmp_path / "store"
    with open_store(root) as store:
        fail.set()
        msg, qid, _ = message("stale", 0)
        assert store.put_message(msg, qid).status == PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        time.sleep(0.3)             # the service tried (and failed) to prepare file 2 too
        fail.clear()
        statuses = []
        i = 0
        while len(store.commit_log.queue.files) < 2 and i < 500:
            statuses.append(store.put_message(*message("stale", i)[:2]).status)
            i += 1
        assert set(statuses) == {PutMessageStatus.PUT_OK}, statuses[-3:]


def test_create_mapped_file_failed_real_os_error(tmp_path):
    """A real OS error (RLIMIT_FSIZE below the segment size): CREATE_MAPPED_FILE_FAILED."""
    root = tmp_path / "store"
    code = f"""
        import resource, signal
        from test_durability import open_store, message
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        store = open_store({str(root)!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, ({CL // 2}, resource.RLIM_INFINITY))
        r = store.put_message(*message("rlimit", 0)[:2])
        print("STATUS", r.status.name)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        store.shutdown()
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "STATUS CREATE_MAPPED_FILE_FAILED" in proc.stdout, proc.stdout + proc.stderr


# ---- recovery report and progress ----------------------------------------------------------

def _zero_checkpoint(root: Path) -> None:
    with open(root / "checkpoint", "r+b") as f:
        f.write(bytes(24))


def test_recovery_report_full_replay(base_store, tmp_path):
    root = copy_store(base_store, tmp_path)
    touch_abort(root)
    _zero_checkpoint(root)
    calls: list[tuple[int, int]] = []
    with open_store(root, progress=lambda d, t: calls.append((d, t))) as store:
        rep = store.recovery
    records = base_store["records"]
    nfiles = len(base_store["bytes"])
    end = records[-1].commitLogOffset + records[-1].storeSize
    assert rep.abnormal is True
    assert rep.start_offset == 0
    assert rep.end_offset == end
    assert rep.records == len(records)
    assert rep.files_scanned == nfiles
    assert rep.truncated_bytes == 0
    assert rep.dispatched_records == len(records)
    assert rep.stop_status == "end" and rep.stop_reason is None
    assert rep.duration_s > 0
    assert 0 < rep.dispatch_s < rep.duration_s
    assert set(rep.as_dict()) >= {"abnormal", "start_offset", "end_offset", "records",
                                  "files_scanned", "truncated_bytes", "dispatched_records",
                                  "stop_status", "stop_reason", "duration_s", "dispatch_s"}
    assert len(calls) >= nfiles
    assert all(t == nfiles * CL for _, t in calls)
    dones = [d for d, _ in calls]
    assert dones == sorted(dones) and dones[0] == 0
    assert [k * CL for k in range(nfiles)] == sorted(set(dones) - {nfiles * CL})


def test_recovery_progress_reaches_total(base_store, tmp_path):
    """The last progress call says the scan is over: (total, total)."""
    root = copy_store(base_store, tmp_path)
    touch_abort(root)
    _zero_checkpoint(root)
    calls: list[tuple[int, int]] = []
    with open_store(root, progress=lambda d, t: calls.append((d, t))):
        pass
    assert calls[-1][0] == calls[-1][1] == len(base_store["bytes"]) * CL


def _checkpoint_at_third_file(base: dict[str, Any], root: Path) -> int:
    """Set the checkpoint so that abnormal recovery replays from the third CommitLog file:
    min(physic, logics) - 3 s = the store time of that file's first record."""
    records = base["records"]
    start = sorted(int(n) for n in base["bytes"])[2]
    first = next(r for r in records if r.commitLogOffset >= start)
    nxt = next(r for r in records if r.commitLogOffset >= start + CL)
    assert nxt.storeTimestamp > first.storeTimestamp
    ts = first.storeTimestamp + 3000
    with open(root / "checkpoint", "r+b") as f:
        f.write(struct.pack(">qq", ts + 5, ts))
    touch_abort(root)
    return start


def test_recovery_starts_at_checkpoint(base_store, tmp_path):
    """Abnormal recovery replays from the newest file whose first record is stored at or
    before min(physic, logics) - 3 s of the checkpoint."""
    root = copy_store(base_store, tmp_path)
    records = base_store["records"]
    start = _checkpoint_at_third_file(base_store, root)
    with open_store(root) as store:
        rep = store.recovery
        assert rep.abnormal and rep.start_offset == start, rep
        assert rep.records == sum(r.commitLogOffset >= start for r in records)
        assert rep.files_scanned == len(base_store["bytes"]) - 2
        check_store_matches(store, root, records, base_store, label="checkpoint start")
        put_after_recovery(store, records, "checkpoint start")


@pytest.mark.parametrize("index_safe", [
    False,
    True])
def test_index_complete_when_replay_starts_after_first_file(base_store, tmp_path, index_safe):
    """Regression: when the abnormal replay started after the first file (a checkpoint
    older than 3 s), records before the replay start whose IndexFile was dropped were
    never indexed again (message_index_safe=False, the default) (found by this suite, fixed in 06413a8)."""
    root = copy_store(base_store, tmp_path)
    _checkpoint_at_third_file(base_store, root)
    with open_store(root, message_index_safe=index_safe) as store:
        check_store_matches(store, root, base_store["records"], base_store,
                            label=f"index after checkpoint start (safe={index_safe})")


def test_recovery_report_normal_and_corrupt(base_store, tmp_path):
    records = base_store["records"]
    nfiles = len(base_store["bytes"])
    root = copy_store(base_store, tmp_path / "normal")
    with open_store(root) as store:
        rep = store.recovery
    third_last = sorted(int(n) for n in base_store["bytes"])[-3]
    assert not rep.abnormal and rep.start_offset == third_last and rep.files_scanned == 3
    assert rep.records == sum(r.commitLogOffset >= third_last for r in records)
    assert rep.stop_status == "end" and rep.truncated_bytes == 0
    # a body bit flipped in the last file
    root = copy_store(base_store, tmp_path / "corrupt")
    last_start = third_last + 2 * CL
    victim = [r for r in records if r.commitLogOffset >= last_start and r.bodyLen][1]
    pos = victim.commitLogOffset + 88
    old = (root / "commitlog" / f"{last_start:020d}").read_bytes()[pos - last_start]
    write_at(root, pos, bytes([old ^ 0x10]))
    touch_abort(root)
    _zero_checkpoint(root)
    with open_store(root) as store:
        rep = store.recovery
        kept = [r for r in records if r.commitLogOffset < victim.commitLogOffset]
        check_store_matches(store, root, kept, base_store, label="crc")
    assert rep.abnormal and rep.stop_status == "corrupt"
    assert "CRC" in (rep.stop_reason or "")
    assert rep.end_offset == victim.commitLogOffset
    assert rep.records == len(kept) and rep.files_scanned == nfiles
    assert rep.truncated_bytes == CL - (victim.commitLogOffset - last_start)


def test_body_crc_helper_matches_refcodec():
    """The reference codec's CRC is zlib's, masked (sanity check of the helper used above)."""
    assert refcodec.body_crc(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF
