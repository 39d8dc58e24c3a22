"""Tag subscription expressions, read as RocketMQ's FilterAPI.buildSubscriptionData reads them:
the whole expression ``*`` (or empty) means every message; anything else is tags separated by
``||``, each trimmed, empty ones ignored. A ``*`` among other tags is a tag like any other.
"""
from __future__ import annotations

from rocketstore.common.text import quote

#: The expression that selects every message.
SUB_ALL = "*"
#: SubscriptionData.expressionType of tag expressions.
EXPRESSION_TYPE_TAG = "TAG"


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ's ExpressionType.isTagType: no type, an empty one, or exactly ``TAG``."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


class NoTagError(ValueError):
    """An expression that is neither ``*`` nor names a tag (``"||"``, ``" || "``)."""


def parse_tags(expression: str | None) -> frozenset[str]:
    """The tags an expression names; empty when it selects every message. TypeError for a
    non-str, NoTagError for an expression with separators and no tag."""
    if expression is None:
        return frozenset()
    if not isinstance(expression, str):
        raise TypeError(f"expression must be str, got {type(expression).__name__}")
    text = expression.strip()
    if not text or text == SUB_ALL:
        return frozenset()
    tags = frozenset(tag.strip() for tag in text.split("||") if tag.strip())
    if not tags:
        raise NoTagError(f"subscription expression {quote(expression)} holds no tag (use '*' for every message)")
    return tags
