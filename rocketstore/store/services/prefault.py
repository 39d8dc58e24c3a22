"""CommitLogPrefaultService (rocketstore's own): keeps the CommitLog's pages faulted in for
writing a little ahead of the write position, on a background thread.

A first write to a page of a new segment costs a page fault (~0.7 us here, most of it the
kernel zeroing the page); at 1 KiB a message that is a third of an append. RocketMQ can warm
whole segments when they are created (warm_mapped_file_enable, off by default); this service
instead faults in a window of commit_log_prefault_ahead bytes ahead of the writer, so puts
find their pages mapped and the faults run on another core. The bytes are never changed
(MappedFile.prefault_follow), so it races with no append, and the loop runs without the GIL:
it never makes a producer wait.

Pages get their blocks on disk before they are faulted in (MappedFile.prefault_follow
allocates the window first), so the writer seldom allocates itself. When the disk has no
room the service backs off (ROOM_RETRY_S) and the writer's own allocation decides: a put that
cannot get blocks stores nothing and says CREATE_MAPPED_FILE_FAILED."""
from __future__ import annotations

from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.stop_flag import StopFlag
from rocketstore.store.mapped_file_queue import MappedFileQueue
from rocketstore.store.services.service_thread import ServiceThread

FOLLOW_INTERVAL_S = 0.0005      # how often the native loop looks at the write position
ROOM_RETRY_S = 0.1              # between allocation attempts while the disk has no room


class CommitLogPrefaultService(ServiceThread):
    wait_interval_s = 0.001     # between files (the native loop returns when one fills up)

    def __init__(self, queue: MappedFileQueue, ahead: int) -> None:
        super().__init__("CommitLogPrefaultService")
        self.queue = queue
        self.ahead = ahead
        self._stop = StopFlag()
        self._file: MappedFile | None = None
        self._done = 0              # prefaulted up to here in self._file

    @property
    def prefaulted_to(self) -> int:
        """CommitLog offset up to which pages were faulted in (0 before the first round)."""
        return 0 if self._file is None else self._file.file_from_offset + self._done

    def run_once(self) -> None:
        mf = self.queue.last_file()
        if mf is None or not mf.is_available or mf.is_full:
            return
        if mf is not self._file:
            self._file, self._done = mf, 0
        self._done = mf.prefault_follow(self.ahead, self._done, FOLLOW_INTERVAL_S, self._stop)
        want = min(mf.wrote_position + self.ahead, mf.file_size)
        if mf.is_available and mf.allocated_position < want and not self._stop.is_set():
            self._stopped.wait(ROOM_RETRY_S)    # the allocation failed: the disk is full

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        super().shutdown(timeout_s)

    def start(self) -> None:
        self._stop.clear()
        super().start()
