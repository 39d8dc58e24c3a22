"""Shared vocabulary: messages, statuses, property names and sysFlag bits (FORMAT.md)."""
from __future__ import annotations

import enum
import re

from rocketstore._native.hosts import format_host, make_msg_id, parse_host, parse_msg_id
from rocketstore._native.message import Message, new_uniq_key, validate_topic
from rocketstore._native.record import CorruptRecordError, MessageExt
from rocketstore._native.record_writer import PutMessageResult, PutMessagesResult, PutMessageStatus

__all__ = [
    "BLANK_MAGIC_CODE", "CorruptRecordError", "GetMessageStatus", "Message", "MessageExt",
    "MESSAGE_MAGIC_CODE", "MessageProperty", "PutMessageResult", "PutMessageStatus",
    "PutMessagesResult", "SysFlag", "format_host", "make_msg_id", "new_uniq_key", "parse_host",
    "parse_msg_id", "queue_key", "split_queue_key", "validate_topic",
]

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194


class GetMessageStatus(enum.IntEnum):
    """RocketMQ's GetMessageStatus."""

    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


class MessageProperty:
    """Well-known property names (MessageConst)."""

    TAGS = "TAGS"
    KEYS = "KEYS"
    UNIQ_KEY = "UNIQ_KEY"
    DELAY = "DELAY"
    WAIT = "WAIT"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    RETRY_TOPIC = "RETRY_TOPIC"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CLUSTER = "CLUSTER"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"


class SysFlag(enum.IntFlag):
    """SYSFLAG bits of a CommitLog record."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        return sys_flag & 0xC


def queue_key(topic: str, queue_id: int) -> str:
    """The ``topic:queueId`` key of offset maps (consumer offsets, Spark's streaming offsets)."""
    return f"{topic}:{queue_id}"


def split_queue_key(key: str) -> tuple[str, int]:
    topic, sep, qid = key.rpartition(":")
    if not sep or not topic or not re.fullmatch(r"-?[0-9]+", qid):
        raise ValueError(f"{key!r} is not a 'topic:queueId' key")
    return topic, int(qid)
