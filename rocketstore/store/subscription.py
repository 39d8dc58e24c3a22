"""Subscriptions as the store filters them: tag expressions (read by
:func:`rocketstore.common.subscription.parse_tags`, matched by their hash codes, then by the
record's tag) and SQL92 expressions (:mod:`rocketstore.common.sql92`, matched against the
record's properties)."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from rocketstore._native.hashes import java_hash
from rocketstore.common.sql92 import EXPRESSION_TYPE_SQL92, Sql92Filter, compile_sql92
from rocketstore.common.subscription import SUB_ALL, is_tag_type, parse_tags


@dataclass(frozen=True)
class Subscription:
    expression: str
    tags: frozenset[str]          # empty: match everything (a tag subscription)
    codes: frozenset[int]
    #: the compiled expression of an SQL92 subscription (None: a tag subscription)
    sql: Sql92Filter | None = None

    @property
    def match_all(self) -> bool:
        return not self.tags and self.sql is None

    def matches_code(self, tags_code: int) -> bool:
        return not self.tags or tags_code in self.codes

    def matches_tag(self, tag: str | None) -> bool:
        return not self.tags or (tag is not None and tag in self.tags)

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        """The SQL92 check (True for a tag subscription)."""
        return self.sql is None or self.sql.matches(properties)


@functools.lru_cache(maxsize=1024)
def parse_subscription(expression: str | None, expression_type: str | None = None) -> Subscription:
    """The subscription of an expression (None: every message) of a type (``TAG``, the
    default, or ``SQL92``, spelled so as RocketMQ's ExpressionType). ValueError for a bad
    expression or type."""
    if expression_type == EXPRESSION_TYPE_SQL92:
        if expression is None:
            raise ValueError("an SQL92 subscription needs an expression")
        return Subscription(expression, frozenset(), frozenset(), compile_sql92(expression))
    if not is_tag_type(expression_type):
        raise ValueError(f"expression type must be TAG or SQL92, got {expression_type!r:.40}")
    if expression is None:
        expression = SUB_ALL
    if not isinstance(expression, str):
        raise TypeError(f"subscription must be a str, got {type(expression).__name__}")
    tags = parse_tags(expression)
    return Subscription(expression, tags, frozenset(java_hash(t) for t in tags))
