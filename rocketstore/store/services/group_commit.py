"""GroupCommitService (SYNC_FLUSH): producers wait until their offset is durable; the service
flushes once for all of them and wakes every producer whose offset is now durable.

The CommitLog's files are write-through in SYNC_FLUSH (MappedFile.enable_write_through):
producers append into an anonymous buffer, and a flush round hands everything written so far
to the file with one pwrite and makes it durable with one fdatasync. Nothing lingers: the
producers that arrive while a round runs all ride the next one, which starts as soon as this
one is over.

The hand-off is native (rocketstore._native.group_commit.GroupCommit): a producer waits on a
futex with the GIL released, and the flush rounds on the current CommitLog file (wait for a
waiting producer, pwrite, fdatasync, publish, wake) run without the GIL too. This thread
comes back to Python when that file is full (to move on to the next one), when idle, every
``max_busy_s`` under load (to refresh the queue's flushed_where and the checkpoint's physic
timestamp), and at shutdown.

A round that starts while producers the round before it woke are still appending their next
message waits for them (GroupCommit.fill_max_s at most), so the flushes carry every producer
instead of two alternating halves; a round after one that woke a single producer never waits.

Given a sync function (a test's, see MessageStore.open), the same native rounds (leaders,
the waits for riders, the wake-ups) call sync(file, start, end) instead of fdatasync, with
the GIL, and wake the producers it covers only after it returned; so do the rounds run from
Python (idle, shutdown, a file not flushable natively)."""
from __future__ import annotations

from rocketstore._native.group_commit import RUN_IDLE, RUN_UNAVAILABLE, GroupCommit
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.mapped_file_queue import FlushFunction, MappedFileQueue
from rocketstore.store.services.service_thread import ServiceThread


class GroupCommitService(ServiceThread):
    wait_interval_s = 0.010     # idle rounds: flush what puts without waiters left behind
    max_busy_s = 0.050          # under load: back to Python this often

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint,
                 sync: FlushFunction | None = None) -> None:
        super().__init__("GroupCommitService")
        self.queue = queue
        self._sync = sync       # None: the file's own fdatasync / msync
        self.checkpoint = checkpoint
        self.group = GroupCommit(queue.flushed_where)
        self.group.sync = sync
        self._errors_seen = 0

    @property
    def flushes(self) -> int:
        """Flushes that made data durable (each covers every producer waiting for it)."""
        return self.group.flushes

    def wait_flushed(self, next_offset: int, timeout_s: float) -> bool:
        """A producer: True when everything below next_offset is durable within timeout_s
        (False: the put reports FLUSH_DISK_TIMEOUT)."""
        return self.group.wait_flushed(next_offset, timeout_s)

    def start(self) -> None:
        if self._thread is None:
            self.group.reset(self.queue.flushed_where)     # after recovery set the end
        super().start()

    def wakeup(self) -> None:
        """A put that does not wait (WAIT=false): flush it soon all the same."""
        self.group.kick()

    def wait_for_running(self, interval_s: float) -> None:
        """No wait here (run_once waits natively for producers), unless the last round
        failed (a write or sync error): then pause, so a failing disk is not retried in a
        spin."""
        if self.errors != self._errors_seen:
            self._errors_seen = self.errors
            self._stopped.wait(interval_s)

    def run_once(self) -> None:
        queue = self.queue
        where = queue.flushed_where
        mf = queue.find_by_offset(where, where == 0)
        if mf is not None:
            try:
                result = self.group.run(mf, self.wait_interval_s, self.max_busy_s)
            finally:
                queue.flushed_where = max(where, self.group.flushed_where)
                self._publish_timestamp(self.group.store_timestamp)
            if result == RUN_IDLE:      # flush what puts without a waiter left behind
                self._commit()
            if result != RUN_UNAVAILABLE:
                return
        self.group.wait_requests(self.wait_interval_s)
        self._commit()

    def _commit(self) -> None:
        """One round from Python: flush (twice when a file rolled in between), publish."""
        queue = self.queue
        flushes = 0
        for _ in range(2):
            before = queue.flushed_where
            queue.flush(0, self._sync)
            if queue.flushed_where == before:
                break
            flushes += 1
        self.group.publish(queue.flushed_where, flushes)
        self._publish_timestamp(queue.store_timestamp)

    def _publish_timestamp(self, ts: int) -> None:
        if ts > 0:
            if ts > self.queue.store_timestamp:
                self.queue.store_timestamp = ts
            self.checkpoint.physic_msg_timestamp = self.queue.store_timestamp

    def shutdown(self, timeout_s: float = 10.0) -> None:
        started = self._thread is not None
        self._stopped.set()
        self.group.interrupt()          # out of a native round, back to the loop's check
        super().shutdown(timeout_s)
        if not started:                 # no loop to run on_shutdown: still answer waiters
            self.group.close()

    def on_shutdown(self) -> None:
        """Flush what is left, then wake every producer still waiting with its answer (also
        when that last flush fails: they get FLUSH_DISK_TIMEOUT)."""
        try:
            self._commit()
        finally:
            self.group.close()

