"""SYNC_FLUSH group commit: shared flushes, PUT_OK only after the flush covering a put returned,
FLUSH_DISK_TIMEOUT, slow, hanging and failing disks (through the commit_log_flush seam),
waiters answered at shutdown, the write-through CommitLog files."""
from __future__ import annotations

import threading
import time

import pytest
import refcodec
from store_faults import (
    message,
    open_store,
)

from rocketstore.message import GetMessageStatus, PutMessageStatus

# ---- group commit and FLUSH_DISK_TIMEOUT ----------------------------------------------------

def test_flush_disk_timeout_when_msync_is_slow(tmp_path):
    root = tmp_path / "store"
    slow = threading.Event()
    slow.set()

    def slowed(mf, start: int, end: int) -> None:   # a disk slowed artificially
        if slow.is_set():
            time.sleep(0.8)
        mf.sync(start, end)

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

    def counting(mf, start: int, end: int) -> None:
        time.sleep(0.002)       # a disk that takes ~2 ms per flush
        mf.sync(start, end)
        msyncs.append(mf.file_from_offset + end)

    store = open_store(root, flush_disk_type="SYNC_FLUSH", commit_log_flush=counting)
    try:
        statuses = _produce_together(store, producers, per_thread, "gc")
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
    gc.publish(600, flushes=1)                  # covers the first half only
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
    assert gc.flushes == 2 and gc.sync_seconds > 0
    mf.close()


def test_native_group_commit_run_writes_through(tmp_path):
    """run() on a write-through file: producers are released once their bytes were written
    to the file (pwrite from the buffer) and made durable; readers see them from then on."""
    import os

    from rocketstore._native.group_commit import RUN_FULL, GroupCommit
    from rocketstore._native.mapped_file import MappedFile
    size = 16 * 4096
    path = tmp_path / f"{size:020d}"
    mf = MappedFile(path, size)
    mf.enable_write_through()
    gc = GroupCommit(size)
    payload = os.urandom(3000)
    assert mf.append(payload)
    assert mf.read_position == 0
    out: list[int] = []
    flusher = threading.Thread(target=lambda: out.append(gc.run(mf, 10.0, 60.0)))
    flusher.start()
    assert gc.wait_flushed(size + 3000, 60.0)
    assert mf.read_position == 3000 and mf.flushed_position == 3000
    with open(path, "rb") as f:
        assert f.read(3000) == payload
    rest = os.urandom(size - 3000)
    assert mf.append(rest)
    assert gc.wait_flushed(2 * size, 60.0)
    flusher.join(30)
    assert out == [RUN_FULL] and mf.flushed_position == size
    with open(path, "rb") as f:
        assert f.read() == payload + rest
    assert gc.flushes == 2 and gc.sync_seconds > 0 and gc.write_seconds > 0
    mf.close()


def test_put_ok_only_after_the_flush_covering_it_returned(tmp_path):
    """The issue's proof: an injected flush function records every range it is asked to
    make durable, and when its call returned; every PUT_OK put (8 producers, across file
    rolls) returned after a returned call covered all of its bytes. The flush function is
    slow, so a put answered before its flush returned would be seen. The function is
    called by the native group commit, as fdatasync is in production: rounds led by
    producers on their own threads (only native rounds do that) and rounds that waited for
    the producers the round before woke."""
    root = tmp_path / "store"
    lock = threading.Lock()
    events: list[tuple[str, int, int]] = []     # ("returned" | "put", start, end), in order
    asked: list[tuple[int, int]] = []
    callers: list[str] = []

    def recording(mf, start: int, end: int) -> None:
        base = mf.file_from_offset
        with lock:
            asked.append((base + start, base + end))
            callers.append(threading.current_thread().name)
        time.sleep(0.002)
        mf.sync(start, end)
        with lock:
            events.append(("returned", base + start, base + end))

    store = open_store(root, flush_disk_type="SYNC_FLUSH", commit_log_flush=recording)
    group = store.commit_log.flush_service.group
    assert group.sync is recording
    producers, per_thread = 8, 40
    try:
        def produce(t: int) -> None:
            for i in range(per_thread):
                msg, qid, _ = message(f"rec{t}", i)
                r = store.put_message(msg, qid)
                assert r.status == PutMessageStatus.PUT_OK, r.status
                with lock:
                    events.append(("put", r.commitlog_offset,
                                   r.commitlog_offset + r.wrote_bytes))
        threads = [threading.Thread(target=produce, args=(t,), name=f"producer-{t}")
                   for t in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert group.fill_waits > 0
        batch = [message("recbatch", i) for i in range(5)]
        rb = store.put_messages([m for m, _, _ in batch], [q for _, q, _ in batch])
        assert rb.status == PutMessageStatus.PUT_OK
        with lock:
            end = int(rb.commitlog_offsets[-1] + rb.sizes[-1])
            events.append(("put", int(rb.commitlog_offsets[0]), end))
    finally:
        store.shutdown()
    puts = [e for e in events if e[0] == "put"]
    assert len(puts) == producers * per_thread + 1
    assert len(list((root / "commitlog").iterdir())) > 2        # it rolled
    durable: list[tuple[int, int]] = []         # ranges whose call returned, so far
    for kind, start, end in events:
        if kind == "returned":
            durable.append((start, end))
            continue
        # the put's bytes [start, end) are covered by the ranges returned before it
        covered = start
        for a, b in sorted(durable):
            if a <= covered < b:
                covered = b
        assert covered >= end, f"put [{start}, {end}) answered before its flush returned"
    # asked ranges are in log order and never overlap: nothing is made durable twice
    for (a0, b0), (a1, _) in zip(asked, asked[1:], strict=False):
        assert a0 < b0 and b0 <= a1
    assert any(name.startswith("producer-") for name in callers), set(callers)


def _produce_together(store, producers: int, per_thread: int, tag: str) -> list[int]:
    statuses: list[int] = []

    def produce(t: int) -> None:
        for i in range(per_thread):
            msg, qid, _ = message(f"{tag}{t}", i)
            statuses.append(store.put_message(msg, qid).status)

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_rounds_wait_for_the_producers_the_last_round_woke(tmp_path):
    """Each producer has one put in flight: a round that started as soon as the last one
    ended would carry only the producers that asked meanwhile, and the others would ride
    the round after (two alternating halves). A round waits for the producers the round
    before it woke, so with generous bounds the rounds carry all 4, but for the first few
    and those around a roll to the next file."""
    root = tmp_path / "store"
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    group = store.commit_log.flush_service.group
    group.fill_max_s = group.fill_gap_s = 2.0  # wait for them however slow they are
    producers, per_thread = 4, 60
    try:
        flushes0 = group.flushes
        statuses = _produce_together(store, producers, per_thread, "fill")
        flushes = group.flushes - flushes0
    finally:
        store.shutdown()
    assert statuses.count(PutMessageStatus.PUT_OK) == producers * per_thread
    assert group.fill_waits > 0
    # 60 full rounds, plus those around the five rolls to a new file: 65-67 on a quiet
    # machine, 66-94 with two busy loops beside the test (descheduled producers split some
    # rounds). Without the wait: 120-127, quiet or not.
    assert flushes <= per_thread * 7 // 4, f"{flushes} flushes for {producers} x {per_thread}"
    assert len(list(refcodec.iter_commitlog(root))) == producers * per_thread


def test_lone_producer_never_waits_for_riders(tmp_path):
    """A round after one that woke a single producer does not wait: a lone producer pays
    the disk and nothing else. When the other producers are gone, one round at most waits
    (for producers that will not come back, up to fill_max_s)."""
    root = tmp_path / "store"
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    group = store.commit_log.flush_service.group
    group.fill_max_s = 0.05
    try:
        assert _produce_together(store, 1, 50, "alone") == [PutMessageStatus.PUT_OK] * 50
        assert group.fill_waits == 0
        assert _produce_together(store, 4, 20, "crowd").count(PutMessageStatus.PUT_OK) == 80
        waits = group.fill_waits
        assert _produce_together(store, 1, 50, "left") == [PutMessageStatus.PUT_OK] * 50
        assert group.fill_waits - waits <= 1
    finally:
        store.shutdown()
    assert len(list(refcodec.iter_commitlog(root))) == 180


def test_group_commit_sync_must_be_callable():
    from rocketstore._native.group_commit import GroupCommit
    gc = GroupCommit(0)
    assert gc.sync is None
    with pytest.raises(TypeError, match="sync must be callable"):
        gc.sync = 3
    gc.sync = print
    assert gc.sync is print
    gc.sync = None
    assert gc.sync is None


def test_sync_flush_commit_log_files_write_through(tmp_path):
    """SYNC_FLUSH CommitLog files are write-through (new ones, and the last one again after a
    restart); ASYNC_FLUSH ones are written through their mapping."""
    root = tmp_path / "store"
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    try:
        for i in range(80):             # ~100 KB: two files of 64 KiB
            msg, qid, _ = message("wt", i)
            assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
        files = store.commit_log.queue.files
        assert len(files) >= 2 and all(f.write_through for f in files)
        assert files[-1].read_position == files[-1].wrote_position
    finally:
        store.shutdown()
    for abnormal in (False, True):
        if abnormal:
            (root / "abort").touch()
        store = open_store(root, flush_disk_type="SYNC_FLUSH")
        try:
            last = store.commit_log.queue.last_file()
            assert last.write_through and not last.is_full
            msg, qid, d = message("wt", 100 + abnormal)
            r = store.put_message(msg, qid)
            assert r.status == PutMessageStatus.PUT_OK
            assert bytes(store.look_message_by_offset(r.commitlog_offset).body) == d["body"]
            assert store.wait_dispatched()
            got = store.get_message("g", d["topic"], qid, 0, 1000)
            assert r.commitlog_offset in [m.commitlog_offset for m in got.messages]
        finally:
            store.shutdown()
    assert len(list(refcodec.iter_commitlog(root))) == 82
    for changes in ({"flush_disk_type": "ASYNC_FLUSH"},
                    {"flush_disk_type": "SYNC_FLUSH", "commit_log_write_through": False}):
        store = open_store(root, **changes)
        try:
            for i in range(60):         # into a new file too
                msg, qid, _ = message("wt", 300 + i)
                assert store.put_message(msg, qid).status == PutMessageStatus.PUT_OK
            assert not any(f.write_through for f in store.commit_log.queue.files)
            if changes["flush_disk_type"] == "SYNC_FLUSH":     # every PUT_OK was flushed
                assert store.commit_log.flush_service.group.flushed_where == \
                    store.get_max_phy_offset()
        finally:
            store.shutdown()
    assert len(list(refcodec.iter_commitlog(root))) == 202


@pytest.mark.parametrize("wake_chains", [1, 3, 0])
def test_sync_flush_many_producers_across_files(tmp_path, wake_chains):
    """32 SYNC_FLUSH producers through the native group commit, rolling over many 64 KiB
    CommitLog files: every put is PUT_OK (a producer the wake-up chain left asleep would get
    FLUSH_DISK_TIMEOUT after its 5 s), flushes are shared, and everything is on disk. Woken
    in one chain (each woken producer wakes the next), three, or all at once."""
    root = tmp_path / "store"
    producers, per_thread = 32, 25
    store = open_store(root, flush_disk_type="SYNC_FLUSH")
    group = store.commit_log.flush_service.group
    assert group.wake_chains == 1       # the default
    group.wake_chains = wake_chains
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
    def failing(mf, start: int, end: int) -> None:     # a disk that never completes one
        raise OSError("flush failed (simulated)")

    store = open_store(root, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=60_000,
                       commit_log_flush=failing)
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

    def maybe(mf, start: int, end: int) -> None:
        if hang.is_set():
            raise OSError("disk unavailable (simulated)")
        mf.sync(start, end)

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

    def flaky(mf, start: int, end: int) -> None:
        if failing.is_set():
            raise OSError("fdatasync failed (simulated)")
        mf.sync(start, end)

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
