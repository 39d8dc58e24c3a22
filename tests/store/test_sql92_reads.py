"""get_message with SQL92 subscriptions: for random messages and random expressions, a drain
of every queue returns exactly what the separately written reference evaluator selects (no
message lost, none extra, in queue order), and the answers a bad subscription gets."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql92_reference import random_expression, random_properties, reference_match

from rocketstore import GetMessageStatus, Message, MessageStore, StoreConfig

TOPIC = "sql"
QUEUES = 3
COUNT = 300


@pytest.fixture(scope="module")
def sql_store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sql") / "store"
    store = MessageStore.open(str(root), StoreConfig(store_path_root_dir=str(root),
                                                     mapped_file_size_commit_log=256 * 1024,
                                                     mapped_file_size_consume_queue=20 * 40))
    rng = random.Random(28)
    stored: list[tuple[int, int, dict[str, str]]] = []
    try:
        for i in range(COUNT):
            props = {k: v for k, v in random_properties(rng).items() if v}  # stored values are never empty
            tags = props.pop("TAGS", None)
            queue = i % QUEUES
            result = store.put_message(Message(TOPIC, f"m{i}".encode(), tags=tags, properties=props), queue)
            assert result.ok
            stored.append((queue, result.queue_offset, {**props, **({"TAGS": tags} if tags else {})}))
        assert store.wait_dispatched(timeout_s=30)
        yield store, stored
    finally:
        store.close()


def _drain(store: MessageStore, expression: str, max_msgs: int) -> list[tuple[int, int]]:
    got = []
    for q in range(QUEUES):
        offset = 0
        end = store.get_max_offset_in_queue(TOPIC, q)
        for _ in range(end + 2):
            if offset >= end:
                break
            r = store.get_message("g", TOPIC, q, offset, max_msgs, expression, "SQL92")
            assert r.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)
            got.extend((q, m.queue_offset) for m in r.messages)
            assert r.next_begin_offset > offset
            offset = r.next_begin_offset
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False), st.sampled_from([1, 7, 32]))
def test_sql92_drain_equals_the_reference(sql_store, rng: random.Random, max_msgs: int) -> None:
    store, stored = sql_store
    expression = random_expression(rng)
    if reference_match(expression, {}) is None:
        with pytest.raises(ValueError, match="Invalid MessageSelector"):
            store.get_message("g", TOPIC, 0, 0, 32, expression, "SQL92")
        return
    expected = sorted((q, off) for q, off, props in stored if reference_match(expression, props))
    assert _drain(store, expression, max_msgs) == expected


def test_subscription_types(sql_store) -> None:
    store, stored = sql_store
    with pytest.raises(ValueError, match="expression type"):
        store.get_message("g", TOPIC, 0, 0, 32, "a > 1", "sql92")
    with pytest.raises(ValueError, match="needs an expression"):
        store.get_message("g", TOPIC, 0, 0, 32, None, "SQL92")
    everything = store.get_message("g", TOPIC, 0, 0, 32, "TRUE", "SQL92")
    assert [m.queue_offset for m in everything.messages] == list(range(32))
    tagged = store.get_message("g", TOPIC, 0, 0, 32, "*", "TAG")
    assert [m.queue_offset for m in tagged.messages] == list(range(32))
