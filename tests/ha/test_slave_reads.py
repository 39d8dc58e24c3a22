"""Reading from a slave (subprocesses on 127.0.0.1) with the project's client: a consumer goes
on consuming from the slave while its master is down and back on the master once it is up,
reading nothing twice (its offsets carry over: the slave's copy from SlaveSynchronize, then the
consumer's own, committed to the master again); and pulls follow suggestWhichBrokerId when the
master suggests the slave (slaveReadEnable, consumer behind accessMessageInMemoryMaxRatio)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from ha_servers import QUEUES, TOPIC, create_topic, ha_broker, ss, wait_for
from test_slave_sync import call, tables

from rocketstore.client import ConsumeStatus, PushConsumer
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")

GROUP = "slave_reads_group"


async def send(address: str, bodies: list[bytes]) -> None:
    client = RemotingClient()
    try:
        for i, body in enumerate(bodies):
            response = await client.invoke(address, ss.send_request(TOPIC, i % QUEUES, body), timeout=10)
            assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    finally:
        await client.close()


async def route_addrs(namesrv: str) -> dict[str, str]:
    client = RemotingClient()
    try:
        response = await client.invoke(namesrv, create_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), timeout=10)
        if response.code != ResponseCode.SUCCESS:
            return {}
        return json.loads(response.body)["brokerDatas"][0]["brokerAddrs"]
    finally:
        await client.close()


async def gets(address: str) -> int:
    """Messages the broker at address served to pulls today (its runtime info)."""
    table = json.loads((await call(address, create_request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
    return int(table["table"]["msgGetTotalTodayNow"])


class Collector:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, messages):  # noqa: ANN001, ANN204 - a listener
        with self.lock:
            self.bodies += [bytes(m.body) for m in messages]
        return ConsumeStatus.SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)


def consumer(namesrv: str, collector: Collector) -> PushConsumer:
    c = PushConsumer(GROUP, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     persist_consumer_offset_interval=500, poll_name_server_interval=1000)
    c.subscribe(TOPIC, "*")
    c.register_message_listener(collector)
    c.start()
    return c


def bodies_of(phase: str, count: int) -> list[bytes]:
    return [f"{phase}-{i:04d}".encode() for i in range(count)]


def test_consumer_reads_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, _ = ha_broker(tmp_path, "master", namesrv_addr=namesrv.address)
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             namesrv_addr=namesrv.address)
        with ss.running(master, slave):
            asyncio.run(create_topic(master.address))
            first, second, third = bodies_of("one", 80), bodies_of("two", 80), bodies_of("three", 40)
            asyncio.run(send(master.address, first))
            collector = Collector()
            c = consumer(namesrv.address, collector)
            try:
                wait_for(lambda: collector.count() >= len(first), 60, "the first messages")
            finally:
                c.shutdown()    # its offsets go to the master
            asyncio.run(send(master.address, second))

            # the slave has the records and (SlaveSynchronize) the master's offsets of the group
            def slave_ready() -> bool:
                offsets = asyncio.run(tables(slave.address))["offsets"].get(f"{TOPIC}@{GROUP}", {})
                return sum(offsets.values()) == len(first) and \
                    asyncio.run(gets_or_none(slave.address, len(first) + len(second)))

            wait_for(slave_ready, 40, "the slave to have the records and the offsets")
            master.kill()
            wait_for(lambda: asyncio.run(route_addrs(namesrv.address)) == {"1": slave.address},
                     30, "the route to name the slave alone")

            c = consumer(namesrv.address, collector)
            try:
                wait_for(lambda: collector.count() >= len(first) + len(second), 60,
                         "the second messages, from the slave")
                assert asyncio.run(gets(slave.address)) >= len(second)

                master.start()
                wait_for(lambda: "0" in asyncio.run(route_addrs(namesrv.address)), 60,
                         "the master back in the route")
                asyncio.run(send(master.address, third))
                wait_for(lambda: collector.count() >= len(first) + len(second) + len(third), 60,
                         "the third messages")
                # the consumer's offsets reach the master again
                wait_for(lambda: sum(asyncio.run(tables(master.address))["offsets"]
                                     .get(f"{TOPIC}@{GROUP}", {}).values())
                         == len(first) + len(second) + len(third), 30,
                         "the consumer's offsets on the master")
            finally:
                c.shutdown()
    counts = Counter(collector.bodies)
    assert set(counts) == set(first + second + third)
    assert [b for b, n in counts.items() if n > 1] == []


async def gets_or_none(address: str, records: int) -> bool:
    """Whether the broker's queues of TOPIC hold ``records`` messages."""
    total = 0
    client = RemotingClient()
    try:
        for queue_id in range(QUEUES):
            response = await client.invoke(address, create_request(
                RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue_id)}), timeout=10)
            if response.code != ResponseCode.SUCCESS:
                return False
            total += int(response.ext_fields["offset"])
    finally:
        await client.close()
    return total == records


def test_pulls_follow_suggest_which_broker_id(tmp_path: Path) -> None:
    """accessMessageInMemoryMaxRatio=0: any consumer that is behind at all is "behind memory";
    with slaveReadEnable the master suggests the group's whichBrokerWhenConsumeSlowly (1)."""
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        options = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
        master, _ = ha_broker(tmp_path, "master", namesrv_addr=namesrv.address, **options)
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             namesrv_addr=namesrv.address, **options)
        with ss.running(master, slave):
            asyncio.run(create_topic(master.address))
            bodies = bodies_of("slow", 400)
            asyncio.run(send(master.address, bodies))
            wait_for(lambda: asyncio.run(gets_or_none(slave.address, len(bodies))), 30,
                     "the slave to have the records")
            wait_for(lambda: TOPIC in asyncio.run(tables(slave.address))["topics"], 30,
                     "the slave to have the topic")
            collector = Collector()
            c = consumer(namesrv.address, collector)
            try:
                wait_for(lambda: collector.count() >= len(bodies), 60, "every message")
            finally:
                c.shutdown()
            from_master, from_slave = asyncio.run(gets(master.address)), asyncio.run(gets(slave.address))
    assert sorted(set(collector.bodies)) == sorted(bodies)
    # the first pull of each queue goes to the master, which sends the rest to the slave
    assert from_slave > 0 and from_master < len(bodies), (from_master, from_slave)
