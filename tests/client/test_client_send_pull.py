"""Our Producer against a real name server and broker (subprocesses): every kind of send,
read back with our PullConsumer."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path

import pytest
from cluster import cluster, wait_for

from rocketstore.client import (
    Message,
    MQClientError,
    Producer,
    PullConsumer,
    PullStatus,
    SelectMessageQueueByHash,
    SendStatus,
)

pytestmark = pytest.mark.slow


def read_all(consumer: PullConsumer, expected: int, timeout: float = 30.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout=0.5))
    return got


def test_every_kind_of_send_is_read_back(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "SendKinds"
        sent: dict[str, Message] = {}

        # sync, with tags, keys and a user property
        for i in range(10):
            msg = Message(topic, f"sync-{i}".encode(), tags="TagA" if i % 2 else "TagB", keys=[f"key-{i}", "k"])
            msg.put_user_property("seq", str(i))
            result = producer.send(msg)
            assert result.send_status is SendStatus.SEND_OK
            assert result.msg_id == msg.uniq_key and len(result.offset_msg_id) == 32
            sent[result.msg_id] = msg

        # async, with a callback on another thread
        callbacks: list = []
        done = threading.Event()

        def on_result(result, error) -> None:
            callbacks.append((result, error, threading.current_thread().name))
            if len(callbacks) == 10:
                done.set()

        async_messages = [Message(topic, f"async-{i}".encode(), tags="TagC") for i in range(10)]
        futures = [producer.send_async(msg, on_result) for msg in async_messages]
        results = [f.result(10) for f in futures]
        assert all(r.send_status is SendStatus.SEND_OK for r in results)
        assert done.wait(10) and all(e is None for _, e, _ in callbacks)
        assert all("callback" in name for _, _, name in callbacks)
        for msg, result in zip(async_messages, results, strict=True):
            assert result.msg_id == msg.uniq_key
            sent[result.msg_id] = msg

        # oneway
        for i in range(5):
            msg = Message(topic, f"oneway-{i}".encode())
            producer.send_oneway(msg)
            sent[msg.uniq_key or ""] = msg
        assert all(sent)

        # orderly: one key, one queue, in order
        for i in range(20):
            msg = Message(topic, f"order-{i % 2}-{i}".encode(), tags="Ordered")
            result = producer.send(msg, selector=SelectMessageQueueByHash(), arg=f"order-{i % 2}")
            sent[result.msg_id] = msg

        # a batch
        batch = [Message(topic, f"batch-{i}".encode(), keys=[f"b{i}"]) for i in range(8)]
        result = producer.send_batch(batch)
        assert result.send_status is SendStatus.SEND_OK
        assert result.msg_id.split(",") == [m.uniq_key for m in batch]
        for msg in batch:
            sent[msg.uniq_key or ""] = msg

        # a body over 4 KiB goes compressed
        big = Message(topic, bytes(range(256)) * 64, tags="Big")
        sent[producer.send(big).msg_id] = big

        # a delayed message (delay levels are 1 s in these brokers)
        delayed = Message(topic, b"delayed", delay_time_level=2)
        delayed_at = time.time()
        sent[producer.send(delayed).msg_id] = delayed

        with PullConsumer("PullAll", namesrv_addr=c.namesrv_addr,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
            consumer.subscribe(topic)
            got = read_all(consumer, len(sent))
            by_id = {m.msg_id: m for m in got}
            assert len(got) == len(sent) == len(by_id)
            for msg_id, msg in sent.items():
                received = by_id[msg_id]
                assert received.body == msg.body
                assert received.tags == msg.tags
                assert received.keys == msg.keys
                assert received.get_property("seq") == msg.get_property("seq")
            assert by_id[big.uniq_key].sys_flag & 0x701 == 0x301       # stored ZLIB-compressed
            assert by_id[delayed.uniq_key].store_timestamp >= delayed_at * 1000 + 1000 - 50
            for key in ("order-0", "order-1"):
                ordered = [m for m in got if m.body.startswith(f"order-{key[-1]}-".encode())]
                assert len({m.queue_id for m in ordered}) == 1
                assert [m.body for m in sorted(ordered, key=lambda m: m.queue_offset)] == \
                    [f"{key}-{i}".encode() for i in range(int(key[-1]), 20, 2)]
            batch_got = sorted((by_id[m.uniq_key] for m in batch), key=lambda m: m.queue_offset)
            assert len({m.queue_id for m in batch_got}) == 1
            assert [m.queue_offset for m in batch_got] == list(range(batch_got[0].queue_offset,
                                                                     batch_got[0].queue_offset + 8))
            consumer.commit()
            queues = consumer.fetch_message_queues(topic)
            assert sum(consumer.committed(mq) for mq in queues) == len(sent)


def test_pull_consumer_assign_seek_commit(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        topic = "Seekable"
        mq = None
        for i in range(30):
            result = producer.send(Message(topic, f"m{i}".encode()), queue=mq) if mq else \
                producer.send(Message(topic, f"m{i}".encode()))
            mq = mq or result.message_queue
        assert mq is not None
        with PullConsumer("Seeker", namesrv_addr=c.namesrv_addr, auto_commit=False) as consumer:
            consumer.assign([mq])
            assert consumer.assignment() == {mq}
            # the broker's ConsumeQueue follows its CommitLog a few ms behind
            assert wait_for(lambda: consumer.max_offset(mq) == 30, 10)
            consumer.seek(mq, 10)
            got = read_all(consumer, 20)
            assert [m.body for m in got] == [f"m{i}".encode() for i in range(10, 30)]
            assert consumer.committed(mq) in (-1, 0)
            consumer.commit()
            assert consumer.committed(mq) == 30
            consumer.seek_to_begin(mq)
            assert read_all(consumer, 30)[0].body == b"m0"
            with pytest.raises(ValueError, match="outside"):
                consumer.seek(mq, 31)
            direct = consumer.pull(mq, 25, 10)
            assert direct.pull_status is PullStatus.FOUND
            assert [m.queue_offset for m in direct.messages] == [25, 26, 27, 28, 29]
            assert consumer.pull(mq, 30).pull_status is PullStatus.NO_NEW_MSG
            assert consumer.offset_for_timestamp(mq, 0) == 0


def test_sync_send_fails_cleanly_without_a_route(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c, Producer("PG", namesrv_addr=c.namesrv_addr,
                                                         send_msg_timeout=1000) as producer:
        with pytest.raises(MQClientError, match="No route info"):
            producer.send(Message("Nowhere", b"x"))
        with pytest.raises(MQClientError, match="empty"):
            producer.send(Message("Nowhere", b""))
    with pytest.raises(MQClientError, match="not running"):
        producer.send(Message("Nowhere", b"x"))


def test_send_async_on_many_threads(tmp_path: Path) -> None:
    with cluster(tmp_path) as c, Producer("PG", namesrv_addr=c.namesrv_addr) as producer:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: producer.send(Message("Threads", f"{i}".encode())), range(400)))
        assert all(r.send_status is SendStatus.SEND_OK for r in results)
        offsets = {(r.message_queue.queue_id, r.queue_offset) for r in results}
        assert len(offsets) == 400
