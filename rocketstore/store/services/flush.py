"""FlushRealTimeService (ASYNC_FLUSH): msync the CommitLog every flush_interval_commit_log ms
when at least flush_commit_log_least_pages are dirty, thoroughly every
flush_commit_log_thorough_interval ms; the thorough flush records the checkpoint's physic
timestamp."""
from __future__ import annotations

import time

from rocketstore.config import StoreConfig
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.mapped_file_queue import FlushFunction, MappedFileQueue
from rocketstore.store.services.service_thread import ServiceThread


class FlushRealTimeService(ServiceThread):
    def __init__(self, config: StoreConfig, queue: MappedFileQueue,
                 checkpoint: StoreCheckpoint, sync: FlushFunction | None = None) -> None:
        super().__init__("FlushRealTimeService")
        self.config = config
        self.queue = queue
        self._sync = sync       # None: the file's own msync
        self.checkpoint = checkpoint
        self.wait_interval_s = config.flush_interval_commit_log / 1000.0
        self._last_thorough = time.monotonic()
        self.flushes = 0

    def flush(self, thorough: bool = False) -> None:
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.config.flush_commit_log_thorough_interval:
            thorough = True
        if thorough:
            self._last_thorough = now
        self.queue.flush(0 if thorough else self.config.flush_commit_log_least_pages,
                         self._sync)
        self.flushes += 1
        if thorough and self.queue.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = self.queue.store_timestamp

    def run_once(self) -> None:
        self.flush()

    def on_shutdown(self) -> None:
        # RocketMQ retries the final flush a few times so a roll in between is covered.
        for _ in range(10):
            if self.queue.flush(0, self._sync):
                break
