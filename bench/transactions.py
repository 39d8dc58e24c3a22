"""Transactional sends (prepare + commit) against plain sends, same broker, same run.

One name server and one broker (subprocesses, loopback, ASYNC_FLUSH), 100 B bodies, then,
interleaved ``--repeat`` times (the median shown):

(a) blocking, one thread: ``TransactionProducer.send_message_in_transaction`` (the half's
    send, a listener that answers COMMIT_MESSAGE, the END_TRANSACTION oneway) against
    ``Producer.send`` (plain sync send); target ratio >= 0.4 (issue 28);
(b) asyncio, ``--concurrency`` in flight: ``AsyncTransactionProducer`` against
    ``AsyncProducer.send``.

Every committed message is then counted in the topic (a pull of the backlog): the commits
of (a) and (b) must all be there, or the figures are not printed as valid.

    python bench/transactions.py [--count 3000] [--async-count 20000] [--concurrency 64] [--repeat 3]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import _common as C

C.ensure_importable()

from broker import broker_available, create_topic, start_broker, start_namesrv  # noqa: E402

from rocketstore.client import (  # noqa: E402
    AsyncProducer,
    AsyncTransactionProducer,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    TransactionProducer,
)
from rocketstore.remoting.eventloop import run  # noqa: E402

TX_TOPIC = "TxBench"
PLAIN_TOPIC = "PlainBench"
QUEUES = 4
BODY = b"x" * 100
TARGET = 0.4


class CommitAll:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def blocking_tx_rate(namesrv: str, count: int) -> float:
    with TransactionProducer("BenchTxPG", CommitAll(), namesrv_addr=namesrv) as producer:
        producer.send_message_in_transaction(Message(TX_TOPIC, BODY))
        began = time.perf_counter()
        for _ in range(count):
            producer.send_message_in_transaction(Message(TX_TOPIC, BODY))
        return count / (time.perf_counter() - began)


def blocking_plain_rate(namesrv: str, count: int) -> float:
    with Producer("BenchPlainPG", namesrv_addr=namesrv) as producer:
        producer.send(Message(PLAIN_TOPIC, BODY))
        began = time.perf_counter()
        for _ in range(count):
            producer.send(Message(PLAIN_TOPIC, BODY))
        return count / (time.perf_counter() - began)


async def _concurrent(count: int, concurrency: int, one: Any) -> float:
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - began)


async def async_tx_rate(namesrv: str, count: int, concurrency: int) -> float:
    async with AsyncTransactionProducer("BenchAsyncTxPG", CommitAll(), namesrv_addr=namesrv) as producer:
        await producer.send_message_in_transaction(Message(TX_TOPIC, BODY))
        return await _concurrent(count, concurrency,
                                 lambda: producer.send_message_in_transaction(Message(TX_TOPIC, BODY)))


async def async_plain_rate(namesrv: str, count: int, concurrency: int) -> float:
    async with AsyncProducer("BenchAsyncPlainPG", namesrv_addr=namesrv) as producer:
        await producer.send(Message(PLAIN_TOPIC, BODY))
        return await _concurrent(count, concurrency, lambda: producer.send(Message(PLAIN_TOPIC, BODY)))


def committed_count(namesrv: str) -> int:
    total = 0
    with PullConsumer("BenchTxCount", namesrv_addr=namesrv) as consumer:
        for mq in consumer.fetch_message_queues(TX_TOPIC):
            total += consumer.max_offset(mq) - consumer.min_offset(mq)
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3_000, help="messages per blocking measurement")
    parser.add_argument("--async-count", type=int, default=20_000, help="messages per asyncio measurement")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    if not broker_available():
        sys.exit("bench/transactions.py needs the broker (rocketstore.broker)")
    info = C.machine_info()
    C.print_machine_info(info)
    dirs = C.TempDirs(prefix="rocketstore-tx-bench-")
    work = dirs.new("broker")
    namesrv = start_namesrv()
    broker = start_broker(work, os.path.join(work, "store"), namesrv.address,
                          mappedFileSizeCommitLog=256 * 1024 * 1024)
    try:
        for topic in (TX_TOPIC, PLAIN_TOPIC):
            run(create_topic(broker.address, topic, QUEUES))
        time.sleep(1.0)
        tx_b: list[float] = []
        plain_b: list[float] = []
        tx_a: list[float] = []
        plain_a: list[float] = []
        for _ in range(args.repeat):               # interleaved: the machine's load hits both alike
            tx_b.append(blocking_tx_rate(namesrv.address, args.count))
            plain_b.append(blocking_plain_rate(namesrv.address, args.count))
            tx_a.append(run(async_tx_rate(namesrv.address, args.async_count, args.concurrency)))
            plain_a.append(run(async_plain_rate(namesrv.address, args.async_count, args.concurrency)))
        expected = args.repeat * (args.count + args.async_count + 2)
        time.sleep(1.0)
        committed = committed_count(namesrv.address)
        rows = []
        for name, tx, plain in (("(a) blocking, 1 thread", tx_b, plain_b),
                                (f"(b) asyncio, {args.concurrency} in flight", tx_a, plain_a)):
            ratio = C.median(tx) / C.median(plain)
            rows.append([name, C.fmt_rate(C.median(tx)), C.fmt_rate(C.median(plain)), C.fmt_ratio(ratio),
                         ("PASS" if ratio >= TARGET else "MISS") if name.startswith("(a)") else ""])
        print(C.markdown_table(["measure", "transactional msgs/s", "plain send msgs/s", "ratio",
                                f"target >= {TARGET}"], rows))
        print(f"\ncommitted messages in {TX_TOPIC}: {committed:,} of {expected:,} sent"
              + ("" if committed == expected else "  (MISMATCH: the figures are not valid)"))
        if args.json:
            C.write_json(args.json, {"machine": info, "rows": rows, "committed": committed, "expected": expected})
    finally:
        broker.stop()
        namesrv.stop()


if __name__ == "__main__":
    main()
