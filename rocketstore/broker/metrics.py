"""The broker's Prometheus metrics, made from the state it already keeps (the statistics of
BrokerStatsManager, the consumer offsets, the store's public face) when a scrape asks: the
send path counts nothing more.

Names: rocketmq-exporter's where it has the metric, with its meaning (labels ``cluster``,
``broker``, ``topic``, ``group``, ``queueid``); RocketMQ 5's counters
(``rocketmq_messages_in_total`` ...); ``rocketstore_*`` for what neither has. The exporter's
TPS gauges are the last minute's rate (its source, the broker's statsMinute). Every
``rocketmq_brokeruntime_*`` gauge is a numeric GET_BROKER_RUNTIME_INFO key in snake case
(``msgPutTotalTodayNow`` -> ``rocketmq_brokeruntime_msg_put_total_today_now``; a TPS key's
first figure, its 10 s rate).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from rocketstore.broker.runtime_info import disk_used_ratio, runtime_info
from rocketstore.broker.stats.manager import (
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from rocketstore.remoting.metrics import connection_family, request_family
from rocketstore.store import HOLD_BUCKET_CEILINGS

if TYPE_CHECKING:
    from rocketstore.broker.controller import BrokerController

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def runtime_metric_name(key: str) -> str:
    """``msgPutTotalTodayNow`` -> ``rocketmq_brokeruntime_msg_put_total_today_now``."""
    return "rocketmq_brokeruntime_" + _CAMEL.sub("_", key).lower()


def _number(text: str) -> float | None:
    try:
        return float(text.split(" ", 1)[0])
    except ValueError:
        return None


class _Families:
    """Metric families sharing the broker's labels."""

    def __init__(self, cluster: str, broker: str) -> None:
        self.base = [cluster, broker]
        self.families: list[Any] = []

    def gauge(self, name: str, doc: str, *labels: str) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["cluster", "broker", *labels])
        self.families.append(family)
        return family

    def counter(self, name: str, doc: str, *labels: str) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=["cluster", "broker", *labels])
        self.families.append(family)
        return family


def broker_families(controller: BrokerController) -> Iterator[Any]:
    """Every family, read on the event loop (see rocketstore.remoting.metrics)."""
    store = controller.store
    if store is None:
        return iter(())
    config = controller.config
    stats = controller.stats
    f = _Families(config.broker_cluster_name, config.broker_name)
    base = f.base

    producer_tps = f.gauge("rocketmq_producer_tps", "TopicPutNums: messages put per second (last minute)", "topic")
    producer_size = f.gauge("rocketmq_producer_message_size", "TopicPutMessageSize: bytes put per second (last minute)", "topic")
    messages_in = f.counter("rocketmq_messages_in", "messages put, by topic", "topic")
    bytes_in = f.counter("rocketmq_throughput_in", "bytes put, by topic", "topic")
    sizes = stats.sets[TOPIC_PUT_SIZE]
    for topic, item in stats.sets[TOPIC_PUT_NUMS].items.items():
        size = sizes.get(topic)
        producer_tps.add_metric([*base, topic], item.in_minute().tps)
        messages_in.add_metric([*base, topic], item.value)
        if size is not None:
            producer_size.add_metric([*base, topic], size.in_minute().tps)
            bytes_in.add_metric([*base, topic], size.value)

    consumer_tps = f.gauge("rocketmq_consumer_tps", "GroupGetNums: messages pulled per second (last minute)", "topic", "group")
    consumer_size = f.gauge("rocketmq_consumer_message_size", "GroupGetMessageSize: bytes pulled per second (last minute)", "topic", "group")
    messages_out = f.counter("rocketmq_messages_out", "messages pulled, by topic and group", "topic", "group")
    bytes_out = f.counter("rocketmq_throughput_out", "bytes pulled, by topic and group", "topic", "group")
    got_sizes = stats.sets[GROUP_GET_SIZE]
    for key, item in stats.sets[GROUP_GET_NUMS].items.items():
        topic, _, group = key.rpartition("@")
        labels = [*base, topic, group]
        consumer_tps.add_metric(labels, item.in_minute().tps)
        messages_out.add_metric(labels, item.value)
        size = got_sizes.get(key)
        if size is not None:
            consumer_size.add_metric(labels, size.in_minute().tps)
            bytes_out.add_metric(labels, size.value)
    latency = f.gauge("rocketmq_group_get_latency", "GroupGetLatency: ms from a pull's receipt to its reply (last minute's average)",
                      "topic", "group", "queueid")
    for key, item in stats.sets[GROUP_GET_LATENCY].items.items():
        parts = key.split("@")
        if len(parts) == 3:
            queue_id, topic, group = parts
        else:
            topic, group, queue_id = parts[0], "@".join(parts[1:]), ""
        latency.add_metric([*base, topic, group, queue_id], item.in_minute().avgpt)

    _offsets(f, controller)
    _store(f, controller)
    for key, text in runtime_info(config, store, stats, controller.schedule, head_wait_ms=0).items():
        value = _number(text)
        if value is not None and "_" not in key:
            f.gauge(runtime_metric_name(key), f"GET_BROKER_RUNTIME_INFO {key}").add_metric(base, value)
    connections = sum(len(server.connections) for server in controller.serving_servers)
    f.families.append(connection_family({"cluster": base[0], "broker": base[1]}, connections))
    f.families.append(request_family({"cluster": base[0], "broker": base[1]}))
    return iter(f.families)


def _offsets(f: _Families, controller: BrokerController) -> None:
    """Producer offsets, consumer offsets and lag (max offset - committed offset)."""
    store = controller.topic_stores       # a memory topic's offsets from the memory store
    assert store is not None
    base = f.base
    producer_offset = f.gauge("rocketmq_producer_offset", "TopicOffset: the sum of the topic's queues' max offsets", "topic")
    max_offsets: dict[str, dict[int, int]] = {}
    for topic, config in controller.topics.table.items():
        queues = max_offsets[topic] = {q: store.get_max_offset_in_queue(topic, q)
                                       for q in range(config.read_queue_nums)}
        producer_offset.add_metric([*base, topic], sum(queues.values()))
    consumer_offset = f.gauge("rocketmq_consumer_offset", "GroupOffset: the sum of the group's committed offsets on the topic", "topic", "group")
    diff = f.gauge("rocketmq_group_diff", "messages the group has yet to consume on the topic (max offset - committed offset)", "topic", "group")
    accumulation = f.gauge("rocketmq_message_accumulation", "how far the group's offsets lag behind (as rocketmq_group_diff)", "topic", "group")
    lag = f.gauge("rocketstore_consumer_lag", "max offset - committed offset, by queue", "topic", "group", "queueid")
    for key, queues in controller.offsets.table.items():
        topic, _, group = key.rpartition("@")
        highs = max_offsets.get(topic)
        if highs is None:
            highs = {q: store.get_max_offset_in_queue(topic, q) for q in queues}
        total = 0
        for queue_id, committed in sorted(queues.items()):
            behind = max(0, highs.get(queue_id, committed) - committed)
            total += behind
            lag.add_metric([*base, topic, group, str(queue_id)], behind)
        consumer_offset.add_metric([*base, topic, group], sum(queues.values()))
        diff.add_metric([*base, topic, group], total)
        accumulation.add_metric([*base, topic, group], total)


def _store(f: _Families, controller: BrokerController) -> None:
    store = controller.store
    assert store is not None
    base = f.base
    ranges, buckets, longest = store.put_hold_times()
    del ranges
    cumulative: list[tuple[str, float]] = []
    running = 0
    for ceiling, count in zip(HOLD_BUCKET_CEILINGS, buckets, strict=True):
        running += count
        cumulative.append(("+Inf" if ceiling is None else repr(ceiling / 1000), running))
    if cumulative[-1][0] != "+Inf":
        cumulative.append(("+Inf", running))
    hold = HistogramMetricFamily("rocketstore_put_lock_hold_seconds",
                                 "how long each put held the CommitLog's put lock (the put latency)",
                                 labels=["cluster", "broker"])
    hold.add_metric(base, cumulative, sum_value=None)
    f.families.append(hold)
    f.gauge("rocketstore_put_lock_hold_max_seconds", "the longest put lock hold since start").add_metric(base, longest / 1000)
    f.gauge("rocketstore_put_lock_held_seconds", "how long the put lock has been held now (0: free)").add_metric(
        base, store.put_lock_held_ms() / 1000)
    f.gauge("rocketstore_dispatch_lag_bytes", "CommitLog bytes not yet dispatched to the consume queues and index").add_metric(
        base, store.dispatch_behind_bytes())
    f.gauge("rocketstore_flush_lag_bytes", "CommitLog bytes written but not yet flushed").add_metric(
        base, store.remain_how_many_data_to_flush())
    to_commit = store.remain_how_many_data_to_commit()
    if to_commit is not None:
        f.gauge("rocketstore_commit_lag_bytes", "bytes in the transient store pool not yet committed").add_metric(base, to_commit)
    f.gauge("rocketstore_commitlog_min_offset", "the CommitLog's first offset").add_metric(base, store.get_min_phy_offset())
    f.gauge("rocketstore_commitlog_max_offset", "the CommitLog's end offset").add_metric(base, store.get_max_phy_offset())
    disk = f.gauge("rocketstore_disk_used_ratio", "used / (used + usable) of the disk holding the path", "path")
    for path in dict.fromkeys([*(p.strip() for p in store.config.commit_log_path.split(",") if p.strip()),
                               store.paths.consume_queue_root]):
        disk.add_metric([*base, path], disk_used_ratio(path))
    marks = f.gauge("rocketstore_disk_watermark_ratio", "the disk ratios at which the store acts", "watermark")
    for mark, percent in (("diskMaxUsedSpaceRatio", store.config.disk_max_used_space_ratio),
                          ("diskSpaceCleanForciblyRatio", store.config.disk_space_clean_forcibly_ratio),
                          ("diskSpaceWarningLevelRatio", store.config.disk_space_warning_level_ratio)):
        marks.add_metric([*base, mark], percent / 100)
    f.gauge("rocketstore_disk_full", "1 while the store refuses puts for want of disk").add_metric(
        base, 0 if store.disk_full is None else 1)
    hold_service = controller.hold_service
    f.gauge("rocketstore_pull_holds", "pulls held by long polling now").add_metric(
        base, 0 if hold_service is None else hold_service.held_count)
    f.counter("rocketstore_busy_rejections", "sends answered SYSTEM_BUSY").add_metric(base, controller.stats.busy_rejections)
    f.counter("rocketstore_put_failures", "sends the store refused").add_metric(base, controller.stats.put_failures)
    ha = controller.ha_service
    slaves = f.gauge("rocketstore_replication_lag_bytes", "CommitLog bytes a connected slave has yet to acknowledge", "slave")
    f.gauge("rocketstore_replication_slaves", "slaves connected").add_metric(base, 0 if ha is None else len(ha.slaves()))
    if ha is not None:
        for slave in ha.slaves():
            if slave["lagBytes"] is not None:
                slaves.add_metric([*base, slave["address"]], slave["lagBytes"])
