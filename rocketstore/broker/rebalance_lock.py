"""RebalanceLockManager: which client of a consumer group holds each queue (orderly
consumption). A lock is held by one client id; it is renewed by that client's next lock
request, and expires ``rebalanceLockMaxLiveTime`` (60 s) after its last renewal, so a client
that died without unlocking loses its queues within a minute."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MessageQueueKey = tuple[str, str, int]  # (topic, brokerName, queueId)


@dataclass
class _Lock:
    client_id: str
    last_update_ms: float


class RebalanceLockManager:
    def __init__(self, max_live_time_ms: int = 60_000,
                 clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.max_live_time_ms = max_live_time_ms
        self._clock_ms = clock_ms
        self._locks: dict[str, dict[MessageQueueKey, _Lock]] = {}

    def _live(self, lock: _Lock | None, now: float) -> bool:
        return lock is not None and now - lock.last_update_ms <= self.max_live_time_ms

    def try_lock_batch(self, group: str, queues: Iterable[MessageQueueKey], client_id: str
                       ) -> list[MessageQueueKey]:
        """Lock (or renew) each queue free or already held by client_id; returns those held."""
        now = self._clock_ms()
        table = self._locks.setdefault(group, {})
        locked = []
        for mq in queues:
            lock = table.get(mq)
            if lock is None or not self._live(lock, now) or lock.client_id == client_id:
                table[mq] = _Lock(client_id, now)
                locked.append(mq)
        return locked

    def unlock_batch(self, group: str, queues: Iterable[MessageQueueKey], client_id: str) -> None:
        table = self._locks.get(group)
        if table is None:
            return
        for mq in queues:
            lock = table.get(mq)
            if lock is not None and lock.client_id == client_id:
                del table[mq]
        if not table:
            del self._locks[group]

    def holder(self, group: str, mq: MessageQueueKey) -> str | None:
        lock = self._locks.get(group, {}).get(mq)
        return lock.client_id if self._live(lock, self._clock_ms()) and lock is not None else None
