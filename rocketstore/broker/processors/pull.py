"""PULL_MESSAGE 11 (RocketMQ's PullMessageProcessor), with long polling.

The reply of a pull that found messages carries the CommitLog records exactly as stored: its
body is the records copied once, natively, from the mapped files into one buffer
(``MessageStore.get_message_records``: no Python object per message), or, on the general
path (filters, damage), the list of the records' memoryviews (``RemotingCommand.body`` as a
list of buffers).

sysFlag bits (:mod:`rocketstore.common.pull_sys_flag`): the request carries the consumer's
committed offset (stored for the group); suspend (a pull that finds nothing is held up to
suspendTimeoutMillis, see :mod:`rocketstore.broker.long_polling`); the request carries its
subscription (else the one the group's heartbeat registered is used). Tags are filtered by the
ConsumeQueue's tags code and then by the record's TAGS (the C++ client's heartbeat sends zeros
as tag codes, so they are never used); SQL92 subscriptions (brokers with
enable_property_filter) by their expression over each record's properties. A memory topic's
pull reads the memory store, with the same statuses (an evicted offset is OFFSET_TOO_SMALL).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rocketstore.broker.client_groups import ConsumerManager
from rocketstore.broker.config import MASTER_ID, BrokerConfig
from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.broker.long_polling import PullRequestHoldService
from rocketstore.broker.stats import BrokerStatsManager
from rocketstore.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.common.consume import MessageModel
from rocketstore.common.perm import is_readable
from rocketstore.common.pull_sys_flag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rocketstore.common.subscription import is_tag_type
from rocketstore.common.text import quote
from rocketstore.message import GetMessageStatus
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
    decode_header,
)
from rocketstore.store import MemoryMessageStore, MessageStore, parse_subscription

log = logging.getLogger(__name__)

#: The longest a pull is held (clients ask 15-20 s; a connection idle for 120 s is closed).
MAX_SUSPEND_MS = 120_000


@dataclass
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int = 0
    suspend_timeout_millis: int = 0
    sub_version: int = 0
    subscription: str | None = None
    expression_type: str | None = None


_MOVED_OR_NOT_FOUND = (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, consumers: ConsumerManager,
                 offsets: ConsumerOffsetManager, stats: BrokerStatsManager) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.offsets = offsets
        self.stats = stats
        self.hold_service: PullRequestHoldService | None = None
        #: the memory topics' store (the broker sets it), read for topics with memory=true
        self.memory: MemoryMessageStore | None = None
        self._is_master = config.broker_id == MASTER_ID

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.PULL_MESSAGE, self.pull_message)

    def pull_message(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(ctx, request, allow_suspend=True)

    def process_without_suspend(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        response = self.process(ctx, request, allow_suspend=False)
        assert response is not None
        return response

    def _suggest(self, group_config: SubscriptionGroupConfig, from_slave: bool) -> int:
        """suggestWhichBrokerId, as RocketMQ 4.9.8's PullMessageProcessor: with slaveReadEnable,
        the group's whichBrokerWhenConsumeSlowly when the consumer is further behind than
        accessMessageInMemoryMaxRatio of memory, its brokerId otherwise; without, the master."""
        if not self.config.slave_read_enable:
            return MASTER_ID
        return group_config.which_broker_when_consume_slowly if from_slave else group_config.broker_id

    def process(self, ctx: RemotingConnection, request: RemotingCommand,
                allow_suspend: bool) -> RemotingCommand | None:
        header = decode_header(request.ext_fields, PullMessageRequestHeader)
        sys_flag = header.sys_flag
        if not is_readable(self.config.broker_permission):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{self.config.broker_ip1}] pulling message is forbidden")
        group_config = self.groups.find(header.consumer_group)
        if group_config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                   f"subscription group [{header.consumer_group}] does not exist")
        if not group_config.consume_enable:
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"subscription group no permission, {header.consumer_group}")
        topic_config = self.topics.select(header.topic)
        if topic_config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                   f"topic[{header.topic}] not exist, apply first please!")
        if not is_readable(topic_config.perm):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the topic[{header.topic}] pulling message is forbidden")
        if header.queue_id < 0 or header.queue_id >= topic_config.read_queue_nums:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                                   f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]")
        if header.max_msg_nums <= 0:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"maxMsgNums must be positive, got {header.max_msg_nums}")
        if sys_flag & FLAG_SUBSCRIPTION:
            expression = header.subscription
            expression_type = header.expression_type
            try:
                parse_subscription(expression, expression_type)
            except (ValueError, TypeError) as exc:
                log.warning("parse the consumer's subscription %s of %s failed: %s", quote(expression),
                            quote(header.consumer_group), exc)
                return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                       f"parse the consumer's subscription[{expression}] failed: {exc}")
        else:
            group_info = self.consumers.get(header.consumer_group)
            if group_info is None:
                return create_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                       f"the consumer's group info not exist, group {header.consumer_group}")
            if not group_config.consume_broadcast_enable and group_info.message_model == MessageModel.BROADCASTING:
                return create_response(request, ResponseCode.NO_PERMISSION,
                                       f"the consumer group[{header.consumer_group}] can not consume by broadcast way")
            subscription = group_info.find_subscription(header.topic)
            if subscription is None:
                return create_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                       f"the consumer's subscription not exist, group {header.consumer_group}")
            if subscription.sub_version < header.sub_version:
                return create_response(request, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                       "the consumer's subscription not latest")
            expression = subscription.sub_string
            expression_type = subscription.expression_type
            try:
                parse_subscription(expression, expression_type)
            except (ValueError, TypeError) as exc:
                if not is_tag_type(expression_type):
                    # the heartbeat's expression did not compile: no filter data was kept
                    return create_response(request, ResponseCode.FILTER_DATA_NOT_EXIST,
                                           "The broker's consumer filter data is not exist!"
                                           "Your expression may be wrong!")
                return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                       f"parse the consumer's subscription[{expression}] failed: {exc}")
        if not is_tag_type(expression_type) and not self.config.enable_property_filter:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The broker does not support consumer to filter message by {expression_type}")

        began = time.monotonic()
        if topic_config.memory and self.memory is not None:
            result = self.memory.get_message(header.consumer_group, header.topic, header.queue_id,
                                             header.queue_offset, header.max_msg_nums, expression,
                                             expression_type)
        else:
            result = self.store.get_message_records(header.consumer_group, header.topic,
                                                    header.queue_id, header.queue_offset,
                                                    header.max_msg_nums, expression, expression_type)
        ext = {
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
            "suggestWhichBrokerId": str(self._suggest(group_config, result.suggest_pulling_from_slave)),
        }
        status = result.status
        if status == GetMessageStatus.FOUND:
            code = ResponseCode.SUCCESS
        elif status in _MOVED_OR_NOT_FOUND:
            code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS_CODES.get(status, ResponseCode.PULL_NOT_FOUND)
        if status != GetMessageStatus.FOUND:
            self.stats.record_get_miss(int((time.monotonic() - began) * 1000))
        if code == ResponseCode.PULL_OFFSET_MOVED and not self._is_master:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS:
            self.stats.record_get(header.consumer_group, header.topic, header.queue_id,
                                  result.message_count, result.buffer_total_size,
                                  int((time.monotonic() - began) * 1000))
            response = create_response(request, code, ext_fields=ext, body=result.buffers)
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND \
                and self.hold_service is not None:
            timeout_ms = (header.suspend_timeout_millis if self.config.long_polling_enable
                          else self.config.short_polling_time_mills)
            self.hold_service.hold(ctx, request, header.topic, header.queue_id,
                                   header.queue_offset, min(max(0, timeout_ms), MAX_SUSPEND_MS) / 1000)
            response = None
        else:
            if code == ResponseCode.PULL_OFFSET_MOVED:
                log.info("pull of %s@%s queue %d at offset %d moved to %d (min %d, max %d)",
                         header.topic, quote(header.consumer_group), header.queue_id,
                         header.queue_offset, result.next_begin_offset, result.min_offset,
                         result.max_offset)
            response = create_response(request, code, ext_fields=ext)
        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and self._is_master \
                and header.commit_offset >= 0:
            self.offsets.commit(header.consumer_group, header.topic, header.queue_id,
                                header.commit_offset)
        return response
