"""Python idioms over the clients: a pull consumer iterates (``for``, ``async for``, with an
end after a quiet spell or at shutdown), and a producer's flush() waits for its asynchronous
sends and their callbacks."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from cluster import cluster

from rocketstore.client import AsyncPullConsumer, Message, Producer, PullConsumer, SendStatus

pytestmark = pytest.mark.slow


def test_flush_waits_for_async_sends_and_their_callbacks_then_iteration_reads_them(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        called: list[str] = []
        lock = threading.Lock()

        def callback(result, error) -> None:
            time.sleep(0.002)            # a callback slower than the send: flush waits for it
            with lock:
                called.append("ok" if error is None and result.send_status is SendStatus.SEND_OK else "bad")

        with Producer("FlushPG", namesrv_addr=c.namesrv_addr) as producer:
            producer.send(Message("Iterated", b"warm-up"))        # the route, fetched once
            futures = [producer.send_async(Message("Iterated", f"m{i}".encode()), callback)
                       for i in range(300)]
            producer.flush(timeout=60)
            assert all(f.done() for f in futures)
            assert called == ["ok"] * 300
            producer.flush(timeout=0.1)                           # nothing outstanding: at once

        with PullConsumer("Iterator", namesrv_addr=c.namesrv_addr) as consumer:
            consumer.subscribe("Iterated")
            started = time.monotonic()
            bodies = [m.body for m in consumer.messages(idle_timeout=3.0)]
            assert sorted(bodies) == sorted([b"warm-up", *(f"m{i}".encode() for i in range(300))])
            assert time.monotonic() - started < 60

            # plain ``for``: ends when another thread shuts the consumer down
            stopper = threading.Timer(1.0, consumer.shutdown)
            stopper.start()
            started = time.monotonic()
            assert list(consumer) == []             # everything was read above
            assert time.monotonic() - started < 15
            stopper.join()


def test_async_for_over_an_async_pull_consumer(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        with Producer("AsyncIterPG", namesrv_addr=c.namesrv_addr) as producer:
            for i in range(40):
                producer.send(Message("AsyncIterated", f"a{i}".encode()))

        async def read() -> list[bytes]:
            async with AsyncPullConsumer("AsyncIterator", namesrv_addr=c.namesrv_addr) as consumer:
                consumer.subscribe("AsyncIterated")
                got = [m.body async for m in consumer.messages(idle_timeout=3.0)]
                # ``async for msg in consumer`` ends when the consumer shuts down
                asyncio.get_running_loop().call_later(0.5, lambda: asyncio.ensure_future(consumer.shutdown()))
                rest = [m async for m in consumer]
                assert rest == []
                return got

        got = asyncio.run(asyncio.wait_for(read(), 90))
        assert sorted(got) == sorted(f"a{i}".encode() for i in range(40))
