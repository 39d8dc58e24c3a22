"""BrokerStatsManager: the broker's statistics as RocketMQ 4.9.8 keeps them, by name and key:

=========================  =================================  ===========================
name                       key                                 added to on
=========================  =================================  ===========================
TOPIC_PUT_NUMS, _SIZE      topic                               a stored send (messages,
                                                               bytes; times: 1 a send)
BROKER_PUT_NUMS            the cluster name                    a stored send (messages)
GROUP_GET_NUMS, _SIZE      ``topic@group``                     a pull that found messages
BROKER_GET_NUMS            the cluster name                    a pull that found messages
GROUP_GET_LATENCY          ``queueId@topic@group``             a pull that found messages
                                                               (ms from receipt to reply)
SNDBCK_PUT_NUMS            ``topic@group``                     a stored send-back
QUEUE_PUT_NUMS, _SIZE      ``topic@queueId``                   a stored send
QUEUE_GET_NUMS, _SIZE      ``topic@queueId@group``             a pull that found messages
=========================  =================================  ===========================

and the store's totals and per-second rates behind GET_BROKER_RUNTIME_INFO (RocketMQ's
StoreStatsService and BrokerStats): puts and their bytes, gets found and missed, messages
transferred, their rates over the last 10 s, 60 s and 600 s, and the totals at this and
yesterday's midnight.

A send costs one dict lookup and four counter increments (``record_put``, native:
_put_counts.pyx; with enable_queue_stat a list index and four more for QUEUE_PUT_*); the broker
totals (BROKER_PUT_NUMS, the store's put count) are sums over the topics' items, made on the
timer. :meth:`tick`, once a second on the event loop, takes the snapshots when they are due
(the items' every 10 s / 10 min / 1 h, the store rates' every second) and logs each item's
minute, hour and day at the turn of each (logger ``rocketstore.broker.stats``). Only the event
loop thread touches this object.
"""

from __future__ import annotations

import collections
import datetime
import logging
import time
from collections.abc import Callable

from rocketstore.broker.stats._put_counts import PutCounts
from rocketstore.broker.stats.items import (
    DAY_PERIOD_MS,
    HOUR_PERIOD_MS,
    MINUTE_PERIOD_MS,
    StatsItem,
    StatsItemSet,
)

log = logging.getLogger(__name__)
#: pull stats keys kept before the cache starts over (a bound against many short-lived groups)
_GET_KEYS_KEPT = 65_536

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"

#: the store's per-second snapshots kept (RocketMQ's MAX_RECORDS_OF_SAMPLING + 1)
RATE_SNAPSHOTS = 601
#: the windows of putTps, getFoundTps, ... (seconds)
RATE_WINDOWS_S = (10, 60, 600)


def java_double(value: float) -> str:
    """A double as Java's String.valueOf writes the usual ones (``0.0``, ``12.5``)."""
    return repr(float(value))


class _Rate:
    """A running total's per-second snapshots (StoreStatsService's CallSnapshot lists)."""

    __slots__ = ("snapshots",)

    def __init__(self) -> None:
        self.snapshots: collections.deque[tuple[int, int]] = collections.deque(maxlen=RATE_SNAPSHOTS)

    def tps(self, window_s: int) -> float | None:
        """Per second between the newest snapshot and the one window_s snapshots before it
        (None while fewer are kept)."""
        snapshots = self.snapshots
        if len(snapshots) <= window_s:
            return None
        begin_ms, begin = snapshots[-1 - window_s]
        end_ms, end = snapshots[-1]
        return (end - begin) * 1000.0 / (end_ms - begin_ms) if end_ms > begin_ms else 0.0

    def text(self) -> str:
        """RocketMQ's "10s 60s 600s" text: a window without enough snapshots is empty."""
        return " ".join("" if t is None else java_double(t) for t in map(self.tps, RATE_WINDOWS_S))


class BrokerStatsManager:
    """See the module docstring. ``clock`` is wall time in seconds (tests pass a fake one)."""

    def __init__(self, cluster_name: str, *, enable_queue_stat: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.cluster_name = cluster_name
        self.enable_queue_stat = enable_queue_stat
        self.clock = clock
        self.started_ms = int(clock() * 1000)
        self.sets: dict[str, StatsItemSet] = {
            name: StatsItemSet(name, log, rt=name == GROUP_GET_LATENCY)
            for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE,
                         GROUP_GET_LATENCY, SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS)}
        if enable_queue_stat:
            for name in (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE):
                self.sets[name] = StatsItemSet(name, log)
        # the send path's items: topic -> (TOPIC_PUT_NUMS item, TOPIC_PUT_SIZE item, the
        # QUEUE_PUT_NUMS and _SIZE items by queue id)
        self._topic_put: dict[str, tuple[StatsItem, StatsItem, list[tuple[StatsItem, StatsItem] | None]]] = {}
        #: ``record_put(topic, queue_id, messages, size)``: a stored send of ``messages`` (1, or
        #: a batch's count) and ``size`` bytes; QUEUE_PUT_* too with enable_queue_stat (a
        #: bound method chosen once, so the send path pays no test for it)
        self.record_put: Callable[[str, int, int, int], None] = PutCounts(
            self._topic_put, self._new_topic, self._new_queue, enable_queue_stat).record
        self._broker_put = self.sets[BROKER_PUT_NUMS].item(cluster_name)
        self._broker_get = self.sets[BROKER_GET_NUMS].item(cluster_name)
        #: a pull's stats keys by (group, topic, queue id): made once, not per pull
        self._get_keys: dict[tuple[str, str, int], tuple[str, str, str]] = {}
        # what deleted topics had put (the totals outlive their items)
        self._retired_puts = 0
        self._retired_put_bytes = 0
        #: puts other than sends: send-backs (they count in the store's totals)
        self.other_puts = 0
        self.other_put_bytes = 0
        self.put_failures = 0
        self.busy_rejections = 0
        self.gets_found = 0
        self.gets_missed = 0
        self.got_messages = 0
        self.got_bytes = 0
        self.get_time_max_ms = 0
        self._put_rate = _Rate()
        self._found_rate = _Rate()
        self._miss_rate = _Rate()
        self._transferred_rate = _Rate()
        # msgPut/GetTotal at this and yesterday's midnight (RocketMQ's BrokerStats.record)
        self.put_total_today_morning = 0
        self.get_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_yesterday_morning = 0
        #: the store's put lock hold counts (MessageStore.put_hold_times), read each minute
        self.hold_times: Callable[[], tuple[list[int], list[int], int]] | None = None
        self._hold_base: tuple[list[int], list[int]] | None = None
        self._hold_last_minute: tuple[list[int], list[int]] | None = None
        self.dispatch_max_buffer = 0
        now_ms = self.started_ms
        self._next_store_minute_ms = now_ms + 60_000
        # RocketMQ samples every list when the manager is made, before any item exists: an
        # item made in the broker's first hour has no hour or day figures until the next tick
        self._next_minute_ms = now_ms + MINUTE_PERIOD_MS
        self._next_hour_ms = now_ms + HOUR_PERIOD_MS
        self._next_day_ms = now_ms + DAY_PERIOD_MS
        self._next_log_minute_ms = _next_boundary_ms(now_ms, 60_000)
        self._next_log_hour_ms = _next_boundary_ms(now_ms, 3_600_000)
        self._next_morning_ms = _next_local_midnight_ms(now_ms)

    # ---- the event loop's updates ----

    def _new_topic(self, topic: str) -> tuple[StatsItem, StatsItem, list[tuple[StatsItem, StatsItem] | None]]:
        entry = self._topic_put[topic] = (self.sets[TOPIC_PUT_NUMS].item(topic),
                                          self.sets[TOPIC_PUT_SIZE].item(topic), [])
        return entry

    def _new_queue(self, topic: str, queue_id: int,
                   queues: list[tuple[StatsItem, StatsItem] | None]) -> tuple[StatsItem, StatsItem]:
        key = f"{topic}@{queue_id}"
        pair = (self.sets[QUEUE_PUT_NUMS].item(key), self.sets[QUEUE_PUT_SIZE].item(key))
        if queue_id >= len(queues):
            queues.extend([None] * (queue_id + 1 - len(queues)))
        queues[queue_id] = pair
        return pair

    def record_put_failed(self) -> None:
        self.put_failures += 1

    def record_send_back(self, group: str, topic: str, size: int) -> None:
        """A stored send-back of a message of ``topic`` (its original topic) by ``group``."""
        self.sets[SNDBCK_PUT_NUMS].add_value(f"{topic}@{group}", 1)
        self.other_puts += 1
        self.other_put_bytes += size

    def record_get(self, group: str, topic: str, queue_id: int, messages: int, size: int,
                   latency_ms: int) -> None:
        """A pull that found ``messages`` (``size`` bytes), ``latency_ms`` after the store was
        asked."""
        keys = self._get_keys.get((group, topic, queue_id))
        if keys is None:
            if len(self._get_keys) >= _GET_KEYS_KEPT:
                self._get_keys.clear()
            keys = self._get_keys[(group, topic, queue_id)] = (
                f"{topic}@{group}", f"{topic}@{queue_id}@{group}", f"{queue_id}@{topic}@{group}")
        key = keys[0]
        sets = self.sets
        sets[GROUP_GET_NUMS].add_value(key, messages)
        sets[GROUP_GET_SIZE].add_value(key, size)
        self._broker_get.value += messages
        if self.enable_queue_stat:
            queue_key = keys[1]
            sets[QUEUE_GET_NUMS].add_value(queue_key, messages)
            sets[QUEUE_GET_SIZE].add_value(queue_key, size)
            sets[GROUP_GET_LATENCY].add_value(keys[2], latency_ms)
        else:
            sets[GROUP_GET_LATENCY].add_value(key, latency_ms)
        self.gets_found += 1
        self.got_messages += messages
        self.got_bytes += size
        if latency_ms > self.get_time_max_ms:
            self.get_time_max_ms = latency_ms

    def record_get_miss(self, latency_ms: int) -> None:
        """A pull that found nothing (RocketMQ's getMessageTimesTotalMiss), answered
        ``latency_ms`` after the store was asked."""
        self.gets_missed += 1
        if latency_ms > self.get_time_max_ms:
            self.get_time_max_ms = latency_ms

    # ---- reading ----

    def item(self, name: str, key: str) -> StatsItem | None:
        """VIEW_BROKER_STATS_DATA's item (None: no such statistic or key)."""
        found = self.sets.get(name)
        return None if found is None else found.get(key)

    def group_get_tps(self, group: str, topic: str) -> float:
        """GROUP_GET_NUMS's rate over the last minute (ConsumeStats' consumeTps)."""
        return self.sets[GROUP_GET_NUMS].in_minute(f"{topic}@{group}").tps

    @property
    def put_messages(self) -> int:
        """Messages put into the store (sends and send-backs): putMessageTimesTotal."""
        return self._retired_puts + self.other_puts + sum(e[0].value for e in self._topic_put.values())

    @property
    def put_bytes(self) -> int:
        return self._retired_put_bytes + self.other_put_bytes + sum(
            e[1].value for e in self._topic_put.values())

    def put_tps_text(self) -> str:
        return self._put_rate.text()

    def found_tps_text(self) -> str:
        return self._found_rate.text()

    def miss_tps_text(self) -> str:
        return self._miss_rate.text()

    def transferred_tps_text(self) -> str:
        return self._transferred_rate.text()

    def total_get_tps_text(self) -> str:
        """getTotalTps: found + missed per window (0.0 where a side has too few snapshots)."""
        parts = []
        for window in RATE_WINDOWS_S:
            found = self._found_rate.tps(window)
            missed = self._miss_rate.tps(window)
            parts.append(java_double((found or 0.0) + (missed or 0.0)))
        return " ".join(parts)

    def put_time_counts(self) -> tuple[list[int], list[int], int]:
        """The puts of the last whole minute (RocketMQ's lastPutMessageDistributeTime and
        lastBuckets) by range and by bucket, and the longest put since start; before the
        first minute has passed, the puts so far."""
        if self.hold_times is None:
            return [0] * 13, [0] * 76, 0
        ranges, buckets, longest = self.hold_times()
        if self._hold_last_minute is not None:
            return self._hold_last_minute[0], self._hold_last_minute[1], longest
        if self._hold_base is not None:
            ranges = [a - b for a, b in zip(ranges, self._hold_base[0], strict=True)]
            buckets = [a - b for a, b in zip(buckets, self._hold_base[1], strict=True)]
        return ranges, buckets, longest

    def _roll_put_times(self) -> None:
        if self.hold_times is None:
            return
        ranges, buckets, _ = self.hold_times()
        if self._hold_base is not None:
            self._hold_last_minute = (
                [a - b for a, b in zip(ranges, self._hold_base[0], strict=True)],
                [a - b for a, b in zip(buckets, self._hold_base[1], strict=True)])
        else:
            self._hold_last_minute = (ranges, buckets)
        self._hold_base = (ranges, buckets)

    def note_dispatch_behind(self, behind: int) -> None:
        """dispatchMaxBuffer: the most the dispatch was behind at a tick."""
        if behind > self.dispatch_max_buffer:
            self.dispatch_max_buffer = behind

    # ---- removal ----

    def on_topic_deleted(self, topic: str) -> None:
        entry = self._topic_put.pop(topic, None)
        if entry is not None:
            self._retired_puts += entry[0].value
            self._retired_put_bytes += entry[1].value
        sets = self.sets
        sets[TOPIC_PUT_NUMS].remove(topic)
        sets[TOPIC_PUT_SIZE].remove(topic)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            sets[name].remove_by_prefix(topic)
        sets[GROUP_GET_LATENCY].remove_by_infix(topic)
        if self.enable_queue_stat:
            for name in (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE):
                sets[name].remove_by_prefix(topic)

    def on_group_deleted(self, group: str) -> None:
        sets = self.sets
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, GROUP_GET_LATENCY):
            sets[name].remove_by_suffix(group)
        if self.enable_queue_stat:
            sets[QUEUE_GET_NUMS].remove_by_suffix(group)
            sets[QUEUE_GET_SIZE].remove_by_suffix(group)

    # ---- the timer ----

    def tick(self) -> None:
        """Once a second: the snapshots and log lines that are due."""
        now_ms = int(self.clock() * 1000)
        sends = self._retired_puts + sum(e[0].value for e in self._topic_put.values())
        self._broker_put.value = sends
        put_total = sends + self.other_puts
        self._put_rate.snapshots.append((now_ms, put_total))
        self._found_rate.snapshots.append((now_ms, self.gets_found))
        self._miss_rate.snapshots.append((now_ms, self.gets_missed))
        self._transferred_rate.snapshots.append((now_ms, self.got_messages))
        sets = self.sets.values()
        if now_ms >= self._next_store_minute_ms:
            self._next_store_minute_ms = _after(self._next_store_minute_ms, now_ms, 60_000)
            self._roll_put_times()
        if now_ms >= self._next_minute_ms:
            self._next_minute_ms = _after(self._next_minute_ms, now_ms, MINUTE_PERIOD_MS)
            for item_set in sets:
                item_set.sample_minute(now_ms)
        if now_ms >= self._next_hour_ms:
            self._next_hour_ms = _after(self._next_hour_ms, now_ms, HOUR_PERIOD_MS)
            for item_set in sets:
                item_set.sample_hour(now_ms)
        if now_ms >= self._next_day_ms:
            self._next_day_ms = _after(self._next_day_ms, now_ms, DAY_PERIOD_MS)
            for item_set in sets:
                item_set.sample_day(now_ms)
        if now_ms >= self._next_log_minute_ms:
            self._next_log_minute_ms = _next_boundary_ms(now_ms, 60_000)
            if log.isEnabledFor(logging.INFO):
                for item_set in sets:
                    item_set.log_window("Minute")
                log.info("[STORETPS] put_tps %s get_found_tps %s get_miss_tps %s get_transfered_tps %s",
                         self._put_rate.tps(60), self._found_rate.tps(60), self._miss_rate.tps(60),
                         self._transferred_rate.tps(60))
        if now_ms >= self._next_log_hour_ms:
            self._next_log_hour_ms = _next_boundary_ms(now_ms, 3_600_000)
            if log.isEnabledFor(logging.INFO):
                for item_set in sets:
                    item_set.log_window("Hour")
        if now_ms >= self._next_morning_ms:
            self._next_morning_ms = _next_local_midnight_ms(now_ms)
            if log.isEnabledFor(logging.INFO):
                for item_set in sets:
                    item_set.log_window("Day")
            self.record_morning(put_total)

    def record_morning(self, put_total: int) -> None:
        """RocketMQ's BrokerStats.record, at midnight: today's totals become yesterday's."""
        self.put_total_yesterday_morning = self.put_total_today_morning
        self.get_total_yesterday_morning = self.get_total_today_morning
        self.put_total_today_morning = put_total
        self.get_total_today_morning = self.got_messages
        log.info("yesterdayPutMessageSize, total: %d", self.put_total_today_morning
                 - self.put_total_yesterday_morning)
        log.info("yesterdayGetMessageSize, total: %d", self.get_total_today_morning
                 - self.get_total_yesterday_morning)


def _after(due_ms: int, now_ms: int, period_ms: int) -> int:
    """The next due time after now_ms on a fixed-rate schedule (missed ticks are not run
    twice, as a ScheduledExecutorService catching up would not be asked to)."""
    due_ms += period_ms
    if due_ms <= now_ms:
        due_ms += ((now_ms - due_ms) // period_ms + 1) * period_ms
    return due_ms


def _next_boundary_ms(now_ms: int, period_ms: int) -> int:
    return (now_ms // period_ms + 1) * period_ms


def _next_local_midnight_ms(now_ms: int) -> int:
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    midnight = (now + datetime.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.timestamp() * 1000)
