"""Tag subscription expressions: `*` (everything) or `TagA || TagB` (RocketMQ TAG type)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from rocketstore._native.hashes import java_hash


@dataclass(frozen=True)
class Subscription:
    expression: str
    tags: frozenset[str]          # empty: match everything
    codes: frozenset[int]

    @property
    def match_all(self) -> bool:
        return not self.tags

    def matches_code(self, tags_code: int) -> bool:
        return not self.tags or tags_code in self.codes

    def matches_tag(self, tag: str | None) -> bool:
        return not self.tags or (tag is not None and tag in self.tags)


@functools.lru_cache(maxsize=1024)
def parse_subscription(expression: str | None) -> Subscription:
    """Parse as RocketMQ's FilterAPI.buildSubscriptionData: '*' or empty means all; else tags
    separated by '||', trimmed, empty ones ignored."""
    if expression is None:
        expression = "*"
    if not isinstance(expression, str):
        raise TypeError(f"subscription must be a str, got {type(expression).__name__}")
    text = expression.strip()
    if text in ("", "*"):
        return Subscription(expression, frozenset(), frozenset())
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        raise ValueError(f"subscription {expression!r} names no tag")
    return Subscription(expression, tags, frozenset(java_hash(t) for t in tags))
