"""The SEND request header's field names: SendMessageRequestHeader's long names (SEND_MESSAGE
10) and SendMessageRequestHeaderV2's one-letter names (SEND_MESSAGE_V2 310 and
SEND_BATCH_MESSAGE 320), in RocketMQ's order.

The frame decoder's typed SEND path produces the values in this order, and the broker's header
reader takes them in it: both build their tables from :data:`SEND_HEADER_FIELDS`.
"""

from __future__ import annotations

from typing import NamedTuple


class SendHeaderField(NamedTuple):
    attribute: str  # SendRequestHeader's attribute (snake_case)
    name: str       # SEND_MESSAGE's wire name
    v2_name: str    # SEND_MESSAGE_V2's wire name


SEND_HEADER_FIELDS: tuple[SendHeaderField, ...] = (
    SendHeaderField("producer_group", "producerGroup", "a"),
    SendHeaderField("topic", "topic", "b"),
    SendHeaderField("default_topic", "defaultTopic", "c"),
    SendHeaderField("default_topic_queue_nums", "defaultTopicQueueNums", "d"),
    SendHeaderField("queue_id", "queueId", "e"),
    SendHeaderField("sys_flag", "sysFlag", "f"),
    SendHeaderField("born_timestamp", "bornTimestamp", "g"),
    SendHeaderField("flag", "flag", "h"),
    SendHeaderField("properties", "properties", "i"),
    SendHeaderField("reconsume_times", "reconsumeTimes", "j"),
    SendHeaderField("unit_mode", "unitMode", "k"),
    SendHeaderField("max_reconsume_times", "maxReconsumeTimes", "l"),
    SendHeaderField("batch", "batch", "m"),
)

#: The first this many of :data:`SEND_HEADER_FIELDS` are required (producerGroup ... flag).
REQUIRED_SEND_HEADER_FIELDS = 8

#: SendRequestHeader's attribute -> its field.
SEND_HEADER_FIELD = {field.attribute: field for field in SEND_HEADER_FIELDS}

#: SEND_MESSAGE_V2's one-letter name of a SendRequestHeader attribute.
V2_NAME = {field.attribute: field.v2_name for field in SEND_HEADER_FIELDS}
