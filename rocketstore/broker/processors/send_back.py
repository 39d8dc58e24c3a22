"""CONSUMER_SEND_MSG_BACK 36: a consumer hands back a message it failed to consume
(RocketMQ's AbstractSendMessageProcessor.consumerSendMsgBack).

The message is found by its CommitLog offset (the C++ client sends only group, offset and
delayLevel) and put again to ``%RETRY%<group>`` with ``reconsumeTimes + 1`` and delay level
``3 + reconsumeTimes`` (or the level the consumer asked for), so it comes back later through
the schedule service; after ``maxReconsumeTimes`` (the group's ``retryMaxTimes``, 16, unless the
request names another) or with a negative delay level it goes to ``%DLQ%<group>`` instead. The
first send-back records ``RETRY_TOPIC`` (the original topic) and every one keeps
``ORIGIN_MESSAGE_ID`` (the first record's offsetMsgId), as RocketMQ does; a dead letter's
``DELAY`` is 0 (RocketMQ's setDelayTimeLevel(0)).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.broker.stats import BrokerStatsManager
from rocketstore.broker.subscription_group import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.common.perm import PERM_READ, PERM_WRITE, is_writeable
from rocketstore.common.record import MESSAGE_SYS_FLAGS
from rocketstore.common.text import quote
from rocketstore.common.topics import dlq_topic, retry_topic
from rocketstore.message import CorruptRecordError, Message, MessageProperty, PutMessageStatus
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
    decode_header,
)
from rocketstore.store import MEMORY_OFFSET_BASE, MemoryMessageStore

log = logging.getLogger(__name__)


@dataclass
class ConsumerSendMsgBackRequestHeader:
    offset: int
    group: str
    delay_level: int = 0
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None


class SendBackProcessor:
    def __init__(self, config: BrokerConfig, writer: MessageWriter, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, stats: BrokerStatsManager) -> None:
        self.config = config
        self.stats = stats
        self.writer = writer
        self.store = writer.store
        self.topics = topics
        self.groups = groups
        #: the memory topics' store (the broker sets it): messages at MEMORY_OFFSET_BASE on
        self.memory: MemoryMessageStore | None = None

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, self.consumer_send_msg_back)

    def consumer_send_msg_back(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        header = decode_header(request.ext_fields, ConsumerSendMsgBackRequestHeader)
        group_config = self.groups.find(header.group)
        if group_config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                   f"subscription group not exist, {header.group}")
        if not is_writeable(self.config.broker_permission):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{self.config.broker_ip1}] sending message is forbidden")
        if group_config.retry_queue_nums <= 0:
            return create_response(request)     # the group wants no retries: dropped
        stored = None
        if header.offset >= MEMORY_OFFSET_BASE and self.memory is not None:
            stored = self.memory.look_message_by_offset(header.offset)    # a memory topic's
        elif self.store.get_min_phy_offset() <= header.offset < self.store.get_max_phy_offset():
            try:
                stored = self.store.look_message_by_offset(header.offset)
            except (CorruptRecordError, ValueError):
                stored = None
        if stored is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"look message by offset failed, {header.offset}")
        properties = dict(stored.properties)
        if MessageProperty.RETRY_TOPIC not in properties:
            properties[MessageProperty.RETRY_TOPIC] = stored.topic
        properties[MessageProperty.WAIT] = "false"
        max_reconsume = group_config.retry_max_times
        if header.max_reconsume_times is not None:
            max_reconsume = header.max_reconsume_times
        delay_level = header.delay_level
        reconsume_times = stored.reconsume_times
        if reconsume_times >= max_reconsume or delay_level < 0:
            topic = dlq_topic(header.group)
            queue_id = 0
            self.topics.create_in_send_back(topic, 1, PERM_WRITE | PERM_READ)
            properties[MessageProperty.DELAY] = "0"     # RocketMQ's setDelayTimeLevel(0): stored so
            log.info("message %s of group %s consumed %d times: to %s", stored.msg_id,
                     quote(header.group), reconsume_times, quote(topic))
        else:
            topic = retry_topic(header.group)
            queue_id = random.randrange(group_config.retry_queue_nums)
            self.topics.create_in_send_back(topic, group_config.retry_queue_nums, PERM_WRITE | PERM_READ)
            if delay_level == 0:
                delay_level = 3 + reconsume_times
            properties[MessageProperty.DELAY] = str(delay_level)
        # the first delivery's offsetMsgId (RocketMQ's broker ignores the header's originMsgId,
        # the client's view of it: its UNIQ_KEY)
        if not properties.get(MessageProperty.ORIGIN_MESSAGE_ID, "").strip():
            properties[MessageProperty.ORIGIN_MESSAGE_ID] = stored.msg_id
        try:
            message = Message(topic, bytes(stored.body), properties=properties, flag=stored.flag,
                              born_timestamp=stored.born_timestamp, born_host=stored.born_host,
                              sys_flag=stored.sys_flag & MESSAGE_SYS_FLAGS, reconsume_times=reconsume_times + 1)
        except (ValueError, TypeError, OverflowError) as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"cannot send the message back: {exc}")
        result = self.writer.put(message, queue_id)
        if result.status_code != PutMessageStatus.PUT_OK:
            self.stats.record_put_failed()
            return create_response(request, ResponseCode.SYSTEM_ERROR, result.status.name)
        self.stats.record_send_back(header.group, properties[MessageProperty.RETRY_TOPIC], result.wrote_bytes)
        return create_response(request)
