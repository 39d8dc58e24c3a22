"""Drives the real RocketMQ C++ client (``rocketmq`` 0.4.4 on PyPI, unmodified) for the broker's
system tests; run as a subprocess with HOME pointed at a fresh directory. Prints one JSON
object per line (flushed) for the test to read.

    python cpp_client_script.py produce NAMESRV TOPIC          sends of every kind
    python cpp_client_script.py push NAMESRV GROUP TOPIC [--broadcast] [--orderly]
                                     [--instance NAME] [--fail-prefix P] [--tags EXPR]
                                                                 until stdin closes
    python cpp_client_script.py pull NAMESRV GROUP TOPIC       everything, once
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time

import rocketmq.ffi
from rocketmq.client import Message, MessageModel, Producer, PullConsumer, PushConsumer


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def message(topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
            **properties: str) -> Message:
    msg = Message(topic)
    msg.set_body(body)
    if tags:
        msg.set_tags(tags)
    if keys:
        msg.set_keys(keys)
    for name, value in properties.items():
        msg.set_property(name, value)
    return msg


def produce(namesrv: str, topic: str) -> None:
    producer = Producer("PID_CPP_TEST", timeout=5000)
    rocketmq.ffi.dll.SetProducerLogLevel(producer._handle, 1)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        for i in range(5):
            r = producer.send_sync(message(topic, b"sync-%d" % i, "TagA", f"sync-key-{i}", idx=str(i), kind="sync"))
            emit(kind="sync", status=int(r.status), offset=r.offset, msg_id=r.msg_id)
        done = threading.Semaphore(0)
        results: list[object] = []

        def ok(result: object) -> None:
            results.append(("ok", int(result.status), result.offset))  # type: ignore[attr-defined]
            done.release()

        def failed(exc: Exception) -> None:
            results.append(("error", str(exc)))
            done.release()

        for i in range(5):
            producer.send_async(message(topic, b"async-%d" % i, "TagB", f"async-key-{i}", idx=str(i), kind="async"),
                                ok, failed)
        for _ in range(5):
            done.acquire(timeout=30)
        for item in results:
            emit(kind="async", result=list(item))  # type: ignore[arg-type]
        for i in range(5):
            producer.send_oneway(message(topic, b"oneway-%d" % i, "TagC", f"oneway-key-{i}", idx=str(i), kind="oneway"))
            emit(kind="oneway")
        for i in range(8):
            r = producer.send_orderly(message(topic, b"orderly-%d" % i, "TagD", f"orderly-key-{i}", idx=str(i), kind="orderly"), i)
            emit(kind="orderly", status=int(r.status), offset=r.offset, arg=i)
        batch = [message(topic, b"batch-%d" % i, None, f"batch-key-{i}", kind="batch") for i in range(3)]
        r = producer.send_batch(batch)
        emit(kind="batch", status=int(r.status), offset=r.offset)
        big = bytes(range(32, 127)) * 54 + b"tail"      # 5,134 bytes: sent compressed
        r = producer.send_sync(message(topic, big, "TagBig", "big-key", kind="big"))
        emit(kind="big", status=int(r.status), offset=r.offset, size=len(big))
        delayed = message(topic, b"delayed", "TagDelay", "delay-key", kind="delay")
        delayed.set_delay_time_level(2)
        r = producer.send_sync(delayed)
        emit(kind="delay", status=int(r.status), offset=r.offset, sent_ms=int(time.time() * 1000))
    finally:
        producer.shutdown()
    emit(kind="done")


def _describe(msg: object) -> dict[str, object]:
    def text(value: object) -> object:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    return {
        "topic": text(msg.topic), "tags": text(msg.tags), "keys": text(msg.keys),  # type: ignore[attr-defined]
        "body": base64.b64encode(msg.body).decode(),  # type: ignore[attr-defined]
        "id": text(msg.id), "queue_id": int(msg.queue_id),  # type: ignore[attr-defined]
        "queue_offset": int(msg.queue_offset), "reconsume_times": int(msg.reconsume_times),  # type: ignore[attr-defined]
        "born_timestamp": int(msg.born_timestamp), "store_timestamp": int(msg.store_timestamp),  # type: ignore[attr-defined]
        "idx": text(msg.get_property("idx")), "sent_as": text(msg.get_property("kind")),  # type: ignore[attr-defined]
    }


def push(namesrv: str, group: str, topic: str, broadcast: bool, orderly: bool, instance: str | None,
         fail_prefix: str | None, tags: str = "*") -> None:
    model = MessageModel.BROADCASTING if broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(group, orderly=orderly, message_model=model)
    rocketmq.ffi.dll.SetPushConsumerLogLevel(consumer._handle, 1)
    consumer.set_namesrv_addr(namesrv)
    if instance:
        consumer.set_instance_name(instance)
    consumer.set_thread_count(2)
    lock = threading.Lock()

    def on_message(msg: object) -> None:
        described = _describe(msg)
        described["thread"] = threading.get_ident()
        with lock:
            emit(kind="received", **described)
        if fail_prefix and base64.b64decode(str(described["body"])).startswith(fail_prefix.encode()):
            raise RuntimeError("consumer refuses this message")

    consumer.subscribe(topic, on_message, tags)
    consumer.start()
    emit(kind="started")
    sys.stdin.read()        # until the test closes stdin
    consumer.shutdown()
    emit(kind="stopped")


def pull(namesrv: str, group: str, topic: str) -> None:
    consumer = PullConsumer(group)
    rocketmq.ffi.dll.SetPullConsumerLogLevel(consumer._handle, 1)
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    try:
        for msg in consumer.pull(topic):
            emit(kind="pulled", **_describe(msg))
    finally:
        consumer.shutdown()
    emit(kind="done")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["produce", "push", "pull"])
    parser.add_argument("namesrv")
    parser.add_argument("args", nargs="*")
    parser.add_argument("--broadcast", action="store_true")
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--instance")
    parser.add_argument("--fail-prefix")
    parser.add_argument("--tags", default="*", help="the subscription's tag expression")
    ns = parser.parse_args()
    if ns.command == "produce":
        produce(ns.namesrv, ns.args[0])
    elif ns.command == "push":
        push(ns.namesrv, ns.args[0], ns.args[1], ns.broadcast, ns.orderly, ns.instance, ns.fail_prefix,
             ns.tags)
    else:
        pull(ns.namesrv, ns.args[0], ns.args[1])


if __name__ == "__main__":
    main()
