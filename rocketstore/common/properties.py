"""Message property names (RocketMQ's MessageConst), the separators of the properties text and
its codec (MessageDecoder's messageProperties2String and string2messageProperties).

The native store and the broker's send path parse the same text natively (fast paths);
tests/common/test_properties_text.py holds them to :func:`decode_properties`."""
from __future__ import annotations

from collections.abc import Mapping

#: Between a property's name and its value in a record's properties text.
NAME_VALUE_SEPARATOR = "\x01"
#: Between two properties.
PROPERTY_SEPARATOR = "\x02"


class MessageConst:
    """Well-known property names, with RocketMQ's MessageConst names."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    SHARDING_KEY = "SHARDING_KEY"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"


#: Properties a user may not set with put_user_property (RocketMQ's STRING_HASH_SET).
SYSTEM_PROPERTIES = frozenset(
    value for name, value in vars(MessageConst).items() if not name.startswith("_")
)


class MessageProperty:
    """The same names, spelled as the store and the broker use them."""

    TAGS = MessageConst.TAGS
    KEYS = MessageConst.KEYS
    UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    DELAY = MessageConst.DELAY_TIME_LEVEL
    WAIT = MessageConst.WAIT_STORE_MSG_OK
    TRAN_MSG = MessageConst.TRANSACTION_PREPARED
    PGROUP = MessageConst.PRODUCER_GROUP
    REAL_TOPIC = MessageConst.REAL_TOPIC
    REAL_QID = MessageConst.REAL_QUEUE_ID
    RETRY_TOPIC = MessageConst.RETRY_TOPIC
    MAX_RECONSUME_TIMES = MessageConst.MAX_RECONSUME_TIMES
    CLUSTER = "CLUSTER"
    ORIGIN_MESSAGE_ID = MessageConst.ORIGIN_MESSAGE_ID


def encode_properties(properties: Mapping[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02`` (no trailing separator, as 4.9.8 writes)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items())


def decode_properties(text: str) -> dict[str, str]:
    """RocketMQ's string2messageProperties: a pair with no separator, an empty name or an empty
    value is dropped (so is a trailing separator); a later pair with the same name wins."""
    properties: dict[str, str] = {}
    if not text:
        return properties
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            properties[name] = value
    return properties


def c_header() -> str:
    """The separators and MessageProperty's names as C macros for the native code's generated
    header: ``RS_PROPERTY_<NAME>`` a string literal, ``RS_PROPERTY_<NAME>_LEN`` its length (a
    compile-time constant, so a memcmp against it compiles to a word compare)."""
    lines = [f"#define RS_NAME_VALUE_SEPARATOR {ord(NAME_VALUE_SEPARATOR)}",
             f"#define RS_PROPERTY_SEPARATOR {ord(PROPERTY_SEPARATOR)}"]
    for name, value in vars(MessageProperty).items():
        if name.startswith("_"):
            continue
        assert value.isascii() and value.isidentifier(), value   # a plain C string literal
        lines.append(f'#define RS_PROPERTY_{name} "{value}"')
        lines.append(f"#define RS_PROPERTY_{name}_LEN {len(value)}")
    return "\n".join(lines) + "\n"
