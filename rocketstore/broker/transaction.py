"""TransactionalMessageService: RocketMQ 4.9.8's transactional messages on the broker's store
(its TransactionalMessageBridge and TransactionalMessageServiceImpl, the check aside:
:mod:`rocketstore.broker.transaction_check`).

- A prepared (half) message, sent with ``TRAN_MSG=true`` (and sysFlag
  TRANSACTION_PREPARED_TYPE), is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real
  topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and its transaction bits reset to
  NOT_TYPE (parseHalfMessageInner), so the half topic's ConsumeQueue indexes it for the check
  and no consumer of its topic sees it.
- END_TRANSACTION commits (the half's message put to its real topic with sysFlag COMMIT_TYPE,
  preparedTransactionOffset the half's CommitLog offset, every stored property kept: UNIQ_KEY,
  and, as RocketMQ 4.9.8 writes the text before it clears them, REAL_TOPIC, REAL_QID and
  TRAN_MSG) or rolls back; either way an op message marks the half done: topic
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the half's queue id, tags ``d``, body the half's queue
  offset as decimal text.

The store's dispatch gives PREPARED and ROLLBACK records no ConsumeQueue unit (RocketMQ's
CommitLogDispatcherBuildConsumeQueue); this service writes neither, as RocketMQ 4.9.8 does not.
"""

from __future__ import annotations

import logging
import struct
from collections import OrderedDict

from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.properties import MessageConst
from rocketstore.common.record import (
    BORNHOST_OFFSET,
    MESSAGE_SYS_FLAGS,
    QUEUEID_OFFSET,
    TRANSACTION_TYPE_MASK,
    SysFlag,
)
from rocketstore.common.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketstore.message import Message, MessageExt, MessageProperty, PutMessageResult
from rocketstore.store import MessageStore

log = logging.getLogger("rocketstore.broker")

#: The op message's tags: the half at the body's offset is done (TransactionalMessageUtil.REMOVETAG).
REMOVE_TAG = "d"
#: How many ended transactions a broker remembers to end each only once.
ENDED_REMEMBERED = 200_000
_V6 = 20
_V4 = 8


def with_transaction_type(sys_flag: int, transaction_type: int) -> int:
    """MessageSysFlag.resetTransactionValue."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | transaction_type


def half_message_inner(message: Message, queue_id: int) -> None:
    """parseHalfMessageInner, in place: the half topic's queue 0, the real topic and queue in
    properties, the transaction bits NOT_TYPE."""
    properties = message.properties
    properties[MessageProperty.REAL_TOPIC] = message.topic
    properties[MessageProperty.REAL_QID] = str(queue_id)
    message.properties = properties
    message.sys_flag = with_transaction_type(message.sys_flag, _NOT_TYPE)
    message.topic = TRANS_HALF_TOPIC


def record_as_real_message(half: MessageExt) -> bytes:
    """A half's stored record with its real topic and queue id (the CHECK_TRANSACTION_STATE
    body: RocketMQ's MessageDecoder.encode of the half with REAL_TOPIC / REAL_QID set)."""
    record = bytes(half.record)
    properties = half.properties
    topic = properties.get(MessageProperty.REAL_TOPIC, half.topic).encode()
    queue_id = int(properties.get(MessageProperty.REAL_QID, str(half.queue_id)))
    sys_flag = half.sys_flag
    born = _V6 if sys_flag & SysFlag.BORNHOST_V6 else _V4
    stored = _V6 if sys_flag & SysFlag.STOREHOST_V6 else _V4
    body_length_at = BORNHOST_OFFSET + born + 8 + stored + 4 + 8
    (body_length,) = struct.unpack_from(">i", record, body_length_at)
    topic_at = body_length_at + 4 + body_length
    head = bytearray(record[:topic_at])
    rest = record[topic_at + 1 + record[topic_at]:]
    out = head + bytes((len(topic),)) + topic + rest
    struct.pack_into(">i", out, 0, len(out))
    struct.pack_into(">i", out, QUEUEID_OFFSET, queue_id)
    return bytes(out)


def op_message(half_queue_offset: int) -> Message:
    """The op marking the half at ``half_queue_offset`` done (makeOpMessageInner)."""
    return Message(TRANS_OP_HALF_TOPIC, str(half_queue_offset).encode(), tags=REMOVE_TAG)


class TransactionalMessageService:
    """Half messages in, ops and committed messages out, on ``store``; ``put_final`` stores
    a committed message (the broker's MessageWriter.put: a committed message with DELAY is
    delayed, as RocketMQ's CommitLog delays a COMMIT_TYPE one)."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager | None = None) -> None:
        self.store = store
        self.topics = topics
        #: transactions (producer group, UNIQ_KEY) this broker run already ended, newest last
        self._ended: OrderedDict[tuple[str | None, str], None] = OrderedDict()

    def first_end(self, properties: dict[str, str]) -> bool:
        """True the first time this run ends the half's transaction: a check's answer for a
        copy of a half whose earlier answer is still on its way ends it once more (RocketMQ
        4.9.8 delivers it twice then; this broker delivers it once, remembering the last
        ENDED_REMEMBERED transactions)."""
        uniq_key = properties.get(MessageProperty.UNIQ_KEY)
        if uniq_key is None:
            return True
        key = (properties.get(MessageConst.PRODUCER_GROUP), uniq_key)
        if key in self._ended:
            return False
        self._ended[key] = None
        if len(self._ended) > ENDED_REMEMBERED:
            self._ended.popitem(last=False)
        return True

    def _ensure_topic(self, topic: str) -> None:
        """The half and op topics' configs (one queue, read and write), as RocketMQ's bridge
        creates them when it first uses them."""
        if self.topics is not None and topic not in self.topics.table:
            self.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE)

    def prepare(self, message: Message, queue_id: int) -> PutMessageResult:
        """Store a half message (putHalfMessage)."""
        self._ensure_topic(TRANS_HALF_TOPIC)
        half_message_inner(message, queue_id)
        return self.store.append_message(message, 0)

    def find_half(self, commitlog_offset: int) -> MessageExt | None:
        """The half message at a CommitLog offset (lookMessageByOffset), None when there is
        none there."""
        try:
            found = self.store.look_message_by_offset(commitlog_offset)
        except (ValueError, OSError) as exc:
            log.info("no half message at CommitLog offset %d: %s", commitlog_offset, exc)
            return None
        if found is None or found.topic != TRANS_HALF_TOPIC:
            return None
        return found

    @staticmethod
    def final_message(half: MessageExt, properties: dict[str, str], transaction_type: int
                      ) -> tuple[Message, int]:
        """endMessageTransaction: the half's message (``properties`` are its own) for its
        real topic with ``transaction_type`` (COMMIT), and its queue id."""
        topic = properties[MessageProperty.REAL_TOPIC]
        queue_id = int(properties[MessageProperty.REAL_QID])
        message = Message(topic, bytes(half.body), properties=properties, flag=half.flag,
                          born_timestamp=half.born_timestamp, born_host=half.born_host,
                          sys_flag=with_transaction_type(half.sys_flag & MESSAGE_SYS_FLAGS,
                                                         transaction_type),
                          reconsume_times=half.reconsume_times,
                          prepared_transaction_offset=half.commitlog_offset)
        return message, queue_id

    def delete_prepared(self, half: MessageExt) -> bool:
        """deletePrepareMessage: the op for the half; False when it could not be stored."""
        self._ensure_topic(TRANS_OP_HALF_TOPIC)
        result = self.store.append_message(op_message(half.queue_offset), half.queue_id)
        if not result.ok:
            log.warning("writing the op of half message %d failed: %s (%s)", half.queue_offset,
                        result.status.name, result.reason)
        return result.ok


def producer_group_of(message: MessageExt) -> str | None:
    return message.properties.get(MessageConst.PRODUCER_GROUP)


_NOT_TYPE = int(SysFlag.TRANSACTION_NOT_TYPE)
