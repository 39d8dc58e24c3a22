"""Master/slave replication between rocketstore brokers (subprocesses on 127.0.0.1): the slave's
CommitLog is byte-identical to the master's over the replicated range, its ConsumeQueues and
index give the same answers, it serves pulls, refuses sends, catches up when started late and
resumes at the right offset after SIGKILL."""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from ha_servers import (
    QUEUES,
    SEGMENT,
    TOPIC,
    commit_log_bytes,
    create_topic,
    ha_broker,
    send_many,
    ss,
    wait_for,
)
from ports import free_port

from rocketstore.config import StoreConfig
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.store import MessageStore

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")


def read_store(root: Path) -> MessageStore:
    return MessageStore.open(root, StoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=60_000, max_hash_slot_num=5000, max_index_num=20000),
        read_only=True)


def replicated(master_root: Path, slave_root: Path) -> bool:
    with read_store(master_root) as master, read_store(slave_root) as slave:
        end = master.get_max_phy_offset()
        return end > 0 and slave.get_max_phy_offset() == end and slave.wait_dispatched(5)


def assert_same(master_root: Path, slave_root: Path, start: int, keys: list[str]) -> None:
    """Byte-identical CommitLogs over [start, end), the same ConsumeQueue answers and index
    lookups over the slave's range."""
    with read_store(master_root) as master, read_store(slave_root) as slave:
        end = master.get_max_phy_offset()
        assert slave.get_max_phy_offset() == end
        assert slave.get_min_phy_offset() == start
        mine = commit_log_bytes(master_root, start)[:end - start]
        assert len(mine) == end - start
        assert commit_log_bytes(slave_root, start)[:end - start] == mine
        # a slave that started late has the queues whose records are in its range, as RocketMQ's
        in_range = Counter(m.queue_id for m in master.scan(start) if m.topic == TOPIC)
        for queue_id in range(QUEUES):
            if not in_range[queue_id]:
                assert slave.get_max_offset_in_queue(TOPIC, queue_id) == 0
                continue
            low = slave.get_min_offset_in_queue(TOPIC, queue_id)
            assert slave.get_max_offset_in_queue(TOPIC, queue_id) == \
                master.get_max_offset_in_queue(TOPIC, queue_id)
            got = slave.get_message("g", TOPIC, queue_id, low, 100_000)
            want = master.get_message("g", TOPIC, queue_id, low, 100_000)
            assert [(m.commitlog_offset, m.queue_offset) for m in got.messages] == \
                [(m.commitlog_offset, m.queue_offset) for m in want.messages]
            assert got.messages and got.messages[0].commitlog_offset >= start
        for key in keys:
            want_hits = [m.commitlog_offset for m in master.query_message(TOPIC, key).messages]
            assert want_hits
            assert [m.commitlog_offset for m in slave.query_message(TOPIC, key).messages] == \
                [o for o in want_hits if o >= start]


async def call(address: str, request):  # noqa: ANN001, ANN201
    client = RemotingClient()
    try:
        return await client.invoke(address, request, timeout=10)
    finally:
        await client.close()


def test_slave_follows_through_the_name_server(tmp_path: Path) -> None:
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, _ = ha_broker(tmp_path, "master", namesrv_addr=namesrv.address)
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             namesrv_addr=namesrv.address)
        with ss.running(master, slave):
            asyncio.run(create_topic(master.address))
            bodies = asyncio.run(send_many(master.address, 3000))
            wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 60,
                     "the slave to catch up")
            with read_store(tmp_path / "master") as m:
                assert m.get_max_phy_offset() > 4 * SEGMENT     # several segments
            assert_same(tmp_path / "master", tmp_path / "slave", 0, ["k0", "k1234", "k2999"])

            # the route names both; the slave serves pulls and refuses sends
            route = asyncio.run(call(namesrv.address, create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})))
            assert route.code == ResponseCode.SUCCESS
            addrs = json.loads(route.body)["brokerDatas"][0]["brokerAddrs"]
            assert addrs == {"0": master.address, "1": slave.address}
            asyncio.run(create_topic(slave.address))
            pulled = asyncio.run(call(slave.address, ss.pull_request(TOPIC, 1, 0, "ha_group")))
            assert pulled.code == ResponseCode.SUCCESS, (pulled.code, pulled.remark)
            assert ss.record_bodies(pulled.body) == [b for i, b in enumerate(bodies)
                                                     if i % QUEUES == 1][:32]
            refused = asyncio.run(call(slave.address, ss.send_request(TOPIC, 0, b"no")))
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
        master_log, slave_log = master.log(), slave.log()
    assert "HAService receive new connection, 127.0.0.1:" in master_log
    assert "request offset 0" in master_log
    assert "HA slave 127.0.0.1:" in master_log and "disconnected" in master_log
    assert "HAClient connected to master" in slave_log


def test_late_slave_catches_up_and_resumes_after_kill(tmp_path: Path) -> None:
    master, master_ha = ha_broker(tmp_path, "master", haSlaveFallbehindMax=65536)
    with ss.running(master):
        asyncio.run(send_many(master.address, 2500))
        with read_store(tmp_path / "master") as m:
            end = m.get_max_phy_offset()
        last_segment = end - end % SEGMENT
        assert last_segment >= 3 * SEGMENT
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             haMasterAddress=f"127.0.0.1:{master_ha}")
        try:
            slave.start()
            wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 60,
                     "the late slave to catch up")
            assert_same(tmp_path / "master", tmp_path / "slave", last_segment, ["k2499"])

            # SIGKILL the slave while the master takes more; it restarts where it was
            done = threading.Event()
            sender = threading.Thread(target=lambda: (asyncio.run(
                send_many(master.address, 2500, first=2500)), done.set()))
            sender.start()
            wait_for(lambda: replicated_beyond(tmp_path / "slave", end + 100_000), 60,
                     "the slave to receive more")
            slave.kill()
            slave.start()
            sender.join(120)
            assert done.is_set()
            wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 60,
                     "the restarted slave to catch up")
            assert_same(tmp_path / "master", tmp_path / "slave", last_segment,
                        ["k2499", "k3000", "k4999"])
        finally:
            slave.stop()
        log = master.log()
    assert "falls behind" in log and "within haSlaveFallbehindMax again" in log


def replicated_beyond(root: Path, offset: int) -> bool:
    with read_store(root) as store:
        return store.get_max_phy_offset() > offset


def test_master_survives_bad_slaves(tmp_path: Path) -> None:
    """Garbage, negative offsets, cut reports and offsets past the end on the HA port: each
    connection is closed with a log line; the master goes on serving a real slave."""
    import socket
    import struct

    master, master_ha = ha_broker(tmp_path, "master")
    with ss.running(master):
        asyncio.run(send_many(master.address, 300))
        rnd = random.Random(27)
        attempts = [b"\xff" * 8, struct.pack(">q", -7), b"\x00\x01\x02",
                    bytes(range(256)) * 40, struct.pack(">q", 10**15),
                    *(rnd.randbytes(rnd.randrange(1, 3000)) for _ in range(20))]
        for payload in attempts:
            with socket.create_connection(("127.0.0.1", master_ha), timeout=5) as sock:
                sock.sendall(payload)
                sock.settimeout(2)
                try:
                    sock.recv(65536)
                except OSError:
                    pass
        slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                             haMasterAddress=f"127.0.0.1:{master_ha}")
        with ss.running(slave):
            wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 60,
                     "a real slave after the bad ones")
        assert master.running
        log = master.log()
    assert "slave reported a negative offset" in log
    assert "end of stream inside a report (3 of 8 bytes)" in log


class FakeMaster:
    """A master that misbehaves once per connection, in order, on a free port."""

    def __init__(self, scripts: list[bytes]) -> None:
        self.scripts = scripts
        self.port = free_port()
        self.reports: list[int] = []
        self.connections = 0
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._one, "127.0.0.1", self.port)
        self.ready.set()
        while not self.stop.is_set():
            await asyncio.sleep(0.05)
        server.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import struct

        index = self.connections
        self.connections += 1
        try:
            self.reports.append(struct.unpack(">q", await reader.readexactly(8))[0])
            writer.write(self.scripts[min(index, len(self.scripts) - 1)])
            await writer.drain()
            await asyncio.sleep(0.3)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def test_slave_survives_a_bad_master(tmp_path: Path) -> None:
    import struct

    scripts = [
        struct.pack(">qi", 0, -5),                          # negative bodySize
        struct.pack(">qi", 0, 100 << 20),                   # too large a body
        struct.pack(">qi", -1, 0),                          # negative phyOffset
        struct.pack(">qi", 12345, 4) + b"abcd",             # not a segment start
        struct.pack(">qi", 0, 200) + b"garbage!" * 25,      # not a record
        struct.pack(">qi", 0, 1000) + b"\x00" * 10,         # cut mid-frame
        random.Random(0).randbytes(600),                    # noise (test_network_faults fuzzes)
    ]
    fake = FakeMaster(scripts)
    fake.thread.start()
    assert fake.ready.wait(10)
    slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                         haMasterAddress=f"127.0.0.1:{fake.port}")
    try:
        with ss.running(slave):
            wait_for(lambda: fake.connections > len(scripts), 60, "the slave to reconnect")
            assert slave.running
            # still serving requests
            response = asyncio.run(call(slave.address, ss.send_request(TOPIC, 0, b"x")))
            assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
            log = slave.log()
    finally:
        fake.stop.set()
    assert set(fake.reports) == {0}         # nothing bad was appended
    for expected in ("frame bodySize -5", "frame bodySize 104857600", "frame phyOffset -1",
                     "an empty CommitLog starts at a segment start",
                     "bytes at CommitLog offset 0 are not a record", "end of stream"):
        assert expected in log, expected
