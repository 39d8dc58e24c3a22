"""Our clients when servers go away: two brokers under one name server, two name servers."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from cluster import cluster, wait_for

from rocketstore.client import (
    AdminClient,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)

pytestmark = pytest.mark.slow

FAST = {"rebalance_interval": 2_000, "persist_consumer_offset_interval": 1_000,
        "poll_name_server_interval": 1_000, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


class Bodies:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[bytes] = []

    def __call__(self, messages: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.items.extend(m.body for m in messages)
        return ConsumeStatus.SUCCESS

    def seen(self) -> set[bytes]:
        with self.lock:
            return set(self.items)


def test_two_brokers_share_sends_and_consumption_survives_one(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=("broker-a", "broker-b")) as c:
        ns = c.namesrv_addr
        with AdminClient(namesrv_addr=ns) as admin:
            assert len(admin.update_topic("Spread", cluster="TestCluster", read_queue_nums=4,
                                          write_queue_nums=4)) == 2
        got = Bodies()
        consumer = PushConsumer("SpreadCG", namesrv_addr=ns, **FAST)
        consumer.subscribe("Spread")
        consumer.register_message_listener(got)
        with Producer("SpreadPG", namesrv_addr=ns, poll_name_server_interval=1_000) as producer:
            consumer.start()
            try:
                first = [f"first-{i}".encode() for i in range(100)]
                brokers = Counter(producer.send(Message("Spread", body)).message_queue.broker_name for body in first)
                assert set(brokers) == {"broker-a", "broker-b"} and min(brokers.values()) >= 40
                assert wait_for(lambda: got.seen() >= set(first), 30)

                c.brokers["broker-b"].stop()
                after = [f"after-{i}".encode() for i in range(60)]
                results = [producer.send(Message("Spread", body)) for body in after]
                assert all(r.send_status is SendStatus.SEND_OK for r in results)
                assert {r.message_queue.broker_name for r in results} == {"broker-a"}
                assert wait_for(lambda: got.seen() >= set(after), 30)
                assert max(Counter(got.items).values()) == 1
            finally:
                consumer.shutdown()


def test_clients_carry_on_when_a_name_server_stops(tmp_path: Path) -> None:
    with cluster(tmp_path, namesrvs=2) as c:
        ns = c.namesrv_addr
        with AdminClient(namesrv_addr=ns) as admin:
            admin.update_topic("Before", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
            admin.update_topic("Later", cluster="TestCluster", read_queue_nums=2, write_queue_nums=2)
        got = Bodies()
        consumer = PushConsumer("NsCG", namesrv_addr=ns, **FAST)
        consumer.subscribe("Before")
        consumer.register_message_listener(got)
        with Producer("NsPG", namesrv_addr=ns, poll_name_server_interval=1_000) as producer:
            consumer.start()
            try:
                producer.send(Message("Before", b"one"))
                assert wait_for(lambda: got.seen() == {b"one"}, 30)
                # stop the name server the producer talks to: it moves to the other one
                in_use = producer.core.instance.api.namesrv_in_use
                next(s for s in c.namesrvs if s.address == in_use).stop()
                assert producer.send(Message("Later", b"two")).send_status is SendStatus.SEND_OK
                assert producer.core.instance.api.namesrv_in_use != in_use
                consumer.subscribe("Later")
                producer.send(Message("Before", b"three"))
                producer.send(Message("Later", b"four"))
                assert wait_for(lambda: got.seen() >= {b"one", b"two", b"three", b"four"}, 30)
            finally:
                consumer.shutdown()
