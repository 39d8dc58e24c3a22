"""Retention (issue 17): CleanCommitLogService, CleanConsumeQueueService and the IndexFiles'
expiry, the disk watermarks, readers of deleted ranges, held segments, topic deletion.

Every test injects a clock and a disk usage probe (MessageStore.open's seams) and runs the
periodic cleanup by hand (CleanFilesService.run_cycle), with 64 KiB CommitLog segments,
50-unit ConsumeQueue files and 300-item IndexFiles."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import GetMessageStatus, PutMessageStatus
from rocketstore.store.services.clean import MAX_MANUAL_DELETE_FILE_TIMES

SEG = 64 * 1024
HOUR_MS = 3600 * 1000
QUEUES = 4


class FakeClock:
    def __init__(self) -> None:
        self.wall = time.time_ns() // 1_000_000
        # "now" is never the default delete hour ("04"): the tests say when it is
        while time.localtime(self.wall // 1000).tm_hour == 4:
            self.wall += HOUR_MS
        self.mono = 1_000_000.0

    def wall_ms(self) -> int:
        return self.wall

    def monotonic_ms(self) -> float:
        return self.mono

    def at(self, hours_later: float, hour: int) -> None:
        """hours_later hours from now, then on to the next time the local hour is `hour`."""
        t = time.time_ns() // 1_000_000 + int(hours_later * HOUR_MS)
        while time.localtime(t // 1000).tm_hour != hour:
            t += HOUR_MS
        self.wall = t


class FakeDisk:
    """Usage of the disk as the store sees it: a fixed ratio, or a function of the store."""

    def __init__(self, ratio: float = 0.30) -> None:
        self.ratio = ratio
        self.calls = 0

    def __call__(self, path: str) -> float:
        self.calls += 1
        return self.ratio() if callable(self.ratio) else self.ratio


def config(root: Path, **changes: Any) -> StoreConfig:
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": SEG,
        "mapped_file_size_consume_queue": 50 * 20,
        "max_hash_slot_num": 97,
        "max_index_num": 300,
        "clean_resource_interval": 3_600_000,       # the tests run cycles themselves
        "delete_commit_log_files_interval": 0,
        "delete_consume_queue_files_interval": 0,
        "redelete_hanged_file_interval": 0,
        "commit_log_prefault_ahead": 0,
    }
    values.update(changes)
    return StoreConfig(**values)


@pytest.fixture
def env(tmp_path: Path):
    clock, disk = FakeClock(), FakeDisk()
    stores: list[MessageStore] = []

    def open_store(**changes: Any) -> MessageStore:
        store = MessageStore.open(tmp_path / "store", config(tmp_path / "store", **changes),
                                  disk_probe=disk, clock=clock)
        stores.append(store)
        return store

    yield clock, disk, open_store
    for s in stores:
        s.shutdown()


def put(store: MessageStore, n: int, start: int = 0, size: int = 900) -> list[Any]:
    """n messages of topic t over 4 queues, each with key k<i>; their results."""
    out = []
    for i in range(start, start + n):
        body = f"m{i:06d}".encode().ljust(size, b"x")
        r = store.put_message(Message(topic="t", body=body, keys=[f"k{i}"]), i % QUEUES)
        assert r.status == PutMessageStatus.PUT_OK, (r.status, r.reason)
        out.append(r)
    assert store.wait_dispatched(20)
    return out


def cycle(store: MessageStore):
    assert store.clean_service is not None
    return store.clean_service.run_cycle()


def files(store: MessageStore) -> list[str]:
    return [os.path.basename(mf.file_name) for mf in store.commit_log.queue.files]


def test_expired_files_go_at_the_delete_hour_and_not_before(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 400)
    before = files(store)
    assert len(before) >= 6
    clock.at(1, 4)                      # the delete hour, but nothing is 72 h old
    report = cycle(store)
    assert report.reasons == ["time"] and not report.deleted and files(store) == before
    clock.at(73, 5)                     # expired, but not the hour, and the disk is fine
    report = cycle(store)
    assert report.reasons == [] and files(store) == before
    clock.at(73, 4)                     # expired, at the hour
    report = cycle(store)
    assert report.reasons == ["time"]
    kinds = [d.kind for d in report.deleted]
    assert kinds.count("commitlog") == len(before) - 1      # never the newest segment
    assert files(store) == before[-1:]
    assert not any((Path(store.root) / "commitlog" / name).exists() for name in before[:-1])
    assert store.get_min_phy_offset() == int(before[-1]) == report.min_offset_after


def test_delete_when_takes_several_hours(env) -> None:
    clock, disk, open_store = env
    store = open_store(delete_when="04;16")
    put(store, 200)
    clock.at(73, 16)
    assert cycle(store).reasons == ["time"] and len(files(store)) == 1


def test_over_the_clean_up_watermark_expired_files_go_at_any_hour(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 300)
    n = len(files(store))
    clock.at(73, 5)
    disk.ratio = 0.76                   # over disk_max_used_space_ratio (75)
    report = cycle(store)
    assert report.reasons == ["space"] and len(files(store)) == 1
    assert sum(d.kind == "commitlog" for d in report.deleted) == n - 1
    assert store.disk_full is None      # under the warning level: puts go on
    put(store, 1, start=300)


def test_over_85_percent_files_go_before_they_expire_oldest_first(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 1000)                    # ~15 segments: more than one run's 10
    names = files(store)
    assert len(names) > 11
    disk.ratio = 0.87                   # over disk_space_clean_forcibly_ratio (85)
    report = cycle(store)               # nothing is expired: files go all the same
    assert report.reasons == ["space", "forced"]
    assert [os.path.basename(d.path) for d in report.deleted if d.kind == "commitlog"] == \
        names[:10]                      # oldest first, 10 a run
    assert files(store) == names[10:]
    cycle(store)
    assert files(store) == names[-1:]   # never the newest
    cycle(store)
    assert files(store) == names[-1:]
    # clean_file_forcibly_enable off: unexpired files stay over 85%
    store.shutdown()
    store = open_store(clean_file_forcibly_enable=False)
    put(store, 200, start=1000)
    kept = files(store)
    assert len(kept) > 1
    assert cycle(store).reasons == ["space"] and files(store) == kept


def test_over_90_percent_puts_are_refused_until_usage_is_back_under(env) -> None:
    clock, disk, open_store = env
    store = open_store(clean_file_forcibly_enable=False)
    put(store, 100)
    disk.ratio = 0.91
    cycle(store)
    assert store.disk_full is not None and store.disk_full.startswith("disk full: ")
    r = store.put_message(Message(topic="t", body=b"refused"), 0)
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert r.reason == store.disk_full and "91.0% used" in r.reason
    batch = store.put_messages([Message(topic="t", body=b"refused")] * 3)
    assert batch.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and batch.stored == 0
    assert batch.reason == store.disk_full
    rt = store.describe()["retention"]
    assert rt["diskFull"] is True and rt["putsRefused"] == store.disk_full
    disk.ratio = 0.89                   # the user freed space: the next run sees it
    cycle(store)
    assert store.disk_full is None
    assert store.put_message(Message(topic="t", body=b"again"), 0).status == \
        PutMessageStatus.PUT_OK
    # a store opened on a full disk refuses from its first put
    store.shutdown()
    disk.ratio = 0.95
    store = open_store()
    assert store.put_message(Message(topic="t", body=b"x"), 0).status == \
        PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_cleanup_that_frees_room_reopens_puts_in_the_same_run(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 650)
    # usage follows the CommitLog: each segment is 8% of this disk
    disk.ratio = lambda: 0.10 + 0.08 * len(store.commit_log.queue.files)
    assert disk.ratio() > 0.90
    cycle(store)                        # over 90%: refused, forced deletion, measured again
    assert store.disk_full is None, store.disk_full
    assert len(files(store)) <= 2
    put(store, 5, start=650)


def test_readers_below_the_min_offset_move_on(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    results = put(store, 600)
    clock.at(73, 4)
    cycle(store)
    min_phy = store.get_min_phy_offset()
    assert min_phy > 0
    gone = [r for r in results if r.commitlog_offset < min_phy]
    kept = [r for r in results if r.commitlog_offset >= min_phy]
    assert gone and kept
    for qid in range(QUEUES):
        low = store.get_min_offset_in_queue("t", qid)
        first_kept = min(r.queue_offset for i, r in enumerate(results)
                         if i % QUEUES == qid and r.commitlog_offset >= min_phy)
        assert low == first_kept        # the queue starts at its first message still there
        got = store.get_message("g", "t", qid, 0, 8)
        assert got.status == GetMessageStatus.OFFSET_TOO_SMALL
        assert got.next_begin_offset == low and got.min_offset == low
        got = store.get_message("g", "t", qid, got.next_begin_offset, 8)
        assert got.status == GetMessageStatus.FOUND
        assert got.messages[0].commitlog_offset >= min_phy
    # scan starts at the min offset, from wherever it is asked to
    scanned = list(store.scan(0))
    assert [m.commitlog_offset for m in scanned] == [r.commitlog_offset for r in kept]
    # key queries do not return deleted messages
    assert store.query_message("t", "k0").messages == []
    last = len(results) - 1
    assert [m.body[:7] for m in store.query_message("t", f"k{last}").messages] == \
        [f"m{last:06d}".encode()]
    assert store.view_message(results[0].msg_id) is None
    assert store.look_message_by_offset(results[-1].commitlog_offset) is not None
    # the columnar reader (what the Spark source reads with) starts there too
    ranges = store.plan_ranges(1 << 16)
    assert ranges[0][0] == min_phy
    offsets = [o for lo, hi in ranges for b in store.read_range(lo, hi, include_body=False)
               for o in b.column("commitlog_offset").to_pylist()]
    assert offsets == [r.commitlog_offset for r in kept]
    assert [o for b in store.read_range(0, include_body=False)
            for o in b.column("commitlog_offset").to_pylist()] == offsets


def test_consume_queue_and_index_files_follow(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 800)
    root = Path(store.root)
    cq_before = sorted((root / "consumequeue" / "t" / "0").iterdir())
    index_before = sorted((root / "index").iterdir())
    assert len(cq_before) >= 4 and len(index_before) >= 4
    clock.at(73, 4)
    report = cycle(store)
    min_phy = store.get_min_phy_offset()
    cq_after = sorted((root / "consumequeue" / "t" / "0").iterdir())
    index_after = sorted((root / "index").iterdir())
    assert 1 <= len(cq_after) < len(cq_before)
    assert 1 <= len(index_after) < len(index_before)
    deleted = {d.path for d in report.deleted}
    assert {str(p) for p in cq_before[:len(cq_before) - len(cq_after)]} <= deleted
    # what is left: a queue file with a unit at or after the new min; index files ending
    # at or after it (or the newest one)
    for qid in range(QUEUES):
        cq = store.consume_queues.find("t", qid)
        first = cq.queue.files[0]
        assert first.file_from_offset <= cq.min_offset * 20
        unit = cq.get_unit(cq.min_offset)
        assert unit is not None and unit[0] >= min_phy
    for f in store.index_service.files[:-1]:
        assert f.end_phy_offset >= min_phy
    # and all of it survives a reopen (normal recovery)
    offsets = store.queue_offsets()
    store.shutdown()
    store = open_store()
    assert store.get_min_phy_offset() == min_phy
    assert store.queue_offsets() == offsets
    assert sorted((root / "consumequeue" / "t" / "0").iterdir()) == cq_after


def test_a_held_segment_waits_for_its_reader_or_is_forced(env) -> None:
    clock, disk, open_store = env
    store = open_store(destroy_mapedfile_interval_forcibly=120_000)
    put(store, 300)
    names = files(store)
    first = store.commit_log.queue.files[0]
    view = store.get_commitlog_data(0)      # a live view pins the first segment
    data = bytes(view[:64])
    disk.ratio = 0.87
    report = cycle(store)
    assert report.deleted == [] and report.waiting == first.file_name
    assert (Path(store.root) / "commitlog" / names[0]).exists()
    assert not first.is_available          # no new holders
    assert bytes(view[:64]) == data        # the reader still reads its bytes
    assert store.get_min_phy_offset() == int(names[1])      # readers are sent past it
    assert store.look_message_by_offset(0) is None
    assert list(store.scan())[0].commitlog_offset == int(names[1])
    view.release()                          # the reader lets go: the next run deletes
    report = cycle(store)
    assert report.deleted[0].path == first.file_name
    assert not (Path(store.root) / "commitlog" / names[0]).exists()
    # forced: a view that is never released is detached after the interval
    put(store, 300, start=300)
    second = store.commit_log.queue.files[0]
    held = store.get_commitlog_data(second.file_from_offset)
    report = cycle(store)
    assert report.waiting == second.file_name
    clock.mono += 120_000                   # destroy_mapedfile_interval_forcibly later
    report = cycle(store)
    assert report.deleted and report.deleted[0].path == second.file_name
    assert not Path(second.file_name).exists()
    assert bytes(held[:16]) == bytes(16)    # zeros, not a fault
    held.release()


def test_manual_deletion_at_any_hour(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 300)
    clock.at(73, 5)
    plan = store.clean_files(dry_run=True)
    assert plan.dry_run and plan.reasons == ["manual"]
    planned = [d.path for d in plan.deleted]
    n = len(files(store))
    assert sum(d.kind == "commitlog" for d in plan.deleted) == n - 1
    assert len(files(store)) == n           # a dry run changes nothing
    report = store.clean_files()
    assert report.reasons == ["manual"] and [d.path for d in report.deleted] == planned
    assert store.clean_commit_log.manual_delete_times == MAX_MANUAL_DELETE_FILE_TIMES - 1
    # later periodic runs keep deleting expired files at any hour
    put(store, 200, start=300)
    assert cycle(store).reasons == ["manual"] and len(files(store)) == 1


def test_stat_shows_usage_watermarks_and_the_next_run(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 200)
    disk.ratio = 0.80
    clock.at(73, 5)
    rt = store.describe()["retention"]
    assert rt["usedRatio"] == pytest.approx(0.80)
    assert (rt["diskMaxUsedSpaceRatio"], rt["diskSpaceCleanForciblyRatio"],
            rt["diskSpaceWarningLevelRatio"]) == (75, 85, 90)
    assert rt["disk"]["total"] > 0 and not rt["diskFull"]
    nxt = rt["nextRun"]
    assert nxt["reasons"] == ["space"] and nxt["dryRun"]
    assert sum(d["kind"] == "commitlog" for d in nxt["deleted"]) == len(files(store)) - 1


def test_delete_topic_removes_its_queues(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    put(store, 50)
    store.put_message(Message(topic="other", body=b"o"), 0)
    assert store.wait_dispatched()
    assert store.delete_topic("t")
    assert not (Path(store.root) / "consumequeue" / "t").exists()
    assert store.topics() == ["other"] and store.next_queue_offset("t", 0) == 0
    assert store.get_message("g", "t", 0, 0).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    # dispatch went on; a new message of the topic starts a new queue at offset 0
    r = store.put_message(Message(topic="t", body=b"new"), 0)
    assert r.queue_offset == 0 and store.wait_dispatched()
    got = store.get_message("g", "t", 0, 0)
    assert got.status == GetMessageStatus.FOUND and got.messages[0].body == b"new"
    assert store.clean_unused_topics({"t"}) == 1 and store.topics() == ["t"]
    assert store.delete_topic("missing") is False


def test_reopen_after_cleanup_recovers(env) -> None:
    clock, disk, open_store = env
    store = open_store()
    results = put(store, 400)
    clock.at(73, 4)
    cycle(store)
    min_phy = store.get_min_phy_offset()
    store.shutdown()
    # abnormal: the abort file is there, the checkpoint points before the min offset
    (Path(store.root) / "abort").touch()
    store = open_store()
    assert store.recovery is not None and store.recovery.abnormal
    assert store.get_min_phy_offset() == min_phy
    kept = [r for r in results if r.commitlog_offset >= min_phy]
    assert [m.commitlog_offset for m in store.scan()] == [r.commitlog_offset for r in kept]
    for qid in range(QUEUES):
        low = store.get_min_offset_in_queue("t", qid)
        got = store.get_message("g", "t", qid, low, 1000)
        assert got.messages[0].commitlog_offset >= min_phy
    put(store, 10, start=400)


# ---- SIGKILL while files are being deleted ----------------------------------------------

@pytest.mark.slow
def test_sigkill_during_deletion_loses_nothing_unexpired(tmp_path: Path) -> None:
    """20 rounds: a child writes while its cleanup deletes expired files without pause; it
    is killed right after a deletion (or in the middle of a run of them). Each time the
    store opens (abnormal recovery), and every acknowledged message at or past the new
    minimum offset (those retention did not delete) is read back by offset and by queue."""
    import json
    import queue
    import random
    import signal
    import subprocess
    import sys
    import threading

    import helpers
    import retention_child as child

    root = str(tmp_path / "store")
    rng = random.Random(1717)
    acked: dict[int, tuple[int, int, int]] = {}       # seq -> (qid, queue offset, phy)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(helpers.PACKAGE_ROOT), *helpers.TEST_PATHS, os.environ.get("PYTHONPATH", "")]))
    hour = time.localtime().tm_hour
    check_config = child.config(root).replace(delete_when=str((hour + 12) % 24))
    killed_after = []
    checked_rounds = 0                  # rounds with acknowledged messages left to check
    for round_no in range(20):
        proc = subprocess.Popen([sys.executable, str(Path(child.__file__)), root,
                                 str(round_no)], stdout=subprocess.PIPE, text=True, env=env,
                                cwd=str(helpers.TESTS), preexec_fn=helpers._child_setup)
        lines: queue.Queue[str | None] = queue.Queue()

        def read(out=proc.stdout, lines=lines) -> None:
            for line in out:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        want = rng.randint(1, 4)
        seen = 0
        deadline = time.monotonic() + 60
        try:
            while seen < want:
                assert time.monotonic() < deadline, f"round {round_no}: no deletion seen"
                try:
                    line = lines.get(timeout=1)
                except queue.Empty:
                    continue
                assert line is not None, f"round {round_no}: the child ended ({proc.wait()})"
                assert not line.startswith("FAIL"), line
                if line.startswith("ACK "):
                    _, seq, rows = line.split(" ", 2)
                    for i, row in enumerate(json.loads(rows)):
                        acked[int(seq) + i] = tuple(row)
                elif line.startswith("DEL "):
                    seen += 1
            time.sleep(rng.uniform(0, 0.01))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            reader.join(timeout=30)
        while True:                     # acks printed before the kill count too
            line = lines.get_nowait() if not lines.empty() else None
            if line is None:
                break
            if line.startswith("ACK "):
                _, seq, rows = line.split(" ", 2)
                for i, row in enumerate(json.loads(rows)):
                    acked[int(seq) + i] = tuple(row)
        killed_after.append(want)
        # the store opens, and nothing acknowledged that retention did not delete is lost
        with MessageStore.open(root, check_config, disk_probe=lambda path: 0.10) as store:
            assert store.recovery is not None and store.recovery.abnormal
            min_phy = store.get_min_phy_offset()
            kept = {seq: a for seq, a in acked.items() if a[2] >= min_phy}
            # the log's tail survives: it reaches past every acknowledged message, and the
            # segment being written is not deleted. (The newest acknowledged message may be
            # gone all the same: its segment is expired once the child rolls to the next,
            # possibly before it prints that next batch's ACK.)
            newest = max(a[2] for a in acked.values())
            assert store.get_max_phy_offset() > max(newest, min_phy), (round_no, newest,
                                                                      min_phy)
            checked_rounds += bool(kept)
            for seq, (qid, qoff, phy) in kept.items():
                msg = store.look_message_by_offset(phy)
                assert msg is not None and bytes(msg.body) == child.body(seq), (round_no, seq)
                got = store.get_message("check", "ret", qid, qoff, 1)
                if (got.status == GetMessageStatus.OFFSET_TOO_SMALL
                        and phy < min_phy + check_config.mapped_file_size_commit_log
                        and got.min_offset > qoff):
                    # the first segment was shut down for deletion but still held by a
                    # reader when the child died: its queue units were deleted with it (as
                    # RocketMQ's getMinOffset has it), the file goes at the next cleanup
                    continue
                assert got.status == GetMessageStatus.FOUND, (round_no, seq, got.status,
                                                              qid, qoff, got.min_offset)
                assert got.messages[0].commitlog_offset == phy
            scanned = {m.commitlog_offset for m in store.scan()}
            assert {a[2] for a in kept.values()} <= scanned
            for seq in [s for s, a in acked.items() if a[2] < min_phy]:
                del acked[seq]          # expired and deleted by retention
    assert len(killed_after) == 20
    assert checked_rounds >= 13, checked_rounds


def test_disk_usage_is_what_df_shows(tmp_path: Path) -> None:
    from rocketstore.store.services.clean import disk_used_ratio

    st = os.statvfs(tmp_path)
    used = st.f_blocks - st.f_bfree
    assert disk_used_ratio(str(tmp_path / "not" / "there")) == pytest.approx(
        used / (used + st.f_bavail), abs=0.01)
    assert 0.0 <= disk_used_ratio(str(tmp_path)) <= 1.0
