"""SQL92 filters and RocketMQ 4.9.8's Java side: its own parser and evaluator
(``programs/RsSql.java eval``) decide the semantics table of tests/common/test_sql92.py and
random expressions exactly as rocketstore's broker filter and the reference evaluator do; its
push consumer with ``MessageSelector.bySql`` gets exactly its messages from rocketstore's
broker, and is refused at start by a broker without enablePropertyFilter."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from cluster import Cluster, wait_for
from conftest import start_java_facing_broker
from java_env import JavaPrograms
from sql92_reference import random_expression, random_properties, reference_match

from rocketstore.client import Message, Producer
from rocketstore.common.sql92 import FilterExpressionError, compile_sql92

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
from test_sql92 import REFUSED, TABLE  # noqa: E402


def _ours(expression: str, properties: dict[str, str]) -> bool | None:
    try:
        return compile_sql92(expression).matches(properties)
    except FilterExpressionError:
        return None


def test_java_parser_agrees_with_the_table_and_random_expressions(
        java_programs: JavaPrograms, tmp_path: Path) -> None:
    rng = random.Random(928)
    cases = [{"expr": e, "props": p} for e, p, _ in TABLE]
    for _ in range(1500):
        cases.append({"expr": random_expression(rng), "props": random_properties(rng)})
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    lines = java_programs.json_lines("RsSql", "eval", path)
    assert [line["i"] for line in lines] == list(range(len(cases)))
    for case, line, row in zip(cases, lines, [*TABLE, *[None] * 1500], strict=True):
        java = None if line.get("error") else line["match"]
        assert _ours(case["expr"], case["props"]) == java, case
        assert reference_match(case["expr"], case["props"]) == java, case
        if row is not None:
            assert (None if row[2] == REFUSED else row[2]) == java, case


def _send(namesrv: str, topic: str, count: int) -> dict[str, dict[str, str]]:
    sent = {}
    with Producer("JavaSqlPG", namesrv_addr=namesrv) as producer:
        for i in range(count):
            props = {"amount": str(i % 100), "region": ("eu", "us")[i % 2]}
            producer.send(Message(topic, f"m-{i}".encode(), tags=f"T{i % 3}", keys=[f"k-{i}"],
                                  properties=props))
            sent[f"k-{i}"] = {**props, "TAGS": f"T{i % 3}"}
    return sent


def test_java_consumer_by_sql_gets_exactly_its_messages(rs_sql_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_sql_cluster.namesrv_addr
    sent = _send(ns, "JavaSqlTopic", 200)
    expression = "amount > 60 AND region = 'eu' OR TAGS = 'T1' AND amount < 10"
    expected = sorted(k for k, p in sent.items() if reference_match(expression, p))
    assert 0 < len(expected) < 100
    lines = java_programs.json_lines("RsSql", "push", ns, "JavaSqlGroup", "JavaSqlTopic", expression,
                                     len(expected), 60_000, 1_500)
    assert lines[-1] == {"done": True}, lines[-3:]
    assert sorted(line["key"] for line in lines[:-1]) == expected


def test_java_consumer_by_sql_refused_without_property_filter(rs_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_cluster.namesrv_addr
    _send(ns, "JavaSqlOff", 4)
    lines = java_programs.json_lines("RsSql", "push", ns, "JavaSqlOffGroup", "JavaSqlOff", "amount > 1",
                                     1, 10_000, 0)
    assert lines[-1]["done"] is False
    assert "The broker does not support consumer to filter message by SQL92" in lines[-1]["error"]


def test_java_consumer_by_sql_with_the_bloom_filter(tmp_path: Path, java_programs: JavaPrograms) -> None:
    """A broker with enableCalcFilterBitMap and enableConsumeQueueExt: RocketMQ 4.9.8's push
    consumer subscribes by SQL92 first (its heartbeat registers the filter), the messages sent
    afterwards get bitmaps at dispatch, and it gets exactly its messages."""
    expression = "amount > 60 AND region = 'eu' OR TAGS = 'T1' AND amount < 10"
    planned = {f"k-{i}": {"amount": str(i % 100), "region": ("eu", "us")[i % 2], "TAGS": f"T{i % 3}"}
               for i in range(200)}
    expected = sorted(k for k, p in planned.items() if reference_match(expression, p))
    assert 0 < len(expected) < 100 and "k-0" not in expected
    (tmp_path / "rocketstore").mkdir()
    cluster = Cluster(tmp_path / "rocketstore")
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a", enablePropertyFilter="true",
                                 enableCalcFilterBitMap="true", enableConsumeQueueExt="true")
        ns = cluster.namesrv_addr
        _send(ns, "JavaBloomTopic", 1)      # the topic exists: the consumer finds its route
        consumer = java_programs.start("RsSql", "push", ns, "JavaBloomGroup", "JavaBloomTopic",
                                       expression, len(expected), 90_000, 1_500)
        try:
            filters = tmp_path / "rocketstore" / "broker-a" / "config" / "consumerFilter.json"
            wait_for(lambda: filters.exists() and "JavaBloomGroup" in filters.read_text(), 60)
            assert _send(ns, "JavaBloomTopic", 200) == planned
            out, err = consumer.communicate(timeout=120)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.communicate()
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert lines and lines[-1] == {"done": True}, (lines[-3:], err[-2000:])
        assert sorted(line["key"] for line in lines[:-1]) == expected
    finally:
        cluster.close()
