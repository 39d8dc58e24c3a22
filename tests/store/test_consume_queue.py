"""ConsumeQueues against an independent scan of the CommitLog (tests/refcodec.py).

What is checked:
- the units the reput service builds equal what the dispatch rules (docs/format.md: only
  ``sysFlag & 0xC`` in {0, 0x8} gets a unit) give over an independent scan of the CommitLog,
  across rolls of both the CommitLog (64 KiB segments, END_FILE blanks) and the ConsumeQueue
  (100 units per file), for several topics and queues, with prepared, committed and rolled
  back transactions, through ``read_units``, ``get_unit``, the raw files and ``get_message``;
- the real RocketMQ 4.9.8 store serves exactly consumequeue.jsonl's units and messages;
- reopening keeps every unit and every queue's next offset; re-dispatch changes nothing;
- corrupt ConsumeQueue files (bit flips, zeroed tails, truncated or extended files, missing
  files, random bytes) never crash a fresh process: the store opens or raises a clear error,
  and a zeroed tail is rebuilt from the CommitLog.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import shutil
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
import refcodec
from helpers import assert_no_signal, run_python

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig

CL_SIZE = 64 * 1024
CQ_UNITS = 100
CQ_SIZE = CQ_UNITS * 20
STORE_HOST = helpers.STORE_HOST
# topic -> number of queues
TOPICS = {"alpha": 3, "beta": 2, "%RETRY%grp": 1}
TAGS = [None, "TagA", "TagB", "Aa", "BB", "订单", "café", "📦"]
PREPARED, COMMIT, ROLLBACK = 0x4, 0x8, 0xC


def make_config(root: str | os.PathLike[str], **changes: Any) -> StoreConfig:
    """helpers.make_config with this file's sizes: 100-unit ConsumeQueue files (rolls early)
    and a 64-slot IndexFile (collisions)."""
    sizes: dict[str, Any] = {"mapped_file_size_commit_log": CL_SIZE,
                             "mapped_file_size_consume_queue": CQ_SIZE,
                             "max_hash_slot_num": 64, "max_index_num": 400}
    return helpers.make_config(root, **{**sizes, **changes})


def open_store(root: str | os.PathLike[str], **changes: Any) -> MessageStore:
    return MessageStore.open(root, make_config(root, **changes))


# ---------------------------------------------------------------------------- workload


def fill(store: MessageStore, rng: random.Random, n: int) -> None:
    """n puts over TOPICS: single and batched, bodies 0..2.5 KB with a few 30 KB ones (END_FILE
    blanks), tags incl. unicode and colliding ones, and transactions (prepared, then commit or
    rollback, some left open)."""
    pending: list[tuple[Message, int, int]] = []  # prepared (message, queue, offset)
    topics = list(TOPICS)
    i = 0
    while i < n:
        topic = rng.choice(topics)
        qid = rng.randrange(TOPICS[topic])

        def msg(k: int, sys_flag: int = 0, prepared_offset: int = 0,
                topic: str = topic) -> Message:
            size = 30_000 if rng.random() < 0.01 else rng.randrange(0, 2500)
            return Message(topic, rng.randbytes(size), tags=rng.choice(TAGS),
                           keys=[f"k{k}", f"{topic}-{k % 7}"], sys_flag=sys_flag,
                           prepared_transaction_offset=prepared_offset)

        roll = rng.random()
        if roll < 0.55:
            assert store.put_message(msg(i), qid).ok
            i += 1
        elif roll < 0.85:
            count = rng.randrange(1, 40)
            batch = [msg(i + j) for j in range(count)]
            qids = [rng.randrange(TOPICS[topic]) for _ in range(count)]
            result = store.put_messages(batch, qids)
            assert result.ok and result.stored == count
            i += count
        elif roll < 0.93 or not pending:
            m = msg(i, PREPARED)
            r = store.put_message(m, qid)
            assert r.ok and r.queue_offset == 0
            pending.append((m, qid, r.commitlog_offset))
            i += 1
        else:
            m, q, off = pending.pop(rng.randrange(len(pending)))
            end = COMMIT if rng.random() < 0.6 else ROLLBACK
            done = Message(m.topic, m.body, tags=m.tags, keys=m.keys, sys_flag=end,
                           prepared_transaction_offset=off, uniq_key=m.uniq_key)
            r = store.put_message(done, q)
            assert r.ok
            i += 1


def expected_units(root: str | os.PathLike[str]) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """What the dispatch rules give over refcodec's scan of the CommitLog: per (topic, queue),
    the (commitlog offset, size, tags code) of each plain or committed record, in log order.
    Also checks the records' queue offsets count 0, 1, 2, ... per queue (and are 0 for
    prepared and rolled back records)."""
    out: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    kinds: dict[int, int] = defaultdict(int)
    for rec in refcodec.iter_commitlog(root):
        tran = rec.sysFlag & 0xC
        kinds[tran] += 1
        if tran in (0, COMMIT):
            units = out[(rec.topic, rec.queueId)]
            assert rec.queueOffset == len(units), (rec.topic, rec.queueId, rec.commitLogOffset)
            code = refcodec.tags_code(rec.topic, rec.properties, rec.storeTimestamp)
            assert code == rec.tagsCode
            units.append((rec.commitLogOffset, rec.storeSize, code))
        else:
            assert rec.queueOffset == 0
    return dict(out)


def store_units(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """Every queue's units from min to max offset, read with read_units (file by file)."""
    out = {}
    for topic in store.topics():
        for qid in store.queues(topic):
            cq = store.consume_queues.find(topic, qid)
            assert cq is not None
            units: list[tuple[int, int, int]] = []
            offset = cq.min_offset
            while offset < cq.max_offset:
                part = cq.read_units(offset, 1000)
                assert part is not None and len(part), (topic, qid, offset)
                units += zip(part["offset"].tolist(), part["size"].tolist(),
                             part["tags_code"].tolist(), strict=True)
                offset += len(part)
            out[(topic, qid)] = units
    return out


def pull_all(store: MessageStore, topic: str, qid: int, max_msgs: int = 32,
             group: str = "g") -> list[Any]:
    """Every message of a queue through get_message, following next_begin_offset."""
    offset = store.get_min_offset_in_queue(topic, qid)
    end = store.get_max_offset_in_queue(topic, qid)
    got = []
    while offset < end:
        r = store.get_message(group, topic, qid, offset, max_msgs)
        assert r.status == GetMessageStatus.FOUND, (topic, qid, offset, r.status)
        assert r.next_begin_offset > offset
        got += r.messages
        offset = r.next_begin_offset
    assert offset == end
    return got


def cq_files(root: Path) -> dict[tuple[str, int], list[Path]]:
    out = {}
    for tdir in sorted((root / "consumequeue").iterdir()):
        for qdir in sorted(tdir.iterdir()):
            out[(tdir.name, int(qdir.name))] = sorted(qdir.iterdir())
    return out


def file_bytes(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(base)): p.read_bytes()
            for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store: ~1,500 records over 3 topics / 6 queues, ~30 CommitLog segments,
    queues of 2..4 ConsumeQueue files."""
    root = tmp_path_factory.mktemp("cq") / "store"
    store = open_store(root)
    fill(store, random.Random(20261122), 1500)
    assert store.wait_dispatched()
    store.shutdown()
    return root


def copy_of(pristine: Path, tmp_path: Path, name: str = "store") -> Path:
    dst = tmp_path / name
    shutil.copytree(pristine, dst)
    return dst


# ------------------------------------------------------------------- units vs CommitLog


def test_pristine_store_rolls_both_file_kinds(pristine: Path) -> None:
    segments = sorted((pristine / "commitlog").iterdir())
    assert len(segments) >= 20
    files = cq_files(pristine)
    assert set(files) == {(t, q) for t, n in TOPICS.items() for q in range(n)}
    assert max(len(v) for v in files.values()) >= 3
    assert all(p.stat().st_size == CQ_SIZE for v in files.values() for p in v)
    kinds = {rec.sysFlag & 0xC for rec in refcodec.iter_commitlog(pristine)}
    assert kinds == {0, PREPARED, COMMIT, ROLLBACK}


def test_units_equal_independent_scan(pristine: Path, tmp_path: Path) -> None:
    root = copy_of(pristine, tmp_path)
    expected = expected_units(root)
    # the raw files, read with refcodec (no rocketstore code)
    for (topic, qid), units in expected.items():
        assert refcodec.read_consume_queue(root / "consumequeue" / topic / str(qid)) == units
    with open_store(root) as store:
        assert store.recovery is not None and store.recovery.dispatched_records == 0
        assert store_units(store) == expected
        assert store.topics() == sorted(TOPICS)
        for topic, n in TOPICS.items():
            assert store.queues(topic) == list(range(n))
        for (topic, qid), units in expected.items():
            cq = store.consume_queues.find(topic, qid)
            assert cq is not None
            assert (cq.min_offset, cq.max_offset) == (0, len(units))
            assert store.get_max_offset_in_queue(topic, qid) == len(units)
            assert store.next_queue_offset(topic, qid) == len(units)
            for off in (0, CQ_UNITS - 1, CQ_UNITS, len(units) - 1):
                if off < len(units):
                    assert cq.get_unit(off) == units[off]
                    assert store.get_commitlog_offset_in_queue(topic, qid, off) == units[off][0]
            assert cq.get_unit(len(units)) is None
            assert cq.get_unit(-1) is None
            # read_units never crosses a file: a read from inside a file stops at its end
            part = cq.read_units(CQ_UNITS - 3, 50)
            if len(units) > CQ_UNITS:
                assert part is not None and len(part) == 3
            messages = pull_all(store, topic, qid)
            assert [(m.commitlog_offset, m.store_size, m.tags_code) for m in messages] == units
            assert [m.queue_offset for m in messages] == list(range(len(units)))
            assert {(m.topic, m.queue_id) for m in messages} == {(topic, qid)}
            assert all(m.transaction_type in (0, COMMIT) for m in messages)


@pytest.mark.parametrize("batch_records", [1, 7, 8192])
def test_units_built_while_writing_equal_independent_scan(tmp_path: Path,
                                                          batch_records: int) -> None:
    """Dispatch runs beside the producer, in rounds of batch_records records."""
    store = open_store(tmp_path / "s")
    store.reput.batch_records = batch_records
    fill(store, random.Random(batch_records), 400)
    assert store.wait_dispatched()
    try:
        assert store_units(store) == expected_units(tmp_path / "s")
        assert store.dispatch_behind_bytes() == 0
    finally:
        store.shutdown()


def test_fixture_store_serves_rocketmq_units(rocketmq_store: Path,
                                             fixture_consumequeue: list[dict[str, Any]],
                                             fixture_messages: list[dict[str, Any]]) -> None:
    by_offset = {m["commitLogOffset"]: m for m in fixture_messages}
    config = StoreConfig(store_path_root_dir=str(rocketmq_store),
                         mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000,
                         max_hash_slot_num=200, max_index_num=800)
    with MessageStore.open(rocketmq_store, config) as store:
        assert store.recovery is not None and store.recovery.dispatched_records == 0
        assert store.topics() == sorted({q["topic"] for q in fixture_consumequeue})
        total = 0
        for q in fixture_consumequeue:
            topic, qid = q["topic"], q["queueId"]
            units = [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in q["units"]]
            assert [u["queueOffset"] for u in q["units"]] == list(range(q["unitCount"]))
            cq = store.consume_queues.find(topic, qid)
            assert cq is not None
            assert (cq.min_offset, cq.max_offset) == (q["minOffset"], q["maxOffset"])
            assert store.get_min_offset_in_queue(topic, qid) == q["minOffset"]
            assert store.get_max_offset_in_queue(topic, qid) == q["maxOffset"]
            assert store.next_queue_offset(topic, qid) == q["maxOffset"]
            assert [cq.get_unit(i) for i in range(q["unitCount"])] == units
            assert store_units(store)[(topic, qid)] == units
            for max_msgs in (32, 7):
                got = pull_all(store, topic, qid, max_msgs)
                assert [m.commitlog_offset for m in got] == [u[0] for u in units]
                for m in got:
                    want = by_offset[m.commitlog_offset]
                    assert want["inConsumeQueue"]
                    assert (m.topic, m.queue_id, m.queue_offset, m.msg_id, m.tags_code,
                            m.store_timestamp) == (
                        want["topic"], want["queueId"], want["queueOffset"], want["msgId"],
                        want["tagsCode"], want["storeTimestamp"])
                    assert bytes(m.body) == base64.b64decode(want["body_b64"])
            total += len(got)
        assert total == 589 == sum(m["inConsumeQueue"] for m in fixture_messages)
        # a queue with exactly one full file and no next one (orders/1): the end is the end
        r = store.get_message("g", "orders", 1, 100)
        assert r.status == GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 100


# -------------------------------------------------------------------- reopen / redispatch


def test_reopen_keeps_units_and_next_offsets(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = open_store(root)
    fill(store, random.Random(7), 500)
    assert store.wait_dispatched()
    units = store_units(store)
    nexts = {k: store.next_queue_offset(*k) for k in units}
    store.shutdown()
    for round_ in range(2):
        with open_store(root) as store:
            assert store.recovery is not None and not store.recovery.abnormal
            assert store.recovery.dispatched_records == 0
            assert store_units(store) == units
            assert {k: store.next_queue_offset(*k) for k in units} == nexts
            # new puts continue every queue where it stopped
            for (topic, qid), n in sorted(nexts.items()):
                r = store.put_message(Message(topic, f"more-{round_}".encode(), tags="TagA"), qid)
                assert r.ok and r.queue_offset == n
                nexts[(topic, qid)] = n + 1
            assert store.wait_dispatched()
            units = store_units(store)
            assert units == expected_units(root)
            assert {k: len(v) for k, v in units.items()} == nexts


def test_read_only_open_serves_the_same_units(pristine: Path, tmp_path: Path) -> None:
    """Read-only (no lock, no service, no file touched), also beside a running writer."""
    root = copy_of(pristine, tmp_path)
    before = file_bytes(root, "consumequeue")
    expected = expected_units(root)
    with MessageStore.open(root, make_config(root), read_only=True) as ro:
        assert store_units(ro) == expected
        for key in expected:
            assert [m.commitlog_offset for m in pull_all(ro, *key)] == [
                u[0] for u in expected[key]]
    assert file_bytes(root, "consumequeue") == before
    with open_store(root) as writer:
        writer.put_message(Message("alpha", b"new"), 0)
        assert writer.wait_dispatched()
        with MessageStore.open(root, make_config(root), read_only=True) as ro:
            units = store_units(ro)
            assert units == store_units(writer)
            assert len(units[("alpha", 0)]) == len(expected[("alpha", 0)]) + 1


def test_reopen_after_unclean_exit_keeps_units(pristine: Path, tmp_path: Path) -> None:
    """An abort file (the last run did not shut down): abnormal recovery replays the CommitLog
    from the checkpoint and re-dispatches; what is already in a ConsumeQueue is skipped."""
    root = copy_of(pristine, tmp_path)
    before = file_bytes(root, "consumequeue")
    (root / "abort").write_bytes(b"")
    with open_store(root) as store:
        assert store.recovery is not None and store.recovery.abnormal
        assert store.recovery.dispatched_records > 0
        assert store_units(store) == expected_units(root)
    assert file_bytes(root, "consumequeue") == before


def test_redispatch_is_idempotent(pristine: Path, tmp_path: Path) -> None:
    root = copy_of(pristine, tmp_path)
    records = list(refcodec.iter_commitlog(root))
    with open_store(root) as store:
        units = store_units(store)
        nexts = {k: store.next_queue_offset(*k) for k in units}
        queries = {k: [m.commitlog_offset for m in store.query_message("alpha", k).messages]
                   for k in ("k5", "alpha-3", "k1000")}
        for start in (0, records[len(records) // 2].commitLogOffset, records[-1].commitLogOffset):
            seen = store.reput.dispatched_records
            store.reput.reput_from_offset = start
            store.reput.do_reput()
            assert store.wait_dispatched()
            # the records from start on were handed to the dispatchers again (by this call or
            # by the service thread's round) ...
            again = sum(1 for r in records if r.commitLogOffset >= start)
            assert store.reput.dispatched_records - seen == again
            # ... and nothing changed
            assert store_units(store) == units
            assert {k: store.next_queue_offset(*k) for k in units} == nexts
            assert {k: [m.commitlog_offset for m in store.query_message("alpha", k).messages]
                    for k in queries} == queries
    # the files too: no unit rewritten, no blank added, no index item added
    fresh = copy_of(pristine, tmp_path, "fresh")
    assert file_bytes(root, "consumequeue") == file_bytes(fresh, "consumequeue")
    assert file_bytes(root, "index") == file_bytes(fresh, "index")


def test_deleted_consumequeue_is_rebuilt_at_open(pristine: Path, tmp_path: Path) -> None:
    root = copy_of(pristine, tmp_path)
    want = file_bytes(root, "consumequeue")
    shutil.rmtree(root / "consumequeue")
    with open_store(root) as store:
        assert store.recovery is not None
        assert store.recovery.dispatched_records == len(list(refcodec.iter_commitlog(root)))
        assert store_units(store) == expected_units(root)
    assert file_bytes(root, "consumequeue") == want


# ------------------------------------------------------------------------- corruption


def _valid_end(data: bytes | bytearray) -> int:
    end = 0
    while end + 20 <= len(data):
        off, size, _ = struct.unpack_from(">qiq", data, end)
        if off < 0 or size <= 0:
            break
        end += 20
    return end


def _zero_tail(root: Path, topic: str, qid: int, count: int) -> None:
    last = cq_files(root)[(topic, qid)][-1]
    data = bytearray(last.read_bytes())
    end = _valid_end(data)
    assert end >= count * 20
    data[end - count * 20:end] = bytes(count * 20)
    last.write_bytes(bytes(data))


def _newest_queue(root: Path) -> tuple[str, int]:
    last = None
    for rec in refcodec.iter_commitlog(root):
        if rec.sysFlag & 0xC in (0, COMMIT):
            last = (rec.topic, rec.queueId)
    assert last is not None
    return last


def _single_queue_store(root: Path, n: int = 350) -> None:
    store = open_store(root)
    rng = random.Random(5)
    for _ in range(n):
        assert store.put_message(Message("solo", rng.randbytes(rng.randrange(3000)),
                                         tags=rng.choice(TAGS)), 0).ok
    assert store.wait_dispatched()
    store.shutdown()


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort"])
@pytest.mark.parametrize("count", [1, 30])
def test_zeroed_tail_of_the_only_queue_is_redispatched(tmp_path: Path, count: int,
                                                       abort: bool) -> None:
    root = tmp_path / "s"
    _single_queue_store(root)
    expected = expected_units(root)
    _zero_tail(root, "solo", 0, count)
    if abort:
        (root / "abort").write_bytes(b"")
    with open_store(root) as store:
        assert store.recovery is not None and store.recovery.dispatched_records >= count
        assert store_units(store) == expected
        assert store.next_queue_offset("solo", 0) == len(expected[("solo", 0)])
        assert len(pull_all(store, "solo", 0)) == len(expected[("solo", 0)])


def test_zeroed_tails_after_an_unclean_exit_are_redispatched(pristine: Path,
                                                             tmp_path: Path) -> None:
    """With an abort file, recovery replays from the checkpoint: lost tails of any queue come
    back (the checkpoint of this store is older than all its records)."""
    root = copy_of(pristine, tmp_path)
    expected = expected_units(root)
    for topic, qid in [("alpha", 1), _newest_queue(root)]:
        _zero_tail(root, topic, qid, 12)
    (root / "abort").write_bytes(b"")
    with open_store(root) as store:
        assert store_units(store) == expected
        assert {k: store.next_queue_offset(*k) for k in expected} == {
            k: len(v) for k, v in expected.items()}


@pytest.mark.parametrize("which", ["newest", "older", "deleted"])
def test_zeroed_tail_of_one_queue_among_several_is_redispatched(pristine: Path,
                                                                tmp_path: Path,
                                                                which: str) -> None:
    """A clean shutdown records every queue's next offset; a queue that opens shorter (its tail
    zeroed, or all its files gone) is re-dispatched from the CommitLog, whichever queue it
    is. (Fixed in cf6addb: before it, dispatch restarted at the newest unit of ANY queue, so
    the lost units of one queue among several never came back.)"""
    root = copy_of(pristine, tmp_path)
    expected = expected_units(root)
    newest = _newest_queue(root)
    target = newest if which == "newest" else next(k for k in sorted(expected) if k != newest)
    if which == "deleted":      # every file of one queue gone (its directory stays)
        for path in cq_files(root)[target]:
            path.unlink()
    else:
        _zero_tail(root, *target, 10)
    with open_store(root) as store:
        assert {k: store.next_queue_offset(*k) for k in expected} == {
            k: len(v) for k, v in expected.items()}
        assert store_units(store) == expected


CORRUPT_CHILD = r"""
import json, sys, traceback
from rocketstore import GetMessageStatus, MessageStore, StoreConfig

def pull(store, topic, qid):
    lo, hi = store.get_min_offset_in_queue(topic, qid), store.get_max_offset_in_queue(topic, qid)
    got, offset, rounds = [], lo, 0
    while offset < hi and rounds < 10000:
        rounds += 1
        r = store.get_message("g", topic, qid, offset, 32)
        got += [[m.topic, m.queue_id, m.queue_offset, m.commitlog_offset] for m in r.messages]
        if r.next_begin_offset <= offset:
            break
        offset = r.next_begin_offset
    return got

def run(root, read_only):
    config = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=CL_SIZE,
                         mapped_file_size_consume_queue=CQ_SIZE, max_hash_slot_num=64,
                         max_index_num=400)
    try:
        store = MessageStore.open(root, config, read_only=read_only)
    except Exception as e:
        return {"opened": False, "error": type(e).__name__, "message": str(e),
                "mro": [c.__name__ for c in type(e).__mro__]}
    out = {"opened": True, "queues": {}}
    try:
        with store:
            for topic in store.topics():
                for qid in store.queues(topic):
                    cq = store.consume_queues.find(topic, qid)
                    units = []
                    for off in range(cq.min_offset, cq.max_offset):
                        u = cq.get_unit(off)
                        units.append(None if u is None else list(u))
                    msgs = pull(store, topic, qid)
                    store.get_offset_in_queue_by_time(topic, qid, 0)
                    store.get_offset_in_queue_by_time(topic, qid, 2**62)
                    out["queues"][f"{topic}/{qid}"] = {
                        "min": cq.min_offset, "units": units, "messages": msgs,
                        "next": store.next_queue_offset(topic, qid)}
    except Exception:
        out["failure"] = traceback.format_exc()
    return out

for i, (root, read_only) in enumerate(json.loads(sys.argv[1])):
    print("CASE", i, flush=True)
    print("RESULT", json.dumps(run(root, read_only)), flush=True)
""".replace("CL_SIZE", str(CL_SIZE)).replace("CQ_SIZE", str(CQ_SIZE))

CLEAR_ERRORS = {"ValueError", "OSError"}  # StoreFormatError, CorruptRecordError subclass them


def _corrupt(rng: random.Random, root: Path, kind: str) -> tuple[str, bool]:
    """Damage one ConsumeQueue of a copy; returns (what was done, whether a read-write open
    must rebuild every unit: lost tails, and zeroed files among the last 3 of their queue,
    which recovery scans)."""
    files = cq_files(root)
    key = rng.choice(sorted(files))
    paths = files[key]
    path = rng.choice(paths)
    name = f"{key[0]}/{key[1]}/{path.name}"
    data = bytearray(path.read_bytes())
    if kind == "flip":
        flips = rng.choice([1, 3, 20])
        end = max(_valid_end(data), 20)
        for _ in range(flips):
            pos = rng.randrange(end) if rng.random() < 0.8 else rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        return f"{flips} bit flips in {name}", False
    if kind == "zero_tail":
        path = paths[-1]
        data = bytearray(path.read_bytes())
        end = _valid_end(data)
        count = rng.randrange(1, max(2, end // 20))
        data[max(0, end - count * 20):end] = bytes(min(end, count * 20))
        path.write_bytes(bytes(data))
        return f"zeroed the last {count} units of {key}", True
    if kind == "zero_file":
        path.write_bytes(bytes(len(data)))
        return f"zeroed {name}", path in paths[-3:]
    if kind == "random_bytes":
        start = rng.randrange(0, len(data), 20)
        data[start:] = rng.randbytes(len(data) - start)
        path.write_bytes(bytes(data))
        return f"random bytes from {start} in {name}", False
    if kind == "garbage_units":
        # plausible-looking units pointing anywhere (offsets inside and outside the log)
        start = rng.randrange(0, len(data), 20)
        for pos in range(start, min(len(data), start + 20 * rng.randrange(1, 20)), 20):
            struct.pack_into(">qiq", data, pos, rng.choice([-5, 0, rng.randrange(1 << 21),
                                                            rng.randrange(1 << 62)]),
                             rng.choice([1, 91, rng.randrange(1 << 31)]),
                             rng.randrange(-(1 << 63), 1 << 63))
        path.write_bytes(bytes(data))
        return f"garbage units from {start} in {name}", False
    if kind == "truncate":
        size = rng.choice([0, 1, 19, 20, len(data) // 2, len(data) - 1])
        path.write_bytes(bytes(data[:size]))
        return f"truncated {name} to {size} bytes", False
    if kind == "extend":
        path.write_bytes(bytes(data) + rng.randbytes(rng.choice([1, 20, 4096])))
        return f"extended {name}", False
    if kind == "delete":
        path.unlink()
        return f"deleted {name}", path == paths[-1]
    if kind == "stray":
        (path.parent / "junk").write_bytes(b"not a segment")
        return f"stray file in {key}", False
    if kind == "bad_queue_dir":
        (root / "consumequeue" / key[0] / "notanumber").mkdir()
        (root / "consumequeue" / key[0] / "notanumber" / ("0" * 20)).write_bytes(bytes(CQ_SIZE))
        return f"non-numeric queue directory in {key[0]}", False
    raise AssertionError(kind)


KINDS = ["flip", "flip", "flip", "zero_tail", "zero_tail", "zero_file", "random_bytes",
         "garbage_units", "garbage_units", "truncate", "extend", "delete", "stray",
         "bad_queue_dir"]


@pytest.mark.parametrize("seed", [1, 2])
def test_corrupt_consume_queue_never_crashes(pristine: Path, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    records = {rec.commitLogOffset for rec in refcodec.iter_commitlog(pristine)}
    expected = expected_units(pristine)
    cases: list[tuple[str, bool]] = []
    notes: list[str] = []
    rebuilds: list[bool] = []
    for i, kind in enumerate(KINDS * 2):
        dst = tmp_path / f"case{i:02d}"
        shutil.copytree(pristine, dst)
        note, rebuild = _corrupt(rng, dst, kind)
        if rng.random() < 0.3:
            (dst / "abort").write_bytes(b"")
            note += " + abort file"
        read_only = i % 5 == 4
        cases.append((str(dst), read_only))
        notes.append(f"{note} (read_only={read_only})")
        rebuilds.append(rebuild and not read_only)
    proc = run_python(CORRUPT_CHILD, args=[json.dumps(cases)], timeout=300)
    started = [ln for ln in proc.stdout.splitlines() if ln.startswith("CASE")]
    if proc.returncode < 0:
        last = int(started[-1].split()[1]) if started else -1
        assert_no_signal(proc, f"case {last}: {notes[last] if last >= 0 else '?'}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(ln.split(" ", 1)[1]) for ln in proc.stdout.splitlines()
               if ln.startswith("RESULT")]
    assert len(results) == len(cases)
    opened = 0
    for i, r in enumerate(results):
        assert "failure" not in r, f"case {i} {notes[i]}:\n{r.get('failure')}"
        if not r["opened"]:
            assert CLEAR_ERRORS & set(r["mro"]) and r["message"], (
                f"case {i} {notes[i]}: unclear error {r['error']}: {r['message']}")
            continue
        opened += 1
        for name, q in r["queues"].items():
            # whatever a corrupt unit points at, a served message is a real record
            for m in q["messages"]:
                assert m[3] in records, (i, notes[i], name, m)
        if rebuilds[i]:
            got = {tuple(k.rsplit("/", 1)): (q["min"], [tuple(u) for u in q["units"]], q["next"])
                   for k, q in r["queues"].items()}
            assert got == {(t, str(qid)): (0, units, len(units))
                           for (t, qid), units in expected.items()}, (i, notes[i])
    assert opened >= len(cases) // 3, notes


def test_truncated_consume_queue_file_is_rebuilt(pristine: Path, tmp_path: Path) -> None:
    """A ConsumeQueue file cut short is damage of a derived file: a read-only open serves
    the queue from the CommitLog, a writable open rebuilds it (it used to refuse the store)."""
    root = copy_of(pristine, tmp_path)
    path = cq_files(root)[("alpha", 0)][0]
    path.write_bytes(path.read_bytes()[:1234])
    expected = expected_units(root)
    with MessageStore.open(root, make_config(root), read_only=True) as store:
        assert [m.commitlog_offset for m in pull_all(store, "alpha", 0)] == [
            u[0] for u in expected[("alpha", 0)]]
    with open_store(root) as store:
        assert store_units(store) == expected


def test_flipped_unit_never_serves_a_foreign_record(pristine: Path, tmp_path: Path) -> None:
    """A unit whose size no longer matches its record: get_message never serves garbage
    for it; it checks the record the unit points at (size, topic, queue, queue offset),
    finds the unit's true record in the CommitLog and fixes the unit, so every message of
    the queue is served, each once, in queue order."""
    root = copy_of(pristine, tmp_path)
    path = cq_files(root)[("beta", 0)][0]
    data = bytearray(path.read_bytes())
    off, size, code = struct.unpack_from(">qiq", data, 5 * 20)
    struct.pack_into(">qiq", data, 5 * 20, off, size + 1, code)
    path.write_bytes(bytes(data))
    expected = expected_units(root)[("beta", 0)]
    for read_only in (True, False):
        with MessageStore.open(root, make_config(root), read_only=read_only) as store:
            got = [m.commitlog_offset for m in pull_all(store, "beta", 0)]
            assert got == [u[0] for u in expected], read_only
            assert store.consume_queues.find("beta", 0).get_unit(5) == expected[5]
    data = path.read_bytes()
    assert struct.unpack_from(">qiq", data, 5 * 20) == expected[5]     # the writer fixed it
UNIT_DAMAGE = {
    # kind: (the unit's new (offset, size, tags code) from units 5 and 6, what the log says)
    "size": (lambda u5, u6: (u5[0], u5[1] + 1, u5[2]),
             lambda u5, u6: f"unit 5 says its record at {u5[0]} is {u5[1] + 1} bytes; "
                            f"it is {u5[1]}: unit rebuilt"),
    "size-and-tags": (lambda u5, u6: (u5[0], u5[1] - 1, u5[2] + 1),
                      lambda u5, u6: f"unit 5 says its record at {u5[0]} is {u5[1] - 1} "
                                     f"bytes; it is {u5[1]}; its tags code {u5[2] + 1} is not "
                                     f"the record's {u5[2]}: unit rebuilt"),
    "next-record": (lambda u5, u6: u6,
                    lambda u5, u6: f"unit 5 points at {u6[0]} ({u6[1]} bytes), the record of "
                                   f"beta:0 offset 6 ({u6[1]} bytes); its record is at "
                                   f"{u5[0]} ({u5[1]} bytes)"),
    "inside-a-record": (lambda u5, u6: (u5[0] + 8, u5[1], u5[2]),
                        lambda u5, u6: f"unit 5 points at {u5[0] + 8} ({u5[1]} bytes), 8 "
                                       f"bytes inside its record at {u5[0]} ({u5[1]} bytes)"),
    "between-records": (lambda u5, u6: (u6[0] + u6[1] // 2, u5[1], u5[2]),
                        lambda u5, u6: f"unit 5 points at {u6[0] + u6[1] // 2} ({u5[1]} "
                                       f"bytes), where no record starts (bad magic code); its "
                                       f"record is at {u5[0]} ({u5[1]} bytes)"),
    "past-the-end": (lambda u5, u6: (10**9, u5[1], u5[2]),
                     lambda u5, u6: f"unit 5 points at {10**9} ({u5[1]} bytes), past the "
                                    "CommitLog's end"),
}


@pytest.mark.parametrize("kind", list(UNIT_DAMAGE))
def test_damaged_unit_log_line_says_what_disagrees(pristine: Path, tmp_path: Path, caplog,
                                                   kind: str) -> None:
    """The ERROR line of a unit get_message rebuilds names what the unit says that its
    record does not: a size (or tags code) at the record's own offset, or an offset where
    another record, no record or nothing starts, and where the record is."""
    root = copy_of(pristine, tmp_path)
    path = cq_files(root)[("beta", 0)][0]
    data = bytearray(path.read_bytes())
    u5, u6 = (struct.unpack_from(">qiq", data, i * 20) for i in (5, 6))
    change, says = UNIT_DAMAGE[kind]
    struct.pack_into(">qiq", data, 5 * 20, *change(u5, u6))
    path.write_bytes(bytes(data))
    expected = expected_units(root)[("beta", 0)]
    for read_only in (True, False):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="rocketstore.store"), \
                MessageStore.open(root, make_config(root), read_only=read_only) as store:
            got = [m.commitlog_offset for m in pull_all(store, "beta", 0)]
        assert got == [u[0] for u in expected], read_only
        lines = [r.getMessage() for r in caplog.records if "unit 5 " in r.getMessage()]
        assert len(lines) == 1 and says(u5, u6) in lines[0], (read_only, lines)
        assert "not at its record" not in lines[0]


def test_zeroed_tail_is_redispatched_without_recorded_queue_offsets(
        rocketmq_store: Path, fixture_consumequeue: list[dict[str, Any]]) -> None:
    """A store without config/queueOffsets.json (written by RocketMQ): a zeroed tail of a
    queue that does not hold the newest record is still rebuilt, found from the QUEUEOFFSETs
    of the records the recovery scan reads. (Fixed in 13e4dce: before it, fixture audit/0
    opened with 115 units instead of 120 and its next put reused queue offset 115.)"""
    assert not (rocketmq_store / "config").exists()
    _zero_tail(rocketmq_store, "audit", 0, 5)
    config = StoreConfig(store_path_root_dir=str(rocketmq_store),
                         mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000,
                         max_hash_slot_num=200, max_index_num=800)
    with MessageStore.open(rocketmq_store, config) as store:
        assert store.next_queue_offset("audit", 0) == 120
        for q in fixture_consumequeue:
            units = [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in q["units"]]
            assert store_units(store)[(q["topic"], q["queueId"])] == units


# ---------------------------------------------------------------------------- native grouping

def test_group_records_first_seen_order_and_transactions() -> None:
    from rocketstore._native.consume_queue import group_records

    rng = random.Random(7)
    n = 5000
    topic_ids = np.array([rng.randrange(3) for _ in range(n)], np.int32)
    queue_ids = np.array([rng.randrange(40) for _ in range(n)], np.int32)
    queue_ids[::97] = -1                                  # read from a corrupt record
    flags = np.array([rng.choice([0, 0, 0, 0x4, 0x8, 0xC, 0x1]) for _ in range(n)], np.int32)
    groups, keys = group_records(topic_ids, queue_ids, flags)
    expected: dict[int, int] = {}
    for i in range(n):
        if flags[i] & 0xC in (0x4, 0xC):
            assert groups[i] == -1
            continue
        key = int(topic_ids[i]) << 32 | (int(queue_ids[i]) & 0xFFFFFFFF)
        g = expected.setdefault(key, len(expected))
        assert groups[i] == g
    assert keys.tolist() == list(expected)
    with pytest.raises(ValueError):
        group_records(topic_ids, queue_ids[:-1], flags)


def test_write_grouped_units_marks_the_rest_of_a_queue_slow(tmp_path: Path) -> None:
    from rocketstore._native.consume_queue import write_grouped_units
    from rocketstore._native.mapped_file import MappedFile

    f0 = MappedFile(tmp_path / "00000000000000000000", 5 * 20)      # room for 5 units
    phys = np.arange(0, 800, 100, dtype=np.int64)
    sizes = np.full(8, 100, np.int32)
    tags = np.arange(8, dtype=np.int64)
    groups = np.array([0, 1, 0, 0, 1, 0, 0, 0], np.int32)          # group 1 has no file
    qoffs = np.array([0, 0, 1, 3, 1, 4, 5, 6], np.int64)           # a gap at 2, 5 rolls
    max_phys = np.array([-1, -1], np.int64)
    slow = np.zeros(8, np.uint8)
    # a new file has no blocks on disk yet: every unit goes to the slow path (which allocates)
    n = write_grouped_units([f0, None], max_phys, groups, phys, sizes, tags, qoffs, slow)
    assert slow.tolist() == [1] * 8 and n == 8 and f0.wrote_position == 0
    f0.allocate_to(f0.file_size)
    slow[:] = 0
    n = write_grouped_units([f0, None], max_phys, groups, phys, sizes, tags, qoffs, slow)
    # the unit past the queue's end (offset 3 after 1) goes to Python (ConsumeQueue.put_units
    # judges gaps), and so does the rest of its queue
    assert slow.tolist() == [0, 1, 0, 1, 1, 1, 1, 1] and n == 6
    assert f0.wrote_position == 40 and max_phys.tolist() == [300, -1]
    units = np.frombuffer(f0.read(0, 40), np.dtype([("o", ">i8"), ("s", ">i4"), ("t", ">i8")]))
    assert units["o"].tolist() == [0, 200] and units["s"].tolist() == [100, 100]
    # the same again: everything is already there (idempotent re-dispatch)
    slow[:] = 0
    max_phys = np.array([300, -1], np.int64)
    write_grouped_units([f0, None], max_phys, groups, phys, sizes, tags, qoffs, slow)
    assert f0.wrote_position == 40 and slow.tolist() == [0, 1, 0, 1, 1, 1, 1, 1]
    with pytest.raises(ValueError):
        write_grouped_units([f0], max_phys, groups, phys, sizes, tags, qoffs, slow)
    f0.close()
