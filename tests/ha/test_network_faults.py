"""Network faults between replicas, through a proxy the test controls (tests/ha/fault_proxy.py):
brokers and the controller are subprocesses on 127.0.0.1; the proxy sits between a slave's
HAClient and its master's HA port, or between a broker and its controller (controllerAddr is
the proxy).

- replication resumes at the right offset after delay, drop, cut mid-frame (both directions),
  a one-way partition and a refused connection: the slave's CommitLog is byte-identical to the
  master's, its ConsumeQueue units too, every message once;
- SYNC_MASTER answers FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE where RocketMQ 4.9.8 does
  (CommitLog.submitReplicaRequest, HAService.isSlaveOK, GroupTransferService: slaveTimeout);
- a master cut off from the controller (one way) cannot acknowledge sends once the controller
  replaced it: two masters never acknowledge the same queue offsets;
- fuzzed HA frames injected into a live connection, both directions, crash neither side;
  in one process, mutated frame streams never put a foreign byte in a slave's CommitLog.

In-process tests beside them: the proxy itself, isSlaveOK's boundary, a report past what was
sent, an unanswered SyncStateSet change, ReplicasManager.settle stopped early.
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from fault_proxy import FaultProxy, ha_frame_length, ha_report_length, remoting_frame_length
from ha_servers import (
    QUEUES,
    TOPIC,
    commit_log_bytes,
    controller_namesrv,
    ha_broker,
    replica,
    run,
    send_many,
    ss,
    wait_for,
)
from ports import free_port
from test_controller_failover import sync_state
from test_replication import assert_same, call, read_store, replicated
from test_sync_master import runtime_info

from rocketstore import MessageStore
from rocketstore.ha import MAX_FRAME_BODY, HAService
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.store import SIDE_FILE_PREFIX

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")

#: short HA timers: a silent peer is dropped after 2 s
HA_TIMERS = {"haSendHeartbeatInterval": 500, "haHousekeepingInterval": 2000}
SLAVE_TIMEOUT_MS = 1000
OK = ResponseCode.SUCCESS


def send_request(body: bytes, queue_id: int, *, wait: bool = True):  # noqa: ANN201
    """SEND_MESSAGE_V2 as a Java producer sends it; wait=False is WAIT=false (RocketMQ's
    waitStoreMsgOK: the reply waits neither for the flush nor for a slave)."""
    return create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "faults_pg", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0",
        "i": f"WAIT\x01{'true' if wait else 'false'}\x02", "j": "0", "k": "false",
        "m": "false"}, body)


async def send(client: RemotingClient, address: str, body: bytes, queue_id: int = 0, *,
               wait: bool = True) -> tuple[int, int, float]:
    """One send: (response code, queue offset or -1, seconds it took)."""
    began = time.monotonic()
    response = await client.invoke(address, send_request(body, queue_id, wait=wait), timeout=20)
    fields = response.ext_fields or {}
    return response.code, int(fields.get("queueOffset", -1)), time.monotonic() - began


def send_once(address: str, body: bytes, queue_id: int = 0, *, wait: bool = True
              ) -> tuple[int, int, float]:
    async def go() -> tuple[int, int, float]:
        client = RemotingClient()
        try:
            return await send(client, address, body, queue_id, wait=wait)
        finally:
            await client.close()
    return run(go())


async def create_topic(*addresses: str) -> None:
    client = RemotingClient()
    try:
        for address in addresses:
            await ss.create_topic(client, address, TOPIC, QUEUES)
    finally:
        await client.close()


def queue_units(root: Path, queue_id: int) -> bytes:
    """The ConsumeQueue files of (TOPIC, queue_id) back to back."""
    directory = root / "consumequeue" / TOPIC / str(queue_id)
    if not directory.exists():
        return b""
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir(), key=lambda p: p.name))


def topic_bodies(root: Path) -> list[bytes]:
    with read_store(root) as store:
        return [bytes(m.body) for m in store.scan(0) if m.topic == TOPIC]


def check_replicated(root: Path, sent: list[bytes] | None = None,
                     keys: tuple[str, ...] = ()) -> None:
    """The slave caught up; its CommitLog is byte-identical to the master's, its ConsumeQueue
    units and index answers the same; every message once, in the master's order."""
    master, slave = root / "master", root / "slave"
    wait_for(lambda: replicated(master, slave), 60, "the slave to catch up")
    assert_same(master, slave, 0, list(keys))
    with read_store(master) as m:
        counts = [m.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)]
    for queue_id, count in enumerate(counts):
        want = queue_units(master, queue_id)[:count * 20]
        assert len(want) == count * 20
        assert queue_units(slave, queue_id)[:count * 20] == want, f"queue {queue_id}"
    bodies = topic_bodies(slave)
    assert bodies == topic_bodies(master)
    assert len(set(bodies)) == len(bodies), "a message twice"
    if sent is not None:
        assert sorted(bodies) == sorted(sent)


@contextmanager
def proxied_pair(tmp_path: Path, role: str = "ASYNC_MASTER", **master_properties: object
                 ) -> Iterator[tuple[ss.Server, ss.Server, FaultProxy]]:
    """A master, a slave whose haMasterAddress is a fault proxy in front of the master's HA
    port, the topic created, the slave connected."""
    master, master_ha = ha_broker(tmp_path, "master", role=role, **HA_TIMERS,
                                  **master_properties)
    proxy = FaultProxy(f"127.0.0.1:{master_ha}", up=ha_report_length,
                       down=ha_frame_length).start()
    slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                         haMasterAddress=proxy.address, **HA_TIMERS)
    try:
        master.start()
        slave.start()
        # the slave's topic table too (no name server: no SlaveSynchronize), for its pulls
        run(create_topic(master.address, slave.address))
        wait_for(lambda: "HAClient connected to master" in slave.log(), 30, "the slave to connect")
        yield master, slave, proxy
    finally:
        slave.stop()
        proxy.stop()
        master.stop()


def sends(master: ss.Server, count: int, first: int) -> list[bytes]:
    return run(send_many(master.address, count, first=first))


def test_the_fault_proxy_does_what_it_says() -> None:
    """The proxy itself, against a peer streaming HA frames: a drop loses whole frames, a cut
    leaves exactly n bytes of a frame, a delay holds each chunk, a partition is one way."""
    frames = [struct.pack(">qi", i * 100, 100) + bytes([i]) * 100 for i in range(40)]
    got_up: list[bytes] = []

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"".join(frames[:10]))
        await writer.drain()
        got_up.append(await reader.read(100))
        for frame in frames[10:]:
            writer.write(frame)
            await writer.drain()
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(peer, "127.0.0.1", 0)
        target = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        with FaultProxy(target, down=ha_frame_length) as proxy:
            # frames 10.. arrive while the drop is on for a while: whole frames go missing
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await reader.readexactly(10 * 112) == b"".join(frames[:10])
            proxy.down.drop = True
            writer.write(b"go")
            await asyncio.sleep(0.15)
            proxy.heal()
            rest = await reader.read()
            assert rest and len(rest) % 112 == 0 and proxy.down.dropped % 112 == 0
            assert proxy.down.dropped > 0
            offsets = [struct.unpack_from(">q", rest, i)[0] for i in range(0, len(rest), 112)]
            assert offsets == sorted(offsets) and offsets[-1] == 3900
            assert got_up == [b"go"]
            # a cut 50 bytes into a frame; a one-way partition; a delay
            proxy.cut_mid_frame("down", 50)
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await reader.read() == frames[0][:50] and proxy.down.cuts == 1
            proxy.partition("up")
            proxy.down.delay_ms = 300
            got_up.clear()
            began = time.monotonic()
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"lost")
            assert await reader.readexactly(112) == frames[0]
            assert time.monotonic() - began >= 0.3
            await asyncio.sleep(0.2)
            # (an empty read is the cut connection's end)
            assert not b"".join(got_up) and proxy.up.dropped == 4
            writer.close()
        server.close()
    run(asyncio.wait_for(scenario(), 30))


def test_replication_resumes_at_the_right_offset_after_each_fault(tmp_path: Path) -> None:
    with proxied_pair(tmp_path) as (master, slave, proxy):
        sent = sends(master, 100, 0)
        check_replicated(tmp_path, sent, ("k0", "k99"))

        # delay both ways
        proxy.up.delay_ms = proxy.down.delay_ms = 150
        sent += sends(master, 150, len(sent))
        check_replicated(tmp_path, sent)
        proxy.heal()

        # the connection cut 5000 bytes into a frame of records, then 7 bytes into a header
        for cut in (5000, 7):
            proxy.cut_mid_frame("down", cut)
            sent += sends(master, 150, len(sent))
            wait_for(lambda: proxy.down.cut_at is None, 20, f"the cut at {cut}")
            check_replicated(tmp_path, sent)
            assert f"end of stream ({cut} bytes of a frame read)" in slave.log()

        # a report cut after 3 of its 8 bytes
        proxy.cut_mid_frame("up", 3)
        wait_for(lambda: proxy.up.cut_at is None, 20, "the report cut")
        sent += sends(master, 100, len(sent))
        check_replicated(tmp_path, sent)
        assert "end of stream inside a report (3 of 8 bytes)" in master.log()

        # frames discarded while the master streams: when they flow again the slave finds the
        # gap and connects again from its end
        proxy.down.drop = True
        sent += sends(master, 150, len(sent))
        wait_for(lambda: proxy.down.dropped > 20_000, 20, "frames to be dropped")
        proxy.heal()
        check_replicated(tmp_path, sent)
        assert "master pushed offset not equal the max phy offset in slave" in slave.log()

        # one-way partition: the reports are lost longer than haHousekeepingInterval, the
        # frames still go; the master drops the silent slave, which connects again
        connections = proxy.accepted
        proxy.partition("up")
        sent += sends(master, 150, len(sent))
        wait_for(lambda: "expired" in master.log(), 20, "the master to drop the silent slave")
        proxy.heal()
        wait_for(lambda: proxy.accepted > connections, 20, "the slave to connect again")
        check_replicated(tmp_path, sent)

        # no connection at all for a while
        proxy.refuse = True
        proxy.reset()
        sent += sends(master, 100, len(sent))
        time.sleep(1)
        proxy.heal()
        check_replicated(tmp_path, sent, ("k0", f"k{len(sent) - 1}"))
        assert master.running and slave.running


# ---- SYNC_MASTER's statuses --------------------------------------------------------------------

def runtime_table(address: str) -> dict[str, str]:
    return run(runtime_info(address))


def test_sync_master_statuses_under_faults(tmp_path: Path) -> None:
    """FLUSH_SLAVE_TIMEOUT after slaveTimeout when the slave's acknowledgement does not come
    (its reports lost, or the frames lost); SLAVE_NOT_AVAILABLE at once when the slave is
    haSlaveFallbehindMax or more behind, or none is connected; each message stored all the
    same. SEND_OK again once the fault is gone."""
    fallbehind = 64 * 1024
    with proxied_pair(tmp_path, "SYNC_MASTER", slaveTimeout=SLAVE_TIMEOUT_MS,
                      syncFlushTimeout=20_000, haSlaveFallbehindMax=fallbehind) as (
            master, slave, proxy):
        address, timeout_s = master.address, SLAVE_TIMEOUT_MS / 1000
        stored: list[bytes] = []

        def one(body: bytes, *, wait: bool = True) -> tuple[int, float]:
            code, _, took = send_once(address, body, len(stored) % QUEUES, wait=wait)
            stored.append(body)
            return code, took

        assert one(b"healthy")[0] == OK
        assert b"healthy" in commit_log_bytes(tmp_path / "slave")

        # the slave's acknowledgements lost: it has the record, the master does not know
        proxy.partition("up")
        code, took = one(b"acks-lost" * 10)
        assert code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        # the slave's timeout, not syncFlushTimeout (RocketMQ 4.9.8)
        assert timeout_s * 0.9 <= took < timeout_s + 3
        assert b"acks-lost" * 10 in commit_log_bytes(tmp_path / "slave")
        proxy.heal()
        assert one(b"acks-back")[0] == OK

        # the frames lost: the slave never gets the record
        proxy.partition("down")
        code, took = one(b"frames-lost" * 10)
        assert code == ResponseCode.FLUSH_SLAVE_TIMEOUT and took >= timeout_s * 0.9
        assert b"frames-lost" * 10 not in commit_log_bytes(tmp_path / "slave")
        # sends that do not wait (WAIT=false) are answered at once, whatever the slave
        while True:
            code, took = one(f"no-wait-{len(stored):04d}-".encode() + b"w" * 4000, wait=False)
            assert code == OK and took < timeout_s
            table = runtime_table(address)
            if int(table["commitLogMaxOffset"]) - int(table["haPush2SlaveMaxOffset"]) \
                    >= fallbehind:
                break
        # haSlaveFallbehindMax or more behind: SLAVE_NOT_AVAILABLE without waiting
        code, took = one(b"too-far-behind")
        assert code == ResponseCode.SLAVE_NOT_AVAILABLE and took < timeout_s
        proxy.heal()
        wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 30,
                 "the slave to catch up after the frames came back")
        assert one(b"caught-up")[0] == OK

        # no slave connected: SLAVE_NOT_AVAILABLE at once
        proxy.refuse = True
        proxy.reset()
        wait_for(lambda: runtime_table(address)["haSlaveCount"] == "0", 20,
                 "the master to see the slave go")
        code, took = one(b"no-slave")
        assert code == ResponseCode.SLAVE_NOT_AVAILABLE and took < timeout_s
        assert one(b"no-slave-no-wait", wait=False)[0] == OK
        proxy.heal()
        wait_for(lambda: runtime_table(address)["haSlaveCount"] == "1", 30,
                 "the slave to connect again")
        wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 30,
                 "the slave to catch up")
        assert one(b"back-again")[0] == OK
        check_replicated(tmp_path, stored)


class FakeConnection:
    """What HAService reads of a connected slave."""

    def __init__(self, address: str, ack_offset: int) -> None:
        self.state = SimpleNamespace(address=address, ack_offset=ack_offset)


def test_is_slave_ok_is_rocketmqs_boundary(tmp_path: Path) -> None:
    """HAService.isSlaveOK as RocketMQ 4.9.8's: a connected slave, and masterPutWhere minus
    the best acknowledged offset strictly below haSlaveFallbehindMax."""
    from helpers import make_config

    config = make_config(tmp_path / "m")
    store = MessageStore.open(tmp_path / "m", config)
    try:
        service = HAService(store, port=0)
        limit = store.config.ha_slave_fallbehind_max
        assert not service.is_slave_ok(0)
        slow, fast = FakeConnection("a:1", 1000), FakeConnection("b:1", 5000)
        service.connections.update({slow, fast})       # type: ignore[arg-type]
        assert service.is_slave_ok(5000 + limit - 1)    # the best slave counts
        assert not service.is_slave_ok(5000 + limit)
        service.connections.discard(fast)               # type: ignore[arg-type]
        assert service.is_slave_ok(1000 + limit - 1) and not service.is_slave_ok(1000 + limit)
    finally:
        store.shutdown()


def test_master_refuses_an_acknowledgement_of_bytes_it_never_sent(tmp_path: Path) -> None:
    """A report past what the connection sent (a stream out of step, a lying peer) ends the
    connection and is not counted: SYNC_MASTER would otherwise answer sends no slave has."""
    from helpers import make_config

    from rocketstore import Message

    store = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    for i in range(50):
        assert store.put_message(Message(topic="T", body=b"x" * 300, keys=[f"k{i}"]), 0).ok
    end = store.get_max_phy_offset()

    async def scenario() -> None:
        service = HAService(store, port=0)
        await service.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
            writer.write(struct.pack(">q", 0))
            sent = 0
            while sent < end:
                offset, size = struct.unpack(">qi", await reader.readexactly(12))
                await reader.readexactly(size)
                sent = offset + size
            writer.write(struct.pack(">q", sent))       # honest: counted
            await asyncio.sleep(0.2)
            assert service.max_ack_offset() == sent
            writer.write(struct.pack(">q", sent + 1))   # one byte more than it was sent
            assert await asyncio.wait_for(reader.read(), 5) == b""
            assert not service.connections and service.max_ack_offset() == -1
            writer.close()
        finally:
            await service.stop()
    try:
        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        store.shutdown()


def test_an_unanswered_sync_state_set_change_waits_for_both_sets(tmp_path: Path) -> None:
    """A master asks the controller to add replica 3 and the answer is lost (the request may
    have been applied): until the controller's word comes, SYNC_MASTER waits for replica 3
    too, as RocketMQ 5's master does while synchronizing the set; otherwise it could
    acknowledge a send replica 3 lacks while the controller, counting 3 in sync, may elect
    it. A refusal drops the proposal; the controller's answer replaces both."""
    import io
    import json

    from helpers import make_config

    from rocketstore.broker.config import BrokerConfig
    from rocketstore.broker.replicas_manager import ReplicasManager
    from rocketstore.ha import SyncStateSet
    from rocketstore.remoting import create_response

    store = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    answers: list[object] = []

    class Controller:
        """The controller as the broker's RemotingClient sees it: the next scripted answer."""

        async def invoke(self, address: str, request, timeout: float):  # noqa: ANN001, ANN202
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            code, body = answer     # type: ignore[misc]
            return create_response(request, code, "scripted", None, json.dumps(body).encode())

    try:
        service = HAService(store, port=0)
        service.connections.update({FakeConnection("10.0.0.2:1", 5000),    # type: ignore[arg-type]
                                    FakeConnection("10.0.0.3:1", 3000)})
        sss = SyncStateSet(service, 1, members={1, 2}, epoch=4, master_epoch=1,
                           epoch_start_offset=0, max_time_not_catchup_ms=3000)
        replicas = [{"brokerId": 2, "haClientAddress": "10.0.0.2:1"},
                    {"brokerId": 3, "haClientAddress": "10.0.0.3:1"}]
        sss.update([1, 2], 4, replicas)
        service.sync_state_set = sss
        config = BrokerConfig.from_properties(io.StringIO(
            "brokerId=1\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:9\n"))
        manager = ReplicasManager(config, Controller(), str(tmp_path / "m"))  # type: ignore[arg-type]
        assert service.acknowledged_offset() == 5000

        async def alter() -> None:
            await manager._alter(sss, {1, 2, 3})
        answers.append(asyncio.TimeoutError("the answer is lost"))
        run(alter())
        assert sss.members == {1, 2} and service.acknowledged_offset() == 3000
        assert not service.is_acknowledged(4000)
        answers.append((ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, {}))
        run(alter())
        assert service.acknowledged_offset() == 5000
        answers.append((ResponseCode.SUCCESS, {"syncStateSet": [1, 2, 3],
                                               "syncStateSetEpoch": 5, "replicas": replicas}))
        run(alter())
        assert sss.members == {1, 2, 3} and sss.epoch == 5
        assert service.acknowledged_offset() == 3000
    finally:
        store.shutdown()


# ---- a master cut off from the controller ------------------------------------------------------

@pytest.mark.slow
def test_a_master_cut_off_from_the_controller_cannot_acknowledge(tmp_path: Path) -> None:
    """Replica 1 (SYNC_MASTER) loses its way to the controller, one way (its requests are
    discarded; its HA port and the name server stay reachable). The controller elects replica
    2; replica 1 still takes sends but acknowledges none (its SyncStateSet's slave left it and
    it cannot shrink the set); healed, it follows replica 2 and cuts what it had alone. Every
    SEND_OK of either master is in the new master's queue at its offset; no queue offset
    acknowledged twice."""
    namesrv = controller_namesrv(tmp_path).start()
    proxies = [FaultProxy(namesrv.address, up=remoting_frame_length,
                          down=remoting_frame_length).start() for _ in (1, 2)]
    brokers: list[ss.Server] = []
    try:
        for i, proxy in enumerate(proxies, 1):
            server, _ = replica(tmp_path, f"b{i}", i, namesrv.address,
                                controllerAddr=proxy.address, brokerRole="SYNC_MASTER",
                                slaveTimeout=SLAVE_TIMEOUT_MS)
            brokers.append(server.start())
            if i == 1:
                wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] == 1, 15,
                         "master 1")
        wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2], 15,
                 "replica 2 in the SyncStateSet")
        run(create_topic(*(b.address for b in brokers)))

        # (broker, code, queue, queue offset, body, time) of every send, both brokers at once
        replies: list[tuple[int, int, int, int, bytes, float]] = []
        stop = threading.Event()

        async def sender(broker: int) -> None:
            client = RemotingClient()
            try:
                n = 0
                while not stop.is_set():
                    body = f"b{broker}-{n:05d}-".encode() * 8
                    queue_id = n % QUEUES
                    try:
                        code, offset, _ = await send(client, brokers[broker - 1].address,
                                                     body, queue_id)
                    except Exception:   # noqa: BLE001 - a broker switching roles
                        code, offset = -1, -1
                        await asyncio.sleep(0.1)
                    replies.append((broker, code, queue_id, offset, body, time.monotonic()))
                    if code != OK:
                        await asyncio.sleep(0.02)
                    n += 1
            finally:
                await client.close()

        async def both() -> None:
            await asyncio.gather(sender(1), sender(2))
        thread = threading.Thread(target=lambda: run(both()), daemon=True)
        thread.start()
        try:
            wait_for(lambda: sum(r[0] == 1 and r[1] == OK for r in replies) >= 20, 20,
                     "SEND_OKs from master 1")
            # the master's controller answers slow and one cut mid-frame: no failover
            before = sync_state(namesrv.address)
            proxies[0].down.delay_ms = 200
            proxies[0].cut_mid_frame("down", 10)
            wait_for(lambda: proxies[0].down.cut_at is None, 20, "an answer cut")
            time.sleep(1.5)
            proxies[0].heal()
            after = sync_state(namesrv.address)
            assert (after["masterBrokerId"], after["masterEpoch"]) == \
                (1, before["masterEpoch"])
            proxies[0].partition("up")      # replica 1's requests to the controller are lost
            wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] == 2, 20,
                     "the controller to elect replica 2")
            elected = time.monotonic()
            wait_for(lambda: any(r[0] == 2 and r[1] == OK for r in replies), 20,
                     "SEND_OKs from master 2")
            # replica 1 still a master to its producers for a while: it must not acknowledge
            time.sleep(4)
            assert "controller heartbeat" in brokers[0].log()
            proxies[0].heal()
            wait_for(lambda: "changes role" in brokers[0].log(), 30,
                     "replica 1 to learn it is no longer the master")
            time.sleep(1)
        finally:
            stop.set()
            thread.join(60)
        assert not thread.is_alive()

        ok = [r for r in replies if r[1] == OK]
        by_broker = {b: {(q, o) for (broker, _, q, o, _, _) in ok if broker == b} for b in (1, 2)}
        assert by_broker[1] and by_broker[2]
        assert not by_broker[1] & by_broker[2], "two masters acknowledged the same offsets"
        # the partitioned old master took sends after the election and acknowledged none
        late = [r for r in replies if r[0] == 1 and r[5] > elected + SLAVE_TIMEOUT_MS / 1000 + 1]
        assert any(r[1] == ResponseCode.FLUSH_SLAVE_TIMEOUT for r in late), \
            sorted({r[1] for r in late})
        assert not [r for r in late if r[1] == OK]

        # replica 1 follows replica 2: its CommitLog the same, the tail it had alone cut
        def end_of(root: Path) -> int:
            with read_store(root) as store:
                return store.get_max_phy_offset()
        wait_for(lambda: end_of(tmp_path / "b1") == end_of(tmp_path / "b2"), 30,
                 "replica 1 to converge")
        end = end_of(tmp_path / "b2")
        assert commit_log_bytes(tmp_path / "b1")[:end] == commit_log_bytes(tmp_path / "b2")[:end]
        assert list((tmp_path / "b1").glob(f"{SIDE_FILE_PREFIX}*")), brokers[0].log()[-3000:]
        # every acknowledged message is in the new master's queue at its offset
        with read_store(tmp_path / "b2") as store:
            for broker, _, queue_id, offset, body, _ in ok:
                got = store.get_message("g", TOPIC, queue_id, offset, 1).messages
                assert got and got[0].body == body, (broker, queue_id, offset)
    finally:
        for b in brokers:
            b.stop()
        for p in proxies:
            p.stop()
        namesrv.stop()


def test_settle_stopped_before_a_master_is_named_closes_the_store(tmp_path: Path) -> None:
    """ReplicasManager.settle with no controller answering, the broker stopping: it ends with
    ControllerUnavailable and the store it opened is shut down."""
    import io

    from rocketstore.broker.config import BrokerConfig
    from rocketstore.broker.replicas_manager import ControllerUnavailable, ReplicasManager

    config = BrokerConfig.from_properties(io.StringIO(
        f"brokerId=1\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:{free_port()}\n"
        f"storePathRootDir={tmp_path / 'b'}\n"))
    opened: list[MessageStore] = []

    def open_store(role: str, master_ha: str | None) -> MessageStore:
        from helpers import make_config
        opened.append(MessageStore.open(tmp_path / "b", make_config(
            tmp_path / "b", broker_role=role)))
        return opened[-1]

    async def scenario() -> None:
        client = RemotingClient()
        stopping = asyncio.Event()
        stopping.set()
        try:
            manager = ReplicasManager(config, client, str(tmp_path / "b"))
            with pytest.raises(ControllerUnavailable, match="stopped before"):
                await manager.settle(open_store, stopping)
        finally:
            await client.close()
    run(scenario())
    assert len(opened) == 1 and not opened[0].is_running


# ---- fuzzed HA frames, both directions ---------------------------------------------------------

@pytest.mark.slow
def test_fuzzed_frames_both_ways_crash_neither_side(tmp_path: Path) -> None:
    """Bad frames injected into a live HA connection: to the slave (bad phyOffset, bodySize,
    a partial header, garbage) and to the master (negative, unsent and out-of-step reports,
    garbage). Each ends the connection with a log line; both sides keep serving, replication
    resumes, and no send is acknowledged for bytes the slave does not have."""
    rnd = random.Random(2027)
    to_slave = [struct.pack(">qi", -1, 0), struct.pack(">qi", 2**62, 0),
                struct.pack(">qi", 0, -1), struct.pack(">qi", 0, 2**31 - 1),
                struct.pack(">qi", 0, MAX_FRAME_BODY + 1), b"\x00" * 5,
                struct.pack(">qi", 12345, 4) + b"abcd",
                *(rnd.randbytes(rnd.randrange(1, 400)) for _ in range(4))]
    to_master = [struct.pack(">q", -5), struct.pack(">q", 10**15), b"\x01\x02\x03",
                 *(rnd.randbytes(rnd.randrange(1, 64)) for _ in range(4))]
    with proxied_pair(tmp_path, "SYNC_MASTER", slaveTimeout=SLAVE_TIMEOUT_MS) as (
            master, slave, proxy):
        stored: list[bytes] = []
        cases = [("down", p) for p in to_slave] + [("up", p) for p in to_master]
        for n, (direction, payload) in enumerate(cases):
            wait_for(lambda: proxy.connections == 1, 30, "the slave connected")
            accepted = proxy.accepted
            assert proxy.inject(direction, payload) == 1
            body = f"fuzz-{n:03d}-".encode() * 10
            code, _, _ = send_once(master.address, body, n % QUEUES)
            stored.append(body)
            if code == OK:      # acknowledged: the slave has it
                assert body in commit_log_bytes(tmp_path / "slave"), (direction, payload)
            wait_for(lambda accepted=accepted: proxy.accepted > accepted or replicated(
                tmp_path / "master", tmp_path / "slave"), 30, "the connection to go on")
        # an acknowledgement of bytes never sent to the slave (its frames lost meanwhile)
        proxy.partition("down")
        proxy.inject("up", struct.pack(">q", 10**12))
        time.sleep(0.3)     # the master has read it
        body = b"never-on-the-slave" * 5
        code, _, _ = send_once(master.address, body)
        stored.append(body)
        assert code != OK
        proxy.heal()
        # both still serve: sends acknowledged again, the slave answers pulls
        wait_for(lambda: replicated(tmp_path / "master", tmp_path / "slave"), 30,
                 "the slave to catch up")
        stored += run(send_many(master.address, 40, first=10_000))
        assert master.running and slave.running
        check_replicated(tmp_path, stored)
        response = run(call(slave.address, ss.pull_request(TOPIC, 0, 0, "fuzz_cg")))
        assert response.code == OK and ss.record_bodies(response.body)
    master_log, slave_log = master.log(), slave.log()
    for expected in ("frame phyOffset -1", "frame bodySize -1", "frame bodySize 2147483647",
                     f"frame bodySize {MAX_FRAME_BODY + 1}", "master pushed offset not equal"):
        assert expected in slave_log, expected
    for expected in ("slave reported a negative offset -5",
                     "slave reported offset 1000000000000000, past the"):
        assert expected in master_log, expected



def test_slave_frame_parser_under_mutated_streams(tmp_path: Path) -> None:
    """In one process, seeded: the master's real frames with one fault each, fed to the
    slave's MasterStream in random pieces. Only protocol errors (ValueError) end a stream.
    With the faults a connection can bring (a frame lost, a frame twice, the stream cut
    anywhere, bytes between frames) the slave's CommitLog is always a prefix of the
    master's: nothing skipped, nothing twice, nothing foreign. A header whose bodySize is
    wrong but in range cannot be told from a right one (the protocol has no checksum; TCP
    keeps a connection's bytes intact): there only the store's own consistency is checked."""
    from helpers import make_config

    from rocketstore import Message
    from rocketstore.ha.client import HAClient, MasterStream

    rnd = random.Random(27)
    master = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    for i in range(300):
        assert master.put_message(Message(topic="T", body=rnd.randbytes(rnd.randrange(1, 600)),
                                          keys=[f"k{i}"]), i % 2).ok
    master_end = master.get_max_phy_offset()
    master_bytes = bytearray()
    while len(master_bytes) < master_end:
        view = master.get_commitlog_data(len(master_bytes))
        assert view is not None
        master_bytes += view
    master.shutdown()
    stores: list[MessageStore] = []

    def new_slave() -> MessageStore:
        root = tmp_path / f"s{len(stores)}"
        stores.append(MessageStore.open(root, make_config(root, broker_role="SLAVE")))
        return stores[-1]

    def stream_from(start: int) -> tuple[bytes, bool]:
        """Frames of the master's bytes from start, one fault among them; whether the slave
        can tell every fault of that kind."""
        frames: list[bytearray] = []
        at = start
        while at < master_end and len(frames) < 12:
            size = min(rnd.randrange(1, 8000), master_end - at)
            frames.append(bytearray(struct.pack(">qi", at, size) + master_bytes[at:at + size]))
            at += size
        frames.append(bytearray(struct.pack(">qi", at, 0)))     # a heartbeat
        k = rnd.randrange(len(frames))
        fault = rnd.randrange(6)
        if fault == 0:      # a header byte changed
            frames[k][rnd.randrange(12)] ^= 1 << rnd.randrange(8)
        elif fault == 1:    # a frame lost
            del frames[k]
        elif fault == 2:    # a frame twice
            frames.insert(k, frames[k])
        elif fault == 3:    # bodySize off
            size = struct.unpack_from(">i", frames[k], 8)[0]
            struct.pack_into(">i", frames[k], 8, max(0, size + rnd.choice((-13, -1, 1, 7, 4096))))
        elif fault == 4:    # garbage between frames
            frames.insert(k, bytearray(rnd.randbytes(rnd.randrange(1, 40))))
        else:               # the stream ends inside a frame
            frames[k] = frames[k][:rnd.randrange(len(frames[k]))]
            del frames[k + 1:]
        return b"".join(frames), fault not in (0, 3)

    async def scenario() -> tuple[int, int]:
        slave = new_slave()
        errors = whole = 0
        for _ in range(250):
            if slave.get_replica_offset() >= master_end:
                slave.shutdown()
                slave = new_slave()
            stream = MasterStream(HAClient(slave))
            data, detectable = stream_from(slave.get_replica_offset())
            pos = 0
            while pos < len(data) and not stream.closed.done():
                piece = data[pos:pos + rnd.randrange(1, 20_000)]
                buffer = stream.get_buffer(len(piece))
                buffer[:len(piece)] = piece
                stream.buffer_updated(len(piece))
                pos += len(piece)
            if stream.closed.done():
                exc = stream.closed.exception()
                assert isinstance(exc, ValueError), repr(exc)
                errors += 1
            else:
                whole += 1
            end = slave.get_max_phy_offset()
            replica_end = slave.get_replica_offset()
            assert end <= replica_end <= master_end
            assert slave.wait_dispatched(5)
            if not detectable:      # a new slave: what follows starts from a true prefix
                slave.shutdown()
                slave = new_slave()
                continue
            got = commit_log_bytes(Path(slave.root))[:replica_end]
            assert got == master_bytes[:replica_end]
        return errors, whole

    try:
        errors, whole = asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:
        for store in stores:
            if store.is_running:
                store.shutdown()
    assert errors > 50 and len(stores) > 1, (errors, whole, len(stores))
