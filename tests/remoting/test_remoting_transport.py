"""Server and client transports: requests, replies, oneway, server-to-client requests, errors,
closing, idle timeout, back-pressure and many connections. Everything on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import pytest
import remoting_helpers
from remoting_helpers import raise_nofile_limit, read_frame, wait_until

from rocketstore.remoting import (
    RemotingClient,
    RemotingClientConfig,
    RemotingCommand,
    RemotingConnection,
    RemotingSendRequestError,
    RemotingServer,
    RemotingServerConfig,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    SerializeType,
    create_request,
    create_response,
    decode,
    encode,
)
from rocketstore.remoting.headers import require_int

ECHO = 1
SLOW = 2
ASK_CLIENT = 3
FUTURE = 4
FAIL = 5
BAD_FIELD = 6
BIG = 7

arun = remoting_helpers.arun


def echo(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return create_response(request, body=request.body, ext_fields=dict(request.ext_fields))


def make_server(**config: Any) -> RemotingServer:
    server = RemotingServer(RemotingServerConfig(listen_port=0, **config))
    server.register_processor(ECHO, echo)

    async def slow(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(request.ext_fields.get("sleep", "0.05")))
        return create_response(request, remark="slept")

    async def ask_client(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        answer = await ctx.invoke(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}), 2)
        return create_response(request, remark=f"client answered {answer.code} {answer.remark}")

    def future_handler(ctx: RemotingConnection, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        # What a SYNC_FLUSH put does: a future resolved later (by the store's threads).
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, future.set_result, create_response(request, remark="flushed"))
        return future

    def fail(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("disk on fire")

    def bad_field(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        require_int(request.ext_fields, "queueId")
        return create_response(request)

    def big(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        size = int(request.ext_fields["size"])
        first = memoryview(bytearray(b"m" * (size // 2)))
        second = memoryview(bytearray(b"m" * (size - size // 2)))
        return create_response(request, body=[first, second])

    server.register_processor(SLOW, slow)
    server.register_processor(ASK_CLIENT, ask_client)
    server.register_processor(FUTURE, future_handler)
    server.register_processor(FAIL, fail)
    server.register_processor(BAD_FIELD, bad_field)
    server.register_processor(BIG, big)
    return server


def test_request_response_both_serializations(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
                request = create_request(ECHO, {"topic": "T"}, b"payload", serialize_type=serialize_type)
                response = await client.invoke(address, request)
                assert response.is_response and response.code == ResponseCode.SUCCESS
                assert response.opaque == request.opaque
                assert response.serialize_type == serialize_type
                assert response.ext_fields == {"topic": "T"} and response.body == b"payload"
            assert client.addresses == [address] and len(server.connections) == 1

    arun(main())


def test_many_requests_in_flight_out_of_order(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            sleeps = [0.2, 0.01, 0.1, 0.0, 0.05] * 20
            requests = [create_request(SLOW, {"sleep": str(s), "i": str(i)}) for i, s in enumerate(sleeps)]
            responses = await asyncio.gather(*(client.invoke(address, r) for r in requests))
            assert all(r.remark == "slept" for r in responses)
            assert [r.opaque for r in responses] == [q.opaque for q in requests]
            assert len({r.opaque for r in requests}) == len(requests)

    arun(main())


def test_unknown_code_failing_processor_and_bad_field(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            response = await client.invoke(address, create_request(999))
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert "999" in (response.remark or "")
            response = await client.invoke(address, create_request(FAIL))
            assert response.code == ResponseCode.SYSTEM_ERROR and "disk on fire" in (response.remark or "")
            response = await client.invoke(address, create_request(BAD_FIELD, {"queueId": "x1"}))
            assert response.code == ResponseCode.SYSTEM_ERROR and "'queueId'" in (response.remark or "")
            response = await client.invoke(address, create_request(ECHO, body=b"still fine"))
            assert response.body == b"still fine"

    arun(main())


def test_default_processor(arun) -> None:
    async def main() -> None:
        server = make_server()
        server.register_default_processor(lambda ctx, req: create_response(req, remark=f"default {req.code}"))
        async with server, RemotingClient() as client:
            response = await client.invoke(f"127.0.0.1:{server.port}", create_request(4242))
            assert response.code == 0 and response.remark == "default 4242"

    arun(main())


def test_future_and_async_processors(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            assert (await client.invoke(address, create_request(FUTURE))).remark == "flushed"
            assert (await client.invoke(address, create_request(SLOW))).remark == "slept"

    arun(main())


def test_oneway(arun) -> None:
    async def main() -> None:
        seen: list[RemotingCommand] = []
        server = make_server()

        def record(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            seen.append(request)
            return create_response(request)  # dropped: the request is oneway

        server.register_processor(RequestCode.HEART_BEAT, record)
        async with server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            await client.invoke_oneway(address, create_request(RequestCode.HEART_BEAT, body=b"{}"))
            assert await wait_until(lambda: len(seen) == 1, 5)
            assert seen[0].is_oneway
            # Nothing came back: a later request's response is the next frame.
            assert (await client.invoke(address, create_request(ECHO, body=b"x"))).body == b"x"

    arun(main())


def test_server_asks_the_client(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            asked: list[RemotingCommand] = []

            def on_notify(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
                asked.append(request)
                return create_response(request, remark="rebalanced")

            client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            response = await client.invoke(address, create_request(ASK_CLIENT))
            assert response.remark == "client answered 0 rebalanced"
            assert asked[0].ext_fields == {"consumerGroup": "G"}

            # A request the client has no processor for: REQUEST_CODE_NOT_SUPPORTED.
            (connection,) = server.connections
            answer = await connection.invoke(create_request(RequestCode.CHECK_TRANSACTION_STATE), 2)
            assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

            # And a oneway one needs no processor answer at all.
            connection.invoke_oneway(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED))
            assert await wait_until(lambda: len(asked) == 2, 5)

    arun(main())


def test_invoke_async_callback(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            results: list[tuple[RemotingCommand | None, BaseException | None]] = []
            task = client.invoke_async(address, create_request(ECHO, body=b"cb"), 2, lambda r, e: results.append((r, e)))
            await task
            bad = client.invoke_async("127.0.0.1:1", create_request(ECHO), 1, lambda r, e: results.append((r, e)))
            await bad
            assert results[0][0] is not None and results[0][0].body == b"cb" and results[0][1] is None
            assert results[1][0] is None and isinstance(results[1][1], ConnectionError)

    arun(main())


def test_timeout_and_close_fail_pending_requests(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            started = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(address, create_request(SLOW, {"sleep": "2"}), timeout=0.2)
            assert time.monotonic() - started < 1.5
            (connection,) = server.connections
            pending = asyncio.ensure_future(client.invoke(address, create_request(SLOW, {"sleep": "5"}), timeout=10))
            await asyncio.sleep(0.1)
            connection.close()
            with pytest.raises(RemotingSendRequestError):
                await pending
            # The client reconnects on the next request.
            assert (await client.invoke(address, create_request(ECHO, body=b"again"))).body == b"again"

    arun(main())


def test_connection_listeners(arun) -> None:
    async def main() -> None:
        server = make_server()
        opened: list[str] = []
        closed: list[str] = []
        server.add_connection_listener(lambda c: opened.append(c.remote_address), lambda c: closed.append(c.remote_address))
        client_closed: list[str] = []
        async with server:
            client = RemotingClient()
            client.add_connection_closed_listener(lambda addr, c: client_closed.append(addr))
            address = f"127.0.0.1:{server.port}"
            await client.invoke(address, create_request(ECHO))
            assert await wait_until(lambda: len(opened) == 1, 2)
            assert opened[0].startswith("127.0.0.1:")
            await client.close()
            assert await wait_until(lambda: closed == opened, 5)
            assert client_closed == [address]
            assert not server.connections

    arun(main())


def test_large_reply_from_buffers(arun) -> None:
    async def main() -> None:
        async with make_server() as server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            for size in (10, 100_000, 4_000_001):
                response = await client.invoke(address, create_request(BIG, {"size": str(size)}), timeout=10)
                assert response.body == b"m" * size

    arun(main())


def test_over_limit_reply_closes_the_receiving_connection(arun) -> None:
    async def main() -> None:
        async with make_server() as server:
            client = RemotingClient(RemotingClientConfig(max_frame_bytes=64 * 1024))
            address = f"127.0.0.1:{server.port}"
            with pytest.raises(RemotingSendRequestError):
                await client.invoke(address, create_request(BIG, {"size": "100000"}), timeout=5)
            assert (await client.invoke(address, create_request(BIG, {"size": "1000"}))).body == b"m" * 1000
            await client.close()

    arun(main())


def test_idle_connections_are_closed(arun) -> None:
    async def main() -> None:
        async with make_server(server_channel_max_idle_time_seconds=0.8) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", server.port)
            started = time.monotonic()
            # The busy one keeps talking every 0.1 s and stays open.
            for _ in range(20):
                busy_writer.write(encode(create_request(ECHO)))
                await read_frame(busy_reader)
                await asyncio.sleep(0.1)
            assert await reader.read() == b""  # the idle one was closed (EOF)
            assert 0.7 < time.monotonic() - started < 6
            busy_writer.write(encode(create_request(ECHO, body=b"alive")))
            assert decode(await read_frame(busy_reader)).body == b"alive"
            writer.close()
            busy_writer.close()

    arun(main())


def test_client_idle_timeout(arun) -> None:
    async def main() -> None:
        async with make_server() as server:
            client = RemotingClient(RemotingClientConfig(client_channel_max_idle_time_seconds=0.3))
            address = f"127.0.0.1:{server.port}"
            await client.invoke(address, create_request(ECHO))
            assert await wait_until(lambda: not client.addresses, 5)
            assert (await client.invoke(address, create_request(ECHO, body=b"back"))).body == b"back"
            await client.close()

    arun(main())


def test_back_pressure_a_peer_that_never_reads(arun) -> None:
    """Requests for 64 KiB replies, never reading them: the server stops reading that
    connection, its buffered replies stay near the high-water mark, the idle sweep drops it,
    and another connection is served throughout."""
    reply_size = 64 * 1024
    high_water = 256 * 1024

    async def main() -> None:
        config = dict(
            server_channel_max_idle_time_seconds=1.0,
            write_buffer_high_water_mark=high_water,
            write_buffer_low_water_mark=64 * 1024,
        )
        server = make_server(**config)
        processed = 0

        def counted_big(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            nonlocal processed
            processed += 1
            return create_response(request, body=b"r" * reply_size)

        server.register_processor(BIG, counted_big)
        async with server:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.connect(("127.0.0.1", server.port))
            sock.setblocking(False)
            request = encode(create_request(BIG, {"size": str(reply_size)}))
            burst = request * 200
            sent = 0
            peak_buffered = 0
            paused_seen = False
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            stalled_since = None
            while loop.time() < deadline:
                try:
                    sent += sock.send(burst[sent % len(burst) :] or burst)
                    stalled_since = None
                except BlockingIOError:
                    stalled_since = stalled_since or loop.time()
                    if loop.time() - stalled_since > 0.5:
                        break
                except OSError:
                    break
                await asyncio.sleep(0.001)
                for connection in server.connections:
                    peak_buffered = max(peak_buffered, connection.write_buffer_size)
                    paused_seen = paused_seen or connection.is_reading_paused
            assert stalled_since is not None, "the server never stopped reading"
            assert paused_seen
            # Bounded: the high-water mark plus at most a reply or two of slack.
            assert peak_buffered <= high_water + 3 * reply_size, peak_buffered
            # Reading stopped long before the peer ran out of requests: what was answered fits
            # in the kernel's socket buffers plus the high-water mark, the rest was never read.
            requests_sent = sent // len(request)
            assert processed < 400 < requests_sent, (processed, requests_sent)

            # Meanwhile another connection is served.
            async with RemotingClient() as client:
                response = await client.invoke(f"127.0.0.1:{server.port}", create_request(ECHO, body=b"ok"))
                assert response.body == b"ok"

            # The stuck connection makes no progress and is dropped by the idle sweep.
            assert await wait_until(lambda: len(server.connections) == 0, 10)
            sock.close()

    arun(main(), timeout=60)


def test_inflight_limit_pauses_reading(arun) -> None:
    async def main() -> None:
        release = asyncio.Event()
        server = make_server(max_inflight_requests=8)

        async def held(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return create_response(request)

        server.register_processor(SLOW, held)
        async with server, RemotingClient() as client:
            address = f"127.0.0.1:{server.port}"
            calls = [asyncio.ensure_future(client.invoke(address, create_request(SLOW), 10)) for _ in range(50)]
            assert await wait_until(lambda: any(c.inflight_requests == 8 for c in server.connections), 5)
            await asyncio.sleep(0.1)
            (connection,) = server.connections
            assert connection.inflight_requests == 8 and connection.is_reading_paused
            release.set()
            responses = await asyncio.gather(*calls)
            assert all(r.code == 0 for r in responses)
            assert not connection.is_reading_paused

    arun(main())


def test_a_thousand_connections(arun) -> None:
    count = 1000
    if raise_nofile_limit(2 * count + 200) < 2 * count + 100:
        pytest.skip("RLIMIT_NOFILE hard limit is too low for 1,000 connections in one process")

    async def main() -> None:
        async with make_server() as server:
            started = time.monotonic()
            semaphore = asyncio.Semaphore(200)  # bounded connect rate, all open at the end

            async def open_one(i: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
                async with semaphore:
                    return await asyncio.open_connection("127.0.0.1", server.port)

            streams = await asyncio.gather(*(open_one(i) for i in range(count)))
            assert await wait_until(lambda: len(server.connections) == count, 10)
            for i, (_, writer) in enumerate(streams):
                request = create_request(ECHO, {"i": str(i)})
                request.opaque = i
                writer.write(encode(request))
            replies = await asyncio.gather(*(read_frame(reader) for reader, _ in streams))
            for i, frame in enumerate(replies):
                response = decode(frame)
                assert response.opaque == i and response.ext_fields == {"i": str(i)}
            for _, writer in streams:
                writer.close()
            assert await wait_until(lambda: len(server.connections) == 0, 10)
            assert time.monotonic() - started < 30

    arun(main(), timeout=60)


def test_stop_closes_everything(arun) -> None:
    async def main() -> None:
        server = make_server()
        await server.start()
        client = RemotingClient()
        address = f"127.0.0.1:{server.port}"
        held = asyncio.ensure_future(client.invoke(address, create_request(SLOW, {"sleep": "10"}), 20))
        await asyncio.sleep(0.1)
        await server.stop()
        with pytest.raises(RemotingSendRequestError):
            await held
        assert not server.connections
        with pytest.raises(ConnectionError):
            await client.invoke(address, create_request(ECHO), 1)
        await client.close()

    arun(main())


def test_binary_request_frame_from_a_raw_peer(arun) -> None:
    async def main() -> None:
        async with make_server() as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            request = create_request(ECHO, {"k": "v"}, b"bin", serialize_type=SerializeType.ROCKETMQ)
            request.opaque = 77
            writer.write(encode(request))
            frame = await read_frame(reader)
            assert struct.unpack(">I", frame[4:8])[0] >> 24 == 1
            response = decode(frame)
            assert response.opaque == 77 and response.body == b"bin" and response.ext_fields == {"k": "v"}
            writer.close()

    arun(main())


def test_a_shared_future_is_not_cancelled_when_one_connection_closes(arun) -> None:
    """A handler may hand back a future others wait on too (a group commit): closing the
    connection of one waiter must not cancel it."""

    async def main() -> None:
        shared: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        server = make_server()
        server.register_processor(SLOW, lambda ctx, request: shared)
        async with server:
            client = RemotingClient()
            address = f"127.0.0.1:{server.port}"
            call = asyncio.ensure_future(client.invoke(address, create_request(SLOW), 5))
            assert await wait_until(lambda: any(c.inflight_requests for c in server.connections), 5)
            await client.close()
            with pytest.raises(RemotingSendRequestError):
                await call
            assert await wait_until(lambda: not server.connections, 5)
            assert not shared.cancelled()
            shared.set_result(create_response(create_request(SLOW)))

    arun(main())


def test_client_requests_wait_while_the_server_does_not_read(arun) -> None:
    class Deaf(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport  # kept: uvloop closes a transport nobody references
            # Soon, not now: uvloop starts reading right after connection_made returns.
            asyncio.get_running_loop().call_soon(transport.pause_reading)  # type: ignore[attr-defined]

    async def main() -> None:
        listener = socket.socket()
        # A small receive buffer (inherited by the accepted socket) caps what the kernel takes
        # for the deaf peer; loopback's autotuning would otherwise absorb tens of MiB.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        listener.bind(("127.0.0.1", 0))
        server = await asyncio.get_running_loop().create_server(Deaf, sock=listener)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        client = RemotingClient(RemotingClientConfig(write_buffer_high_water_mark=64 * 1024, write_buffer_low_water_mark=0))
        big = b"b" * (4 << 20)
        for _ in range(10):  # until the kernel's socket buffers are full too
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(address, create_request(ECHO, body=big), timeout=0.2)
            (connection,) = client._registry.connections  # noqa: SLF001
            if connection.write_buffer_size > 64 * 1024:
                break
        buffered = connection.write_buffer_size
        assert buffered > 64 * 1024
        for _ in range(3):  # these wait for the peer instead of piling up
            with pytest.raises(RemotingTimeoutError, match="read none of our requests"):
                await client.invoke(address, create_request(ECHO, body=big), timeout=0.2)
        assert connection.write_buffer_size <= buffered
        await client.close()
        server.close()
        await server.wait_closed()

    arun(main())
