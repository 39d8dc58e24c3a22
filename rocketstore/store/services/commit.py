"""CommitRealTimeService (transient_store_pool_enable): copy what producers wrote into pooled
buffers into the mapped CommitLog files every commit_interval_commit_log ms (at least
commit_commit_log_least_pages, all of it every commit_commit_log_thorough_interval ms), hand
full files' buffers back to the pool and wake the flush service."""
from __future__ import annotations

import time

from rocketstore.config import StoreConfig
from rocketstore.store.mapped_file_queue import MappedFileQueue
from rocketstore.store.services.service_thread import ServiceThread
from rocketstore.store.transient_store_pool import TransientStorePool


class CommitRealTimeService(ServiceThread):
    def __init__(self, config: StoreConfig, queue: MappedFileQueue, pool: TransientStorePool,
                 flush_service: ServiceThread) -> None:
        super().__init__("CommitRealTimeService")
        self.config = config
        self.queue = queue
        self.pool = pool
        self.flush_service = flush_service
        self.wait_interval_s = config.commit_interval_commit_log / 1000.0
        self._last_thorough = time.monotonic()

    def commit(self, thorough: bool = False) -> None:
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.config.commit_commit_log_thorough_interval:
            thorough = True
        if thorough:
            self._last_thorough = now
        least = 0 if thorough else self.config.commit_commit_log_least_pages
        while True:
            before = self.queue.committed_where
            done, returned = self.queue.commit(least)
            for buf in returned:
                self.pool.return_buffer(buf)
            if self.queue.committed_where != before:
                self.flush_service.wakeup()
            if done or self.queue.committed_where == before:
                break

    def run_once(self) -> None:
        self.commit()

    def on_shutdown(self) -> None:
        self.commit(thorough=True)
