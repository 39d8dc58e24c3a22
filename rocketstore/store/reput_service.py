"""ReputMessageService: follows the CommitLog and hands new records, decoded natively in
batches, to the dispatchers (ConsumeQueue, IndexFile) and the arrival listeners."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from rocketstore._native.codec import DispatchBatch, dispatch_region
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.service_thread import ServiceThread

log = logging.getLogger("rocketstore.store")

Dispatcher = Callable[[DispatchBatch], None]
# listener(topic, queue_id, next_queue_offset): new messages are visible in that queue
ArrivalListener = Callable[[str, int, int], None]


class ReputMessageService(ServiceThread):
    wait_interval_s = 0.001     # RocketMQ sleeps 1 ms between rounds; puts also wake it

    def __init__(self, commit_log: CommitLog, *, batch_records: int = 8192) -> None:
        super().__init__("ReputMessageService")
        self.commit_log = commit_log
        self.batch_records = batch_records
        self.reput_from_offset = 0
        self.dispatchers: list[Dispatcher] = []
        self.arrival_listeners: list[ArrivalListener] = []
        self.dispatched_records = 0
        self.dispatched_timestamp = 0    # store time of the newest record dispatched
        self._round_lock = threading.Lock()
        self._corrupt_at: int | None = None

    def behind(self) -> int:
        """dispatch_behind_bytes: CommitLog bytes not dispatched yet."""
        return max(0, self.commit_log.max_offset() - self.reput_from_offset)

    def do_reput(self) -> int:
        """Dispatch everything readable now; returns the number of records dispatched."""
        total = 0
        with self._round_lock:
            while True:
                offset = self.reput_from_offset
                if offset < self.commit_log.min_offset():
                    offset = self.reput_from_offset = self.commit_log.min_offset()
                if offset >= self.commit_log.max_offset():
                    break
                mf = self.commit_log.queue.find_by_offset(offset)
                if mf is None:
                    break
                batch = dispatch_region(mf, offset - mf.file_from_offset,
                                        max_records=self.batch_records)
                if len(batch):
                    for dispatch in self.dispatchers:
                        dispatch(batch)
                    total += len(batch)
                    self.dispatched_records += len(batch)
                    self.dispatched_timestamp = int(batch.store_timestamps[-1])
                    self._notify_arrivals(batch)
                if batch.stop_status == "corrupt":
                    if self._corrupt_at != batch.next_offset:
                        self._corrupt_at = batch.next_offset
                        log.error("dispatch stopped at CommitLog offset %d: %s",
                                  batch.next_offset, batch.reason)
                    self.reput_from_offset = batch.next_offset
                    break
                next_offset = batch.next_offset
                if next_offset == offset:
                    break
                self.reput_from_offset = next_offset
        return total

    def _notify_arrivals(self, batch: DispatchBatch) -> None:
        if not self.arrival_listeners:
            return
        key = batch.topic_ids.astype(np.int64) << 32 | batch.queue_ids.astype(np.int64)
        last = {}
        for k, qoff in zip(key.tolist(), batch.queue_offsets.tolist(), strict=True):
            last[k] = qoff
        for k, qoff in last.items():
            topic = batch.topics[k >> 32]
            for listener in self.arrival_listeners:
                try:
                    listener(topic, k & 0xFFFFFFFF, qoff + 1)
                except Exception:  # noqa: BLE001 - a listener must not stop dispatch
                    log.exception("message arrival listener failed")

    def run_once(self) -> None:
        self.do_reput()

    def on_shutdown(self) -> None:
        self.do_reput()
