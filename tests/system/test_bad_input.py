"""Bad input against the name server and the broker, as subprocesses on loopback: fuzzed
frames never crash them and other connections keep working; a client that stops reading is
disconnected without the broker's memory growing; 1,000 connections at once are served."""

from __future__ import annotations

import asyncio
import json
import random
import resource
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import system_servers as ss
from system_servers import frame, read_frame

from rocketstore.remoting import (
    FrameDecoder,
    RemotingClient,
    RequestCode,
    ResponseCode,
    create_request,
    decode,
    encode,
)
from rocketstore.remoting.eventloop import run

needs_broker = pytest.mark.skipif(not ss.broker_available(), reason="the broker (rocketstore.broker) is not in this checkout")

NAMESRV_CODES = [103, 104, 105, 106, 206, 216, 0, -1, 9999, 2**31 - 1]
BROKER_CODES = [10, 310, 320, 11, 12, 14, 15, 17, 21, 28, 29, 30, 31, 32, 33, 34, 35, 36, 38, 41, 42, 43,
                200, 201, 202, 203, 204, 208, 215, 222, 0, -1, 9999, 2**31 - 1]
TOPIC = "FuzzTopic"


def arun(coro: Awaitable[object], timeout: float = 240.0) -> object:
    return run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


# ---- the fuzz ---------------------------------------------------------------------------------


def wrong_value(rng: random.Random) -> object:
    return rng.choice([
        None, True, -1, 2**63, -(2**70), 1.5, 1e308, "", "x" * rng.randrange(1, 300), "-", "99999999999999999999",
        "\u00b9", "\x00\x01\x02", [1, 2], {"a": {"b": None}}, "%RETRY%", "TBW102", TOPIC, "0", "-1",
    ])


def wrong_types_request(rng: random.Random, codes: list[int], keys: list[str], opaque: int) -> bytes:
    """A well-framed JSON request of a real code whose extFields hold values of any type."""
    ext = {key: wrong_value(rng) for key in rng.sample(keys, rng.randrange(0, len(keys) + 1))}
    header = {"code": rng.choice(codes), "opaque": opaque, "flag": 0, "language": rng.choice(["JAVA", "CPP"]),
              "version": 409, "extFields": ext}
    body = rng.choice([b"", rng.randbytes(rng.randrange(1, 200)), b'{"clientID":1}', b"[]", b"{broken"])
    return frame(json.dumps(header).encode(), body)


def garbage(rng: random.Random, codes: list[int]) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:  # random bytes
        return rng.randbytes(rng.randrange(1, 3000))
    if kind == 1:  # a length up to 2^31 (and past it), then some bytes
        return struct.pack(">I", rng.choice([2**31, 2**31 - 1, 2**32 - 1, rng.randrange(2**31)])) + rng.randbytes(50)
    if kind == 2:  # broken JSON
        text = json.dumps({"code": rng.choice(codes), "opaque": 1, "extFields": {"topic": TOPIC}}).encode()
        return frame(text[: rng.randrange(len(text))] + rng.randbytes(rng.randrange(4)))
    if kind == 3:  # header fields of the wrong types
        header = {"code": wrong_value(rng), "opaque": rng.choice([1, "2", None, -1, 2**40, [3]]),
                  "flag": wrong_value(rng), "language": wrong_value(rng), "extFields": wrong_value(rng)}
        return frame(json.dumps(header).encode(), rng.randbytes(rng.randrange(20)), rng.choice([0, 0, 1, 5]))
    if kind == 4:  # a lying binary header
        return frame(struct.pack(">hBhii", rng.choice(codes) & 0x7FFF, 0, 1, 9, 0)
                     + struct.pack(">i", rng.choice([-1, 10**6, 3])) + rng.randbytes(rng.randrange(20)), b"", 1)
    if kind == 5:  # a good frame with bytes flipped
        data = bytearray(encode(create_request(rng.choice(codes), {"topic": TOPIC}, rng.randbytes(30))))
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    # unknown codes, well formed
    return encode(create_request(rng.choice([7777, 12345, -3, 32767]), {"k": "v"}))


async def throw(port: int, data: bytes, timeout: float = 1.0) -> None:
    """Send ``data`` on a fresh connection and read whatever comes back for a while."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        raise AssertionError(f"the server stopped accepting connections: {exc}") from exc
    try:
        writer.write(data)
        await writer.drain()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not await asyncio.wait_for(reader.read(65536), deadline - time.monotonic()):
                break
    except (asyncio.TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()


async def answered_requests(port: int, requests: list[bytes], timeout: float = 10.0) -> list[int]:
    """Send well-framed requests with opaques 1..n on one connection; return the reply codes by
    opaque (every request must be answered: a processor that hangs or dies fails here)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(requests))
    codes: dict[int, int] = {}
    try:
        while len(codes) < len(requests):
            reply = decode(await asyncio.wait_for(read_frame(reader), timeout))
            assert reply.is_response
            codes[reply.opaque] = reply.code
    finally:
        writer.close()
    return [codes[i + 1] for i in range(len(requests))]


async def fuzz(port: int, codes: list[int], keys: list[str], healthy: Callable[[], Awaitable[None]],
               seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    for round_ in range(rounds):
        # garbage on fresh connections while a steady client keeps working beside them
        await asyncio.gather(*(throw(port, garbage(rng, codes)) for _ in range(8)), healthy())
        # real codes with extFields of any type: every one is answered, none kills the server
        requests = [wrong_types_request(rng, codes, keys, opaque=i + 1) for i in range(20)]
        replies = await answered_requests(port, requests)
        assert all(isinstance(code, int) for code in replies), round_
        await healthy()


# ---- name server ------------------------------------------------------------------------------

NAMESRV_KEYS = ["topic", "brokerName", "brokerAddr", "clusterName", "brokerId", "haServerAddr",
                "compressed", "bodyCrc32", "acceptStandardJsonOnly"]


@pytest.mark.slow
def test_fuzzed_frames_never_crash_the_name_server() -> None:
    with ss.running(ss.namesrv()) as (namesrv,):
        async def main() -> None:
            async with RemotingClient() as client:
                async def healthy() -> None:
                    request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
                    response = await client.invoke(namesrv.address, request, timeout=5)
                    assert response.code == ResponseCode.TOPIC_NOT_EXIST

                await fuzz(namesrv.port, NAMESRV_CODES, NAMESRV_KEYS, healthy, seed=15, rounds=15)
                await healthy()

        arun(main())
        assert namesrv.running, namesrv.log()[-3000:]


# ---- broker ---------------------------------------------------------------------------------

BROKER_KEYS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "topic", "queueId",
               "queueOffset", "maxMsgNums", "sysFlag", "commitOffset", "suspendTimeoutMillis",
               "subscription", "subVersion", "consumerGroup", "producerGroup", "offset", "group",
               "delayLevel", "key", "maxNum", "beginTimestamp", "endTimestamp", "timestamp",
               "readQueueNums", "writeQueueNums", "perm", "clientID", "batch", "properties",
               "bornTimestamp", "flag", "defaultTopic", "defaultTopicQueueNums", "originMsgId"]


@pytest.mark.slow
@needs_broker
def test_fuzzed_frames_never_crash_the_broker(tmp_path: Path) -> None:
    with ss.running(ss.broker(tmp_path)) as (broker,):
        async def main() -> None:
            async with RemotingClient() as client:
                await ss.create_topic(client, broker.address, TOPIC)
                sent = 0

                async def healthy() -> None:
                    nonlocal sent
                    response = await client.invoke(broker.address, ss.send_request(TOPIC, 0, b"steady"), timeout=5)
                    assert response.code == ResponseCode.SUCCESS, response.remark
                    sent += 1
                    for _ in range(100):  # the send is dispatched to its queue asynchronously
                        pull = await client.invoke(
                            broker.address, ss.pull_request(TOPIC, 0, sent - 1, "steady_group", 1), timeout=5)
                        if pull.code != ResponseCode.PULL_NOT_FOUND:
                            break
                        await asyncio.sleep(0.02)
                    assert pull.code == ResponseCode.SUCCESS, (pull.code, pull.remark)
                    assert ss.record_bodies(pull.body_bytes()) == [b"steady"]

                await fuzz(broker.port, BROKER_CODES, BROKER_KEYS, healthy, seed=1515, rounds=15)
                await healthy()
                # every steady send is there, in order, after the fuzz
                offset = await client.invoke(broker.address, create_request(
                    RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}), timeout=5)
                assert int(offset.ext_fields["offset"]) >= sent

        arun(main())
        assert broker.running, broker.log()[-3000:]


@pytest.mark.slow
@needs_broker
@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="needs Linux's TCP_INFO to see the drop unread")
def test_a_client_that_stops_reading_is_dropped_without_the_broker_growing(tmp_path: Path) -> None:
    idle = 4
    with ss.running(ss.broker(tmp_path, serverChannelMaxIdleTimeSeconds=idle)) as (broker,):
        async def main() -> None:
            async with RemotingClient() as client:
                await ss.create_topic(client, broker.address, TOPIC, queues=1)
                body = b"m" * 1024
                for _ in range(20):  # 2,000 x 1 KiB to pull, 32 KiB a reply
                    results = await asyncio.gather(*(client.invoke(
                        broker.address, ss.send_request(TOPIC, 0, body), timeout=10) for _ in range(100)))
                    assert all(r.code == ResponseCode.SUCCESS for r in results)
                await asyncio.sleep(0.5)
                rss_before = broker.rss_bytes()

                # A deaf client: pulls whose replies (32 KiB each) it never reads. Without
                # back-pressure the broker would queue ~1 GiB of replies for it.
                deaf = socket.create_connection(("127.0.0.1", broker.port))
                deaf.setblocking(False)
                pull = encode(ss.pull_request(TOPIC, 0, 0, "deaf_group", 32))
                written, refused_at = 0, None
                deadline = time.monotonic() + 20
                while written < 32_000 and time.monotonic() < deadline:
                    try:
                        deaf.send(pull)
                        written += 1
                    except BlockingIOError:  # the broker stopped reading us: back-pressure
                        refused_at = written
                        break
                assert refused_at is not None, "the broker kept reading a client that reads nothing"
                peak = rss_before
                # meanwhile other connections are served, and the deaf one is dropped once idle
                closed = False
                deadline = time.monotonic() + idle * 4 + 10
                while time.monotonic() < deadline:
                    response = await client.invoke(broker.address, ss.send_request(TOPIC, 0, b"alive"), timeout=5)
                    assert response.code == ResponseCode.SUCCESS
                    peak = max(peak, broker.rss_bytes())
                    if tcp_state(deaf) != TCP_ESTABLISHED:  # the broker closed or reset it
                        closed = True
                        break
                    await asyncio.sleep(0.2)
                deaf.close()
                assert closed, f"the deaf client was not disconnected within {idle * 4 + 10} s"
                growth = peak - rss_before
                # the write buffer's high-water mark is 1 MiB; allow the socket buffers and the
                # allocator's slack, far under what the unread replies would need (~1 GiB)
                assert growth < 48 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB"
                print(f"deaf client: {refused_at} pulls accepted before the broker stopped reading; "
                      f"RSS {rss_before / 2**20:.1f} -> peak {peak / 2**20:.1f} MiB")

        arun(main())
        assert broker.running


TCP_ESTABLISHED = 1


def tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (Linux TCP_INFO's first byte): a peer that closed
    or reset the connection shows without reading the data it sent before."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


# ---- 1,000 connections --------------------------------------------------------------------


def raise_nofile(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is under the {wanted} descriptors this test needs")
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def thousand_connections(port: int, request: bytes, expect: int, count: int = 1000) -> None:
    """``count`` connections open at once, each sends ``request`` and must get its reply."""
    connections = []
    try:
        for chunk in range(0, count, 100):  # connect in waves: the listen backlog is finite
            connections += await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port)
                                                  for _ in range(min(100, count - chunk))))
        for _, writer in connections:
            writer.write(request)

        async def reply(reader: asyncio.StreamReader) -> int:
            return decode(await read_frame(reader)).code

        codes = await asyncio.wait_for(asyncio.gather(*(reply(r) for r, _ in connections)), 120)
        assert codes == [expect] * count
        # still all open and served: a second round on every connection
        for _, writer in connections:
            writer.write(request)
        codes = await asyncio.wait_for(asyncio.gather(*(reply(r) for r, _ in connections)), 120)
        assert codes == [expect] * count
    finally:
        for _, writer in connections:
            writer.close()


@pytest.mark.slow
def test_a_thousand_connections_to_the_name_server() -> None:
    raise_nofile(4096)  # before the server starts: it inherits the limit
    with ss.running(ss.namesrv()) as (namesrv,):
        request = encode(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"}))
        arun(thousand_connections(namesrv.port, request, ResponseCode.TOPIC_NOT_EXIST))
        assert namesrv.running


@pytest.mark.slow
@needs_broker
def test_a_thousand_connections_to_the_broker(tmp_path: Path) -> None:
    raise_nofile(4096)
    with ss.running(ss.broker(tmp_path)) as (broker,):
        async def main() -> None:
            async with RemotingClient() as client:
                await ss.create_topic(client, broker.address, TOPIC)
            request = encode(create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}))
            await thousand_connections(broker.port, request, ResponseCode.SUCCESS)

        arun(main())
        assert broker.running


def test_fuzz_requests_are_well_framed() -> None:
    """The wrong-types requests decode (so the servers must answer them)."""
    rng = random.Random(3)
    for opaque in range(1, 50):
        data = wrong_types_request(rng, BROKER_CODES, BROKER_KEYS, opaque)
        (item,) = FrameDecoder().feed(data)
        assert not isinstance(item, Exception) and item.opaque == opaque
