"""What rocketstore's own clients cost over the wire, against references in the same run.

One name server and one broker (subprocesses, loopback, ASYNC_FLUSH), then:

(a) async sends: ``AsyncProducer.send`` from ``--concurrency`` tasks, 100 B bodies, against
    the same SEND_MESSAGE_V2 requests sent with the bare ``RemotingClient`` (prebuilt headers,
    same loop, same concurrency): the producer's own cost per message;
(b) blocking sends from one thread: ``Producer.send`` against the C++ client's ``send_sync``
    (``rocketmq`` on PyPI, when installed);
(c) a backlog read: ``PullConsumer.poll`` (assign, batches of 32) and a ``PushConsumer`` with
    a listener that does nothing, against bare PULL_MESSAGE requests decoded with the client's
    record decoder, at the same batch size.

    python bench/client.py [--count 20000] [--concurrency 64] [--repeat 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from typing import Any

import _common as C

C.ensure_importable()

from broker import broker_available, create_topic, start_broker, start_namesrv  # noqa: E402

from rocketstore.client import (  # noqa: E402
    AsyncProducer,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rocketstore.client.message import new_uniq_key  # noqa: E402
from rocketstore.client.records import decode_messages  # noqa: E402
from rocketstore.common.pull_sys_flag import FLAG_SUBSCRIPTION  # noqa: E402
from rocketstore.remoting import RemotingClient, RequestCode, create_request  # noqa: E402
from rocketstore.remoting.eventloop import run  # noqa: E402

TOPIC = "ClientBench"
QUEUES = 4
BODY = b"x" * 100


async def producer_rate(namesrv: str, count: int, concurrency: int) -> float:
    async with AsyncProducer("BenchPG", namesrv_addr=namesrv) as producer:
        await producer.send(Message(TOPIC, BODY))              # route and connection ready
        left = count

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await producer.send(Message(TOPIC, BODY))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - began)


async def bare_send_rate(broker: str, count: int, concurrency: int) -> float:
    async with RemotingClient() as client:
        left = count
        sent = 0

        async def worker() -> None:
            nonlocal left, sent
            while left > 0:
                left -= 1
                sent += 1
                ext = {"a": "BenchPG", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(sent % QUEUES), "f": "0",
                       "g": str(int(time.time() * 1000)), "h": "0", "i": f"UNIQ_KEY\x01{new_uniq_key()}\x02WAIT\x01true",
                       "j": "0", "k": "false", "m": "false"}
                response = await client.invoke(broker, create_request(RequestCode.SEND_MESSAGE_V2, ext, BODY), 10)
                assert response.code == 0, response

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - began)


def blocking_rate(namesrv: str, count: int) -> float:
    with Producer("BenchSyncPG", namesrv_addr=namesrv) as producer:
        producer.send(Message(TOPIC, BODY))
        began = time.perf_counter()
        for _ in range(count):
            producer.send(Message(TOPIC, BODY))
        return count / (time.perf_counter() - began)


def cpp_rate(namesrv: str, count: int, home: str) -> float | None:
    try:
        import rocketmq.client  # noqa: F401
    except ImportError:
        return None
    os.environ["HOME"] = home                     # the C++ client logs under $HOME
    from rocketmq.client import Message as CppMessage
    from rocketmq.client import Producer as CppProducer

    producer = CppProducer("BenchCppPG")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        msg = CppMessage(TOPIC)
        msg.set_body(BODY)
        producer.send_sync(msg)
        began = time.perf_counter()
        for _ in range(count):
            msg = CppMessage(TOPIC)
            msg.set_body(BODY)
            producer.send_sync(msg)
        return count / (time.perf_counter() - began)
    finally:
        producer.shutdown()


def pull_consumer_rate(namesrv: str, total: int) -> float:
    with PullConsumer("BenchPoll", namesrv_addr=namesrv, pull_batch_size=32,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        queues = consumer.fetch_message_queues(TOPIC)
        consumer.assign(queues)
        got = 0
        began = time.perf_counter()
        deadline = began + 300
        while got < total and time.perf_counter() < deadline:
            got += len(consumer.poll(timeout=1.0))
        return got / (time.perf_counter() - began)


def push_consumer_rate(namesrv: str, total: int) -> float:
    done = threading.Event()
    count = 0
    lock = threading.Lock()

    def listener(messages: list[Any]) -> None:
        nonlocal count
        with lock:
            count += len(messages)
            if count >= total:
                done.set()

    consumer = PushConsumer("BenchPush", namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            consume_message_batch_max_size=32)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    began = time.perf_counter()
    consumer.start()
    done.wait(300)
    elapsed = time.perf_counter() - began
    consumer.shutdown()
    return count / elapsed


async def bare_pull_rate(broker: str, total: int, broker_name: str) -> float:
    async with RemotingClient() as client:
        got = 0
        began = time.perf_counter()

        async def one_queue(queue_id: int) -> None:
            nonlocal got
            offset = 0
            while True:
                ext = {"consumerGroup": "BenchBare", "topic": TOPIC, "queueId": str(queue_id),
                       "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": str(FLAG_SUBSCRIPTION),
                       "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}
                response = await client.invoke(broker, create_request(RequestCode.PULL_MESSAGE, ext), 10)
                if response.code != 0:
                    return
                messages = decode_messages(response.body, broker_name=broker_name)
                got += len(messages)
                offset = int(response.ext_fields["nextBeginOffset"])

        await asyncio.gather(*(one_queue(q) for q in range(QUEUES)))
        return got / (time.perf_counter() - began)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="messages per send measurement")
    parser.add_argument("--sync-count", type=int, default=3_000, help="messages per blocking-send measurement")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of (a); the median is shown")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    if not broker_available():
        sys.exit("bench/client.py needs the broker (rocketstore.broker)")
    info = C.machine_info()
    C.print_machine_info(info)
    dirs = C.TempDirs(prefix="rocketstore-client-bench-")
    work = dirs.new("broker")
    namesrv = start_namesrv()
    broker = start_broker(work, os.path.join(work, "store"), namesrv.address,
                          mappedFileSizeCommitLog=256 * 1024 * 1024)
    try:
        run(create_topic(broker.address, TOPIC, QUEUES))
        time.sleep(1.0)
        rows: list[list[Any]] = []
        ours_runs: list[float] = []
        bare_runs: list[float] = []
        for _ in range(args.repeat):               # interleaved: the machine's load hits both alike
            ours_runs.append(run(producer_rate(namesrv.address, args.count, args.concurrency)))
            bare_runs.append(run(bare_send_rate(broker.address, args.count, args.concurrency)))
        ours, bare = C.median(ours_runs), C.median(bare_runs)
        rows.append([f"(a) async sends, {args.concurrency} in flight", "AsyncProducer.send",
                     C.fmt_rate(ours), "bare RemotingClient SEND_MESSAGE_V2", C.fmt_rate(bare), C.fmt_ratio(ours / bare)])
        sync = blocking_rate(namesrv.address, args.sync_count)
        cpp = cpp_rate(namesrv.address, args.sync_count, dirs.new("home"))
        rows.append(["(b) blocking sends, 1 thread", "Producer.send", C.fmt_rate(sync),
                     "C++ client send_sync", C.fmt_rate(cpp) if cpp else "n/a",
                     C.fmt_ratio(sync / cpp) if cpp else "n/a"])
        total = 2 * args.count * args.repeat + args.sync_count * (2 if cpp else 1) + 1 + args.repeat
        time.sleep(1.0)
        bare_pull = run(bare_pull_rate(broker.address, total, "bench-broker"))
        poll = pull_consumer_rate(namesrv.address, total)
        push = push_consumer_rate(namesrv.address, total)
        rows.append([f"(c) read a {total:,}-message backlog", "PullConsumer.poll", C.fmt_rate(poll),
                     "bare PULL_MESSAGE + decode_messages", C.fmt_rate(bare_pull), C.fmt_ratio(poll / bare_pull)])
        rows.append(["", "PushConsumer (listener does nothing)", C.fmt_rate(push),
                     "bare PULL_MESSAGE + decode_messages", C.fmt_rate(bare_pull), C.fmt_ratio(push / bare_pull)])
        print(C.markdown_table(["measure", "ours", "msgs/s", "reference", "msgs/s", "ratio"], rows))
        if args.json:
            C.write_json(args.json, {"machine": info, "rows": rows})
    finally:
        broker.stop()
        namesrv.stop()


if __name__ == "__main__":
    main()
