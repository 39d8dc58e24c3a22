"""Torn writes and damage: recovery keeps every intact record, before and after damage (a
damaged region followed by valid records is kept, unreadable); only a torn tail (invalid
bytes after the last valid record) is given up. The ConsumeQueues and the IndexFile agree with
what is kept; crash leftovers of a segment being created are removed.

Torn writes are made on copies of one cleanly written store (``base_store``), whose records are
known from the reference codec (tests/reference/refcodec.py) over the original bytes. The damage
is placed so that it changes bytes that the record check covers (magic, sizes, physical offset,
field lengths, body CRC, and a NUL-ended properties text, which is how a torn tail reads);
damage to the other bytes (the middle of the properties text, timestamps, queue offset) is
undetectable by that check, as in RocketMQ.
"""
from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest
import refcodec
from store_faults import (
    CL,
    check_store_matches,
    copy_store,
    expected_after_damage,
    fill,
    first_change,
    message,
    open_store,
    props_text_range,
    put_after_recovery,
    record_at,
    run_python,
    segments,
    touch_abort,
    validated_ranges,
    write_at,
)

from rocketstore.store.layout import StoreFormatError

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
# before it, where the records after the damage are kept
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
    label = f"{mode}/{where}/{'abort' if abort else 'clean'}/{seed} at {changed}"
    # under the damage policy: damage followed by valid records keeps them (an independent
    # walk of the damaged files says which), only a torn tail is given up
    kept, damaged = expected_after_damage(base_store, root, label)
    if where == "last" and mode in ("zero_tail", "truncate_extend"):
        assert not damaged, label
    with open_store(root) as store:
        rep = store.recovery
        assert rep.abnormal is abort
        end = kept[-1].commitLogOffset + kept[-1].storeSize
        assert rep.end_offset == store.get_max_phy_offset() == end, (label, rep)
        check_store_matches(store, root, kept, base_store, label=label, damaged=damaged)
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
        from store_faults import open_store, fill
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
