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


