"""The admin codes over the wire: topics, subscription groups, runtime info, statistics keyed by
MessageQueue (fastjson's object keys), connections, consumer offsets, resetting a group's
offsets by time, and QUERY_MESSAGE / VIEW_MESSAGE_BY_ID."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import broker_helpers
import orjson
from broker_helpers import cluster, props, send_fields

from rocketstore.common.fastjson import loads_object_keys
from rocketstore.remoting import RequestCode, ResponseCode, create_response

arun = broker_helpers.arun


def mq_table(body: bytes) -> dict[int, dict]:
    """An object-keyed offsetTable by queue id."""
    table = loads_object_keys(body)["offsetTable"]
    return {dict(key)["queueId"]: value for key, value in table.items()}


def test_topics_and_groups(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                              {"topic": "made", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
                               "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
            assert r.code == 0
            r = await cl.call(RequestCode.GET_ALL_TOPIC_CONFIG)
            table = orjson.loads(r.body_bytes())
            assert table["topicConfigTable"]["made"]["readQueueNums"] == 3
            assert table["dataVersion"]["counter"] >= 1
            # the name server hears of it at once
            route = None
            for _ in range(50):
                route = await cl.client.invoke(cl.namesrv.address, broker_helpers.create_request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "made"}), 5)
                if route.code == 0:
                    break
                await asyncio.sleep(0.05)
            assert route is not None and route.code == 0
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "DefaultCluster"})
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x", "perm": "rw"})
            assert r.code == ResponseCode.SYSTEM_ERROR and "perm" in r.remark
            r = await cl.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "made"})
            assert r.code == 0 and cl.broker.topics.select("made") is None
            r = await cl.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
            assert "TBW102" in orjson.loads(r.body_bytes())["topicList"]
            # subscription groups
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                              body=orjson.dumps({"groupName": "billing", "retryMaxTimes": 5, "consumeEnable": True}))
            assert r.code == 0
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"[1]")
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            groups = orjson.loads(r.body_bytes())["subscriptionGroupTable"]
            assert groups["billing"]["retryMaxTimes"] == 5 and "TOOLS_CONSUMER" in groups
            r = await cl.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "billing"})
            assert r.code == 0 and "billing" not in cl.broker.groups.table
            # a group that may not consume is refused
            await cl.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=orjson.dumps({"groupName": "off", "consumeEnable": False}))
            r = await cl.call(RequestCode.PULL_MESSAGE, broker_helpers.pull_fields("off", "TBW102", 0, 0))
            assert r.code == ResponseCode.NO_PERMISSION
            # the broker's config and runtime figures
            r = await cl.call(RequestCode.GET_BROKER_CONFIG)
            text = r.body_bytes().decode()
            assert "brokerName=broker-a" in text and "flushDiskType=ASYNC_FLUSH" in text
            r = await cl.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            info = orjson.loads(r.body_bytes())["table"]
            assert info["brokerVersionDesc"] == "V4_9_8" and int(info["commitLogMaxOffset"]) == 0
            assert all(isinstance(v, str) for v in info.values())

    arun(main())


def test_stats_connections_offsets_and_reset(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            for i in range(6):
                r = await cl.call(RequestCode.SEND_MESSAGE,
                                  send_fields("st", i % 2, props(KEYS=f"key-{i}", TAGS="a")), b"m%d" % i)
                assert r.code == 0
                if i == 2:
                    await asyncio.sleep(0.05)
                    middle = int(time.time() * 1000)
                    await asyncio.sleep(0.05)
            await cl.dispatched()
            r = await cl.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "st"})
            stats = mq_table(r.body_bytes())
            assert stats[0]["maxOffset"] == 3 and stats[1]["maxOffset"] == 3 and stats[2]["maxOffset"] == 0
            assert stats[0]["lastUpdateTimestamp"] > 0
            r = await cl.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "nope"})
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            # a consumer and a producer connected
            await cl.call(RequestCode.HEART_BEAT, body=orjson.dumps({
                "clientID": "cid-1", "producerDataSet": [{"groupName": "PG1"}],
                "consumerDataSet": [{"groupName": "CG", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
                                     "subscriptionDataSet": [{"topic": "st", "subString": "a", "subVersion": 1}]}]}))
            r = await cl.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
            conns = orjson.loads(r.body_bytes())
            assert conns["connectionSet"][0]["clientId"] == "cid-1" and conns["messageModel"] == "CLUSTERING"
            assert conns["subscriptionTable"]["st"]["subString"] == "a"
            # GET_CONSUMER_RUNNING_INFO is asked of the consumer and its answer passed back
            cl.client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, lambda ctx, req: create_response(
                req, body=b'{"properties":{},"mqTable":{{"queueId":0}:{}}}'))
            r = await cl.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG", "clientId": "cid-1"})
            assert r.code == 0 and r.body_bytes().startswith(b'{"properties"')
            r = await cl.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG", "clientId": "other"})
            assert r.code == ResponseCode.SYSTEM_ERROR and "not online" in r.remark
            r = await cl.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "nobody"})
            assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
            r = await cl.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"})
            assert orjson.loads(r.body_bytes())["connectionSet"][0]["clientId"] == "cid-1"
            # consumer progress
            for q, o in ((0, 2), (1, 3)):
                await cl.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "CG", "topic": "st", "queueId": q, "commitOffset": o})
            r = await cl.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": "st"})
            consume = mq_table(r.body_bytes())
            assert (consume[0]["brokerOffset"], consume[0]["consumerOffset"]) == (3, 2)
            assert (consume[1]["brokerOffset"], consume[1]["consumerOffset"]) == (3, 3)
            r = await cl.call(RequestCode.GET_ALL_CONSUMER_OFFSET)
            assert orjson.loads(r.body_bytes())["offsetTable"]["st@CG"] == {"0": 2, "1": 3}
            r = await cl.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "st"})
            assert orjson.loads(r.body_bytes())["groupList"] == ["CG"]
            # reset by time: back to the first message stored after `middle`
            r = await cl.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                              {"topic": "st", "group": "CG", "timestamp": middle, "isForce": "true"})
            assert r.code == 0
            reset = mq_table(r.body_bytes())
            store = cl.broker.store
            expected = {q: store.get_offset_in_queue_by_time("st", q, middle) for q in range(4)}
            assert reset == expected and expected[1] in (0, 1) and expected[0] in (1, 2)
            r = await cl.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", "topic": "st", "queueId": 1})
            assert r.ext_fields["offset"] == str(expected[1])
            r = await cl.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                              {"topic": "st", "group": "CG", "timestamp": -1, "isForce": "true"})
            assert mq_table(r.body_bytes()) == {0: 3, 1: 3, 2: 0, 3: 0}
            r = await cl.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                              {"topic": "st", "group": "CG", "timestamp": 0, "isForce": "true"})
            assert mq_table(r.body_bytes()) == {0: 0, 1: 0, 2: 0, 3: 0}
            # query by key, view by offset
            r = await cl.call(RequestCode.QUERY_MESSAGE, {"topic": "st", "key": "key-4", "maxNum": 8,
                                                          "beginTimestamp": 0, "endTimestamp": 2**62})
            assert r.code == 0
            import refcodec

            rec = refcodec.decode_record(r.body_bytes())
            assert rec.body == b"m4"
            r = await cl.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": rec.commitLogOffset})
            assert r.code == 0 and refcodec.decode_record(r.body_bytes()).body == b"m4"
            r = await cl.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": rec.commitLogOffset + 1})
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(RequestCode.QUERY_MESSAGE, {"topic": "st", "key": "absent", "maxNum": 8,
                                                          "beginTimestamp": 0, "endTimestamp": 2**62})
            assert r.code == ResponseCode.QUERY_NOT_FOUND

    arun(main())
