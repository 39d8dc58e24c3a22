"""Client management: HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38,
LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42, CHECK_CLIENT_CONFIG 46 (RocketMQ's ClientManageProcessor
and the lock half of AdminBrokerProcessor). NOTIFY_CONSUMER_IDS_CHANGED 40 goes the other way: the controller sends
it to a group's members when the group's client ids change.

Heartbeat bodies come from Java (enums by name) and from the C++ client (enums by ordinal,
a trailing newline, tag code sets of zeros); both are read.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from rocketstore.broker.client_groups import (
    LANGUAGES,
    ClientChannelInfo,
    ConsumerManager,
    ProducerManager,
    SubscriptionData,
    enum_name,
)
from rocketstore.broker.rebalance_lock import MessageQueueKey, RebalanceLockManager
from rocketstore.broker.subscription_group import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.common.consume import (
    CONSUME_FROM_WHERE_NAMES,
    CONSUME_TYPE_NAMES,
    MESSAGE_MODEL_NAMES,
)
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.subscription import is_tag_type
from rocketstore.common.text import is_ascii_int, quote
from rocketstore.common.topics import retry_topic
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import get_str, require_str
from rocketstore.store import FilterBitmaps, parse_subscription

log = logging.getLogger(__name__)


class BodyError(ValueError):
    pass


def _json_body(request: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(request.body_bytes())
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"{what} body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BodyError(f"{what} body must be a JSON object")
    return data


def message_queue_json(mq: MessageQueueKey) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


def _message_queues(items: Any) -> list[MessageQueueKey]:
    if not isinstance(items, list):
        raise BodyError("mqSet must be a list")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str):
            raise BodyError(f"mqSet entries must be message queues, got {item!r:.80}")
        queue_id = item.get("queueId")
        if isinstance(queue_id, str) and is_ascii_int(queue_id):
            queue_id = int(queue_id)
        if isinstance(queue_id, bool) or not isinstance(queue_id, int):
            raise BodyError(f"mqSet queueId must be an integer, got {queue_id!r:.40}")
        out.append((item["topic"], str(item.get("brokerName", "")), queue_id))
    return out


class ClientManageProcessor:
    def __init__(self, producers: ProducerManager, consumers: ConsumerManager,
                 groups: SubscriptionGroupManager, topics: TopicConfigManager,
                 locks: RebalanceLockManager, notify_enabled: bool,
                 property_filter_enabled: bool = False,
                 filter_bitmaps: FilterBitmaps | None = None) -> None:
        self.producers = producers
        self.consumers = consumers
        self.groups = groups
        self.topics = topics
        self.locks = locks
        self.notify_enabled = notify_enabled
        self.property_filter_enabled = property_filter_enabled
        #: the store's SQL92 filter bitmaps (enableCalcFilterBitMap): groups' SQL92
        #: subscriptions are registered there from heartbeats (RocketMQ ConsumerFilterManager)
        self.filter_bitmaps = filter_bitmaps

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.HEART_BEAT, self.heart_beat)
        server.register_processor(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        server.register_processor(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list_by_group)
        server.register_processor(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        server.register_processor(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)
        server.register_processor(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)

    def group_notifies(self, group: str) -> bool:
        """Whether a change of group's members is told to them (broker and group setting)."""
        if not self.notify_enabled:
            return False
        cfg = self.groups.table.get(group)
        return cfg is None or cfg.notify_consumer_ids_changed_enable

    def heart_beat(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            data = _json_body(request, "heartbeat")
            client_id = data.get("clientID")
            if not isinstance(client_id, str) or not client_id:
                raise BodyError("heartbeat clientID is missing")
            language = LANGUAGES[request.language] if 0 <= request.language < len(LANGUAGES) else "OTHER"
            consumers = data.get("consumerDataSet") or []
            producers = data.get("producerDataSet") or []
            if not isinstance(consumers, list) or not isinstance(producers, list):
                raise BodyError("consumerDataSet and producerDataSet must be lists")
            parsed = []
            for entry in consumers:
                if not isinstance(entry, dict) or not isinstance(entry.get("groupName"), str):
                    raise BodyError("consumerDataSet entries must have a groupName")
                subs = entry.get("subscriptionDataSet") or []
                if not isinstance(subs, list):
                    raise BodyError("subscriptionDataSet must be a list")
                parsed.append((
                    entry["groupName"],
                    enum_name(entry.get("consumeType", 1), CONSUME_TYPE_NAMES, "consumeType"),
                    enum_name(entry.get("messageModel", 1), MESSAGE_MODEL_NAMES, "messageModel"),
                    enum_name(entry.get("consumeFromWhere", 0), CONSUME_FROM_WHERE_NAMES,
                              "consumeFromWhere"),
                    [SubscriptionData.from_json(s) for s in subs],
                ))
        except (BodyError, ValueError) as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        ctx.attributes["client_id"] = client_id
        for group, consume_type, model, from_where, subs in parsed:
            group_config = self.groups.find(group)
            if group_config is not None:
                # the group's retry topic, so that send-backs and retry pulls find it
                self.topics.create_in_send_back(retry_topic(group), group_config.retry_queue_nums,
                                                PERM_READ | PERM_WRITE)
            channel = ClientChannelInfo(ctx, client_id, language, request.version, 0.0)
            self.consumers.register(group, channel, consume_type, model, from_where, subs,
                                    self.group_notifies(group))
            if self.filter_bitmaps is not None:
                self._register_filters(group, subs)
        for entry in producers:
            if isinstance(entry, dict) and isinstance(entry.get("groupName"), str):
                self.producers.register(entry["groupName"],
                                        ClientChannelInfo(ctx, client_id, language, request.version, 0.0))
        return create_response(request)

    def _register_filters(self, group: str, subs: list[SubscriptionData]) -> None:
        assert self.filter_bitmaps is not None
        for sub in subs:
            try:
                self.filter_bitmaps.register(sub.topic, group, sub.sub_string, sub.expression_type)
            except ValueError as exc:
                log.warning("consumer filter of %s on %s not registered: %s", quote(group),
                            quote(sub.topic), exc)

    def check_client_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Whether the broker serves a consumer's subscription (a Java consumer with a
        non-tag subscription asks at start): tag subscriptions always; SQL92 ones when
        enable_property_filter is on and the expression compiles (else
        SUBSCRIPTION_PARSE_FAILED with the parser's reason)."""
        if not request.body_bytes():
            return create_response(request)
        try:
            data = _json_body(request, "CheckClientRequestBody")
        except BodyError as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        sub = data.get("subscriptionData")
        if not isinstance(sub, dict):
            return create_response(request)
        expression_type = sub.get("expressionType")
        expression = sub.get("subString")
        if expression_type is not None and not isinstance(expression_type, str):
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   "subscriptionData expressionType must be a string")
        if is_tag_type(expression_type):
            return create_response(request)
        if not self.property_filter_enabled:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The broker does not support consumer to filter message by {expression_type}")
        try:
            if not isinstance(expression, str):
                raise ValueError("subscriptionData subString must be a string")
            parse_subscription(expression, expression_type)
        except (ValueError, TypeError) as exc:
            log.warning("client %s of group %s filters by %s but it does not compile: %s",
                        quote(str(data.get("clientId"))), quote(str(data.get("group"))),
                        quote(str(expression)), exc)
            return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return create_response(request)

    def unregister_client(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        client_id = require_str(ext, "clientID")
        producer_group = get_str(ext, "producerGroup")
        consumer_group = get_str(ext, "consumerGroup")
        if producer_group:
            self.producers.unregister(producer_group, ctx, client_id)
        if consumer_group:
            self.consumers.unregister(consumer_group, ctx, client_id, self.group_notifies(consumer_group))
        return create_response(request)

    def get_consumer_list_by_group(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = require_str(request.ext_fields, "consumerGroup")
        info = self.consumers.get(group)
        if info is None or not info.channels:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"no consumer for this group, {group}")
        return create_response(request, body=orjson.dumps({"consumerIdList": info.client_ids()}))

    def lock_batch_mq(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            data = _json_body(request, "LockBatchRequestBody")
            group, client_id = data.get("consumerGroup"), data.get("clientId")
            if not isinstance(group, str) or not isinstance(client_id, str):
                raise BodyError("consumerGroup and clientId are required")
            queues = _message_queues(data.get("mqSet") or [])
        except BodyError as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        locked = self.locks.try_lock_batch(group, queues, client_id)
        return create_response(request, body=orjson.dumps(
            {"lockOKMQSet": [message_queue_json(mq) for mq in locked]}))

    def unlock_batch_mq(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            data = _json_body(request, "UnlockBatchRequestBody")
            group, client_id = data.get("consumerGroup"), data.get("clientId")
            if not isinstance(group, str) or not isinstance(client_id, str):
                raise BodyError("consumerGroup and clientId are required")
            queues = _message_queues(data.get("mqSet") or [])
        except BodyError as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self.locks.unlock_batch(group, queues, client_id)
        return create_response(request)
