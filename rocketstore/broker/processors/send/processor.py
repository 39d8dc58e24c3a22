"""SEND_MESSAGE 10, SEND_MESSAGE_V2 310 and SEND_BATCH_MESSAGE 320 (RocketMQ's
SendMessageProcessor).

A send is checked (broker and topic permissions, topic name, queue id), its topic created from
its default topic when it is new, its properties parsed, a retry topic's message sent to the
group's dead-letter topic once it was retried ``retryMaxTimes``, a delayed message redirected to
the schedule topic (:class:`MessageWriter`), and put. Bodies are stored as sent: a compressed
body (sysFlag bit 0) stays compressed. The reply carries msgId (the offsetMsgId; a batch gives
every id, comma-separated), queueId and queueOffset. With SYNC_FLUSH the reply waits for the
flush through a future, not on the event loop; with SYNC_MASTER for a slave's
acknowledgement the same way.

Back-pressure as RocketMQ's broker fast failure: a send answered more than
``waitTimeMillsInSendQueue`` after its bytes were read, or while another put has held the put
lock longer than ``osPageCacheBusyTimeOutMills``, is answered SYSTEM_BUSY at once.

The rules are :class:`SendPath`'s (``_send_path.pyx``), written once; this processor holds
what they need of the broker's tables (topic creation, the retry/DLQ redirect, the batch, the
replies of refused and SYNC_FLUSH puts) as public methods.
"""

from __future__ import annotations

import logging
from typing import Any

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.broker.processors.send._send_header import (
    SendRequestHeader,
    decode_request_header,
)
from rocketstore.broker.processors.send._send_path import SendPath
from rocketstore.broker.processors.send.batch import send_batch
from rocketstore.broker.stats import BrokerStatsManager
from rocketstore.broker.subscription_group import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.broker.transaction import TransactionalMessageService
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.topics import NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from rocketstore.message import Message, PutMessageResult, PutMessagesResult, PutMessageStatus
from rocketstore.remoting import (
    FrameWriter,
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.store import MemoryMessageStore

log = logging.getLogger(__name__)

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


def put_response(request: RemotingCommand, status: int, reason: str | None = None
                 ) -> RemotingCommand:
    code, remark = _PUT_STATUS_RESPONSES.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"))
    if reason:
        remark = f"{remark}: {reason}" if remark else reason
    return create_response(request, code, remark)


class SendMessageProcessor:
    def __init__(self, config: BrokerConfig, writer: MessageWriter, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, stats: BrokerStatsManager,
                 transactions: TransactionalMessageService | None = None,
                 memory: MemoryMessageStore | None = None) -> None:
        self.config = config
        self.writer = writer
        self.store = writer.store
        self.transactions = transactions or TransactionalMessageService(self.store, topics)
        self.topics = topics
        self.groups = groups
        self.stats = stats
        self.loop = writer.loop
        #: the memory topics' store (the broker sets it; None: memory topics are refused)
        self.memory: MemoryMessageStore | None = memory
        self.reload_config(config)

    def reload_config(self, config: BrokerConfig) -> None:
        """Take ``config`` (and the store's settings): new send paths, which read them once;
        register_with puts them in place of the old ones."""
        self.config = config
        self.cluster = config.broker_cluster_name
        self._send_v1, self._send_v2, self._send_batch = (
            SendPath(self, v2, topics=self.topics, not_allowed_topics=NOT_ALLOWED_SEND_TOPICS,
                     append=self.store.append_message,
                     memory_append=None if self.memory is None else self.memory.append_message,
                     batch=batch)
            for v2, batch in ((False, False), (True, False), (True, True)))

    def register_with(self, server: RemotingServer, *, native: bool = True) -> None:
        """native: SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE go to their
        :class:`SendPath`, which reads the header natively and may write a stored send's reply
        straight into the connection (False: the header is read from the ext fields and the
        reply encoded as any other, the rules being the same)."""
        if native:
            server.register_processor(RequestCode.SEND_MESSAGE, self._send_v1)
            server.register_processor(RequestCode.SEND_MESSAGE_V2, self._send_v2)
            server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self._send_batch)
        else:
            server.register_processor(RequestCode.SEND_MESSAGE, self.send_message)
            server.register_processor(RequestCode.SEND_MESSAGE_V2, self.send_message_v2)
            server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self.send_batch_message)

    # ---- entry points ----

    def send_message(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        return self._send_v1.send(ctx, request, decode_request_header(request.ext_fields, False))

    def send_message_v2(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        return self._send_v2.send(ctx, request, decode_request_header(request.ext_fields, True))

    def send_batch_message(self, ctx: RemotingConnection, request: RemotingCommand) -> Any:
        header = self._send_v2.read_header(request)
        header.batch = True
        return self._send_v2.send(ctx, request, header)

    # ---- what the send rules ask of the broker ----

    def topic_config_for_send(self, header: SendRequestHeader) -> TopicConfig | None:
        """The send's topic, created from its default topic when new (a retry topic with one
        write queue when there is none to inherit from), or None."""
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

    def retry_or_dlq(self, request: RemotingCommand, topic: str, reconsume_times: int,
                     max_reconsume_times: int | None) -> RemotingCommand | tuple[str, int] | None:
        """handleRetryAndDLQ: a message sent to %RETRY%group that was retried enough goes to
        %DLQ%group instead: (the topic, queue 0); a refusal; or None (stays)."""
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

    def send_batch(self, ctx: RemotingConnection, request: RemotingCommand,
                   header: SendRequestHeader, queue_id: int, sys_flag: int,
                   writer: FrameWriter | None = None) -> Any:
        """A batch that passed the send rules: its own rules, the put and the reply (WRITTEN
        when it went into ``writer``, the pump's)."""
        return send_batch(self, self._send_v2, ctx, request, header, queue_id, sys_flag, writer)

    def memory_store_of(self, topic: str) -> MemoryMessageStore | None:
        """The memory store when ``topic`` is a memory topic, else None."""
        cfg = self.topics.select(topic)
        return self.memory if cfg is not None and cfg.memory else None

    def prepare_message(self, message: Message, queue_id: int) -> PutMessageResult:
        """A transaction's half message (TRAN_MSG=true), stored in the half topic."""
        return self.transactions.prepare(message, queue_id)

    def refused_put(self, request: RemotingCommand,
                    result: PutMessageResult | PutMessagesResult) -> RemotingCommand:
        """The reply to a send (or batch) the store did not take."""
        self.stats.record_put_failed()
        return put_response(request, result.status_code, result.reason)

    def reply_when_stored(self, request: RemotingCommand, response: RemotingCommand,
                          end_offset: int) -> Any:
        """SYNC_FLUSH / SYNC_MASTER: ``response`` once the CommitLog below ``end_offset`` is
        flushed and acknowledged by a slave; FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or
        SLAVE_NOT_AVAILABLE with the same fields otherwise (RocketMQ's handlePutMessageResult:
        the message is stored, the producer decides)."""
        return self.writer.when_stored(
            end_offset, lambda status: response if status == PutMessageStatus.PUT_OK
            else self.not_confirmed(request, response, status))

    def not_confirmed(self, request: RemotingCommand, ok: RemotingCommand,
                       status: int) -> RemotingCommand:
        """Stored, its flush or its replication not confirmed in time (the fields say where)."""
        code, _ = _PUT_STATUS_RESPONSES[status]
        return create_response(request, code, _NOT_CONFIRMED[status], ext_fields=ok.ext_fields)


#: the remark of a stored send whose flush or replication was not confirmed
_NOT_CONFIRMED: dict[int, str] = {
    PutMessageStatus.FLUSH_DISK_TIMEOUT: "the message is stored, its flush to disk timed out",
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT:
        "the message is stored, no slave acknowledged it within slaveTimeout",
    PutMessageStatus.SLAVE_NOT_AVAILABLE:
        "the message is stored, no slave is connected or the best is more than "
        "haSlaveFallbehindMax behind",
}
