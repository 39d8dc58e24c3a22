"""RocketMQ's StatsItem and StatsItemSet: a counter (``value``) and how many times it was
added to (``times``), with snapshots of both taken on a timer: every 10 s into the minute list
(7 kept: the last 60 s), every 10 min into the hour list (7: the last hour), every hour into
the day list (25: the last day). A window's figures are those of its oldest and newest
snapshots: sum = value difference, tps = sum per second between them, avgpt = sum / times
difference.

Updating an item is two C increments on the event loop thread; the snapshots are
taken by the broker's timer (:meth:`StatsItemSet.sample`), never per update. The first
snapshot of a list is preceded by a zero one a period earlier, as RocketMQ does, so an item
made and used between two ticks reports what it counted at the next tick.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.broker.stats._put_counts import Counter

MINUTE_PERIOD_MS = 10_000
HOUR_PERIOD_MS = 600_000
DAY_PERIOD_MS = 3_600_000
#: snapshots kept per list (RocketMQ drops the oldest past 7, 7 and 25)
MINUTE_SNAPSHOTS, HOUR_SNAPSHOTS, DAY_SNAPSHOTS = 7, 7, 25

Snapshot = tuple[int, int, int]     # (timestamp ms, times, value)


@dataclass(frozen=True)
class StatsSnapshot:
    """A window's figures (RocketMQ's StatsSnapshot)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0

    def to_json(self) -> dict[str, float | int]:
        """BrokerStatsItem's JSON (ViewBrokerStatsData's statsMinute/Hour/Day)."""
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


def compute(snapshots: collections.deque[Snapshot]) -> StatsSnapshot:
    """RocketMQ's StatsItem.computeStatsData over one list."""
    if not snapshots:
        return StatsSnapshot()
    first_ms, first_times, first_value = snapshots[0]
    last_ms, last_times, last_value = snapshots[-1]
    total = last_value - first_value
    elapsed = last_ms - first_ms
    tps = total * 1000.0 / elapsed if elapsed else 0.0
    times = last_times - first_times
    return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)


class StatsItem(Counter):
    """One key's counter (``value`` and ``times``, native: the send path adds to them from C)
    and its three snapshot lists."""

    __slots__ = ("name", "key", "minute", "hour", "day")

    def __init__(self, name: str, key: str) -> None:
        self.name = name
        self.key = key
        self.minute: collections.deque[Snapshot] = collections.deque(maxlen=MINUTE_SNAPSHOTS)
        self.hour: collections.deque[Snapshot] = collections.deque(maxlen=HOUR_SNAPSHOTS)
        self.day: collections.deque[Snapshot] = collections.deque(maxlen=DAY_SNAPSHOTS)

    def _sample(self, snapshots: collections.deque[Snapshot], now_ms: int, period_ms: int) -> None:
        if not snapshots:
            snapshots.append((now_ms - period_ms, 0, 0))
        snapshots.append((now_ms, self.times, self.value))

    def sample_minute(self, now_ms: int) -> None:
        self._sample(self.minute, now_ms, MINUTE_PERIOD_MS)

    def sample_hour(self, now_ms: int) -> None:
        self._sample(self.hour, now_ms, HOUR_PERIOD_MS)

    def sample_day(self, now_ms: int) -> None:
        self._sample(self.day, now_ms, DAY_PERIOD_MS)

    def in_minute(self) -> StatsSnapshot:
        return compute(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return compute(self.hour)

    def in_day(self) -> StatsSnapshot:
        return compute(self.day)

    def detail(self, snapshot: StatsSnapshot) -> str:
        return f"SUM: {snapshot.sum} TPS: {snapshot.tps:.2f} AVGPT: {snapshot.avgpt:.2f}"


class RTStatsItem(StatsItem):
    """An item whose value is a time (GROUP_GET_LATENCY): logged as times and average."""

    __slots__ = ()

    def detail(self, snapshot: StatsSnapshot) -> str:
        return f"TIMES: {snapshot.times} AVGRT: {snapshot.avgpt:.2f}"


class StatsItemSet:
    """The items of one statistic (RocketMQ's StatsItemSet), by key."""

    def __init__(self, name: str, log: logging.Logger, *, rt: bool = False) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}
        self._log = log
        self._item_type = RTStatsItem if rt else StatsItem

    def item(self, key: str) -> StatsItem:
        """The key's item, made on first use."""
        found = self.items.get(key)
        if found is None:
            found = self.items[key] = self._item_type(self.name, key)
        return found

    def add_value(self, key: str, value: int, times: int = 1) -> None:
        found = self.items.get(key)
        if found is None:
            found = self.items[key] = self._item_type(self.name, key)
        found.value += value
        found.times += times

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def in_minute(self, key: str) -> StatsSnapshot:
        found = self.items.get(key)
        return StatsSnapshot() if found is None else found.in_minute()

    def in_hour(self, key: str) -> StatsSnapshot:
        found = self.items.get(key)
        return StatsSnapshot() if found is None else found.in_hour()

    def in_day(self, key: str) -> StatsSnapshot:
        found = self.items.get(key)
        return StatsSnapshot() if found is None else found.in_day()

    # ---- the timer's work ----

    def sample_minute(self, now_ms: int) -> None:
        for found in self.items.values():
            found.sample_minute(now_ms)

    def sample_hour(self, now_ms: int) -> None:
        for found in self.items.values():
            found.sample_hour(now_ms)

    def sample_day(self, now_ms: int) -> None:
        for found in self.items.values():
            found.sample_day(now_ms)

    def log_window(self, window: str) -> None:
        """RocketMQ's printAtMinutes / printAtHour / printAtDay: one line per item."""
        for found in list(self.items.values()):
            snapshot = (found.in_minute() if window == "Minute" else
                        found.in_hour() if window == "Hour" else found.in_day())
            self._log.info("[%s] [%s] Stats In One %s, %s", self.name, found.key, window,
                           found.detail(snapshot))

    # ---- removal ----

    def remove(self, key: str) -> None:
        self.items.pop(key, None)

    def remove_where(self, keep: Callable[[str], bool]) -> None:
        """Drop the items whose key ``keep(key)`` says False to."""
        for key in [k for k in self.items if not keep(k)]:
            del self.items[key]

    def remove_by_prefix(self, prefix: str, separator: str = "@") -> None:
        start = prefix + separator
        self.remove_where(lambda key: not key.startswith(start))

    def remove_by_infix(self, infix: str, separator: str = "@") -> None:
        middle = separator + infix + separator
        self.remove_where(lambda key: middle not in key)

    def remove_by_suffix(self, suffix: str, separator: str = "@") -> None:
        end = separator + suffix
        self.remove_where(lambda key: not key.endswith(end))
