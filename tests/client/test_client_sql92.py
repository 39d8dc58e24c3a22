"""SQL92 subscriptions end to end: our clients against a broker with enablePropertyFilter
(subprocesses); consumers of one topic with different expressions each get exactly their
messages (as the separately written reference evaluator selects them); CHECK_CLIENT_CONFIG and
PULL_MESSAGE answers as RocketMQ 4.9.8 gives them."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import orjson
import pytest
from cluster import Cluster, cluster, wait_for
from sql92_reference import reference_match

from rocketstore.client import (
    SQL92,
    AdminClient,
    ConsumeStatus,
    Message,
    MessageExt,
    MQBrokerError,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketstore.common.pull_sys_flag import FLAG_SUBSCRIPTION
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

pytestmark = pytest.mark.slow

FAST = {"rebalance_interval": 2_000, "persist_consumer_offset_interval": 1_000,
        "poll_name_server_interval": 2_000, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}

SUBSCRIPTIONS = {
    "SqlHigh": "amount > 60",
    "SqlEu": "region = 'eu' AND amount BETWEEN 20 AND 50",
    "SqlTagOrMissing": "TAGS IN ('T1') OR vip IS NULL",
    "SqlNone": "amount > 1000",
}


def _send_mixed(producer: Producer, topic: str, count: int) -> dict[str, dict[str, str]]:
    """count messages with varied properties; their keys and properties."""
    sent: dict[str, dict[str, str]] = {}
    for i in range(count):
        props = {"amount": str(i % 100), "region": ("eu", "us", "apac")[i % 3]}
        if i % 4:
            props["vip"] = "yes" if i % 8 else "no"
        msg = Message(topic, f"m-{i}".encode(), tags=f"T{i % 3}", keys=[f"k-{i}"], properties=props)
        producer.send(msg)
        sent[f"k-{i}"] = {**props, "TAGS": f"T{i % 3}", "KEYS": f"k-{i}"}
    return sent


class Collector:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: list[str] = []

    def __call__(self, messages: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.keys.extend(m.keys[0] for m in messages)
        return ConsumeStatus.SUCCESS


def test_push_consumers_with_different_sql_get_exactly_their_messages(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c:
        c.start_broker("broker-a", enablePropertyFilter="true")
        topic = "SqlOrders"
        with Producer("SqlPG", namesrv_addr=c.namesrv_addr) as producer:
            sent = _send_mixed(producer, topic, 300)
            consumers, collectors = [], {}
            try:
                for group, expression in SUBSCRIPTIONS.items():
                    collector = collectors[group] = Collector()
                    pc = PushConsumer(group, namesrv_addr=c.namesrv_addr, **FAST)
                    pc.subscribe(topic, SQL92(expression))
                    pc.register_message_listener(collector)
                    pc.start()
                    consumers.append(pc)
                tag_collector = Collector()
                tags = PushConsumer("TagT1", namesrv_addr=c.namesrv_addr, **FAST)
                tags.subscribe(topic, "T1")
                tags.register_message_listener(tag_collector)
                tags.start()
                consumers.append(tags)
                expected = {group: sorted(k for k, p in sent.items() if reference_match(expr, p))
                            for group, expr in SUBSCRIPTIONS.items()}
                assert expected["SqlNone"] == [] and all(expected[g] for g in expected if g != "SqlNone")
                wait_for(lambda: all(len(collectors[g].keys) >= len(expected[g]) for g in expected)
                         and len(tag_collector.keys) >= 100, 60)
                time.sleep(1.0)     # anything extra would show up now
                for group in SUBSCRIPTIONS:
                    assert sorted(collectors[group].keys) == expected[group], group
                assert sorted(tag_collector.keys) == sorted(k for k, p in sent.items() if p["TAGS"] == "T1")
            finally:
                for pc in consumers:
                    pc.shutdown()


def test_pull_consumer_and_direct_pulls_filter_by_sql(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c:
        c.start_broker("broker-a", enablePropertyFilter="true")
        topic = "SqlPulls"
        with Producer("SqlPG2", namesrv_addr=c.namesrv_addr) as producer:
            sent = _send_mixed(producer, topic, 120)
        expression = "amount >= 90 OR (region = 'apac' AND vip = 'no')"
        expected = sorted(k for k, p in sent.items() if reference_match(expression, p))
        with PullConsumer("SqlLite", namesrv_addr=c.namesrv_addr,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
            consumer.subscribe(topic, SQL92(expression))
            got: list[MessageExt] = []
            deadline = time.monotonic() + 30
            while len(got) < len(expected) and time.monotonic() < deadline:
                got.extend(consumer.poll(timeout=0.5))
            got.extend(consumer.poll(timeout=1.0))
            assert sorted(m.keys[0] for m in got) == expected
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            pulled: list[str] = []
            for mq in admin.queues(topic):
                offset = 0
                for _ in range(100):
                    batch = admin.pull(mq, offset, 32, SQL92("amount < 10"))
                    if not batch:
                        break
                    pulled.extend(m.keys[0] for m in batch)
                    offset = batch[-1].queue_offset + 1
            assert sorted(pulled) == sorted(k for k, p in sent.items() if int(p["amount"]) < 10)


async def _request(address: str, code: int, ext: dict[str, str] | None = None,
                   body: bytes | None = None) -> tuple[int, str]:
    client = RemotingClient()
    try:
        response = await client.invoke(address, create_request(code, ext, body=body), 10)
        return response.code, response.remark or ""
    finally:
        await client.close()


def _check_body(expression: str, expression_type: str) -> bytes:
    return orjson.dumps({"clientId": "c1", "group": "G", "subscriptionData": {
        "topic": "T", "subString": expression, "expressionType": expression_type,
        "tagsSet": [], "codeSet": [], "subVersion": 1, "classFilterMode": False}})


def _pull_ext(group: str, topic: str, expression: str, expression_type: str) -> dict[str, str]:
    return {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": str(FLAG_SUBSCRIPTION), "commitOffset": "0",
            "suspendTimeoutMillis": "0", "subscription": expression, "subVersion": "1",
            "expressionType": expression_type}


async def _query_cq(address: str, topic: str) -> list[dict]:
    client = RemotingClient()
    try:
        ext = {"topic": topic, "queueId": "0", "index": "0", "count": "4"}
        response = await client.invoke(address, create_request(RequestCode.QUERY_CONSUME_QUEUE, ext), 10)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return orjson.loads(response.body_bytes())["queueData"]
    finally:
        await client.close()


def _broker_address(c: Cluster, name: str) -> str:
    return c.brokers[name].address


def test_check_client_config_and_pull_answers(tmp_path: Path) -> None:
    with cluster(tmp_path, brokers=()) as c:
        c.start_broker("broker-on", enablePropertyFilter="true")
        c.start_broker("broker-off")
        on, off = _broker_address(c, "broker-on"), _broker_address(c, "broker-off")
        with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
            admin.update_topic("SqlOn", broker_addr=on)
            admin.update_topic("SqlOff", broker_addr=off)
        with Producer("SqlPG3", namesrv_addr=c.namesrv_addr) as producer:
            producer.send(Message("SqlOn", b"x", properties={"a": "1"}))
            producer.send(Message("SqlOff", b"x", properties={"a": "1"}))

        async def main() -> None:
            check = RequestCode.CHECK_CLIENT_CONFIG
            assert await _request(on, check, body=_check_body("a > 1", "SQL92")) == (ResponseCode.SUCCESS, "")
            code, remark = await _request(on, check, body=_check_body("a >", "SQL92"))
            assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "'a >'" in remark
            code, _ = await _request(on, check, body=_check_body("a > 1", "NOPE"))
            assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert (await _request(on, check, body=_check_body("x || y", "TAG")))[0] == ResponseCode.SUCCESS
            assert (await _request(on, check))[0] == ResponseCode.SUCCESS
            code, remark = await _request(off, check, body=_check_body("a > 1", "SQL92"))
            assert code == ResponseCode.SYSTEM_ERROR
            assert remark == "The broker does not support consumer to filter message by SQL92"
            assert (await _request(off, check, body=_check_body("*", "TAG")))[0] == ResponseCode.SUCCESS

            pull = RequestCode.PULL_MESSAGE
            code, _ = await _request(on, pull, _pull_ext("G", "SqlOn", "a >", "SQL92"))
            assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            code, remark = await _request(off, pull, _pull_ext("G", "SqlOff", "a > 0", "SQL92"))
            assert code == ResponseCode.SYSTEM_ERROR and "SQL92" in remark
            found = []
            for queue in range(8):
                ext = {**_pull_ext("G", "SqlOn", "a = 1", "SQL92"), "queueId": str(queue)}
                found.append((await _request(on, pull, ext))[0])
            assert found.count(ResponseCode.SUCCESS) == 1
            missed = []
            for queue in range(8):
                ext = {**_pull_ext("G", "SqlOn", "a = 2", "SQL92"), "queueId": str(queue)}
                missed.append((await _request(on, pull, ext))[0])
            assert ResponseCode.SUCCESS not in missed

            # a heartbeat's expression that does not compile: its pulls find no filter data
            client = RemotingClient()
            try:
                heartbeat = orjson.dumps({"clientID": "hb-1", "producerDataSet": [], "consumerDataSet": [{
                    "groupName": "HbGroup", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [
                        {"topic": "SqlOn", "subString": "a >", "expressionType": "SQL92", "subVersion": 1}]}]})
                reply = await client.invoke(on, create_request(RequestCode.HEART_BEAT, body=heartbeat), 10)
                assert reply.code == ResponseCode.SUCCESS
                ext = {**_pull_ext("HbGroup", "SqlOn", "", "SQL92"), "sysFlag": "0"}
                reply = await client.invoke(on, create_request(pull, ext), 10)
                assert reply.code == ResponseCode.FILTER_DATA_NOT_EXIST
            finally:
                await client.close()

        asyncio.run(main())

        # our consumers check their SQL92 subscriptions at start, as Java's do
        off_only = PushConsumer("SqlOffGroup", namesrv_addr=c.namesrv_addr, **FAST)
        off_only.subscribe("SqlOff", SQL92("a > 1"))
        off_only.register_message_listener(lambda messages: ConsumeStatus.SUCCESS)
        with pytest.raises(MQBrokerError) as refused:
            off_only.start()
        assert refused.value.response_code == ResponseCode.SYSTEM_ERROR
        bad = PushConsumer("SqlBadGroup", namesrv_addr=c.namesrv_addr, **FAST)
        bad.subscribe("SqlOn", SQL92("a >"))
        bad.register_message_listener(lambda messages: ConsumeStatus.SUCCESS)
        with pytest.raises(MQBrokerError) as refused:
            bad.start()
        assert refused.value.response_code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_bloom_filter_broker_consumers_get_exactly_their_messages(tmp_path: Path) -> None:
    """enableCalcFilterBitMap with enableConsumeQueueExt: the consumers' heartbeats register
    their SQL92 filters, messages sent afterwards get bitmaps at dispatch; each group still
    gets exactly its messages, and the store's bitmaps skip the others (checked after the
    broker stops, through the filters it kept in config/consumerFilter.json)."""
    from rocketstore import MessageStore, StoreConfig

    with cluster(tmp_path, brokers=()) as c:
        c.start_broker("broker-a", enablePropertyFilter="true", enableCalcFilterBitMap="true",
                       enableConsumeQueueExt="true")
        topic = "SqlBloom"
        filters = tmp_path / "broker-a" / "config" / "consumerFilter.json"
        consumers, collectors = [], {}
        try:
            with AdminClient(namesrv_addr=c.namesrv_addr) as admin:
                admin.update_topic(topic, cluster="TestCluster", read_queue_nums=2,
                                   write_queue_nums=2)
            for group, expression in SUBSCRIPTIONS.items():
                collector = collectors[group] = Collector()
                pc = PushConsumer(group, namesrv_addr=c.namesrv_addr, **FAST)
                pc.subscribe(topic, SQL92(expression))
                pc.register_message_listener(collector)
                pc.start()
                consumers.append(pc)
            wait_for(lambda: filters.exists() and all(
                g in filters.read_text() for g in SUBSCRIPTIONS), 30)
            with Producer("SqlBloomPG", namesrv_addr=c.namesrv_addr) as producer:
                sent = _send_mixed(producer, topic, 300)
            expected = {group: sorted(k for k, p in sent.items() if reference_match(expr, p))
                        for group, expr in SUBSCRIPTIONS.items()}
            wait_for(lambda: all(len(collectors[g].keys) >= len(expected[g]) for g in expected), 60)
            time.sleep(1.0)
            for group in SUBSCRIPTIONS:
                assert sorted(collectors[group].keys) == expected[group], group
            # queryCq (QUERY_CONSUME_QUEUE) shows each unit's ext unit as RocketMQ does
            units = asyncio.run(_query_cq(_broker_address(c, "broker-a"), topic))
            assert len(units) == 4 and all(u["tagsCode"] <= -(1 << 31) - 1 for u in units)
            for u in units:
                ext = orjson.loads(u["extendDataJson"])
                assert ext["size"] == 34 and ext["tagsCode"] in (2652, 2653, 2654)   # "T0".."T2"
                assert len(u["bitMap"].replace("\n", "")) == 112
        finally:
            for pc in consumers:
                pc.shutdown()
        c.brokers["broker-a"].stop()
    root = str(tmp_path / "broker-a")
    with MessageStore.open(root, StoreConfig(store_path_root_dir=root,
                                             mapped_file_size_commit_log=16 * 1024 * 1024,
                                             mapped_file_size_consume_queue=60_000,
                                             enable_consume_queue_ext=True)) as store:
        store.enable_filter_bitmaps()
        matched = skipped = 0
        for q in (0, 1):
            offset, end = 0, store.get_max_offset_in_queue(topic, q)
            while offset < end:
                r = store.get_message("SqlHigh", topic, q, offset, 32, SUBSCRIPTIONS["SqlHigh"], "SQL92")
                matched += r.message_count
                skipped += r.bloom_skipped
                offset = r.next_begin_offset
        assert matched == len(expected["SqlHigh"]) and skipped >= 0.8 * (300 - matched)
