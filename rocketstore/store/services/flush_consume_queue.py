"""FlushConsumeQueueService: msync ConsumeQueue files every flush_interval_consume_queue ms,
only when flush_consume_queue_least_pages are dirty, thoroughly every
flush_consume_queue_thorough_interval ms (RocketMQ's defaults: 1 s, 2 pages, 60 s)."""
from __future__ import annotations

import time
from collections.abc import Callable

from rocketstore.config import StoreConfig
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.consume_queue_table import ConsumeQueueTable
from rocketstore.store.services.service_thread import ServiceThread


class FlushConsumeQueueService(ServiceThread):
    def __init__(self, config: StoreConfig, queues: ConsumeQueueTable,
                 checkpoint: StoreCheckpoint, dispatched_timestamp: Callable[[], int]) -> None:
        super().__init__("FlushConsumeQueueService")
        self.config = config
        self.queues = queues
        self.checkpoint = checkpoint
        # store time of the newest record dispatched: read before a flush, recorded after it
        self.dispatched_timestamp = dispatched_timestamp
        self.wait_interval_s = config.flush_interval_consume_queue / 1000.0
        self._last_thorough = time.monotonic()

    def flush(self, thorough: bool = False) -> None:
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.config.flush_consume_queue_thorough_interval:
            thorough = True
        if thorough:
            self._last_thorough = now
        newest = self.dispatched_timestamp()
        self.queues.flush(0 if thorough else self.config.flush_consume_queue_least_pages)
        if thorough:
            if newest > 0:
                self.checkpoint.logics_msg_timestamp = newest
            self.checkpoint.flush()

    def run_once(self) -> None:
        self.flush()

    def on_shutdown(self) -> None:
        self.flush(thorough=True)
