"""One producer of the failover rounds (tests/ha/test_failover_rounds.py), run as a subprocess:
sends distinct bodies one at a time until stdin closes (or --max-seconds pass) and prints one
JSON line per SEND_OK (flushed): the body, the wall-clock time the reply came and, for the
project's client, the port of the broker that stored it (from the offset msgId). Failed sends
are counted and summed up in the last line.

    python failover_producer.py project|cpp NAMESRV TOPIC NAME [--pause-ms 40] [--max-seconds 300]

The C++ client (``rocketmq`` 0.4.4) needs HOME pointed at a fresh directory (its logs go there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def stdin_closed() -> threading.Event:
    closed = threading.Event()

    def watch() -> None:
        sys.stdin.read()
        closed.set()
    threading.Thread(target=watch, daemon=True).start()
    return closed


def broker_port(offset_msg_id: str) -> int:
    """The store host's port in a broker's msgId (IPv4: 4 bytes host, 4 bytes port, 8 offset)."""
    return int(offset_msg_id[8:16], 16) if len(offset_msg_id) == 32 else -1


async def project(namesrv: str, topic: str, name: str, pause: float, until: float,
                  closed: threading.Event) -> tuple[int, int]:
    from rocketstore.client import AsyncProducer, Message, SendStatus

    producer = AsyncProducer(f"FailoverPy{name}", namesrv_addr=namesrv,
                             poll_name_server_interval=200, send_msg_timeout=3000,
                             retry_times_when_send_failed=2)
    await producer.start()
    sent = failed = 0
    try:
        while not closed.is_set() and time.monotonic() < until:
            body = f"{name}-{sent + failed:07d}"
            try:
                result = await producer.send(Message(topic, body.encode(), keys=[body]))
            except Exception:       # noqa: BLE001 - the failover window: counted, go on
                failed += 1
                await asyncio.sleep(0.1)
                continue
            if result.send_status == SendStatus.SEND_OK:
                sent += 1
                emit(ok=body, t=time.time(), port=broker_port(result.offset_msg_id))
            else:
                failed += 1
            await asyncio.sleep(pause)
    finally:
        await producer.shutdown()
    return sent, failed


def cpp(namesrv: str, topic: str, name: str, pause: float, until: float,
        closed: threading.Event) -> tuple[int, int]:
    import rocketmq.ffi
    from rocketmq.client import Message, Producer, SendStatus

    producer = Producer(f"FailoverCpp{name}", timeout=3000)
    rocketmq.ffi.dll.SetProducerLogLevel(producer._handle, 1)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    sent = failed = 0
    try:
        while not closed.is_set() and time.monotonic() < until:
            body = f"{name}-{sent + failed:07d}"
            msg = Message(topic)
            msg.set_keys(body)
            msg.set_body(body.encode())
            try:
                result = producer.send_sync(msg)
            except Exception:       # noqa: BLE001 - the failover window: counted, go on
                failed += 1
                time.sleep(0.1)
                continue
            if result.status == SendStatus.OK:
                sent += 1
                emit(ok=body, t=time.time(), port=-1)
            else:
                failed += 1
            time.sleep(pause)
    finally:
        producer.shutdown()
    return sent, failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["project", "cpp"])
    parser.add_argument("namesrv")
    parser.add_argument("topic")
    parser.add_argument("name")
    parser.add_argument("--pause-ms", type=float, default=40)
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args()
    closed = stdin_closed()
    until = time.monotonic() + args.max_seconds
    pause = args.pause_ms / 1000
    if args.client == "project":
        sent, failed = asyncio.run(project(args.namesrv, args.topic, args.name, pause, until,
                                           closed))
    else:
        sent, failed = cpp(args.namesrv, args.topic, args.name, pause, until, closed)
    emit(done=True, sent=sent, failed=failed)


if __name__ == "__main__":
    main()
