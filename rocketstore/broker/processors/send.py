"""SEND_MESSAGE 10, SEND_MESSAGE_V2 310 and SEND_BATCH_MESSAGE 320 (RocketMQ's
SendMessageProcessor).

A send is checked (broker and topic permissions, topic name, queue id), its topic created from
its default topic when it is new, its properties parsed, a retry topic's message sent to the
group's dead-letter topic once it was retried ``retryMaxTimes``, a delayed message redirected to
the schedule topic (:class:`MessageWriter`), and put. Bodies are stored as sent: a compressed
body (sysFlag bit 0) stays compressed. The reply carries msgId (the offsetMsgId; a batch gives
every id, comma-separated), queueId and queueOffset. With SYNC_FLUSH the reply waits for the
flush through a future, not on the event loop.

Back-pressure as RocketMQ's broker fast failure: a send answered more than
``waitTimeMillsInSendQueue`` after its bytes were read, or while another put has held the put
lock longer than ``osPageCacheBusyTimeOutMills``, is answered SYSTEM_BUSY at once.
"""

from __future__ import annotations

import logging
import random
import struct
from typing import Any

from rocketstore._native.send_header import (
    SendHeaderError,
    SendRequestHeader,
    decode_send_header,
    parse_properties_text,
)
from rocketstore.broker._send_path import SendPath
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.broker.stats import BrokerStats
from rocketstore.broker.subscription_group import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.common.perm import PERM_READ, PERM_WRITE, is_writeable
from rocketstore.common.properties import MessageConst
from rocketstore.common.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
)
from rocketstore.message import (
    Message,
    MessageProperty,
    PutMessageResult,
    PutMessageStatus,
    validate_topic,
)
from rocketstore.remoting import (
    HeaderFieldError,
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)

log = logging.getLogger("rocketstore.broker")

#: PutMessageStatus -> (response code, remark) as RocketMQ's handlePutMessageResult.
_PUT_STATUS_RESPONSES: dict[int, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL, "the message properties are too long"),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full, messages are put to the slave, or the store is shut down"),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}

_NUL_IN_PROPERTIES = "the message properties contain NUL (a torn record to recovery)"

#: sysFlag bits a producer may set (compressed, multi tags, transaction type).
_CLIENT_SYS_FLAGS = 0xF
_TRANSACTION_MASK = 0xC


def _header(ext: dict[str, Any], v2: bool) -> SendRequestHeader:
    try:
        return decode_send_header(ext, v2)
    except SendHeaderError as exc:
        raise HeaderFieldError(exc.field, str(exc).split(" ", 3)[-1]) from None


class BatchBodyError(ValueError):
    pass


_BATCH_HEAD = struct.Struct(">iiiii")   # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLENGTH
_PROPS_LEN = struct.Struct(">h")


def decode_batch_body(body: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """A batch body (FORMAT.md, remoting 8.1) as (flag, body, properties) per message; every
    length is checked against what is left."""
    out = []
    view = memoryview(body)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < _BATCH_HEAD.size:
            raise BatchBodyError(f"batch body truncated at byte {pos}")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(view, pos)
        if total < _BATCH_HEAD.size + 2 or total > end - pos:
            raise BatchBodyError(f"batch message at byte {pos} has a bad size {total}")
        if body_len < 0 or _BATCH_HEAD.size + body_len + 2 > total:
            raise BatchBodyError(f"batch message at byte {pos} has a bad body length {body_len}")
        at = pos + _BATCH_HEAD.size
        msg_body = bytes(view[at:at + body_len])
        at += body_len
        (props_len,) = _PROPS_LEN.unpack_from(view, at)
        at += 2
        if props_len < 0 or at + props_len != pos + total:
            raise BatchBodyError(f"batch message at byte {pos} has a bad properties length {props_len}")
        props = parse_properties_text(bytes(view[at:at + props_len]).decode("utf-8", "replace"))
        out.append((flag, msg_body, props))
        pos += total
    return out


def put_response(request: RemotingCommand, status: int, reason: str | None = None
                 ) -> RemotingCommand:
    code, remark = _PUT_STATUS_RESPONSES.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"))
    if reason:
        remark = f"{remark}: {reason}" if remark else reason
    return create_response(request, code, remark)


class SendMessageProcessor:
    def __init__(self, config: BrokerConfig, writer: MessageWriter, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, stats: BrokerStats) -> None:
        self.config = config
        self.writer = writer
        self.store = writer.store
        self.topics = topics
        self.groups = groups
        self.stats = stats
        self.loop = writer.loop
        self._cluster = config.broker_cluster_name
        self._send_queue_wait_s = config.wait_time_mills_in_send_queue / 1000
        self._put_lock = self.store.commit_log.put_lock
        self._page_cache_busy_ns = self.store.config.os_page_cache_busy_timeout_mills * 1_000_000
        self._reply_extra = {MessageConst.MSG_REGION: config.region_id,
                            MessageConst.TRACE_SWITCH: "true" if config.trace_on else "false"}

    def register_with(self, server: RemotingServer, *, native: bool = True) -> None:
        """native: SEND_MESSAGE and SEND_MESSAGE_V2 go to :class:`SendPath`, which serves
        their common case in one native call and hands every other send to :meth:`_send`
        (False: every send runs in Python)."""
        if native:
            for code, v2 in ((RequestCode.SEND_MESSAGE, False), (RequestCode.SEND_MESSAGE_V2, True)):
                server.register_processor(code, SendPath(
                    self, v2, topics=self.topics,
                    not_allowed_topics=NOT_ALLOWED_SEND_TOPICS, append=self.store.append_message))
        else:
            server.register_processor(RequestCode.SEND_MESSAGE, self.send_message)
            server.register_processor(RequestCode.SEND_MESSAGE_V2, self.send_message_v2)
        server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self.send_batch_message)

    # ---- entry points ----

    def send_message(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        return self._send(ctx, request, _header(request.ext_fields, False))

    def send_message_v2(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        return self._send(ctx, request, _header(request.ext_fields, True))

    def send_batch_message(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        header = _header(request.ext_fields, True)
        header.batch = True
        return self._send(ctx, request, header)

    # ---- the send ----

    def _busy(self, ctx: RemotingConnection) -> str | None:
        """Why the broker refuses this send now (fast failure), or None."""
        if not self.config.broker_fast_failure_enable:
            return None
        waited = self.loop.time() - ctx.received_at
        if waited > self._send_queue_wait_s:
            self.stats.busy_rejections += 1
            return ("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in "
                    f"queue: {waited * 1000:.0f}ms")
        if self._put_lock.held_ns > self._page_cache_busy_ns:
            self.stats.busy_rejections += 1
            return "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        return None

    def _send(self, ctx: RemotingConnection, request: RemotingCommand,
              header: SendRequestHeader) -> Any:
        busy = self._busy(ctx)
        if busy is not None:
            return create_response(request, ResponseCode.SYSTEM_BUSY, busy)
        if not is_writeable(self.config.broker_permission):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{self.config.broker_ip1}] sending message is forbidden")
        topic = header.topic
        try:
            validate_topic(topic)
        except (ValueError, TypeError, OverflowError) as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"the specified topic is illegal: {exc}")
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"Sending message to topic[{topic}] is forbidden.")
        topic_config = self._topic_config(header)
        if topic_config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                   f"topic[{topic}] not exist, apply first please!")
        if not is_writeable(topic_config.perm):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the topic[{topic}] sending message is forbidden")
        queue_id = header.queue_id
        if queue_id >= topic_config.queue_nums:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"request queueId[{queue_id}] is illegal, topic {topic} has "
                                   f"{topic_config.queue_nums} queues")
        if queue_id < 0:
            if topic_config.write_queue_nums <= 0:
                return create_response(request, ResponseCode.NO_PERMISSION,
                                       f"topic[{topic}] has no write queue")
            queue_id = random.randrange(topic_config.write_queue_nums)
        sys_flag = header.sys_flag & _CLIENT_SYS_FLAGS
        if sys_flag & _TRANSACTION_MASK and self.config.reject_transaction_message:
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden")
        if header.batch:
            return self._send_batch(ctx, request, header, topic_config, queue_id, sys_flag)
        properties = parse_properties_text(header.properties)
        if properties.get(MessageProperty.TRAN_MSG) == "true" and self.config.reject_transaction_message:
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden")
        reconsume_times = header.reconsume_times or 0
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            redirected = self._retry_or_dlq(request, topic, reconsume_times, header.max_reconsume_times)
            if isinstance(redirected, RemotingCommand):
                return redirected
            if redirected is not None:
                topic, queue_id = redirected
        properties[MessageProperty.CLUSTER] = self._cluster
        if header.properties and "\x00" in header.properties:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, _NUL_IN_PROPERTIES)
        try:
            message = Message(topic, request.body_bytes(), flag=header.flag,
                              born_timestamp=max(0, header.born_timestamp),
                              born_host=ctx.remote_address, sys_flag=sys_flag,
                              reconsume_times=max(0, reconsume_times))
        except (ValueError, TypeError, OverflowError) as exc:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        # parsed from the text: no separator in a name, no empty name or value, no NUL (checked
        # above), so the constructor's per-property checks would find nothing
        message.properties = properties
        result = self.writer.put(message, queue_id)
        if result.status_code != PutMessageStatus.PUT_OK:
            return self.refused_put(request, result)
        self.stats.record_put(topic, 1, result.wrote_bytes)
        response = create_response(request, ext_fields={
            "msgId": result.msg_id, "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset), **self._reply_extra})
        if not self.writer.needs_flush_wait(properties):
            return response
        return self.durable_reply(request, response, result)

    def refused_put(self, request: RemotingCommand, result: PutMessageResult) -> RemotingCommand:
        """The reply to a send the store did not take."""
        return put_response(request, result.status_code, result.reason)

    def durable_reply(self, request: RemotingCommand, response: RemotingCommand,
                      result: PutMessageResult) -> Any:
        """SYNC_FLUSH: ``response`` once the put's bytes are durable, FLUSH_DISK_TIMEOUT with
        the same fields when that flush timed out."""
        return self.writer.when_durable(
            result.commitlog_offset + result.wrote_bytes,
            lambda durable: response if durable else self._flush_timeout(request, response))

    def _flush_timeout(self, request: RemotingCommand, ok: RemotingCommand) -> RemotingCommand:
        """FLUSH_DISK_TIMEOUT: stored, durability not confirmed in time (the fields say where)."""
        return create_response(request, ResponseCode.FLUSH_DISK_TIMEOUT,
                               "the message is stored, its flush to disk timed out",
                               ext_fields=ok.ext_fields)

    def _topic_config(self, header: SendRequestHeader
                      ) -> TopicConfig | None:
        topic = header.topic
        cfg = self.topics.select(topic)
        if cfg is not None:
            return cfg
        sys_flag = 0
        cfg = self.topics.create_in_send(topic, header.default_topic,
                                         header.default_topic_queue_nums, sys_flag)
        if cfg is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            cfg = self.topics.create_in_send_back(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
        return cfg

    def _retry_or_dlq(self, request: RemotingCommand, topic: str, reconsume_times: int,
                      max_reconsume_times: int | None) -> RemotingCommand | tuple[str, int] | None:
        """handleRetryAndDLQ: a message sent to %RETRY%group that was retried enough goes to
        %DLQ%group instead."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        group_config = self.groups.find(group)
        if group_config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                   f"subscription group not exist, {group}")
        limit = group_config.retry_max_times if max_reconsume_times is None else max_reconsume_times
        if reconsume_times < limit:
            return None
        dlq = dlq_topic(group)
        self.topics.create_in_send_back(dlq, 1, PERM_WRITE | PERM_READ, 0)
        log.info("message of %s retried %d times: to %s", topic, reconsume_times, dlq)
        return dlq, 0

    def _send_batch(self, ctx: RemotingConnection, request: RemotingCommand,
                    header: SendRequestHeader,
                    topic_config: TopicConfig, queue_id: int, sys_flag: int) -> Any:
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                                   f"batch request does not support retry group {topic}")
        try:
            entries = decode_batch_body(request.body_bytes())
        except BatchBodyError as exc:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if not entries:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
        born_host = ctx.remote_address
        born_timestamp = max(0, header.born_timestamp)
        reconsume_times = max(0, header.reconsume_times or 0)
        messages = []
        try:
            for flag, body, properties in entries:
                if properties.get(MessageProperty.DELAY, "0") not in ("0", ""):
                    return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                                           "a batch may not hold delayed messages")
                if properties.get(MessageProperty.TRAN_MSG) == "true":
                    return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                                           "a batch may not hold transaction messages")
                if any("\x00" in k or "\x00" in v for k, v in properties.items()):
                    return create_response(request, ResponseCode.MESSAGE_ILLEGAL, _NUL_IN_PROPERTIES)
                properties[MessageProperty.CLUSTER] = self._cluster
                message = Message(topic, body, flag=flag, born_timestamp=born_timestamp,
                                  born_host=born_host, sys_flag=sys_flag,
                                  reconsume_times=reconsume_times)
                message.properties = properties
                messages.append(message)
        except (ValueError, TypeError, OverflowError) as exc:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        result = self.writer.put_batch(messages, queue_id)
        if result.status_code != PutMessageStatus.PUT_OK:
            return put_response(request, result.status_code, result.reason)
        self.stats.record_put(topic, result.stored, result.wrote_bytes)
        offsets = result.queue_offsets
        assert offsets is not None and result.commitlog_offsets is not None and result.sizes is not None
        response = create_response(request, ext_fields={
            "msgId": ",".join(i or "" for i in result.msg_ids), "queueId": str(queue_id),
            "queueOffset": str(int(offsets[0])), **self._reply_extra})
        wait = any(self.writer.needs_flush_wait(m.properties) for m in messages)
        if not wait:
            return response
        end = int(result.commitlog_offsets[-1] + result.sizes[-1])
        return self.writer.when_durable(
            end, lambda durable: response if durable else self._flush_timeout(request, response))
