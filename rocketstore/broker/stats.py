"""BrokerStats: the broker's counters (messages and bytes put and got, per topic and in total,
rejections), and rates over the last minute for GET_BROKER_RUNTIME_INFO and GET_CONSUME_STATS.
Only the event loop thread updates them."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable


class _Rate:
    """Events per second over a sliding window: the running total is sampled once a second
    at most (on the first event or query of that second), not bucketed per event."""

    def __init__(self, window_s: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self.total = 0
        self._samples: collections.deque[tuple[int, int]] = collections.deque()
        self._sampled_second = -1

    def add(self, count: int) -> None:
        self.total += count

    def _sample(self) -> None:
        second = int(self._clock())
        if second != self._sampled_second:
            self._sampled_second = second
            self._samples.append((second, self.total))
            while self._samples and self._samples[0][0] < second - self.window_s:
                self._samples.popleft()

    def per_second(self, over_s: int | None = None) -> float:
        """The rate over the last over_s seconds (the window at most)."""
        over_s = min(over_s or self.window_s, self.window_s)
        self._sample()
        now = self._sampled_second
        base = None
        for second, total in self._samples:
            if second >= now - over_s:
                base = (second, total)
                break
        if base is None or base[0] >= now:
            return 0.0
        return (self.total - base[1]) / (now - base[0])


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
        self._put_rate.total += messages

    def sample(self) -> None:
        """Once a second (the controller's timer): the rates' reference points."""
        self._put_rate._sample()
        self._got_rate._sample()
        for rate in self._got_rate_by_group_topic.values():
            rate._sample()

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
