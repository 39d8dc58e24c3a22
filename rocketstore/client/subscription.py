"""Subscriptions (RocketMQ's SubscriptionData, FilterAPI.build and MessageSelector).

A tag expression is ``*`` (every message) or tags joined by ``||`` (``"paid || shipped"``). The
broker filters by the tags' hash codes; the client then checks each message's tag exactly, as
two tags may share a hash code.

``SQL92("amount > 100 AND region = 'eu'")`` selects by the messages' properties (RocketMQ's
``MessageSelector.bySql``); the broker filters (it needs ``enablePropertyFilter=true``) and
answers CHECK_CLIENT_CONFIG with the parser's reason for an expression it refuses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketstore.client.message import MessageExt, tags_hash_code, validate_topic
from rocketstore.common.sql92 import EXPRESSION_TYPE_SQL92
from rocketstore.common.subscription import EXPRESSION_TYPE_TAG, SUB_ALL, parse_tags


@dataclass(frozen=True)
class SQL92:
    """An SQL92 selector over message properties: ``consumer.subscribe("orders",
    SQL92("amount > 100"))`` (RocketMQ's ``MessageSelector.bySql``)."""

    expression: str

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise TypeError(f"SQL92 expression must be a str, got {type(self.expression).__name__}")
        if not self.expression:
            raise ValueError("SQL92 expression must not be empty")


#: What subscribe() takes: a tag expression or an SQL92 selector.
Selector = str | SQL92 | None


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[int] = field(default_factory=frozenset)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, expression: Selector) -> SubscriptionData:
        """Parse ``expression``; ValueError names it when it holds no tag. An SQL92 selector
        is kept as it is: the broker compiles it."""
        validate_topic(topic)
        if isinstance(expression, SQL92):
            return cls(topic, expression.expression, expression_type=EXPRESSION_TYPE_SQL92)
        tags = parse_tags(expression)
        if not tags:
            return cls(topic, SUB_ALL)
        assert expression is not None
        return cls(topic, expression.strip(), tags, frozenset(tags_hash_code(tag) for tag in tags))

    @property
    def matches_all(self) -> bool:
        return not self.tags_set and self.is_tag_type

    @property
    def is_tag_type(self) -> bool:
        return self.expression_type == EXPRESSION_TYPE_TAG

    def matches(self, msg: MessageExt) -> bool:
        """The client-side check: the message's tag is one of the subscribed tags."""
        return not self.tags_set or (msg.tags is not None and msg.tags in self.tags_set)

    def filter(self, messages: Iterable[MessageExt]) -> list[MessageExt]:
        if not self.tags_set:
            return list(messages)
        tags = self.tags_set
        return [msg for msg in messages if msg.tags in tags]

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }
