"""Memory topics end to end (a broker subprocess with memoryTopicEnable): created with
``memory=true`` through the admin client; sends (single, batch) and pulls through the usual
processors; offsets, topic status and consumer progress; the cap under a producer faster than
its consumer (the broker's peak RSS from /proc, eviction in arrival order, consumers moving
on past OFFSET_TOO_SMALL); disk topics untouched (no memory message in the CommitLog); an
empty memory topic after a restart, its config kept."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from cluster import CHILD_CWD, Cluster, child_env, cluster, wait_for

from rocketstore.client import (
    AdminClient,
    ConsumeStatus,
    Message,
    MessageExt,
    MQBrokerError,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketstore.client.message import MessageQueue
from rocketstore.store import MessageStore

pytestmark = pytest.mark.slow

MEMORY_MARK = b"MEMORY-TOPIC-BODY"
DISK_MARK = b"DISK-TOPIC-BODY"
MiB = 1024 * 1024


def _broker_addr(c: Cluster) -> str:
    return c.brokers["broker-a"].address


def _rss_kib(pid: int, key: str) -> int:
    """VmRSS / VmHWM of a process, in KiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def _seq(msg: Any) -> int:
    return int(bytes(msg.body[len(MEMORY_MARK):len(MEMORY_MARK) + 8]))


def _body(seq: int, size: int = 0) -> bytes:
    return MEMORY_MARK + b"%08d" % seq + b"m" * size


def _held(admin: AdminClient, topic: str) -> list[int]:
    """Every sequence number the topic still holds, read queue by queue from its min offset."""
    seqs: list[int] = []
    for mq in admin.queues(topic):
        offset = admin.min_offset(mq)
        high = admin.max_offset(mq)
        for _ in range(100_000):
            if offset >= high:
                break
            batch = admin.pull(mq, offset, 32)
            if not batch:
                offset = admin.min_offset(mq)     # evicted meanwhile: on from the new min
                continue
            seqs.extend(_seq(m) for m in batch)
            offset = batch[-1].queue_offset + 1
    return sorted(seqs)


def test_memory_topic_serves_sends_pulls_offsets_and_is_empty_after_restart(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c:
        c.start_broker("broker-a", memoryTopicEnable="true", memoryTopicMaxBytes=4 * MiB)
        c.start_broker("broker-off", listenPort=0)
        address = _broker_addr(c)
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic("MemT", broker_addr=address, read_queue_nums=4, write_queue_nums=4,
                               memory=True)
            admin.update_topic("DiskT", broker_addr=address, read_queue_nums=4, write_queue_nums=4)
            with pytest.raises(MQBrokerError, match="memoryTopicEnable=false"):
                admin.update_topic("MemOff", broker_addr=c.brokers["broker-off"].address, memory=True)
            with pytest.raises(MQBrokerError, match="delete it before"):
                admin.update_topic("DiskT", broker_addr=address, memory=True)
            cli = subprocess.run([sys.executable, "-m", "rocketstore", "admin", "updateTopic", "-n",
                                  c.namesrv_addr, "-b", address, "-t", "MemCli", "--memory"],
                                 capture_output=True, text=True, env=child_env(), cwd=CHILD_CWD, timeout=60)
            assert cli.returncode == 0 and "memory=true" in cli.stdout, cli.stdout + cli.stderr
            with Producer("MemP", namesrv_addr=c.namesrv_addr) as producer:
                offset_ids = []
                for i in range(200):
                    offset_ids.append(producer.send(Message("MemT", _body(i), tags=f"T{i % 2}",
                                                            keys=[f"k{i}"])).offset_msg_id)
                    producer.send(Message("DiskT", DISK_MARK + b"%08d" % i))
                assert _seq(admin.view_message(offset_ids[7])) == 7     # the memory record's id
                batch_queue = MessageQueue("MemT", "broker-a", 3)
                result = producer.send_batch([Message("MemT", _body(200 + i)) for i in range(50)],
                                             queue=batch_queue)
                assert result.queue_offset == admin.max_offset(batch_queue) - 50
                with pytest.raises(MQBrokerError, match="memory topic"):
                    producer.send(Message("MemT", _body(999), delay_time_level=2))
            assert _held(admin, "MemT") == list(range(250))
            status = admin.topic_status("MemT")
            assert sum(row["maxOffset"] for row in status) == 250
            assert all(row["minOffset"] == 0 and row["lastUpdateTimestamp"] > 0 for row in status)
            tagged = [m for mq in admin.queues("MemT") for m in admin.pull(mq, 0, 32, "T1")]
            assert tagged and all(_seq(m) % 2 == 1 and m.tags == "T1" for m in tagged)

            # a push consumer reads it all; its progress is the memory queues'
            got: list[int] = []
            lock = threading.Lock()

            def listener(messages: list[MessageExt]) -> ConsumeStatus:
                with lock:
                    if messages[0].reconsume_times == 0 and _seq(messages[0]) == 3:
                        return ConsumeStatus.RECONSUME_LATER    # sent back: once more, from %RETRY%
                    got.extend(_seq(m) for m in messages)
                return ConsumeStatus.SUCCESS

            # the group's retry topic is created by the send-back: its route comes with the
            # next poll of the name server (30 s by default)
            consumer = PushConsumer("MemG", namesrv_addr=c.namesrv_addr, rebalance_interval=2_000,
                                    persist_consumer_offset_interval=500,
                                    poll_name_server_interval=1_000,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            consumer.subscribe("MemT", "*")
            consumer.register_message_listener(listener)
            consumer.start()
            try:
                assert wait_for(lambda: len(got) >= 250, 60)
                assert wait_for(lambda: sum(r["diff"] for r in
                                            admin.consumer_progress("MemG", "MemT")["offsetTable"]) == 0, 30)
            finally:
                consumer.shutdown()
            assert sorted(got) == list(range(250))
            rows = admin.consumer_progress("MemG", "MemT")["offsetTable"]
            assert sum(r["brokerOffset"] for r in rows) == 250 and all(r["lastTimestamp"] > 0 for r in rows)

        # the CommitLog holds none of the memory topic's messages: only the retry of the one
        # sent back (to its group's retry topic, a disk topic, through the delay topic)
        broker = c.brokers["broker-a"]
        broker.stop()
        commit_log = b"".join(p.read_bytes() for p in sorted((tmp_path / "broker-a" / "commitlog").iterdir()))
        with MessageStore.open(tmp_path / "broker-a", read_only=True) as store:
            records = list(store.scan())
            assert sum(1 for m in records if m.topic == "DiskT") == 200
            assert not any(m.topic == "MemT" for m in records)
            copies = [m for m in records if bytes(m.body).startswith(MEMORY_MARK)]
            assert {m.topic for m in copies} == {"SCHEDULE_TOPIC_XXXX", "%RETRY%MemG"}
            assert {_seq(m) for m in copies} == {3}
            assert sum(store.get_max_offset_in_queue("DiskT", q) for q in range(4)) == 200
        assert commit_log.count(DISK_MARK) == 200 and commit_log.count(MEMORY_MARK) == len(copies)
        topics = orjson.loads((tmp_path / "broker-a" / "config" / "topics.json").read_bytes())
        assert topics["topicConfigTable"]["MemT"]["memory"] is True
        assert topics["topicConfigTable"]["MemCli"]["memory"] is True
        assert "memory" not in topics["topicConfigTable"]["DiskT"]

        # after a restart the memory topic is there, empty, and takes messages from offset 0
        c.restart_broker("broker-a")
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            assert wait_for(lambda: len(admin.queues("MemT")) == 4, 30)
            assert all(admin.max_offset(mq) == 0 for mq in admin.queues("MemT"))
            assert sum(admin.max_offset(mq) for mq in admin.queues("DiskT")) == 200
            with Producer("MemP2", namesrv_addr=c.namesrv_addr) as producer:
                sent = [producer.send(Message("MemT", _body(5000 + i)), queue=MessageQueue("MemT", "broker-a", 0))
                        for i in range(5)]
            assert [s.queue_offset for s in sent] == list(range(5))
            assert [_seq(m) for m in admin.pull(MessageQueue("MemT", "broker-a", 0), 0, 32)] == list(range(5000, 5005))
            # the group's offsets committed before the restart lie past the new ends: its
            # consumer is moved back to 0 and gets the new messages
            got.clear()
            consumer = PushConsumer("MemG", namesrv_addr=c.namesrv_addr, rebalance_interval=2_000)
            consumer.subscribe("MemT", "*")
            consumer.register_message_listener(listener)
            consumer.start()
            try:
                assert wait_for(lambda: len(got) >= 5, 60)
            finally:
                consumer.shutdown()
            assert sorted(got) == list(range(5000, 5005))


def test_the_cap_holds_under_a_faster_producer_and_consumers_move_on(tmp_path: Path) -> None:
    cap = 16 * MiB
    body_size = 4000
    with cluster(tmp_path, brokers=()) as c:
        broker = c.start_broker("broker-a", memoryTopicEnable="true", memoryTopicMaxBytes=cap)
        address = _broker_addr(c)
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic("MemFast", broker_addr=address, read_queue_nums=4, write_queue_nums=4,
                               memory=True)
            slow_got: list[int] = []
            producing = threading.Event()
            producing.set()

            def slow(messages: list[MessageExt]) -> ConsumeStatus:
                if producing.is_set():      # slower than the producer while it sends
                    time.sleep(0.01 * len(messages))
                slow_got.extend(_seq(m) for m in messages)
                return ConsumeStatus.SUCCESS

            consumer = PushConsumer("SlowG", namesrv_addr=c.namesrv_addr, rebalance_interval=2_000,
                                    persist_consumer_offset_interval=500, consume_thread_max=1,
                                    consume_thread_min=1, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            consumer.subscribe("MemFast", "*")
            consumer.register_message_listener(slow)
            consumer.start()
            try:
                with Producer("FastP", namesrv_addr=c.namesrv_addr) as producer:
                    producer.send(Message("MemFast", _body(0, body_size)),
                                  queue=MessageQueue("MemFast", "broker-a", 0))
                    time.sleep(0.5)
                    baseline = _rss_kib(broker.proc.pid, "VmRSS")
                    total = 5 * cap          # five times the cap, 64 messages (256 KiB) a batch
                    seq = 1
                    while seq * body_size < total:
                        queue = MessageQueue("MemFast", "broker-a", (seq // 64) % 4)
                        producer.send_batch([Message("MemFast", _body(seq + i, body_size)) for i in range(64)],
                                            queue=queue)
                        seq += 64
                producing.clear()
                peak = _rss_kib(broker.proc.pid, "VmHWM")
                held = _held(admin, "MemFast")
                # eviction in arrival order: what is held is the newest messages, all of them
                assert held == list(range(seq - len(held), seq))
                assert len(held) * (body_size + 150) <= cap
                assert len(held) * (body_size + 250) > cap * 0.9
                # the broker's memory grew by the cap and some slack, not by what was sent
                grown = (peak - baseline) * 1024
                print(f"sent {seq * body_size / MiB:.0f} MiB, cap {cap / MiB:.0f} MiB, RSS "
                      f"{baseline / 1024:.0f} MiB -> peak {peak / 1024:.0f} MiB (+{grown / MiB:.0f} MiB)")
                assert grown < cap + 24 * MiB, f"RSS grew {grown / MiB:.0f} MiB with a {cap / MiB:.0f} MiB cap"
                # the slow consumer was moved on past what was evicted, and reaches the end
                assert wait_for(lambda: bool(slow_got) and max(slow_got) == seq - 1, 120)
                assert len(set(slow_got)) < seq
                rows = admin.consumer_progress("SlowG", "MemFast")["offsetTable"]
                assert all(r["consumerOffset"] >= admin.min_offset(MessageQueue("MemFast", "broker-a", r["queueId"]))
                           for r in rows)
            finally:
                consumer.shutdown()

            # a pull below the min offset: OFFSET_ILLEGAL with the min as the next offset
            with PullConsumer("LiteG", namesrv_addr=c.namesrv_addr) as lite:
                mq = MessageQueue("MemFast", "broker-a", 0)
                low = admin.min_offset(mq)
                assert low > 0
                result = lite.pull(mq, 0, 32)
                assert result.pull_status.name == "OFFSET_ILLEGAL"
                assert result.next_begin_offset == low and result.min_offset == low
                result = lite.pull(mq, result.next_begin_offset, 32)
                assert result.pull_status.name == "FOUND" and result.messages[0].queue_offset == low
