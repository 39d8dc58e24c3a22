"""Our PushConsumer against a real name server and broker (subprocesses): clustering,
broadcasting, orderly consumption, retries to the DLQ."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
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
    SelectMessageQueueByHash,
)

pytestmark = pytest.mark.slow

FAST = {"rebalance_interval": 2_000, "persist_consumer_offset_interval": 1_000,
        "poll_name_server_interval": 2_000, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


class Collector:
    """A listener that records what it got, thread-safely."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.lock = threading.Lock()
        self.messages: list[MessageExt] = []

    def __call__(self, messages: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.messages.extend(messages)
        return ConsumeStatus.SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages]

    def delivered(self) -> list[MessageExt]:
        with self.lock:
            return list(self.messages)


def consumer(c, group: str, topic: str, listener, **options) -> PushConsumer:
    pc = PushConsumer(group, namesrv_addr=c.namesrv_addr, **{**FAST, **options})
    pc.subscribe(topic)
    pc.register_message_listener(listener)
    return pc


def test_clustering_group_of_two_gets_every_message_once(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "Clustered"
        producer.send(Message(topic, b"warm-up"))          # the topic exists with its queues
        a, b = Collector("a"), Collector("b")
        first = consumer(c, "CG", topic, a)
        second = consumer(c, "CG", topic, b)
        first.start()
        second.start()
        try:
            # the group has settled once both members own queues and no queue is owned twice
            # (a member that rebalanced first holds every queue until it rebalances again)
            def settled() -> bool:
                mine, theirs = set(first.core.process_queues), set(second.core.process_queues)
                return bool(mine and theirs and not mine & theirs)
            assert wait_for(settled, 30)
            sent = {f"m-{i}".encode() for i in range(200)}
            for body in sorted(sent):
                producer.send(Message(topic, body, tags="x"))
            everything = sent | {b"warm-up"}
            assert wait_for(lambda: set(a.bodies()) | set(b.bodies()) >= everything, 30)
            time.sleep(1.0)
            # what was sent once the group had settled comes exactly once (the warm-up may come
            # twice: RocketMQ's consumers are at-least-once while queues move between members)
            counts = Counter(body for body in a.bodies() + b.bodies() if body != b"warm-up")
            assert set(counts) == sent
            twice = {body for body, n in counts.items() if n > 1}
            assert not twice, "delivered more than once: " + "; ".join(
                f"{c.name} got {m.body!r} of queue {m.queue_id} at offset {m.queue_offset} "
                f"(commitlog {m.commit_log_offset}, reconsumed {m.reconsume_times})"
                for c in (a, b) for m in c.delivered() if m.body in twice)
            assert a.bodies() and b.bodies()                # the group shared the work
            assert not set(first.core.process_queues) & set(second.core.process_queues)
        finally:
            first.shutdown()
            second.shutdown()


def test_broadcasting_instances_each_get_every_message(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "Broadcast"
        producer.send(Message(topic, b"warm-up"))
        collectors = [Collector(), Collector()]
        members = [consumer(c, "BG", topic, col, message_model="BROADCASTING", instance_name=f"member-{i}",
                            local_offset_store_dir=str(tmp_path / "offsets"))
                   for i, col in enumerate(collectors)]
        for m in members:
            m.start()
        try:
            sent = [f"b-{i}".encode() for i in range(50)]
            for body in sent:
                producer.send(Message(topic, body))
            for col in collectors:
                assert wait_for(lambda col=col: set(col.bodies()) >= set(sent), 30)
                assert len(col.bodies()) == len(set(col.bodies()))
        finally:
            for m in members:
                m.shutdown()
        files = sorted((tmp_path / "offsets").glob("*/BG/offsets.json"))
        assert len(files) == 2                              # each member its own offset file
        # a restarted member goes on from its file: it gets only what is new
        late = Collector()
        again = consumer(c, "BG", topic, late, message_model="BROADCASTING", instance_name="member-0",
                         local_offset_store_dir=str(tmp_path / "offsets"))
        again.start()
        try:
            producer.send(Message(topic, b"after-restart"))
            assert wait_for(lambda: b"after-restart" in late.bodies(), 30)
            assert not set(late.bodies()) & set(sent)
        finally:
            again.shutdown()


def test_orderly_consumption_keeps_each_queue_in_order(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "Ordered"
        producer.send(Message(topic, b"o-x-0"), selector=SelectMessageQueueByHash(), arg="x")
        seen: dict[str, list[int]] = defaultdict(list)
        failures = {"o-k1-3": 2}                        # fails twice: consumed again, in place
        lock = threading.Lock()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            for msg in messages:
                _, key, seq = msg.body.decode().split("-")
                with lock:
                    left = failures.get(msg.body.decode(), 0)
                    if left:
                        failures[msg.body.decode()] = left - 1
                        return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    seen[key].append(int(seq))
            return ConsumeStatus.SUCCESS

        pc = PushConsumer("OG", namesrv_addr=c.namesrv_addr, suspend_current_queue_time_millis=100, **FAST)
        pc.subscribe(topic)
        pc.register_message_listener(listener, orderly=True)
        pc.start()
        try:
            keys = [f"k{i}" for i in range(6)]
            for seq in range(1, 31):
                for key in keys:
                    producer.send(Message(topic, f"o-{key}-{seq}".encode()), selector=SelectMessageQueueByHash(),
                                  arg=key)
            assert wait_for(lambda: all(len(seen[k]) == 30 for k in keys), 40)
            for key in keys:
                assert seen[key] == list(range(1, 31))
            assert failures["o-k1-3"] == 0
        finally:
            pc.shutdown()


def test_a_failing_listener_gets_retries_then_the_dlq(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "Poison"
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic(topic, cluster="TestCluster", read_queue_nums=4, write_queue_nums=4)
        deliveries: list[int] = []
        good: list[bytes] = []

        def listener(messages: list[MessageExt]) -> None:
            for msg in messages:
                if msg.body == b"poison":
                    deliveries.append(msg.reconsume_times)
                    assert msg.topic == topic               # the retry topic is hidden
                    raise RuntimeError("cannot handle this one")
                good.append(msg.body)

        pc = PushConsumer("DG", namesrv_addr=c.namesrv_addr, max_reconsume_times=2, **FAST)
        pc.subscribe(topic)
        pc.register_message_listener(listener)
        pc.start()
        try:
            poison = Message(topic, b"poison", keys=["poison-key"])
            producer.send(poison)
            producer.send(Message(topic, b"fine"))
            assert wait_for(lambda: len(deliveries) >= 3 and good == [b"fine"], 60)
            time.sleep(2.5)
            assert deliveries == [0, 1, 2]                  # then no more: it went to the DLQ
            with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
                assert wait_for(lambda: admin.query_msg_by_key("%DLQ%DG", "poison-key") != [], 10)
                (dead,) = admin.query_msg_by_key("%DLQ%DG", "poison-key")
                assert dead.body == b"poison" and dead.msg_id == poison.uniq_key
        finally:
            pc.shutdown()


@pytest.mark.parametrize("limits,body_size,most_cached", [
    ({"pull_threshold_for_queue": 40}, 100, lambda pq: pq.msg_count <= 40 + 10),
    ({"pull_threshold_size_for_queue": 1}, 100_000, lambda pq: pq.msg_size <= (1 << 20) + 10 * 100_000),
])
def test_flow_control_stops_pulling_a_full_queue(tmp_path: Path, limits, body_size: int, most_cached) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr,
                                          compress_msg_body_over_howmuch=1 << 30) as producer:
        topic = "Flow"
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic(topic, cluster="TestCluster", read_queue_nums=1, write_queue_nums=1)
        for i in range(200):
            producer.send(Message(topic, str(i).encode().ljust(body_size, b".")))
        gate = threading.Event()
        consumed: list[bytes] = []

        def listener(messages: list[MessageExt]) -> None:
            gate.wait(60)
            consumed.extend(m.body for m in messages)

        pc = PushConsumer("FlowCG", namesrv_addr=c.namesrv_addr, pull_batch_size=10, consume_thread_min=2, consume_thread_max=2,
                          **FAST, **limits)
        pc.subscribe(topic)
        pc.register_message_listener(listener)
        pc.start()
        try:
            assert wait_for(lambda: pc.core.flow_control_times > 20, 30)
            (pq,) = pc.core.process_queues.values()
            assert most_cached(pq) and pq.msg_count < 200
            gate.set()
            assert wait_for(lambda: len(consumed) == 200, 60)
        finally:
            gate.set()
            pc.shutdown()
