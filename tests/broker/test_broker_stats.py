"""The broker's statistics (RocketMQ's BrokerStatsManager and StatsItem arithmetic) under a
fake clock, the runtime-info helpers' formulas, and VIEW_BROKER_STATS_DATA,
GET_BROKER_CONSUME_STATS and GET_BROKER_RUNTIME_INFO over the wire."""

from __future__ import annotations

import os
import time

import broker_helpers
import orjson
import pytest
from broker_helpers import cluster, pull_fields, send_fields
from rocketmq_runtime_keys import JAVA_RUNTIME_KEYS

from rocketstore.broker import runtime_info
from rocketstore.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    QUEUE_GET_NUMS,
    QUEUE_PUT_NUMS,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
)
from rocketstore.common.fastjson import loads_object_keys
from rocketstore.remoting import RequestCode, ResponseCode

arun = broker_helpers.arun

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def ticked(stats: BrokerStatsManager, clock: Clock, seconds: int) -> None:
    """Advance the clock a second at a time, ticking as the broker's timer does."""
    for _ in range(seconds):
        clock.now += 1
        stats.tick()


def test_minute_hour_and_day_windows() -> None:
    clock = Clock()
    stats = BrokerStatsManager("C", clock=clock)
    stats.tick()                              # at start: no list is due (sampled when made)
    for _ in range(3):
        stats.record_put("t", 0, 1, 100)
    stats.record_put("t", 1, 5, 500)         # a batch of 5: one time
    ticked(stats, clock, 9)
    assert stats.item(TOPIC_PUT_NUMS, "t").in_minute().sum == 0    # not sampled yet
    ticked(stats, clock, 1)                   # T0+10: the first sample of the new item
    nums = stats.item(TOPIC_PUT_NUMS, "t").in_minute()
    # the zero snapshot a period before the first, then (T0+10, 4 times, 8 messages)
    assert (nums.sum, nums.tps, nums.avgpt, nums.times) == (8, 0.8, 2.0, 4)
    sizes = stats.item(TOPIC_PUT_SIZE, "t").in_minute()
    assert (sizes.sum, sizes.avgpt) == (800, 200.0)
    assert stats.item(TOPIC_PUT_NUMS, "t").in_hour().sum == 0      # next 10-minute tick: T0+600
    broker = stats.item(BROKER_PUT_NUMS, "C").in_minute()
    assert broker.sum == 8 and broker.times == 0                   # counted, not timed
    # the minute window keeps 7 snapshots (60 s): 2 more puts, then quiet
    stats.record_put("t", 0, 2, 200)
    ticked(stats, clock, 10)
    assert stats.item(TOPIC_PUT_NUMS, "t").in_minute().sum == 10
    ticked(stats, clock, 50)                  # T0+70: the snapshots of T0+10..T0+70
    assert stats.item(TOPIC_PUT_NUMS, "t").in_minute().sum == 2
    ticked(stats, clock, 10)                  # T0+80: of T0+20..T0+80, all after the puts
    minute = stats.item(TOPIC_PUT_NUMS, "t").in_minute()
    assert minute.sum == 0 and minute.tps == 0.0
    ticked(stats, clock, 600 - 80)            # T0+600: the hour list's first sample
    hour = stats.item(TOPIC_PUT_NUMS, "t").in_hour()
    assert hour.sum == 10 and hour.tps == pytest.approx(10 / 600)
    assert stats.item(TOPIC_PUT_NUMS, "t").in_day().sum == 0
    ticked(stats, clock, 3000)                # T0+3600: the day list's
    day = stats.item(TOPIC_PUT_NUMS, "t").in_day()
    assert day.sum == 10 and day.tps == pytest.approx(10 / 3600)
    assert stats.item(TOPIC_PUT_NUMS, "nope") is None and stats.item("NOPE", "t") is None


def test_gets_send_backs_and_keys() -> None:
    clock = Clock()
    stats = BrokerStatsManager("C", clock=clock)
    stats.tick()
    stats.record_get("g", "t", 3, 4, 400, 7)
    stats.record_get("g", "t", 3, 2, 200, 1)
    stats.record_get_miss(0)
    stats.record_send_back("g", "t", 150)
    stats.record_put("t", 2, 1, 100)
    ticked(stats, clock, 10)
    assert stats.item(GROUP_GET_NUMS, "t@g").in_minute().sum == 6
    assert stats.item(GROUP_GET_SIZE, "t@g").in_minute().avgpt == 300.0
    assert stats.item(BROKER_GET_NUMS, "C").in_minute().sum == 6
    latency = stats.item(GROUP_GET_LATENCY, "3@t@g").in_minute()
    assert latency.sum == 8 and latency.avgpt == 4.0
    assert stats.item(QUEUE_GET_NUMS, "t@3@g").in_minute().sum == 6
    assert stats.item(QUEUE_PUT_NUMS, "t@2").in_minute().sum == 1
    assert stats.item(SNDBCK_PUT_NUMS, "t@g").in_minute().sum == 1
    assert stats.group_get_tps("g", "t") == pytest.approx(0.6)
    # the store's totals: sends and send-backs
    assert stats.put_messages == 2 and stats.put_bytes == 250
    assert (stats.gets_found, stats.gets_missed, stats.got_messages, stats.get_time_max_ms) == (2, 1, 6, 7)
    # without detail statistics there are no queue sets, and the latency is by topic@group
    plain = BrokerStatsManager("C", enable_queue_stat=False, clock=clock)
    plain.record_get("g", "t", 3, 1, 10, 5)
    plain.record_put("t", 0, 1, 10)
    assert QUEUE_PUT_NUMS not in plain.sets and plain.item(GROUP_GET_LATENCY, "t@g") is not None


def test_deleting_a_topic_or_group_drops_its_items_not_the_totals() -> None:
    clock = Clock()
    stats = BrokerStatsManager("C", clock=clock)
    stats.record_put("t", 0, 3, 300)
    stats.record_put("tx", 0, 1, 100)
    stats.record_get("g", "t", 0, 1, 10, 0)
    stats.record_get("h", "tx", 0, 1, 10, 0)
    stats.on_topic_deleted("t")
    assert stats.item(TOPIC_PUT_NUMS, "t") is None and stats.item(GROUP_GET_NUMS, "t@g") is None
    assert stats.item(GROUP_GET_LATENCY, "0@t@g") is None
    assert stats.item(TOPIC_PUT_NUMS, "tx") is not None and stats.put_messages == 4
    stats.on_group_deleted("h")
    assert stats.item(GROUP_GET_NUMS, "tx@h") is None
    stats.tick()
    assert stats.item(BROKER_PUT_NUMS, "C").value == 4


def test_store_rates_over_10_60_and_600_seconds() -> None:
    clock = Clock()
    stats = BrokerStatsManager("C", clock=clock)
    stats.tick()
    assert stats.put_tps_text() == "  "          # too few snapshots: each window empty
    for _ in range(60):
        clock.now += 1
        for _ in range(5):
            stats.record_put("t", 0, 1, 10)
        stats.record_get("g", "t", 0, 2, 20, 0)
        stats.record_get_miss(0)
        stats.tick()
    assert stats.put_tps_text() == "5.0 5.0 "
    assert stats.transferred_tps_text() == "2.0 2.0 "
    assert stats.found_tps_text() == "1.0 1.0 " and stats.miss_tps_text() == "1.0 1.0 "
    assert stats.total_get_tps_text() == "2.0 2.0 0.0"
    ticked(stats, clock, 10)                        # ten quiet seconds
    assert stats.put_tps_text().split(" ")[:2] == ["0.0", repr(250 / 60)]


def test_midnight_totals_and_put_time_minutes() -> None:
    clock = Clock()
    stats = BrokerStatsManager("C", clock=clock)
    counts = {"ranges": [0] * 13, "buckets": [0] * 76}
    stats.hold_times = lambda: (list(counts["ranges"]), list(counts["buckets"]), 12)
    counts["ranges"][0] = 5
    counts["buckets"][0] = 5
    assert stats.put_time_counts() == ([5] + [0] * 12, [5] + [0] * 75, 12)   # the puts so far
    ticked(stats, clock, 60)                         # a minute: that minute's puts are kept
    counts["ranges"][2] = 3
    assert stats.put_time_counts()[0][:3] == [5, 0, 0]
    ticked(stats, clock, 60)
    assert stats.put_time_counts()[0][:3] == [0, 0, 3]
    stats.record_put("t", 0, 7, 70)
    stats.record_get("g", "t", 0, 4, 40, 0)
    stats.record_morning(stats.put_messages)
    stats.record_put("t", 0, 1, 10)
    stats.record_morning(stats.put_messages)
    assert (stats.put_total_yesterday_morning, stats.put_total_today_morning) == (7, 8)
    assert (stats.get_total_yesterday_morning, stats.get_total_today_morning) == (4, 4)


def test_runtime_formulas(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    assert runtime_info.human_readable_bytes(0) == "0 B"
    assert runtime_info.human_readable_bytes(1023) == "1023 B"
    assert runtime_info.human_readable_bytes(1536) == "1.5 KiB"
    assert runtime_info.human_readable_bytes(252 * 2**30) == "252.0 GiB"
    # used / (used + usable), rounded up to a hundredth: not used / total
    fake = os.statvfs_result((4096, 4096, 1000, 300, 200, 0, 0, 0, 0, 255))
    monkeypatch.setattr(runtime_info.os, "statvfs", lambda path: fake)
    used, usable = 700, 200                      # blocks: total 1000, free 300, available 200
    assert runtime_info.disk_used_ratio(str(tmp_path)) == pytest.approx(
        -(-used * 100 // (used + usable)) / 100)                         # 0.78, where used/total is 0.70
    assert runtime_info.disk_used_ratio(str(tmp_path / "missing")) == -1.0
    # RocketMQ's percentile: interpolated inside the bucket holding the rank
    buckets = [0] * 76
    buckets[0] = 90                              # <= 1 ms
    buckets[9] = 10                              # (9, 10] ms
    assert runtime_info.put_time_percentile(buckets, 0.99) == pytest.approx(9 + 1 * 9 / 10)
    assert runtime_info.put_time_percentile(buckets, 0.5) == pytest.approx(1 * 50 / 90)
    assert runtime_info.put_time_percentile([0] * 76, 0.99) == 0.0
    assert runtime_info.runtime_text(90_061_000) == "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"




def test_stats_codes_over_the_wire(arun, tmp_path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            for i in range(5):
                r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("st", i % 2), b"m%d" % i)
                assert r.code == 0, r.remark
            await cl.dispatched()
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("SG", "st", 0, 0))
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("SG", "st", 0, 3, commit_offset=3))
            assert r.code == ResponseCode.PULL_NOT_FOUND
            stats = cl.broker.stats
            # the next 10-second sample, now (the broker's own timer reads the same clock)
            stats.clock = lambda: time.time() + 10
            stats.tick()

            r = await cl.call(RequestCode.VIEW_BROKER_STATS_DATA,
                              {"statsName": "TOPIC_PUT_NUMS", "statsKey": "st"})
            assert r.code == 0, r.remark
            data = orjson.loads(r.body_bytes())
            assert set(data) == {"statsMinute", "statsHour", "statsDay"}
            assert data["statsMinute"]["sum"] == 5 and data["statsMinute"]["tps"] > 0
            assert data["statsMinute"]["avgpt"] == 1.0
            r = await cl.call(RequestCode.VIEW_BROKER_STATS_DATA,
                              {"statsName": "GROUP_GET_NUMS", "statsKey": "st@SG"})
            assert orjson.loads(r.body_bytes())["statsMinute"]["sum"] == 3
            r = await cl.call(RequestCode.VIEW_BROKER_STATS_DATA,
                              {"statsName": "BROKER_PUT_NUMS", "statsKey": cl.broker.config.broker_cluster_name})
            assert orjson.loads(r.body_bytes())["statsMinute"]["sum"] == 5
            r = await cl.call(RequestCode.VIEW_BROKER_STATS_DATA,
                              {"statsName": "TOPIC_PUT_NUMS", "statsKey": "nope"})
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "The stats <TOPIC_PUT_NUMS> <nope> not exist"

            r = await cl.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
            assert r.code == 0, r.remark
            body = loads_object_keys(r.body_bytes())
            assert body["brokerAddr"] == cl.addr
            groups = {name: stats for entry in body["consumeStatsList"] for name, stats in entry.items()}
            (sg,) = groups["SG"]
            offsets = {dict(mq)["queueId"]: row for mq, row in sg["offsetTable"].items()}
            assert offsets[0] == {"brokerOffset": 3, "consumerOffset": 3,
                                  "lastTimestamp": offsets[0]["lastTimestamp"]}
            assert offsets[0]["lastTimestamp"] > 0 and offsets[1]["consumerOffset"] == 0
            assert sg["consumeTps"] > 0
            assert body["totalDiff"] == 2                    # queue 1's two messages
            r = await cl.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
            body = loads_object_keys(r.body_bytes())
            assert body["totalDiff"] == 0 and all(not v for e in body["consumeStatsList"] for v in e.values())

            r = await cl.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            table = orjson.loads(r.body_bytes())["table"]
            assert JAVA_RUNTIME_KEYS <= set(table), JAVA_RUNTIME_KEYS - set(table)
            commit_log = cl.broker.store.config.commit_log_path
            assert table[f"commitLogDiskRatio_{commit_log}"] == table["commitLogDiskRatio"]
            assert float(table["commitLogDiskRatio"]) == runtime_info.disk_used_ratio(commit_log)
            assert all(v != "null" and isinstance(v, str) for v in table.values())
            assert table["msgPutTotalTodayNow"] == "5" and table["msgGetTotalTodayNow"] == "3"
            assert table["putMessageTimesTotal"] == "5" and int(table["putMessageSizeTotal"]) > 0
            ranges = [int(part.split(":")[1]) for part in table["putMessageDistributeTime"].split()]
            assert len(ranges) == 13 and sum(ranges) == 5
            assert int(table["sendThreadPoolQueueHeadWaitTimeMills"]) >= 0
            assert table["remainTransientStoreBufferNumbs"] == "2147483647"
            assert table["commitLogDirCapacity"].startswith("Total : ")
            assert table["brokerVersionDesc"] == "V4_9_8"
            assert len(table["putTps"].split(" ")) == 3

    arun(main())
