"""The clients' parts that need no server: allocation, selectors, subscriptions, process
queues, offset files, configuration, routes, fastjson bodies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketstore.client import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    Message,
    MessageQueue,
    ProducerConfig,
    PushConsumerConfig,
    SelectMessageQueueByHash,
)
from rocketstore.client.message import MessageExt
from rocketstore.client.offset_store import LocalFileOffsetStore, ReadOffsetType
from rocketstore.client.process_queue import ProcessQueue
from rocketstore.client.records import decode_messages
from rocketstore.client.route import publish_info_from_route, subscribe_info_from_route
from rocketstore.client.subscription import SubscriptionData
from rocketstore.common.fastjson import FastjsonError, dumps_object_keys, loads_object_keys
from rocketstore.remoting.route_bodies import BrokerData, QueueData, TopicRouteData


def queues(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MessageQueue]:
    return sorted(MessageQueue("T", b, i) for b in brokers for i in range(n))


@pytest.mark.parametrize("strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle()])
@pytest.mark.parametrize("n_queues,n_clients", [(8, 3), (4, 4), (3, 5), (16, 2), (1, 1), (7, 7)])
def test_allocation_gives_each_queue_to_one_member(strategy, n_queues: int, n_clients: int) -> None:
    mqs = queues(n_queues)
    cids = sorted(f"10.0.0.1@{i}" for i in range(n_clients))
    taken = [strategy("G", cid, mqs, cids) for cid in cids]
    flat = [mq for part in taken for mq in part]
    assert sorted(flat) == mqs
    sizes = [len(part) for part in taken]
    assert max(sizes) - min(sizes) <= 1
    assert strategy("G", "not-a-member", mqs, cids) == []


def test_averagely_matches_rocketmq_blocks() -> None:
    mqs = queues(8)
    cids = ["a", "b", "c"]
    strategy = AllocateMessageQueueAveragely()
    assert [[mq.queue_id for mq in strategy("G", c, mqs, cids)] for c in cids] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_hash_selector_is_javas() -> None:
    mqs = queues(4)
    select = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    assert select(mqs, msg, 7).queue_id == 3          # the C++ and Java clients' choice for arg 7
    assert select(mqs, msg, -7).queue_id == 3         # abs(-7 % 4) in Java
    assert select(mqs, msg, "order-1").queue_id == select(mqs, msg, "order-1").queue_id


def test_subscription_expressions() -> None:
    sub = SubscriptionData.build("T", "TagA || TagB ||  ")
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {2598919, 2598920}
    assert SubscriptionData.build("T", "*").matches_all and SubscriptionData.build("T", "").matches_all
    with pytest.raises(ValueError, match="no tag"):
        SubscriptionData.build("T", "||")
    with pytest.raises(ValueError, match="topic"):
        SubscriptionData.build("bad topic", "*")
    a, b, none = (MessageExt("T", b"", properties={"TAGS": t}) if t else MessageExt("T", b"") for t in ("TagA", "TagC", None))
    assert sub.filter([a, b, none]) == [a]


def _msg(offset: int, size: int = 10) -> MessageExt:
    msg = MessageExt("T", b"x" * size)
    msg.queue_offset = offset
    return msg


def test_process_queue_offsets_and_flow_figures() -> None:
    pq = ProcessQueue()
    msgs = [_msg(i) for i in range(10, 20)]
    assert pq.put_messages(msgs)
    assert pq.msg_count == 10 and pq.msg_size == 100 and pq.max_span == 9
    assert pq.remove_messages([msgs[3], msgs[5]]) == 10       # 10 is still being consumed
    assert pq.remove_messages([msgs[0], msgs[1], msgs[2]]) == 14
    assert pq.remove_messages(msgs) == 20                     # all done: one past the largest
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_process_queue_orderly_take_commit_and_again() -> None:
    pq = ProcessQueue()
    pq.put_messages([_msg(i) for i in range(5)])
    first = pq.take_messages(2)
    assert [m.queue_offset for m in first] == [0, 1]
    pq.make_messages_to_consume_again(first)
    again = pq.take_messages(3)
    assert [m.queue_offset for m in again] == [0, 1, 2]
    assert pq.commit() == 3
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5 and pq.take_messages(1) == [] and not pq.consuming


def test_local_offset_file_survives_and_falls_back(tmp_path: Path) -> None:
    mq = MessageQueue("T", "broker-a", 2)

    async def run() -> None:
        store = LocalFileOffsetStore(tmp_path, "10.0.0.1@x", "G")
        await store.load()
        assert await store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY) == -1
        store.update_offset(mq, 41, True)
        store.update_offset(mq, 40, True)                       # increase-only ignores it
        await store.persist_all([mq])
        store.update_offset(mq, 50, False)
        await store.persist_all([mq])
        again = LocalFileOffsetStore(tmp_path, "10.0.0.1@x", "G")
        await again.load()
        assert await again.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY) == 50
        store.path.write_bytes(b"{broken")                      # a torn file: the backup is used
        third = LocalFileOffsetStore(tmp_path, "10.0.0.1@x", "G")
        await third.load()
        assert await third.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY) == 41

    asyncio.run(run())


def test_configs_check_their_fields(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="send_msg_timeout"):
        ProducerConfig(send_msg_timeout=0)
    with pytest.raises(TypeError, match="retry_times_when_send_failed"):
        ProducerConfig(retry_times_when_send_failed="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="namesrv_addr"):
        ProducerConfig(namesrv_addr="nohost")
    with pytest.raises(ValueError, match="consumer_group"):
        PushConsumerConfig(consumer_group="bad group")
    with pytest.raises(ValueError, match="consume_timestamp"):
        PushConsumerConfig(consume_timestamp="yesterday")
    props = tmp_path / "producer.properties"
    props.write_text("namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\nsendMsgTimeout=5000\nproducerGroup=PG\n")
    config = ProducerConfig.from_properties(props)
    assert config.namesrv_addresses == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert config.send_msg_timeout == 5000 and config.producer_group == "PG"
    assert config.compress_msg_body_over_howmuch == 4096 and config.retry_times_when_send_failed == 2
    props.write_text("sendMsgTimeOut=1\n")
    with pytest.raises(ValueError, match="sendMsgTimeOut"):
        ProducerConfig.from_properties(props)
    consumer = PushConsumerConfig()
    assert (consumer.consume_thread_max, consumer.pull_batch_size, consumer.rebalance_interval,
            consumer.persist_consumer_offset_interval, consumer.pull_threshold_for_queue) == (20, 32, 20_000, 5_000, 1_000)


def test_message_checks_its_fields() -> None:
    msg = Message("T", b"body", tags="a", keys=["k1", "k2"], delay_time_level=3)
    assert msg.properties == {"TAGS": "a", "KEYS": "k1 k2", "DELAY": "3"}
    with pytest.raises(TypeError, match="body"):
        Message("T", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reserved"):
        msg.put_user_property("UNIQ_KEY", "x")
    with pytest.raises(ValueError, match="separator"):
        msg.put_user_property("a", "b\x01c")
    with pytest.raises(ValueError, match="space"):
        msg.keys = ["a b"]


def test_routes_to_publish_and_subscribe_queues() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("broker-b", 2, 3, 6, 0), QueueData("broker-a", 4, 4, 6, 0),
                     QueueData("broker-c", 4, 4, 6, 0), QueueData("broker-r", 2, 2, 4, 0)],
        broker_datas=[BrokerData("c", "broker-a", {0: "127.0.0.1:1"}), BrokerData("c", "broker-b", {0: "127.0.0.1:2"}),
                      BrokerData("c", "broker-c", {1: "127.0.0.1:3"}), BrokerData("c", "broker-r", {0: "127.0.0.1:4"})],
        filter_server_table={})
    info = publish_info_from_route("T", route)
    # writable queues of brokers with a master, by broker name
    assert [(q.broker_name, q.queue_id) for q in info.message_queues] == (
        [("broker-a", i) for i in range(4)] + [("broker-b", i) for i in range(3)])
    picks = {info.select_one_message_queue().broker_name for _ in range(20)}
    assert picks == {"broker-a", "broker-b"}
    for _ in range(10):
        assert info.select_one_message_queue("broker-a").broker_name == "broker-b"
    readable = subscribe_info_from_route("T", route)
    assert len(readable) == 4 + 2 + 4 + 2


def test_fastjson_object_keys_round_trip() -> None:
    body = (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":3},'
            b'{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":7,"consumerOffset":7}},"consumeTps":1.5}')
    data = loads_object_keys(body)
    table = {MessageQueue.from_json(dict(k)): v for k, v in data["offsetTable"].items()}
    assert table[MessageQueue("T", "b", 1)]["brokerOffset"] == 7
    assert loads_object_keys(dumps_object_keys(data)) == data
    assert loads_object_keys(b'{0:"a",1:"b"}') == {0: "a", 1: "b"}
    for broken in (b'{"a":}', b"{", b'{"a":1}x', b"[1,]"):
        with pytest.raises((FastjsonError, ValueError)):
            loads_object_keys(broken)
    assert decode_messages(b"") == []
