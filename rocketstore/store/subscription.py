"""Tag subscriptions as the store filters them: the tags of an expression (read by
:func:`rocketstore.common.subscription.parse_tags`) and their hash codes."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from rocketstore._native.hashes import java_hash
from rocketstore.common.subscription import SUB_ALL, parse_tags


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
    """The subscription of an expression (None: every message)."""
    if expression is None:
        expression = SUB_ALL
    if not isinstance(expression, str):
        raise TypeError(f"subscription must be a str, got {type(expression).__name__}")
    tags = parse_tags(expression)
    return Subscription(expression, tags, frozenset(java_hash(t) for t in tags))
