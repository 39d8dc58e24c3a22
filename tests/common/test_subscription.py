"""Tag expressions, read as RocketMQ's FilterAPI reads them, the same in the client and the
store (rocketstore.common.subscription)."""
from __future__ import annotations

import pytest

from rocketstore.common.subscription import NoTagError, parse_tags


@pytest.mark.parametrize("expression", [None, "", "*", "  *  ", "   "])
def test_every_message(expression: str | None) -> None:
    assert parse_tags(expression) == frozenset()


def test_tags() -> None:
    assert parse_tags("a") == {"a"}
    assert parse_tags(" a || b ||  ||c ") == {"a", "b", "c"}


def test_a_star_among_tags_is_a_tag_not_everything() -> None:
    # FilterAPI.buildSubscriptionData: only the whole expression "*" selects everything
    assert parse_tags("a || *") == {"a", "*"}


def test_the_client_and_the_store_agree_on_a_star_among_tags() -> None:
    from rocketstore.client.subscription import SubscriptionData
    from rocketstore.store.subscription import parse_subscription

    client = SubscriptionData.build("T", "a || *")
    store = parse_subscription("a || *")
    assert not client.matches_all and not store.match_all
    assert client.tags_set == store.tags == {"a", "*"}
    assert client.code_set == store.codes


def test_no_tag() -> None:
    with pytest.raises(NoTagError, match="no tag"):
        parse_tags("||")
    with pytest.raises(TypeError):
        parse_tags(1)  # type: ignore[arg-type]
