"""HAService and HAClient in one process against scripted peers: heartbeats both ways when
idle, housekeeping of a silent peer, a slave that switches masters, a slave whose start
offset is where the master starts a late slave."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from helpers import SEG, make_config
from ports import free_port

from rocketstore import Message, MessageStore
from rocketstore.ha import HAClient, HAService


def run(coro, timeout: float = 60.0):  # noqa: ANN001, ANN201 - a test helper
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def master_store(tmp_path: Path):  # noqa: ANN201
    store = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    for i in range(400):
        assert store.put_message(Message(topic="T", body=b"x" * 500, keys=[f"k{i}"]), 0).ok
    try:
        yield store
    finally:
        store.shutdown()


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    offset, size = struct.unpack(">qi", await reader.readexactly(12))
    return offset, await reader.readexactly(size)


def test_master_streams_from_last_segment_then_heartbeats(master_store: MessageStore) -> None:
    end = master_store.get_max_phy_offset()
    assert end > 2 * SEG

    async def scenario() -> None:
        service = HAService(master_store, port=0, heartbeat_interval_ms=200,
                            housekeeping_interval_ms=1500)
        await service.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
            writer.write(struct.pack(">q", 0))
            offset, body = await read_frame(reader)
            assert offset == end - end % SEG            # the last segment's start
            expected = offset
            while expected < end:
                assert offset == expected and 0 < len(body) <= 32 * 1024
                assert body == bytes(master_store.get_commitlog_data(offset)[:len(body)])
                expected += len(body)
                if expected < end:
                    offset, body = await read_frame(reader)
            # idle: heartbeats at the end, about every 200 ms
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            for _ in range(3):
                writer.write(struct.pack(">q", end))
                assert await read_frame(reader) == (end, b"")
            assert 0.3 < loop.time() - t0 < 3
            assert service.slaves()[0]["ackOffset"] == end
            assert service.max_ack_offset() == end
            # silent: dropped after the housekeeping interval
            t0 = loop.time()
            while True:
                data = await asyncio.wait_for(reader.read(65536), 5)
                if not data:
                    break
            assert 1.0 < loop.time() - t0 < 4
            assert not service.connections
            writer.close()
        finally:
            await service.stop()

    run(scenario())


class ScriptedMaster:
    """A master that records reports and sends nothing (or heartbeats at `offset`)."""

    def __init__(self, heartbeat_offset: int | None = None) -> None:
        self.reports: list[int] = []
        self.connections = 0
        self.heartbeat_offset = heartbeat_offset
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._one, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                data = await reader.readexactly(8)
                self.reports.append(struct.unpack(">q", data)[0])
                if self.heartbeat_offset is not None:
                    writer.write(struct.pack(">qi", self.heartbeat_offset, 0))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def test_slave_reports_when_idle_drops_a_silent_master_and_switches(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = MessageStore.open(tmp_path / "s", make_config(tmp_path / "s", broker_role="SLAVE"))
        silent, other = ScriptedMaster(), ScriptedMaster(heartbeat_offset=0)
        client = None
        try:
            silent_port, other_port = await silent.start(), await other.start()
            client = HAClient(store, f"127.0.0.1:{silent_port}", heartbeat_interval_ms=300,
                              housekeeping_interval_ms=1200)
            await client.start()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while silent.connections < 2 and loop.time() < deadline:
                await asyncio.sleep(0.05)
            # a report on connect, reports every ~300 ms, and a new connection after 1.2 s
            assert silent.connections >= 2
            assert len(silent.reports) >= 4 and set(silent.reports) == {0}
            client.update_master_address(f"127.0.0.1:{other_port}")
            deadline = loop.time() + 5
            while not other.reports and loop.time() < deadline:
                await asyncio.sleep(0.05)
            assert other.reports == [0] or other.reports[0] == 0
            before = silent.connections
            await asyncio.sleep(1.5)     # heartbeats keep this one open
            assert other.connections == 1 and silent.connections == before
        finally:
            if client is not None:
                await client.stop()
            silent.close()
            other.close()
            store.shutdown()

    run(scenario())


def test_bad_addresses_are_named() -> None:
    from rocketstore.ha.client import split_address

    for bad in ("", "host", "host:", ":10912", "host:port", "host:70000"):
        with pytest.raises(ValueError, match="haMasterAddress"):
            split_address(bad)
    assert split_address("127.0.0.1:10912") == ("127.0.0.1", 10912)


def listen_again(port: int) -> None:
    """What a restarting server does (asyncio's way): the self-connection left the port free."""
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()


def self_connecting(loop: asyncio.AbstractEventLoop):  # noqa: ANN201 - a test helper
    """loop.create_connection as the kernel may make it to a loopback port nobody listens on:
    from that very port (TCP simultaneous open: the connection's two ends are one socket)."""
    real = loop.create_connection

    async def create_connection(factory, host, port, **kwargs):  # noqa: ANN001, ANN202
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))
        return await real(factory, sock=sock)
    return create_connection


def test_a_slave_never_stays_connected_to_itself(tmp_path: Path) -> None:
    """A slave reconnecting to a master that is restarting could be handed the master's HA
    port as its own: it would then hold the port (the master cannot listen again) and hear its
    own reports. It closes such a connection at once, and the port is free again."""
    port = free_port()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.create_connection = self_connecting(loop)  # type: ignore[method-assign]
        store = MessageStore.open(tmp_path / "s", make_config(tmp_path / "s", broker_role="SLAVE"))
        try:
            client = HAClient(store, f"127.0.0.1:{port}")
            with pytest.raises(ConnectionError, match="connected to itself"):
                await client._follow(f"127.0.0.1:{port}")
            assert not client.connected
        finally:
            store.shutdown()
        await asyncio.sleep(0.05)       # the transport's close runs

    run(scenario())
    listen_again(port)


def test_a_remoting_client_never_stays_connected_to_itself() -> None:
    from rocketstore.remoting import RemotingClient, RemotingConnectError

    port = free_port()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.create_connection = self_connecting(loop)  # type: ignore[method-assign]
        async with RemotingClient() as client:
            with pytest.raises(RemotingConnectError, match="connected to itself"):
                await client.get_connection(f"127.0.0.1:{port}")
        await asyncio.sleep(0.05)

    run(scenario())
    listen_again(port)
