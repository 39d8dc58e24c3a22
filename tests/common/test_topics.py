"""System topics and the topic-name rule (rocketstore.common.topics)."""
from __future__ import annotations

import pytest

from rocketstore.common import topics
from rocketstore.common.topics import (
    NOT_ALLOWED_SEND_TOPICS,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    dlq_topic,
    is_dlq_topic,
    is_retry_topic,
    is_system_topic,
    retry_topic,
    validate_topic,
)


def test_names_are_rocketmqs() -> None:
    assert SCHEDULE_TOPIC == "SCHEDULE_TOPIC_XXXX" and topics.AUTO_CREATE_TOPIC_KEY_TOPIC == "TBW102"
    assert TRANS_HALF_TOPIC == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert topics.TRANS_OP_HALF_TOPIC == "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    assert topics.TRACE_TOPIC == "RMQ_SYS_TRACE_TOPIC"
    assert {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, "TRANS_CHECK_MAX_TIME_TOPIC"} <= NOT_ALLOWED_SEND_TOPICS


def test_retry_and_dead_letter_topics() -> None:
    assert retry_topic("g") == "%RETRY%g" and dlq_topic("g") == "%DLQ%g"
    assert is_retry_topic(retry_topic("g")) and is_dlq_topic(dlq_topic("g"))
    assert not is_retry_topic("g") and not is_dlq_topic(retry_topic("g"))


@pytest.mark.parametrize("topic, system", [
    ("SCHEDULE_TOPIC_XXXX", True), ("RMQ_SYS_TRANS_HALF_TOPIC", True), ("%RETRY%g", True),
    ("%DLQ%g", True), ("orders", False), ("TBW102", False), ("SCHEDULE_TOPIC_XXXXY", False)])
def test_system_topics(topic: str, system: bool) -> None:
    assert is_system_topic(topic) is system


def test_topic_rule() -> None:
    assert validate_topic("a-b_c%d|e9") == "a-b_c%d|e9"
    assert validate_topic("x" * 127)
    for topic, message in (("", "empty"), ("x" * 128, "at most 127"), ("a b", "illegal character ' '"),
                           ("a\n", "illegal character")):
        with pytest.raises(ValueError, match=message):
            validate_topic(topic)
    with pytest.raises(TypeError):
        validate_topic(b"t")


def test_the_native_topic_rule_is_this_one() -> None:
    """The native check (its character table generated from TOPIC_CHARS) accepts exactly the
    topics this rule accepts: every code point below 512 as a one-character topic, and the
    length bounds."""
    from rocketstore._native.message import validate_topic as native_validate_topic

    def accepts(check, topic: str) -> bool:
        try:
            check(topic)
        except ValueError:
            return False
        return True

    for code in range(512):
        assert accepts(native_validate_topic, chr(code)) is accepts(validate_topic, chr(code)), code
    for topic in ("", "x" * 127, "x" * 128):
        assert accepts(native_validate_topic, topic) is accepts(validate_topic, topic)
