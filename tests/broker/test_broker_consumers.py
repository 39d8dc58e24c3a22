"""Consumer-side requests in this process: heartbeats and the group's member list, the
NOTIFY_CONSUMER_IDS_CHANGED sent when it changes, queue locks, send-back to the retry topic and
the DLQ, delayed delivery (and its progress across a restart), SYNC_FLUSH sends answered off the
event loop, and back-pressure (SYSTEM_BUSY)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import broker_helpers
import orjson
from broker_helpers import cluster, props, pull_fields, send_fields, wait_until

from rocketstore.message import MessageProperty
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    create_request,
)
from rocketstore.store.layout import CONFIG_DIR
from rocketstore.store.message_store import MessageStore

arun = broker_helpers.arun

SEND = RequestCode.SEND_MESSAGE
PULL = RequestCode.PULL_MESSAGE
FAST_DELAYS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


def heartbeat(client_id: str, group: str, topic: str, model: object = 1) -> bytes:
    """As the C++ client sends it: enums as ordinals, a trailing newline."""
    return orjson.dumps({"clientID": client_id, "consumerDataSet": [{
        "consumeFromWhere": 0, "consumeType": 1, "groupName": group, "messageModel": model,
        "subscriptionDataSet": [{"subString": "*", "subVersion": "1", "topic": topic}]}]}) + b"\n"


def test_members_notify_and_locks(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            notices: list[str] = []
            second = RemotingClient()

            def on_notify(ctx, request: RemotingCommand) -> None:
                notices.append(request.ext_fields["consumerGroup"])

            cl.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            r = await cl.call(RequestCode.HEART_BEAT, body=heartbeat("c1", "G", "T"))
            assert r.code == 0
            r = await cl.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert orjson.loads(r.body_bytes()) == {"consumerIdList": ["c1"]}
            assert cl.broker.topics.select("%RETRY%G") is not None
            # RocketMQ tells every member, the new one included
            assert await wait_until(lambda: notices == ["G"], 5), notices
            await cl.call(RequestCode.HEART_BEAT, body=heartbeat("c1", "G", "T"))
            await asyncio.sleep(0.2)
            assert notices == ["G"]                 # a renewal changes nothing
            # a second member joins: the first is told to rebalance
            r = await second.invoke(cl.addr, create_request(RequestCode.HEART_BEAT, {}, heartbeat("c2", "G", "T")), 5)
            assert r.code == 0
            assert await wait_until(lambda: notices == ["G", "G"], 5), notices
            r = await cl.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert sorted(orjson.loads(r.body_bytes())["consumerIdList"]) == ["c1", "c2"]
            # Java's enum names are read too
            r = await cl.call(RequestCode.HEART_BEAT, body=orjson.dumps({"clientID": "c1", "consumerDataSet": [{
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": "J", "messageModel": "BROADCASTING", "subscriptionDataSet": []}]}))
            assert r.code == 0 and cl.broker.consumers.get("J").message_model == "BROADCASTING"
            r = await cl.call(RequestCode.HEART_BEAT, body=b"{not json")
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(RequestCode.HEART_BEAT, body=heartbeat("c1", "G", "T", model=7))
            assert r.code == ResponseCode.SYSTEM_ERROR and "messageModel" in r.remark
            # queue locks: c1 gets queue 0, c2 only queue 1
            mq = [{"brokerName": "broker-a", "queueId": 0, "topic": "T"}]
            r = await cl.call(RequestCode.LOCK_BATCH_MQ, body=orjson.dumps({"consumerGroup": "G", "clientId": "c1", "mqSet": mq}))
            assert orjson.loads(r.body_bytes())["lockOKMQSet"] == mq
            both = mq + [{"brokerName": "broker-a", "queueId": 1, "topic": "T"}]
            r = await second.invoke(cl.addr, create_request(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(
                {"consumerGroup": "G", "clientId": "c2", "mqSet": both})), 5)
            assert orjson.loads(r.body_bytes())["lockOKMQSet"] == both[1:]
            r = await cl.call(RequestCode.UNLOCK_BATCH_MQ, body=orjson.dumps({"consumerGroup": "G", "clientId": "c1", "mqSet": mq}))
            assert r.code == 0
            r = await second.invoke(cl.addr, create_request(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(
                {"consumerGroup": "G", "clientId": "c2", "mqSet": mq})), 5)
            assert orjson.loads(r.body_bytes())["lockOKMQSet"] == mq
            # c2 leaves (its connection closes): c1 is told again
            await second.close()
            assert await wait_until(lambda: notices == ["G", "G", "J", "G"], 5), notices
            r = await cl.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert orjson.loads(r.body_bytes())["consumerIdList"] == ["c1"]
            # two client instances over one connection are two members
            await cl.call(RequestCode.HEART_BEAT, body=heartbeat("c3", "G", "T"))
            r = await cl.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert orjson.loads(r.body_bytes())["consumerIdList"] == ["c1", "c3"]
            for client_id in ("c1", "c3"):
                r = await cl.call(RequestCode.UNREGISTER_CLIENT, {"clientID": client_id, "consumerGroup": "G"})
                assert r.code == 0
            r = await cl.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert r.code == ResponseCode.SYSTEM_ERROR

    arun(main())


def test_send_back_retries_with_delay_then_the_dlq(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store", {"message_delay_level": FAST_DELAYS}) as cl:
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                              body=orjson.dumps({"groupName": "G", "retryMaxTimes": 2}))
            assert r.code == 0
            r = await cl.call(SEND, send_fields("orders", 0, props(TAGS="t", KEYS="k1", UNIQ_KEY="A" * 32)), b"payload")
            first_id = r.ext_fields["msgId"]
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("G", "orders", 0, 0))
            import refcodec

            (rec,) = [refcodec.decode_record(r.body_bytes())]
            offset = rec.commitLogOffset
            retry = "%RETRY%G"
            for round_ in range(2):
                r = await cl.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": offset, "delayLevel": 0})
                assert r.code == ResponseCode.SUCCESS, r.remark
                # first in the schedule topic, then (1 s later) in the retry topic
                assert await wait_until(
                    lambda n=round_ + 1: cl.broker.store.get_max_offset_in_queue(retry, 0) == n, 10)
                await cl.dispatched()
                r = await cl.call(PULL, pull_fields("G", retry, 0, round_))
                assert r.code == 0
                rec = refcodec.decode_record(r.body_bytes())
                assert rec.reconsumeTimes == round_ + 1
                assert rec.properties[MessageProperty.RETRY_TOPIC] == "orders"
                assert rec.properties[MessageProperty.ORIGIN_MESSAGE_ID] == first_id
                assert rec.properties[MessageProperty.REAL_TOPIC] == retry
                # the level it waited at stays in the record, as RocketMQ 4.9.8 leaves it
                assert rec.properties[MessageProperty.DELAY] == str(3 + round_) and rec.body == b"payload"
                offset = rec.commitLogOffset
            # the third failure: reconsume times 2 >= retryMaxTimes 2 -> %DLQ%G at once
            r = await cl.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": offset, "delayLevel": 0})
            assert r.code == 0
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("reader", "%DLQ%G", 0, 0))
            assert r.code == 0
            dead = refcodec.decode_record(r.body_bytes())
            assert dead.reconsumeTimes == 3 and dead.properties[MessageProperty.ORIGIN_MESSAGE_ID] == first_id
            assert dead.properties[MessageProperty.DELAY] == "0"       # RocketMQ's setDelayTimeLevel(0)
            # an offset where no message starts
            r = await cl.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": 10**9, "delayLevel": 0})
            assert r.code == ResponseCode.SYSTEM_ERROR

    arun(main(), timeout=90)


def test_delayed_messages_are_delivered_when_due_and_progress_survives_a_restart(arun, tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> None:
        async with cluster(root, {"message_delay_level": "1s 3s " + " ".join(["1s"] * 16)}) as cl:
            t0 = time.time() * 1000
            r = await cl.call(SEND, send_fields("later", 1, props(DELAY="2", TAGS="d")), b"in 3s")
            assert r.code == 0
            await cl.dispatched()
            assert cl.broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 1
            assert cl.broker.store.get_max_offset_in_queue("later", 1) == 0
            await asyncio.sleep(1.5)
            assert cl.broker.store.get_max_offset_in_queue("later", 1) == 0      # not due yet
            assert await wait_until(lambda: cl.broker.store.get_max_offset_in_queue("later", 1) == 1, 10)
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "later", 1, 0, subscription="d"))
            import refcodec

            rec = refcodec.decode_record(r.body_bytes())
            assert rec.storeTimestamp - t0 >= 2900
            # stored with the properties it had (RocketMQ 4.9.8 keeps DELAY on delivery)
            assert rec.properties[MessageProperty.REAL_TOPIC] == "later" and rec.properties["DELAY"] == "2"
            r = await cl.call(RequestCode.GET_ALL_DELAY_OFFSET)
            assert orjson.loads(r.body_bytes())["offsetTable"]["2"] == 1
        data = orjson.loads((root / CONFIG_DIR / "delayOffset.json").read_bytes())
        assert data["offsetTable"]["2"] == 1
        async with cluster(root, {"message_delay_level": "1s 3s " + " ".join(["1s"] * 16)}) as cl:
            await asyncio.sleep(1.5)
            assert cl.broker.store.get_max_offset_in_queue("later", 1) == 1     # not delivered twice

    arun(main(), timeout=90)


def test_sync_flush_sends_are_answered_when_durable_while_other_requests_flow(arun, tmp_path: Path) -> None:
    gate = threading.Event()

    def gated_flush(mf, start: int, end: int) -> None:
        gate.wait(10)
        mf.sync(start, end)

    def opener(root, config):
        return MessageStore.open(root, config, commit_log_flush=gated_flush)

    async def main() -> None:
        async with cluster(tmp_path / "store", {"flush_disk_type": "SYNC_FLUSH"}, store_opener=opener) as cl:
            loop = asyncio.get_running_loop()
            sends = [asyncio.ensure_future(cl.call(SEND, send_fields("sf", 0), b"durable-%d" % i, timeout=15))
                     for i in range(5)]
            await asyncio.sleep(0.3)
            assert not any(s.done() for s in sends)         # waiting for the flush ...
            t0 = loop.time()
            r = await cl.call(RequestCode.GET_MAX_OFFSET, {"topic": "sf", "queueId": 0})
            assert r.code == 0 and loop.time() - t0 < 3     # ... while the loop serves others
            # WAIT=false: answered without waiting for durability
            r = await cl.call(SEND, send_fields("sf", 1, props(WAIT="false")), b"no-wait")
            assert r.code == 0
            gate.set()
            results = await asyncio.gather(*sends)
            assert [x.code for x in results] == [0] * 5
            assert sorted(int(x.ext_fields["queueOffset"]) for x in results) == [0, 1, 2, 3, 4]

    arun(main(), timeout=60)


def test_sync_flush_timeout_answers_flush_disk_timeout(arun, tmp_path: Path) -> None:
    stuck = threading.Event()

    def slow_flush(mf, start: int, end: int) -> None:
        if not stuck.is_set():
            time.sleep(0.5)
        mf.sync(start, end)

    def opener(root, config):
        return MessageStore.open(root, config, commit_log_flush=slow_flush)

    async def main() -> None:
        async with cluster(tmp_path / "store", {"flush_disk_type": "SYNC_FLUSH", "sync_flush_timeout": 100},
                           store_opener=opener) as cl:
            r = await cl.call(SEND, send_fields("sft", 0), b"slow")
            assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT
            assert r.ext_fields["queueOffset"] == "0"       # stored all the same
            stuck.set()

    arun(main(), timeout=60)


def test_back_pressure_answers_system_busy(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store", {"os_page_cache_busy_timeout_mills": 50}) as cl:
            # another put holds the put lock for long: sends are refused at once, not queued
            lock = cl.broker.store.commit_log.put_lock
            held = threading.Event()
            release = threading.Event()

            def hold() -> None:
                with lock:
                    held.set()
                    release.wait(10)

            thread = threading.Thread(target=hold)
            thread.start()
            try:
                held.wait(5)
                await asyncio.sleep(0.1)
                r = await cl.call(SEND, send_fields("bp", 0), b"x")
                assert r.code == ResponseCode.SYSTEM_BUSY and "PC_SYNCHRONIZED" in r.remark
            finally:
                release.set()
                thread.join()
            assert (await cl.call(SEND, send_fields("bp", 0), b"x")).code == 0
            # a send read long before it could be processed (a paused connection's backlog)
            ctx = next(iter(cl.broker.server.connections))
            request = create_request(SEND, {k: str(v) for k, v in send_fields("bp", 0).items()}, b"late")
            ctx.received_at = asyncio.get_running_loop().time() - 1.0
            response = cl.broker.send_processor.send_message(ctx, request)
            assert response.code == ResponseCode.SYSTEM_BUSY and "TIMEOUT_CLEAN_QUEUE" in response.remark
            assert cl.broker.stats.busy_rejections == 2

    arun(main())
