"""BrokerStats: the broker's counters (messages and bytes put and got, per topic and in total,
rejections), and rates over the last minute for GET_BROKER_RUNTIME_INFO and GET_CONSUME_STATS.
Only the event loop thread updates them."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable


class _Rate:
    """Events per second over a sliding window of one-second buckets."""

    def __init__(self, window_s: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._buckets: collections.deque[list[float]] = collections.deque()

    def add(self, count: int) -> None:
        second = int(self._clock())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += count
        else:
            self._buckets.append([second, count])
            while self._buckets and self._buckets[0][0] <= second - self.window_s:
                self._buckets.popleft()

    def per_second(self, over_s: int | None = None) -> float:
        over_s = over_s or self.window_s
        now = int(self._clock())
        total = sum(count for second, count in self._buckets if second > now - over_s)
        return total / over_s


class BrokerStats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.started_ms = int(time.time() * 1000)
        self.put_messages = 0
        self.put_bytes = 0
        self.got_messages = 0
        self.got_bytes = 0
        self.busy_rejections = 0
        self.put_by_topic: collections.Counter[str] = collections.Counter()
        self.got_by_group_topic: collections.Counter[str] = collections.Counter()
        self._put_rate = _Rate(clock=clock)
        self._got_rate = _Rate(clock=clock)
        self._got_rate_by_group_topic: dict[str, _Rate] = {}
        self._clock = clock

    def record_put(self, topic: str, messages: int, size: int) -> None:
        self.put_messages += messages
        self.put_bytes += size
        self.put_by_topic[topic] += messages
        self._put_rate.add(messages)

    def record_get(self, group: str, topic: str, messages: int, size: int) -> None:
        self.got_messages += messages
        self.got_bytes += size
        key = f"{topic}@{group}"
        self.got_by_group_topic[key] += messages
        self._got_rate.add(messages)
        rate = self._got_rate_by_group_topic.get(key)
        if rate is None:
            rate = self._got_rate_by_group_topic[key] = _Rate(clock=self._clock)
        rate.add(messages)

    def put_tps(self, over_s: int = 10) -> float:
        return self._put_rate.per_second(over_s)

    def get_tps(self, over_s: int = 10) -> float:
        return self._got_rate.per_second(over_s)

    def consume_tps(self, group: str, topic: str, over_s: int = 60) -> float:
        rate = self._got_rate_by_group_topic.get(f"{topic}@{group}")
        return 0.0 if rate is None else rate.per_second(over_s)
