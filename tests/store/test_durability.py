"""append_message + on_durable: a SYNC_FLUSH put answered by a callback once its flush is done
(what a broker's event loop uses instead of blocking), FLUSH_DISK_TIMEOUT as a False callback,
answers at shutdown; the put lock's held time (isOSPageCacheBusy)."""
from __future__ import annotations

import threading
import time

from store_faults import message, open_store

from rocketstore.message import PutMessageStatus
from rocketstore.store.services.durability import DurabilityNotifier


def test_append_does_not_wait_and_the_callback_comes_after_the_flush(tmp_path):
    gate = threading.Event()
    flushed_to: list[int] = []

    def gated(mf, start: int, end: int) -> None:
        gate.wait(5)
        mf.sync(start, end)
        flushed_to.append(mf.file_from_offset + end)

    store = open_store(tmp_path / "s", flush_disk_type="SYNC_FLUSH", commit_log_flush=gated)
    try:
        answers: list[tuple[bool, int, float]] = []
        got = threading.Event()
        results = []
        t0 = time.monotonic()
        for i in range(5):
            msg, qid, _ = message("dur", i)
            r = store.append_message(msg, qid)
            assert r.status == PutMessageStatus.PUT_OK
            results.append(r)
            end = r.commitlog_offset + r.wrote_bytes

            def callback(ok: bool, end: int = end) -> None:
                answers.append((ok, end, time.monotonic()))
                if len(answers) == 5:
                    got.set()

            store.on_durable(end, callback)
        assert time.monotonic() - t0 < 3.0          # nobody waited for the gated flush (5 s)
        time.sleep(0.1)
        assert answers == []                         # not durable yet: no answer
        gate.set()
        assert got.wait(5)
        assert all(ok for ok, _, _ in answers)
        # every answer came after a flush that covered its bytes
        assert max(flushed_to) >= max(end for _, end, _ in answers)
    finally:
        gate.set()
        store.shutdown()


def test_a_flush_that_does_not_come_in_time_answers_false(tmp_path):
    stuck = threading.Event()

    def slow(mf, start: int, end: int) -> None:
        if not stuck.is_set():
            time.sleep(0.6)
        mf.sync(start, end)

    store = open_store(tmp_path / "s", flush_disk_type="SYNC_FLUSH", sync_flush_timeout=150,
                       commit_log_flush=slow)
    try:
        msg, qid, _ = message("late", 0)
        r = store.append_message(msg, qid)
        box: list[bool] = []
        done = threading.Event()
        t0 = time.monotonic()
        store.on_durable(r.commitlog_offset + r.wrote_bytes,
                         lambda ok: (box.append(ok), done.set()))
        assert done.wait(3)
        assert box == [False]
        assert 0.1 <= time.monotonic() - t0 < 1.5      # the timeout, not the 2 s flush
    finally:
        stuck.set()
        store.shutdown()


def test_waiting_callbacks_are_answered_at_shutdown(tmp_path):
    gate = threading.Event()

    def gated(mf, start: int, end: int) -> None:
        gate.wait(0.3)
        mf.sync(start, end)

    store = open_store(tmp_path / "s", flush_disk_type="SYNC_FLUSH", sync_flush_timeout=5000,
                       commit_log_flush=gated)
    answers: list[bool] = []
    msg, qid, _ = message("shut", 0)
    r = store.append_message(msg, qid)
    store.on_durable(r.commitlog_offset + r.wrote_bytes, answers.append)
    store.shutdown()        # the last flush makes it durable: answered True
    assert answers == [True]
    # after shutdown: refused, and a callback is answered at once by what is durable
    late: list[bool] = []
    assert store.append_message(message("shut", 1)[0], 0).status == \
        PutMessageStatus.SERVICE_NOT_AVAILABLE
    store.on_durable(10**12, late.append)
    assert late == [False]


def test_async_flush_answers_at_once(tmp_path):
    with open_store(tmp_path / "s") as store:
        msg, qid, _ = message("async", 0)
        r = store.append_message(msg, qid)
        assert r.ok
        box: list[bool] = []
        store.on_durable(r.commitlog_offset + r.wrote_bytes, box.append)
        assert box == [True]
        rb = store.put_messages([message("async", i)[0] for i in range(1, 4)], 0,
                                wait_flush=False)
        assert rb.ok and rb.stored == 3


def test_notifier_orders_and_fails_by_deadline():
    """The notifier alone, with a fake group commit: answers follow the durable offset, and
    a put past its deadline is answered False while later ones still wait."""
    durable = [0]
    cond = threading.Condition()

    def wait_flushed(offset: int, timeout_s: float) -> bool:
        with cond:
            cond.wait_for(lambda: durable[0] >= offset, timeout_s)
            return durable[0] >= offset

    clock = [100.0]
    notifier = DurabilityNotifier(wait_flushed, lambda: durable[0], timeout_s=1.0,
                                  clock=lambda: clock[0])
    notifier.max_wait_s = 0.01
    notifier.start()
    try:
        answers: list[tuple[int, bool]] = []
        for offset in (30, 10, 20):
            notifier.notify_when_durable(offset, lambda ok, o=offset: answers.append((o, ok)))
        with cond:
            durable[0] = 20
            cond.notify_all()
        deadline = time.monotonic() + 5
        while len(answers) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert answers == [(10, True), (20, True)]
        clock[0] += 2.0                               # 30's deadline passes
        while len(answers) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert answers[2] == (30, False)
        assert notifier.pending == 0
    finally:
        notifier.shutdown()


def test_put_lock_held_time(tmp_path):
    with open_store(tmp_path / "s") as store:
        assert store.put_lock_held_ms() == 0 and not store.is_os_page_cache_busy()
        lock = store.commit_log.put_lock
        with lock:
            time.sleep(0.05)
            held = store.put_lock_held_ms()
            assert 40 <= held < 5000
        assert store.put_lock_held_ms() == 0


def test_durable_watch_answers_on_the_polling_thread_after_the_round(tmp_path):
    """DurableWatch: no thread between the caller and the group commit; the round that makes
    a watched put durable writes the eventfd, and poll() answers in append order."""
    import select

    gate = threading.Event()

    def gated(mf, start: int, end: int) -> None:
        gate.wait(5)
        mf.sync(start, end)

    store = open_store(tmp_path / "s", flush_disk_type="SYNC_FLUSH", commit_log_flush=gated)
    try:
        watch = store.durable_watch()
        assert watch is not None and store.durable_watch() is watch     # one per store
        answers: list[tuple[int, bool]] = []
        for i in range(4):
            msg, qid, _ = message("watch", i)
            r = store.append_message(msg, qid)
            assert r.status == PutMessageStatus.PUT_OK
            watch.watch(r.commitlog_offset + r.wrote_bytes,
                        lambda ok, i=i: answers.append((i, ok)))
        assert watch.pending == 4
        watch.poll()
        assert answers == []                         # the round waits at the gate
        gate.set()
        readable, _, _ = select.select([watch.fileno()], [], [], 5)
        assert readable                              # the round wrote the eventfd
        deadline = time.monotonic() + 5
        while watch.pending and time.monotonic() < deadline:
            watch.poll()
            if watch.pending:
                select.select([watch.fileno()], [], [], 0.1)
        assert answers == [(0, True), (1, True), (2, True), (3, True)]
        msg, qid, _ = message("watch", 9)
        r = store.append_message(msg, qid)
        end = r.commitlog_offset + r.wrote_bytes
        last: list[bool] = []
        watch.watch(end, last.append)
        store.shutdown()                             # its last flush makes the put durable
        watch.close()                                # ... and close answers it, here
        assert last == [True] and watch.pending == 0
        late: list[bool] = []
        watch.watch(end, late.append)
        assert late == [True]
    finally:
        gate.set()
        if store.is_running:
            store.shutdown()


def test_durable_watch_is_none_without_sync_flush(tmp_path):
    store = open_store(tmp_path / "s")
    try:
        assert store.durable_watch() is None
    finally:
        store.shutdown()
