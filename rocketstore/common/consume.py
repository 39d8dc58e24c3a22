"""How a consumer group consumes: RocketMQ's MessageModel, ConsumeType and ConsumeFromWhere, as
the client sets them and the broker reads them from a heartbeat (by name or by ordinal)."""
from __future__ import annotations

import enum
from typing import Literal


class MessageModel(str, enum.Enum):
    """How a consumer group shares a topic: each message to one member, or to every member.
    In Java's ordinal order."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


#: MessageModel's values, as a type checker sees a string given for one
MessageModelName = Literal["BROADCASTING", "CLUSTERING"]


class ConsumeType(str, enum.Enum):
    """In Java's ordinal order."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"    # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class ConsumeFromWhere(str, enum.Enum):
    """Where a group with no committed offset starts (RocketMQ's ConsumeFromWhere, without
    its deprecated values)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


#: ConsumeFromWhere's values, as a type checker sees a string given for one
ConsumeFromWhereName = Literal["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                               "CONSUME_FROM_TIMESTAMP"]

#: Every ConsumeFromWhere name a client may send, deprecated ones included, by Java's ordinal.
CONSUME_FROM_WHERE_NAMES = (
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.value,
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET.value,
    ConsumeFromWhere.CONSUME_FROM_TIMESTAMP.value,
)
#: MessageModel's and ConsumeType's names by Java's ordinal.
MESSAGE_MODEL_NAMES = tuple(model.value for model in MessageModel)
CONSUME_TYPE_NAMES = tuple(kind.value for kind in ConsumeType)
