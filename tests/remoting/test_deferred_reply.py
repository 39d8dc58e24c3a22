"""DeferredReply: a processor's reply given later by a loop callback is written by its
connection at once (no Future, no extra loop turn); the in-flight count is kept; an exception
answers SYSTEM_ERROR; awaitable for callers that are not a connection."""

from __future__ import annotations

import asyncio

import pytest

from rocketstore.remoting import (
    DeferredReply,
    RemotingClient,
    RemotingClientConfig,
    RemotingServer,
    RemotingServerConfig,
    ResponseCode,
)
from rocketstore.remoting.command import create_request, create_response


class _Sink:
    def __init__(self) -> None:
        self.answers: list[tuple[object, object]] = []

    def deferred_done(self, request: object, outcome: object) -> None:
        self.answers.append((request, outcome))


def test_resolve_writes_into_the_bound_sink_at_once_and_only_once() -> None:
    sink = _Sink()
    reply = DeferredReply()
    reply.bind(sink, "req")
    assert sink.answers == [] and not reply.done
    reply.resolve("first")
    reply.resolve("second")
    assert sink.answers == [("req", "first")] and reply.done


def test_a_reply_resolved_before_binding_is_written_when_bound() -> None:
    sink = _Sink()
    reply = DeferredReply()
    reply.resolve("early")
    reply.bind(sink, "req")
    assert sink.answers == [("req", "early")]


def test_awaiting_gives_the_reply_or_raises() -> None:
    async def main() -> None:
        later = DeferredReply()
        asyncio.get_running_loop().call_later(0.01, later.resolve, "late")
        assert await later == "late"
        failed = DeferredReply()
        failed.resolve(ValueError("boom"))
        with pytest.raises(ValueError, match="boom"):
            await failed

    asyncio.run(main())


def test_a_server_answers_deferred_replies_and_errors() -> None:
    async def main() -> None:
        pending: list[tuple[DeferredReply, object]] = []

        def handler(ctx: object, request: object) -> DeferredReply:
            reply = DeferredReply()
            pending.append((reply, request))
            return reply

        server = RemotingServer(RemotingServerConfig(listen_port=0, bind_address="127.0.0.1"))
        server.register_processor(9001, handler)
        await server.start()
        client = RemotingClient(RemotingClientConfig())
        try:
            address = f"127.0.0.1:{server.port}"
            calls = [asyncio.ensure_future(client.invoke(address, create_request(9001, {}), timeout=10))
                     for _ in range(3)]
            for _ in range(200):
                if len(pending) == 3:
                    break
                await asyncio.sleep(0.01)
            assert len(pending) == 3
            (first, r1), (second, r2), (third, _) = pending
            first.resolve(create_response(r1, ResponseCode.SUCCESS, "one"))
            second.resolve(RuntimeError("no luck"))
            third.resolve(None)     # no reply: the caller times out (not waited for here)
            ok = await asyncio.wait_for(calls[0], 10)
            assert ok.code == ResponseCode.SUCCESS and ok.remark == "one"
            err = await asyncio.wait_for(calls[1], 10)
            assert err.code == ResponseCode.SYSTEM_ERROR and "no luck" in err.remark
            calls[2].cancel()
        finally:
            await client.close()
            await server.stop()

    asyncio.run(main())


def test_replies_given_outside_a_read_are_written_in_one_callback_for_every_connection() -> None:
    """A slave's report answers a round of sends on many connections: one loop callback
    writes them all (a connection written meanwhile is not written twice), and a reply given
    during a read waits for the read's end."""
    from rocketstore.remoting._frames import FrameWriter
    from rocketstore.remoting._pump import ReplyFlusher, RequestPump

    class Connection:
        remote_address = "peer"

        def __init__(self) -> None:
            self.writes = 0
            self.pump: RequestPump | None = None

        def flush(self) -> None:
            assert self.pump is not None
            self.pump.flush_scheduled = False
            self.writes += 1

    class Processors:
        handlers: dict[int, object] = {}
        default = None

    class Loop:
        def __init__(self) -> None:
            self.callbacks: list[object] = []

        def call_soon(self, callback: object) -> None:
            self.callbacks.append(callback)

    loop = Loop()
    flusher = ReplyFlusher(loop)
    connections = [Connection() for _ in range(3)]
    for connection in connections:
        connection.pump = RequestPump(connection, Processors(), FrameWriter(), 1 << 20, 64,
                                      flusher)
    requests = [create_request(9001, {}) for _ in connections]
    for connection, request in zip(connections, requests, strict=True):
        assert connection.pump is not None
        connection.pump.request_started()
        connection.pump.deferred_done(request, b"\0\0\0\4\0\0\0\0")
        assert connection.pump.inflight == 0 and connection.pump.flush_scheduled
    assert len(loop.callbacks) == 1
    connections[1].flush()          # written already (a read's end)
    flusher.run()
    assert [c.writes for c in connections] == [1, 1, 1]
    pump = connections[0].pump
    assert pump is not None
    pump.receiving = True           # during a read: the read's end writes it
    pump.add_frame(requests[0], b"\0\0\0\4\0\0\0\0")
    assert not pump.flush_scheduled and len(loop.callbacks) == 1
    pump.receiving = False
    pump.schedule_flush()
    assert len(loop.callbacks) == 2     # a new turn, a new callback
