"""CommitLogPrefaultService (rocketstore's own): keeps the CommitLog's pages faulted in for
writing a little ahead of the write position, on a background thread.

A first write to a page of a new segment costs a page fault (~0.7 us here, most of it the
kernel zeroing the page); at 1 KiB a message that is a third of an append. RocketMQ can warm
whole segments when they are created (warm_mapped_file_enable, off by default); this service
instead faults in a window of commit_log_prefault_ahead bytes ahead of the writer, so puts
find their pages mapped and the faults run on another core. The bytes are never changed
(MappedFile.prefault), so it races with no append."""
from __future__ import annotations

from rocketstore._native.mapped_file import MappedFile
from rocketstore.store.mapped_file_queue import MappedFileQueue
from rocketstore.store.service_thread import ServiceThread

CHUNK = 4 * 1024 * 1024     # per native call (GIL released): ~0.7 ms of faults


class CommitLogPrefaultService(ServiceThread):
    wait_interval_s = 0.001

    def __init__(self, queue: MappedFileQueue, ahead: int) -> None:
        super().__init__("CommitLogPrefaultService")
        self.queue = queue
        self.ahead = ahead
        self._file: MappedFile | None = None
        self._done = 0              # prefaulted up to here in self._file
        self.prefaulted_bytes = 0

    def run_once(self) -> None:
        mf = self.queue.last_file()
        if mf is None or not mf.is_available:
            return
        if mf is not self._file:
            self._file, self._done = mf, 0
        wrote = mf.wrote_position
        target = min(wrote + self.ahead, mf.file_size)
        start = max(self._done, wrote)
        while start < target and not self.is_stopped:
            end = mf.prefault(start, min(CHUNK, target - start))
            if end <= start:        # closing, or appends go to a pool buffer
                break
            self.prefaulted_bytes += end - start
            start = end
        self._done = max(self._done, start)
