"""The recovery report and progress: full replays, checkpoints, the IndexFile's completeness."""
from __future__ import annotations

import json
import logging
import struct
import zlib
from pathlib import Path
from typing import Any

import helpers
import pytest
import refcodec
from store_faults import (
    CL,
    check_store_matches,
    copy_store,
    open_store,
    put_after_recovery,
    touch_abort,
    write_at,
)

from rocketstore import GetMessageStatus, Message, MessageStore
from rocketstore.store.verify import verify

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
        kept = [r for r in records if r.commitLogOffset != victim.commitLogOffset]
        damaged = [(victim.commitLogOffset, victim.commitLogOffset + victim.storeSize)]
        check_store_matches(store, root, kept, base_store, label="crc", damaged=damaged)
    # damage in the middle: kept, reported; the log's end stays where it was
    assert rep.abnormal and rep.stop_status == "end" and rep.truncated_bytes == 0
    assert [(d["start"], d["end"]) for d in rep.damaged_ranges] == damaged
    assert "CRC" in str(rep.damaged_ranges[0]["reason"]) and rep.damaged
    assert rep.damaged_bytes == victim.storeSize
    assert rep.end_offset == records[-1].commitLogOffset + records[-1].storeSize
    assert rep.records == len(kept) and rep.files_scanned == nfiles
    # a body bit flipped in the last record: a torn tail, given up
    root = copy_store(base_store, tmp_path / "tail")
    last = records[-1]
    pos = last.commitLogOffset + 88
    old = (root / "commitlog" / f"{last_start:020d}").read_bytes()[pos - last_start]
    write_at(root, pos, bytes([old ^ 0x10]))
    with open_store(root) as store:
        rep = store.recovery
        check_store_matches(store, root, records[:-1], base_store, label="crc tail")
    assert rep.stop_status == "corrupt" and "CRC" in (rep.stop_reason or "")
    assert rep.end_offset == last.commitLogOffset and not rep.damaged
    assert rep.truncated_bytes == CL - (last.commitLogOffset - last_start)


def test_body_crc_helper_matches_refcodec():
    """The reference codec's CRC is zlib's, masked (sanity check of the helper used above)."""
    assert refcodec.body_crc(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF


# ---- config/queueOffsets.json: a hint, ignored when malformed --------------------------------

def _bad_key(text: bytes) -> bytes:
    data = json.loads(text)
    data["queueOffsets"]["q"]["1x"] = data["queueOffsets"]["q"].pop("1")
    return json.dumps(data).encode()


def _edit(change: Any) -> Any:
    def apply(text: bytes) -> bytes:
        data = json.loads(text)
        change(data)
        return json.dumps(data).encode()
    return apply


MALFORMED_QUEUE_OFFSETS = {
    "bad-queue-id": (_bad_key, "'1x'"),
    "huge-queue-id": (_edit(lambda d: d["queueOffsets"]["q"].update({"1x" * 50000: 3})),
                      "not an int"),
    "negative-offset": (_edit(lambda d: d["queueOffsets"]["q"].update({"0": -1})), "-1"),
    "text-offset": (_edit(lambda d: d["queueOffsets"]["q"].update({"0": "5"})), "'5'"),
    "bool-offset": (_edit(lambda d: d["queueOffsets"]["q"].update({"0": True})), "True"),
    "negative-end": (_edit(lambda d: d.update(commitLogEnd=-5)), "commitLogEnd"),
    "topic-not-object": (_edit(lambda d: d["queueOffsets"].update(q=[1, 2])), "[1, 2]"),
    "table-not-object": (_edit(lambda d: d.update(queueOffsets=7)), "queueOffsets"),
    "not-an-object": (lambda text: b"[1, 2, 3]", "[1, 2, 3]"),
    "truncated": (lambda text: text[:len(text) // 2], "not JSON"),
    "empty": (lambda text: b"", "not JSON"),
    "not-utf-8": (lambda text: b"\xff\xfe" + text, "not UTF-8"),
}


@pytest.mark.parametrize("shape", list(MALFORMED_QUEUE_OFFSETS))
def test_malformed_queue_offsets_file_is_ignored(tmp_path: Path, caplog, shape: str) -> None:
    """A writable open of a store whose queueOffsets.json is malformed opens as if the file
    were absent, with one warning naming the file and what is wrong (quoting little of it);
    every message is there; verify names the file."""
    root = tmp_path / "s"
    with helpers_open(root) as store:
        for i in range(40):
            assert store.put_message(Message("q", b"m%d" % i, tags="t"), i % 2).ok
        assert store.wait_dispatched()
    path = root / "config" / "queueOffsets.json"
    assert json.loads(path.read_bytes())["queueOffsets"]["q"] == {"0": 20, "1": 20}
    damage, words = MALFORMED_QUEUE_OFFSETS[shape]
    path.write_bytes(damage(path.read_bytes()))
    report = verify(root, helpers.make_config(root))
    assert any(str(path) in line and words in line for line in report.other_files.listed), \
        report.other_files
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rocketstore"):
        with helpers_open(root) as store:
            for qid in (0, 1):
                r = store.get_message("g", "q", qid, 0, 32)
                assert r.status == GetMessageStatus.FOUND
                assert [bytes(m.body) for m in r.messages] == \
                    [b"m%d" % i for i in range(qid, 40, 2)]
            assert store.put_message(Message("q", b"after"), 0).queue_offset == 20
    lines = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"ignoring {path}"), lines
    assert words in lines[0] and len(lines[0]) < len(str(path)) + 600, lines[0]
    assert "Traceback" not in caplog.text and "invalid literal" not in caplog.text
    with helpers_open(root) as store:      # the next clean shutdown wrote a good one again
        assert store.get_max_offset_in_queue("q", 0) == 21
    assert json.loads(path.read_bytes())["queueOffsets"]["q"] == {"0": 21, "1": 20}


def helpers_open(root: Path) -> MessageStore:
    return MessageStore.open(root, helpers.make_config(root))
