"""The broker's statistics over the wire (RocketMQ's AdminBrokerProcessor, the codes reading
BrokerStatsManager and the runtime figures):

- VIEW_BROKER_STATS_DATA 315 (``mqadmin statsAll``): header statsName, statsKey; body
  BrokerStatsData ``{"statsMinute": {sum, tps, avgpt}, "statsHour": ..., "statsDay": ...}``.
  An unknown name or key is SYSTEM_ERROR "The stats <name> <key> not exist", as in 4.9.8.
- GET_BROKER_CONSUME_STATS 317 (``mqadmin brokerConsumeStats``): header isOrder; body
  ConsumeStatsList ``{"brokerAddr", "totalDiff", "consumeStatsList": [{group: [ConsumeStats]}]}``
  over every subscription group and each topic it has offsets in.
- GET_BROKER_RUNTIME_INFO 28 (``mqadmin brokerStatus``, ``clusterList``): body
  ``{"table": {...}}`` (:mod:`rocketstore.broker.runtime_info`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from rocketstore.broker.processors.admin import message_queue_key
from rocketstore.broker.runtime_info import runtime_info
from rocketstore.common.fastjson import dumps_object_keys
from rocketstore.common.text import quote
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import get_bool, require_str

if TYPE_CHECKING:
    from rocketstore.broker.client_groups import ConsumerManager
    from rocketstore.broker.config import BrokerConfig
    from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
    from rocketstore.broker.long_polling import PullRequestHoldService
    from rocketstore.broker.schedule import ScheduleMessageService
    from rocketstore.broker.stats import BrokerStatsManager
    from rocketstore.broker.subscription_group import SubscriptionGroupManager
    from rocketstore.broker.topic_config import TopicConfigManager
    from rocketstore.broker.topic_stores import TopicStores
    from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

_ECHO = 256


class BrokerStatsProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, stats: BrokerStatsManager, *,
                 topics: TopicConfigManager, groups: SubscriptionGroupManager,
                 offsets: ConsumerOffsetManager, consumers: ConsumerManager,
                 schedule: ScheduleMessageService | None, hold_service: PullRequestHoldService | None,
                 broker_addr: str, queues: TopicStores | None = None) -> None:
        self.config = config
        self.store = store
        #: queue offsets by topic (a memory topic's from the memory store)
        self.queues: TopicStores | MessageStore = queues if queues is not None else store
        self.stats = stats
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.schedule = schedule
        self.hold_service = hold_service
        self.broker_addr = broker_addr
        #: replication's runtime keys (the broker sets it once HA runs)
        self.ha_info: Callable[[], dict[str, str]] | None = None

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data)
        server.register_processor(RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats)
        server.register_processor(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info)

    def view_broker_stats_data(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        name = require_str(request.ext_fields, "statsName")
        key = require_str(request.ext_fields, "statsKey")
        item = self.stats.item(name, key)
        if item is None:
            # RocketMQ's remark; a client's string echoed at most _ECHO characters long
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The stats <{name[:_ECHO]}> <{key[:_ECHO]}> not exist")
        body = {"statsDay": item.in_day().to_json(), "statsHour": item.in_hour().to_json(),
                "statsMinute": item.in_minute().to_json()}
        return create_response(request, body=orjson.dumps(body))

    def get_broker_consume_stats(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        only_order = bool(get_bool(request.ext_fields, "isOrder", False))
        broker_name = self.config.broker_name
        per_group: list[dict[str, list[dict[str, Any]]]] = []
        total_diff = 0
        for group in list(self.groups.table):
            info = self.consumers.get(group)
            subscribed = 0 if info is None else len(info.subscriptions)
            group_stats = []
            for topic in sorted(self.offsets.topics_of_group(group)):
                cfg = self.topics.select(topic)
                if cfg is None:
                    log.warning("consumeStats, topic config not exist, %s", quote(topic))
                    continue
                if only_order and not cfg.order:
                    continue
                if subscribed and (info is None or info.find_subscription(topic) is None):
                    log.warning("consumeStats, the consumer group[%s], topic[%s] not exist",
                                quote(group), quote(topic))
                    continue
                table: dict[Any, dict[str, int]] = {}
                for queue_id in range(cfg.write_queue_nums):
                    broker_offset = max(0, self.queues.get_max_offset_in_queue(topic, queue_id))
                    consumer_offset = max(0, self.offsets.query(group, topic, queue_id))
                    last = 0
                    if consumer_offset > 0:
                        last = max(0, self.queues.get_message_store_timestamp(topic, queue_id,
                                                                              consumer_offset - 1))
                    table[message_queue_key(topic, broker_name, queue_id)] = {
                        "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                        "lastTimestamp": last}
                    total_diff += broker_offset - consumer_offset
                group_stats.append({"consumeTps": self.stats.group_get_tps(group, topic),
                                    "offsetTable": table})
            per_group.append({group: group_stats})
        body = {"brokerAddr": self.broker_addr, "consumeStatsList": per_group, "totalDiff": total_diff}
        return create_response(request, body=dumps_object_keys(body))

    def get_broker_runtime_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        waited_ms = int((asyncio.get_running_loop().time() - ctx.received_at) * 1000)
        table = runtime_info(self.config, self.store, self.stats, self.schedule, head_wait_ms=waited_ms)
        if self.hold_service is not None:
            table["heldPullRequests"] = str(self.hold_service.held_count)
        if self.ha_info is not None:
            table.update(self.ha_info())
        return create_response(request, body=orjson.dumps({"table": table}))
