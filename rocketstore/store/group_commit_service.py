"""GroupCommitService (SYNC_FLUSH): producers queue a request for "durable up to offset X" and
wait; the service swaps the request lists under a lock, flushes once for all of them (twice
when a file rolled in between) and wakes every producer whose offset is now durable."""
from __future__ import annotations

import threading
import time

from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.mapped_file_queue import MappedFileQueue
from rocketstore.store.service_thread import ServiceThread

MAX_LINGER_S = 0.002


class GroupCommitRequest:
    __slots__ = ("next_offset", "_done", "ok")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self._done = threading.Event()
        self.ok = False

    def complete(self, ok: bool) -> None:
        self.ok = ok
        self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """True when flushed in time; False on timeout (the put reports FLUSH_DISK_TIMEOUT)."""
        return self._done.wait(timeout_s) and self.ok


class GroupCommitService(ServiceThread):
    wait_interval_s = 0.010

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint) -> None:
        super().__init__("GroupCommitService")
        self.queue = queue
        self.checkpoint = checkpoint
        self._lock = threading.Lock()
        self._requests_write: list[GroupCommitRequest] = []
        self._requests_read: list[GroupCommitRequest] = []
        self.flushes = 0
        self._last_batch = 1        # requests the last flush covered
        self._linger_s = 0.0        # how long to wait for that many again

    def put_request(self, request: GroupCommitRequest) -> None:
        with self._lock:
            self._requests_write.append(request)
        self.wakeup()

    def on_wait_end(self) -> None:
        with self._lock:
            self._requests_write, self._requests_read = (self._requests_read,
                                                         self._requests_write)

    def _do_commit(self) -> None:
        if not self._requests_read:
            # keep the log flushing even with no waiting producer (puts made before a switch)
            self.queue.flush(0)
            return
        for request in self._requests_read:
            flushed = self.queue.flushed_where >= request.next_offset
            for _ in range(2):          # the second flush covers a roll to the next file
                if flushed:
                    break
                self.queue.flush(0)
                self.flushes += 1
                flushed = self.queue.flushed_where >= request.next_offset
            request.complete(flushed)
        if self.queue.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = self.queue.store_timestamp
        self._requests_read = []

    def _linger(self) -> None:
        """Before flushing, wait briefly for as many requests as the last round had (at most
        half the last flush's duration): producers released by that flush are on their way
        back, and one msync can cover them all (PostgreSQL's commit_delay idea, adaptive)."""
        target = self._last_batch
        if not self._requests_read or len(self._requests_read) >= target or self._linger_s <= 0:
            return
        deadline = time.monotonic() + self._linger_s
        while True:
            with self._lock:
                if self._requests_write:
                    self._requests_read.extend(self._requests_write)
                    self._requests_write = []
            remaining = deadline - time.monotonic()
            if len(self._requests_read) >= target or remaining <= 0:
                return
            if self._wakeup.wait(remaining):
                self._wakeup.clear()

    def run_once(self) -> None:
        self._linger()
        batch = len(self._requests_read)
        started = time.monotonic()
        self._do_commit()
        if batch:
            self._last_batch = batch
            self._linger_s = min(0.5 * (time.monotonic() - started), MAX_LINGER_S)

    def on_shutdown(self) -> None:
        self.on_wait_end()
        self._do_commit()
