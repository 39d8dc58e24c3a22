"""The real RocketMQ C++ client (``rocketmq`` 0.4.4) with ACL credentials, for test_cpp_acl:

    python cpp_acl_script.py NAMESRV TOPIC GROUP ACCESS_KEY SECRET_KEY COUNT

sends COUNT messages with ``set_session_credentials`` (one JSON line a send: status or error),
then, when any was sent, pulls the topic as GROUP with the same credentials (one line: the
bodies read).
"""

from __future__ import annotations

import json
import sys
import time

import rocketmq.ffi
from rocketmq.client import Message, Producer, PullConsumer


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> None:
    namesrv, topic, group, access_key, secret_key, count = sys.argv[1:7]
    producer = Producer("PID_CPP_ACL", timeout=5000)
    rocketmq.ffi.dll.SetProducerLogLevel(producer._handle, 1)
    producer.set_namesrv_addr(namesrv)
    producer.set_session_credentials(access_key, secret_key, "")
    producer.start()
    sent = 0
    try:
        for i in range(int(count)):
            msg = Message(topic)
            msg.set_body(b"cpp-acl-%d" % i)
            try:
                result = producer.send_sync(msg)
                emit(kind="sent", status=int(result.status))
                sent += 1
            except Exception as exc:  # noqa: BLE001 - reported to the test
                emit(kind="error", error=str(exc))
    finally:
        producer.shutdown()
    if not sent:    # refused: a pull with the same credentials would retry without end
        return
    consumer = PullConsumer(group)
    rocketmq.ffi.dll.SetPullConsumerLogLevel(consumer._handle, 1)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_session_credentials(access_key, secret_key, "")
    consumer.start()
    bodies: set[str] = set()
    try:
        # each pass reads every queue from offset 0; a message just sent may not be readable yet
        for _ in range(20):
            bodies.update(msg.body.decode() for msg in consumer.pull(topic))
            if len(bodies) >= sent:
                break
            time.sleep(0.25)
    except Exception as exc:  # noqa: BLE001
        emit(kind="pull_error", error=str(exc))
    finally:
        consumer.shutdown()
    emit(kind="pulled", bodies=sorted(bodies))


if __name__ == "__main__":
    main()
