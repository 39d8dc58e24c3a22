"""SYNC_MASTER (subprocesses on 127.0.0.1): a send's SEND_OK comes once the slave has the record;
a stalled slave gives FLUSH_SLAVE_TIMEOUT after slaveTimeout, no slave SLAVE_NOT_AVAILABLE
(the message stored all the same, as RocketMQ 4.9.8); ASYNC_MASTER answers at once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from ha_servers import (
    QUEUES,
    TOPIC,
    commit_log_bytes,
    create_topic,
    ha_broker,
    pull_all,
    ss,
    wait_for,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_helpers import rocketmq_usable  # noqa: E402
from test_slave_reads import route_addrs  # noqa: E402

from rocketstore.cli import main as cli_main
from rocketstore.client import AsyncProducer, Message
from rocketstore.client.message import SendStatus
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")

#: short, so that a stalled slave's timeout comes quickly
SYNC_FLUSH_TIMEOUT_MS = 1500


async def raw_send(address: str, body: bytes, queue_id: int = 0) -> tuple[int, float]:
    """One SEND_MESSAGE_V2: its response code and how long it took (s)."""
    client = RemotingClient()
    try:
        began = time.monotonic()
        response = await client.invoke(address, ss.send_request(TOPIC, queue_id, body), timeout=20)
        return response.code, time.monotonic() - began
    finally:
        await client.close()


def test_sync_master_answers_after_the_slave_has_the_record(tmp_path: Path) -> None:
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, master_ha = ha_broker(tmp_path, "master", role="SYNC_MASTER",
                                      namesrv_addr=namesrv.address,
                                      slaveTimeout=SYNC_FLUSH_TIMEOUT_MS)
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             haMasterAddress=f"127.0.0.1:{master_ha}")
        with ss.running(master, slave):
            asyncio.run(create_topic(master.address))
            wait_for(lambda: "HAClient connected to master" in slave.log(), 30,
                     "the slave to connect")

            async def produce() -> None:
                producer = AsyncProducer("sync_master_pg", namesrv_addr=namesrv.address)
                await producer.start()
                try:
                    for i in range(40):
                        body = f"sync-{i:04d}-".encode() + b"x" * (100 + i)
                        result = await producer.send(Message(TOPIC, body))
                        assert result.send_status is SendStatus.SEND_OK
                        # already in the slave's CommitLog when SEND_OK comes back
                        assert body in commit_log_bytes(tmp_path / "slave"), i
                    batch = [Message(TOPIC, f"batch-{i:03d}-".encode() * 20) for i in range(10)]
                    result = await producer.send_batch(batch)
                    assert result.send_status is SendStatus.SEND_OK
                    slave_log = commit_log_bytes(tmp_path / "slave")
                    assert all(m.body in slave_log for m in batch)

                    # a stalled slave: FLUSH_SLAVE_TIMEOUT after slaveTimeout, stored
                    os.kill(slave.pid, signal.SIGSTOP)
                    try:
                        began = time.monotonic()
                        stalled = Message(TOPIC, b"while-the-slave-sleeps" * 10)
                        result = await producer.send(stalled, timeout=20)
                        took = time.monotonic() - began
                    finally:
                        os.kill(slave.pid, signal.SIGCONT)
                    assert result.send_status is SendStatus.FLUSH_SLAVE_TIMEOUT
                    assert took >= SYNC_FLUSH_TIMEOUT_MS / 1000 * 0.9
                    assert result.queue_offset >= 0 and result.offset_msg_id
                    # awake again, it has the record and the next send is SEND_OK
                    wait_for(lambda: stalled.body in commit_log_bytes(tmp_path / "slave"), 30,
                             "the slave to take the record after SIGCONT")
                    result = await producer.send(Message(TOPIC, b"after-the-stall" * 10))
                    assert result.send_status is SendStatus.SEND_OK
                finally:
                    await producer.shutdown()

            asyncio.run(produce())

            # the runtime info tells the roles, the slave's acknowledged offset and lag
            master_info = asyncio.run(runtime_info(master.address))
            assert master_info["brokerRole"] == "SYNC_MASTER"
            assert master_info["haSlaveCount"] == "1"
            acks = {k: v for k, v in master_info.items() if k.startswith("haSlaveAckOffset_")}
            assert list(acks.values()) == [master_info["commitLogMaxOffset"]]
            assert master_info["haPush2SlaveMaxOffset"] == master_info["commitLogMaxOffset"]
            lags = [v for k, v in master_info.items() if k.startswith("haSlaveLagBytes_")]
            assert lags == ["0"]
            lags_ms = [v for k, v in master_info.items() if k.startswith("haSlaveLagMs_")]
            assert lags_ms == ["0"]
            # rocketstore stat shows them beside the store (JSON and text)
            shown = CliRunner().invoke(cli_main, ["stat", str(tmp_path / "master"), "--json",
                                                  "-b", master.address])
            assert shown.exit_code == 0, shown.output
            replication = json.loads(shown.output)["replication"]
            assert replication["role"] == "SYNC_MASTER"
            [follower] = replication["slaves"]
            assert (follower["lagBytes"], follower["lagMs"]) == (0, 0)
            assert follower["ackOffset"] == int(master_info["commitLogMaxOffset"])
            shown = CliRunner().invoke(cli_main, ["stat", str(tmp_path / "master"),
                                                  "-b", master.address])
            assert f"replication    broker {master.address}: SYNC_MASTER" in shown.output
            assert ", lag 0 bytes, 0 ms" in shown.output
            slave_info = asyncio.run(runtime_info(slave.address))
            assert slave_info["brokerRole"] == "SLAVE"
            assert slave_info["haMasterAddress"] == f"127.0.0.1:{master_ha}"
            assert slave_info["haMasterConnected"] == "true"
            assert slave_info["haReplicaOffset"] == master_info["commitLogMaxOffset"]

            # the slave goes: SLAVE_NOT_AVAILABLE at once, the message stored all the same
            slave.stop()
            wait_for(lambda: "disconnected" in master.log(), 30,
                     "the master to see the slave go")
            code, took = asyncio.run(raw_send(master.address, b"no-slave-left" * 10))
            assert code == ResponseCode.SLAVE_NOT_AVAILABLE
            assert took < SYNC_FLUSH_TIMEOUT_MS / 1000
            wait_for(lambda: b"no-slave-left" * 10 in asyncio.run(pull_all(master.address, 0)),
                     10, "the message to be dispatched")


async def runtime_info(address: str) -> dict[str, str]:
    client = RemotingClient()
    try:
        response = await client.invoke(
            address, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=10)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return json.loads(response.body)["table"]
    finally:
        await client.close()


@pytest.mark.parametrize(("role", "flush", "want"), [
    ("ASYNC_MASTER", "ASYNC_FLUSH", ResponseCode.SUCCESS),
    ("SYNC_MASTER", "SYNC_FLUSH", ResponseCode.SLAVE_NOT_AVAILABLE),
])
def test_without_a_slave(tmp_path: Path, role: str, flush: str, want: int) -> None:
    """ASYNC_MASTER answers at once; SYNC_MASTER (with SYNC_FLUSH: both conditions, as
    RocketMQ's thenCombine) answers SLAVE_NOT_AVAILABLE once flushed, the message stored."""
    master, _ = ha_broker(tmp_path, "master", role=role, flushDiskType=flush,
                          syncFlushTimeout=SYNC_FLUSH_TIMEOUT_MS)
    with ss.running(master):
        asyncio.run(create_topic(master.address))
        for i in range(3):
            code, took = asyncio.run(raw_send(master.address, f"alone-{i}".encode(), 0))
            assert code == want
            assert took < SYNC_FLUSH_TIMEOUT_MS / 1000
        wait_for(lambda: asyncio.run(pull_all(master.address, 0))
                 == [f"alone-{i}".encode() for i in range(3)], 10, "the messages to be dispatched")


CPP_SEND = r'''
import sys
from rocketmq.client import Message, Producer
producer = Producer("cpp_sync_master_pg", timeout=20000)
producer.set_namesrv_addr(sys.argv[1])
producer.start()
msg = Message(sys.argv[2])
msg.set_body(b"cpp-not-confirmed")
try:
    print("status", int(producer.send_sync(msg).status), flush=True)
except Exception as exc:
    print("raised", type(exc).__name__, str(exc).split(",")[0], flush=True)
producer.shutdown()
'''


def test_cpp_client_on_slave_not_available(tmp_path: Path) -> None:
    """RocketMQ's C++ client (rocketmq 0.4.4, its core 2.x) takes a reply that is not
    SEND_OK (SLAVE_NOT_AVAILABLE here) as a failed attempt: it tries again (the broker stores
    each attempt) and, its retries spent, raises "No route info of this topic", whatever
    broker answered so."""
    why = rocketmq_usable()
    if why is not None:
        pytest.skip(why)
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, _ = ha_broker(tmp_path, "master", role="SYNC_MASTER", namesrv_addr=namesrv.address)
        with ss.running(master):
            asyncio.run(create_topic(master.address))
            wait_for(lambda: asyncio.run(route_addrs(namesrv.address)) == {"0": master.address},
                     30, "the topic's route")
            home = tmp_path / "cpp-home"
            home.mkdir()
            result = subprocess.run([sys.executable, "-c", CPP_SEND, namesrv.address, TOPIC],
                                    capture_output=True, text=True, timeout=120,
                                    env=ss.child_env(HOME=str(home)))
            stored: list[bytes] = []

            def dispatched() -> bool:
                stored[:] = [b for q in range(QUEUES) for b in asyncio.run(pull_all(master.address, q))]
                return bool(stored)

            wait_for(dispatched, 10, "the attempts to be dispatched")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[0] == \
        "raised ProducerSendSyncFailed No route info of this topic: HaTopic", result.stdout
    assert stored and set(stored) == {b"cpp-not-confirmed"}
