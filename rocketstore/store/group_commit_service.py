"""GroupCommitService (SYNC_FLUSH): producers queue a request for "durable up to offset X" and
wait; the service swaps the request lists under a lock, flushes once for all of them (twice
when a file rolled in between) and wakes every producer whose offset is now durable."""
from __future__ import annotations

import threading

from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.mapped_file_queue import MappedFileQueue
from rocketstore.store.service_thread import ServiceThread


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

    def run_once(self) -> None:
        self._do_commit()

    def on_shutdown(self) -> None:
        self.on_wait_end()
        self._do_commit()
