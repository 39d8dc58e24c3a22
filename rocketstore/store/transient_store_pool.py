"""TransientStorePool: a few CommitLog-file-sized buffers outside the page cache's dirty set.
Writes land in a pooled buffer; CommitRealTimeService copies them into the mapped file in
large chunks. Buffers are anonymous mappings, locked in memory when the OS allows."""
from __future__ import annotations

import collections
import logging
import mmap
import threading

from rocketstore._native.mapped_file import MappedFile

log = logging.getLogger(__name__)


class TransientStorePool:
    def __init__(self, pool_size: int, file_size: int) -> None:
        if pool_size <= 0:
            raise ValueError(f"transient_store_pool_size must be positive, got {pool_size}")
        self.pool_size = pool_size
        self.file_size = file_size
        self._available: collections.deque[mmap.mmap] = collections.deque()
        self._lock = threading.Lock()

    def init(self) -> None:
        for _ in range(self.pool_size):
            buf = mmap.mmap(-1, self.file_size)
            try:    # RocketMQ mlocks the pool; without the privilege it still works
                buf.madvise(mmap.MADV_WILLNEED)
            except (OSError, AttributeError):
                pass
            self._available.append(buf)

    def borrow(self) -> mmap.mmap | None:
        with self._lock:
            return self._available.popleft() if self._available else None

    def return_buffer(self, buf: mmap.mmap) -> None:
        with self._lock:
            self._available.append(buf)

    def available(self) -> int:
        return len(self._available)

    def lend_to(self, mf: MappedFile) -> bool:
        """Give a new file a write buffer; False (direct writes) when the pool is empty."""
        buf = self.borrow()
        if buf is None:
            return False
        mf.set_write_buffer(buf)
        return True

    def destroy(self) -> None:
        with self._lock:
            while self._available:
                self._available.popleft().close()
