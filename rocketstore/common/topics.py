"""System topics, retry and dead-letter topic names, and RocketMQ's topic-name rule
(TopicValidator, MixAll).

setup.py writes the names the native code compares into a C header, so they have this one home.
"""
from __future__ import annotations

import re

from rocketstore.common.record import MAX_TOPIC_LENGTH

#: The topic whose route stands for any topic a broker may create on first send.
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
#: Where a delayed message waits, queue ``delayLevel - 1``.
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
#: The prefix of RocketMQ's own topics (transactions, tracing, tests).
SYSTEM_TOPIC_PREFIX = "RMQ_SYS_"
TRANS_HALF_TOPIC = SYSTEM_TOPIC_PREFIX + "TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = SYSTEM_TOPIC_PREFIX + "TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: The group whose offsets on the half and op topics are the transaction check's progress
#: (MixAll.CID_SYS_RMQ_TRANS).
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
SYSTEM_SELF_TEST_TOPIC = SYSTEM_TOPIC_PREFIX + "SELF_TEST_TOPIC"
SYSTEM_BENCHMARK_TOPIC = SYSTEM_TOPIC_PREFIX + "BENCHMARK_TOPIC"
#: The default message-trace topic (BrokerConfig.msgTraceTopicName).
TRACE_TOPIC = SYSTEM_TOPIC_PREFIX + "TRACE_TOPIC"
#: The per-cluster reply topic's suffix (``<cluster>_REPLY_TOPIC``).
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"

#: MixAll's system consumer groups, present on a broker from the start.
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP",
                 "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION",
                 "CID_ONSAPI_OWNER", TRANS_CHECK_GROUP)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

#: Topics no producer may send to (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SYSTEM_SELF_TEST_TOPIC, SYSTEM_BENCHMARK_TOPIC,
})


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back (MixAll.getRetryTopic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where a group's messages go after their last retry."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    """A topic of RocketMQ's own machinery, kept when user topics are cleaned up: the schedule
    topic, ``RMQ_SYS_*``, retry and dead-letter topics."""
    return (topic == SCHEDULE_TOPIC or topic.startswith(SYSTEM_TOPIC_PREFIX)
            or is_retry_topic(topic) or is_dlq_topic(topic))


# ---- the topic-name rule (Validators.checkTopic) ----

#: The characters a topic (and a group) name may hold.
TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%|_-")
#: One or more of TOPIC_CHARS (no length limit: callers add theirs).
TOPIC_NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]+")
_TOPIC_RE = re.compile(TOPIC_NAME_RE.pattern[:-1] + f"{{1,{MAX_TOPIC_LENGTH}}}")


def validate_topic(topic: object) -> str:
    """RocketMQ's rule: 1..127 characters of ``[%|a-zA-Z0-9_-]``. Raises naming ``topic``."""
    if not isinstance(topic, str):
        raise TypeError(f"topic must be str, got {type(topic).__name__}")
    if _TOPIC_RE.fullmatch(topic):
        return topic
    if not topic:
        raise ValueError("topic must not be empty")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic is {len(topic)} characters long; at most {MAX_TOPIC_LENGTH} are allowed")
    bad = next((c for c in topic if c not in TOPIC_CHARS), None)
    if bad is not None:
        raise ValueError(f"topic {topic!r} has an illegal character {bad!r}; "
                         "allowed are letters, digits, '%', '|', '_' and '-'")
    return topic


def c_header() -> str:
    """The names native code compares, as C string macros with their lengths, and TOPIC_CHARS
    as the initializers of a 256-entry table (``[code] = 1``)."""
    lines = ["#define RS_TOPIC_CHAR_INITIALIZERS "
             + ", ".join(f"[{ord(char)}] = 1" for char in sorted(TOPIC_CHARS))]
    for name in ("SCHEDULE_TOPIC", "RETRY_GROUP_TOPIC_PREFIX", "DLQ_GROUP_TOPIC_PREFIX"):
        value = globals()[name]
        lines.append(f'#define RS_{name} "{value}"')
        lines.append(f"#define RS_{name}_LEN {len(value)}")
    return "\n".join(lines) + "\n"
