"""SlaveSynchronize (subprocesses on 127.0.0.1): a slave registered with a name server copies
its master's topics, consumer offsets, delay offsets and subscription groups (every 10 s, the
first 3 s after start, as RocketMQ 4.9.8) and keeps them in its own config files."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import orjson
import pytest
from ha_servers import ha_broker, ss, wait_for

from rocketstore.common.fastjson import loads_fastjson
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")

TOPIC = "SyncedTopic"
GROUP = "synced_group"


async def call(address: str, request):  # noqa: ANN001, ANN201
    client = RemotingClient()
    try:
        response = await client.invoke(address, request, timeout=10)
        assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
        return response
    finally:
        await client.close()


async def tables(address: str) -> dict[str, dict]:
    """The four tables SlaveSynchronize copies, as the broker at address answers them."""
    out = {}
    for name, code, key in (
            ("topics", RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable"),
            ("offsets", RequestCode.GET_ALL_CONSUMER_OFFSET, "offsetTable"),
            ("delay", RequestCode.GET_ALL_DELAY_OFFSET, "offsetTable"),
            ("groups", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscriptionGroupTable")):
        body = loads_fastjson((await call(address, create_request(code))).body)
        out[name] = body[key]
        if "dataVersion" in body:
            out[name + "Version"] = body["dataVersion"]
    return out


async def prepare_master(address: str) -> None:
    client = RemotingClient()
    try:
        await ss.create_topic(client, address, TOPIC, 4)
    finally:
        await client.close()
    await call(address, create_request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
        orjson.dumps({"groupName": GROUP, "consumeEnable": True, "retryQueueNums": 1,
                      "retryMaxTimes": 7, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1})))
    for queue_id, offset in ((0, 11), (3, 42)):
        await call(address, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id),
            "commitOffset": str(offset)}))
    # a message delayed by level 1 (1 s): the schedule service moves delay offset 1 to 1
    await call(address, ss.send_request(TOPIC, 0, b"delayed", properties="DELAY\x011\x02"))


def test_slave_copies_the_masters_tables(tmp_path: Path) -> None:
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, _ = ha_broker(tmp_path, "master", namesrv_addr=namesrv.address)
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             namesrv_addr=namesrv.address)
        with ss.running(master):
            asyncio.run(prepare_master(master.address))
            wait_for(lambda: asyncio.run(tables(master.address))["delay"].get("1") == 1, 20,
                     "the master's schedule service to deliver the delayed message")
            want = asyncio.run(tables(master.address))
            began = time.monotonic()
            with ss.running(slave):
                def synced() -> bool:
                    got = asyncio.run(tables(slave.address))
                    return (got["topics"] == want["topics"]
                            and got["topicsVersion"] == want["topicsVersion"]
                            and got["groups"] == want["groups"]
                            and got["offsets"].get(f"{TOPIC}@{GROUP}") == {"0": 11, "3": 42}
                            and got["delay"].get("1") == 1)

                wait_for(synced, 30, "the slave to copy the master's tables")
                took = time.monotonic() - began
                assert TOPIC in asyncio.run(tables(slave.address))["topics"]

                # kept in the slave's own files
                config = tmp_path / "slave" / "config"

                def on_disk() -> bool:
                    try:
                        topics = json.loads((config / "topics.json").read_text())
                        groups = json.loads((config / "subscriptionGroup.json").read_text())
                        offsets = loads_fastjson((config / "consumerOffset.json").read_bytes())
                        delay = loads_fastjson((config / "delayOffset.json").read_bytes())
                    except (OSError, ValueError):
                        return False
                    return (TOPIC in topics["topicConfigTable"]
                            and GROUP in groups["subscriptionGroupTable"]
                            and f"{TOPIC}@{GROUP}" in offsets["offsetTable"]
                            and int(delay["offsetTable"]["1"] if "1" in delay["offsetTable"]
                                    else delay["offsetTable"][1]) == 1)

                wait_for(on_disk, 20, "the slave to write the copied tables")

                # a change on the master reaches the slave at the next round (10 s)
                asyncio.run(call(master.address, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "99"})))
                wait_for(lambda: asyncio.run(tables(slave.address))["offsets"]
                         [f"{TOPIC}@{GROUP}"].get("0") == 99, 25, "the next round")
            slave_log = slave.log()
    assert took >= 2.5      # the first round comes 3 s after start
    assert "Update slave topic config from master" in slave_log
    assert "Update slave consumer offset from master" in slave_log
