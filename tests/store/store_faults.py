"""Helpers of the durability tests: a small store config, messages from crash_writer, damage
helpers, and a subprocess runner that imports the same rocketstore."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import crash_writer as cw
import helpers
import refcodec

import rocketstore
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import PutMessageStatus

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
                                         *helpers.TEST_PATHS,
                                         env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(TESTS))


def touch_abort(root) -> None:
    Path(root, "abort").touch()


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
                        base: dict[str, Any], *, label: str, check_index: bool = True,
                        damaged: list[tuple[int, int]] = ()) -> None:
    """The store holds exactly `kept` (byte for byte, but for records whose bytes changed in
    ways no check can see), its ConsumeQueues and IndexFile agree. `damaged`: the CommitLog
    ranges the store must report as damaged (records lost there leave gaps in their queues:
    blank units, or units that point into the damage)."""
    end = kept[-1].commitLogOffset + kept[-1].storeSize if kept else 0
    # CommitLog: native scan and reference walk of the files both give exactly `kept`; the
    # scan skips the damage (found at open, or by the scan itself when recovery did not
    # walk that far back)
    native = list(store.scan(check_crc=True))
    assert [(r.start, r.end) for r in store.damaged_ranges] == list(damaged), (
        label, store.damaged_ranges, damaged)
    assert [m.commitlog_offset for m in native] == [r.commitLogOffset for r in kept], label
    for m, r in zip(native, kept, strict=True):
        assert bytes(m.record) == r.encode() or not damaged, label
        o = r.commitLogOffset
        if not damaged:
            assert bytes(m.record) == base["bytes"][f"{o - o % CL:020d}"][o % CL:o % CL + r.storeSize]
    ref = refcodec.walk_commitlog(root, CL)
    assert [r.commitLogOffset for r in ref.records] == [r.commitLogOffset for r in kept], label
    assert ref.damaged == list(damaged), label
    # nothing after the end: the rest of the end file is zero, no later file
    end = max(end, ref.end)
    last_seg = end - end % CL
    for seg in segments(root):
        assert int(seg.name) <= max(last_seg, 0), f"{label}: {seg.name} after the end {end}"
    seg = root / "commitlog" / f"{last_seg:020d}"
    if seg.exists() and end % CL:
        tail = seg.read_bytes()[end % CL:]
        assert tail.count(0) == len(tail), f"{label}: bytes left after the end {end}"

    def in_damage(phy: int) -> bool:
        return any(lo <= phy < hi for lo, hi in damaged)

    # ConsumeQueues: every kept record has its unit; offsets of records lost in damage are
    # blanks or point into the damage
    queues: dict[tuple[str, int], list[refcodec.RefRecord]] = defaultdict(list)
    for r in kept:
        queues[(r.topic, r.queueId)].append(r)
    for topic in cw.TOPICS:
        for qid in range(cw.QUEUES):
            recs = queues.get((topic, qid), [])
            by_qoff = {r.queueOffset: r for r in recs}
            assert [r.queueOffset for r in recs] == sorted(by_qoff), (label, topic, qid)
            top = store.get_max_offset_in_queue(topic, qid)
            assert top >= (max(by_qoff) + 1 if by_qoff else 0), (label, topic, qid)
            assert store.next_queue_offset(topic, qid) == top, (label, topic, qid)
            cq = store.consume_queues.find(topic, qid)
            units = [cq.get_unit(k) for k in range(top)] if top else []
            for k, unit in enumerate(units):
                if k in by_qoff:
                    r = by_qoff[k]
                    assert unit == (r.commitLogOffset, r.storeSize, r.tagsCode), (
                        label, topic, qid, k)
                else:
                    assert damaged and (unit[1] == 0x7FFFFFFF or in_damage(unit[0])), (
                        label, topic, qid, k, unit)
            if not damaged:
                assert top == len(recs), (label, topic, qid)
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


def expected_after_damage(base: dict[str, Any], root: Path, label: str
                          ) -> tuple[list[refcodec.RefRecord], list[tuple[int, int]]]:
    """(records kept, damaged ranges) under the damage policy, from an independent walk of
    the damaged files; checks that the walk keeps every base record whose bytes are intact
    (damage never costs an intact record) and invents none."""
    walk = refcodec.walk_commitlog(root, CL)
    base_offsets = {r.commitLogOffset for r in base["records"]}
    kept = {r.commitLogOffset for r in walk.records}
    assert kept <= base_offsets, label
    for r in base["records"]:
        o = r.commitLogOffset
        seg = root / "commitlog" / f"{o - o % CL:020d}"
        if seg.exists() and r.commitLogOffset + r.storeSize <= walk.end:
            now = seg.read_bytes()[o % CL:o % CL + r.storeSize]
            if now == base["bytes"][seg.name][o % CL:o % CL + r.storeSize]:
                assert o in kept, f"{label}: intact record at {o} not kept"
    return walk.records, walk.damaged


def put_after_recovery(store: MessageStore, kept: list[refcodec.RefRecord], label: str,
                       *, check_index: bool = True) -> None:
    """New puts get the next queue offsets, are dispatched, and (check_index) indexed."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for r in kept:
        key = (r.topic, r.queueId)
        counts[key] = max(counts[key], r.queueOffset + 1)
    if store.damaged_ranges:
        # a queue whose newest record was lost in damage keeps its unit (it points into the
        # damage): its next offset is past it
        for key in list(counts):
            assert store.next_queue_offset(*key) >= counts[key], (label, key)
            counts[key] = store.next_queue_offset(*key)
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


