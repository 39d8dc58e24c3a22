"""The store's message types and statuses; the record vocabulary (property names, sysFlag bits,
magic codes) re-exported from :mod:`rocketstore.common`."""
from __future__ import annotations

import enum
import re

from rocketstore._native.hosts import format_host, make_msg_id, parse_host, parse_msg_id
from rocketstore._native.message import Message, new_uniq_key, validate_topic
from rocketstore._native.record import CorruptRecordError, MessageExt
from rocketstore._native.record_writer import PutMessageResult, PutMessagesResult, PutMessageStatus
from rocketstore.common.properties import MessageProperty
from rocketstore.common.record import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, SysFlag

__all__ = [
    "BLANK_MAGIC_CODE", "CorruptRecordError", "GetMessageStatus", "Message", "MessageExt",
    "MESSAGE_MAGIC_CODE", "MessageProperty", "PutMessageResult", "PutMessageStatus",
    "PutMessagesResult", "SysFlag", "format_host", "make_msg_id", "new_uniq_key", "parse_host",
    "parse_msg_id", "queue_key", "split_queue_key", "validate_topic",
]


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


def queue_key(topic: str, queue_id: int) -> str:
    """The ``topic:queueId`` key of offset maps (consumer offsets, Spark's streaming offsets)."""
    return f"{topic}:{queue_id}"


def split_queue_key(key: str) -> tuple[str, int]:
    topic, sep, qid = key.rpartition(":")
    if not sep or not topic or not re.fullmatch(r"-?[0-9]+", qid):
        raise ValueError(f"{key!r} is not a 'topic:queueId' key")
    return topic, int(qid)
