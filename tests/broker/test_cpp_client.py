"""The real RocketMQ C++ client (``rocketmq`` 0.4.4 on PyPI, unmodified; HOME pointed at a temp
dir) against a name server and a broker running as subprocesses on loopback.

Sends of every kind (sync, async, oneway, orderly, batch, a compressed body over 4 KiB, tags,
keys, properties, a delay level) read back whole by the PullConsumer; a clustering PushConsumer
group of two instances that receives every message once; broadcasting, where each instance
receives all; orderly consumption, each queue in order; a callback that raises, whose message
comes back with a growing reconsume count and then lands in the group's DLQ.

The broker's delay levels are shortened (``messageDelayLevel``) so that delays and retries
take seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from broker_helpers import (
    CHILD_CWD,
    child_env,
    kill_quietly,
    rocketmq_usable,
    start_broker,
    start_namesrv,
    stop_process,
    write_properties,
)

from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.remoting.eventloop import run

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).resolve().parent / "cpp_client_script.py")
DELAY_LEVELS = "1s 2s " + " ".join(["1s"] * 16)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    reason = rocketmq_usable()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("cpp")
    namesrv, ns_addr = start_namesrv()
    broker = None
    try:
        props = write_properties(root / "broker.properties", brokerName="broker-cpp", listenPort=0,
                                 namesrvAddr=ns_addr, storePathRootDir=root / "store",
                                 mappedFileSizeCommitLog=16 << 20, messageDelayLevel=DELAY_LEVELS)
        broker, addr = start_broker(props, log_path=root / "broker.log")
        info = {"namesrv": ns_addr, "broker": addr, "root": root}
        # the broker's TBW102 route is known before a client asks (else its first send fails)
        assert call(ns_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, retry_until_ok=True).code == 0
        yield info
    finally:
        if broker is not None:
            code, _ = stop_process(broker)
            assert code == 0
        stop_process(namesrv)


def call(addr: str, code: int, ext: dict[str, Any], body: bytes | None = None,
         retry_until_ok: bool = False) -> Any:
    async def main() -> Any:
        async with RemotingClient() as client:
            for _ in range(100):
                response = await client.invoke(addr, create_request(code, {k: str(v) for k, v in ext.items()}, body), 10)
                if response.code == ResponseCode.SUCCESS or not retry_until_ok:
                    return response
                await asyncio.sleep(0.1)
            return response

    return run(main())


class CppProcess:
    """One run of cpp_client_script.py; its JSON lines collected by a thread."""

    def __init__(self, home: Path, *args: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, SCRIPT, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=child_env(HOME=str(home)), cwd=CHILD_CWD)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"kind": "noise", "text": line})

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("kind") == kind]

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.proc.poll() is not None:
                time.sleep(0.2)
                return predicate()
            time.sleep(0.1)
        return predicate()

    def finish(self, timeout: float = 60) -> None:
        """Close stdin (a push consumer shuts down) and wait for the exit."""
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_quietly(self.proc)
            raise AssertionError("the C++ client did not exit") from None
        finally:
            self._reader.join(5)
        assert self.proc.returncode == 0, (self.proc.stderr.read() if self.proc.stderr else "")[-3000:]

    def kill(self) -> None:
        kill_quietly(self.proc)


def body_of(line: dict[str, Any]) -> bytes:
    return base64.b64decode(line["body"])


def consumer_ids(broker: str, group: str) -> list[str]:
    response = call(broker, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if response.code != ResponseCode.SUCCESS:
        return []
    return list(orjson.loads(response.body_bytes())["consumerIdList"])


def produce_plain(broker: str, topic: str, bodies: list[bytes], tags: str = "T") -> None:
    """Messages sent with our own remoting client, round robin over 4 queues."""
    async def main() -> None:
        async with RemotingClient() as client:
            for i, body in enumerate(bodies):
                fields = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
                          "defaultTopicQueueNums": "4", "queueId": str(i % 4), "sysFlag": "0",
                          "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                          "properties": f"TAGS\x01{tags}\x02"}
                r = await client.invoke(broker, create_request(RequestCode.SEND_MESSAGE, fields, body), 10)
                assert r.code == ResponseCode.SUCCESS, r.remark

    run(main())


def test_sends_of_every_kind_read_back_by_the_pull_consumer(servers: dict[str, Any]) -> None:
    root: Path = servers["root"]
    topic = "CppSendTopic"
    producer = CppProcess(root / "home-produce", "produce", servers["namesrv"], topic)
    try:
        producer.finish(120)
    finally:
        producer.kill()
    sends = producer.lines
    assert [line["kind"] for line in sends].count("sync") == 5
    assert all(line["status"] == 0 for line in sends if "status" in line), sends
    assert [line["result"][0] for line in producer.of_kind("async")] == ["ok"] * 5
    orderly = producer.of_kind("orderly")
    assert len(orderly) == 8
    sent_delay = producer.of_kind("delay")[0]

    # the delayed message shows up after its 2 s delay (level 2)
    def pull_all() -> CppProcess:
        puller = CppProcess(root / "home-pull", "pull", servers["namesrv"], "CID_CPP_PULL", topic)
        puller.finish(120)
        return puller

    deadline = time.monotonic() + 30
    while True:
        pulled = pull_all().of_kind("pulled")
        if any(p["sent_as"] == "delay" for p in pulled) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
        # the pull consumer's offsets live in a class-level dict of its process: a new process
        # starts from 0 again
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pulled:
        by_kind[p["sent_as"]].append(p)
    assert {k: len(v) for k, v in by_kind.items()} == {
        "sync": 5, "async": 5, "oneway": 5, "orderly": 8, "batch": 3, "big": 1, "delay": 1}, by_kind.keys()
    assert len({(p["queue_id"], p["queue_offset"]) for p in pulled}) == len(pulled)    # none twice
    assert sorted(body_of(p) for p in by_kind["sync"]) == [b"sync-%d" % i for i in range(5)]
    assert {p["tags"] for p in by_kind["async"]} == {"TagB"}
    assert sorted(p["keys"] for p in by_kind["oneway"]) == [f"oneway-key-{i}" for i in range(5)]
    assert sorted(p["idx"] for p in by_kind["sync"]) == ["0", "1", "2", "3", "4"]
    # orderly sends with arg i go to queue i % 4, in order
    for p in by_kind["orderly"]:
        assert p["queue_id"] == int(p["idx"]) % 4
    # the batch went to one queue, with consecutive offsets
    batch = sorted(by_kind["batch"], key=lambda p: p["queue_offset"])
    assert len({p["queue_id"] for p in batch}) == 1
    assert [p["queue_offset"] for p in batch] == list(range(batch[0]["queue_offset"], batch[0]["queue_offset"] + 3))
    # the big body came back whole (the client decompressed it) ...
    big = body_of(by_kind["big"][0])
    assert big == bytes(range(32, 127)) * 54 + b"tail"
    # ... and the store holds it compressed, as sent (sysFlag bit 0)
    found = call(servers["broker"], RequestCode.QUERY_MESSAGE,
                 {"topic": topic, "key": "big-key", "maxNum": 4, "beginTimestamp": 0, "endTimestamp": 2**62})
    assert found.code == ResponseCode.SUCCESS
    import refcodec

    stored = refcodec.decode_record(found.body_bytes())
    assert stored.sysFlag & 1 and len(stored.body) < 1000
    assert zlib.decompress(stored.body) == big
    # the delayed message was stored at least its delay after it was sent
    delayed = by_kind["delay"][0]
    assert delayed["store_timestamp"] - delayed["born_timestamp"] >= 1900
    assert delayed["store_timestamp"] >= sent_delay["sent_ms"] + 1500


def test_clustering_group_of_two_receives_every_message_once(servers: dict[str, Any]) -> None:
    root: Path = servers["root"]
    group, topic = "CID_CPP_CLUSTER", "CppClusterTopic"
    produce_plain(servers["broker"], topic, [b"warmup"])    # the topic exists with 4 queues
    consumers = [CppProcess(root / f"home-cluster-{i}", "push", servers["namesrv"], group, topic,
                            "--instance", f"inst{i}") for i in range(2)]
    try:
        assert all(c.wait_for(lambda c=c: bool(c.of_kind("started")), 60) for c in consumers)
        deadline = time.monotonic() + 60
        while len(consumer_ids(servers["broker"], group)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(consumer_ids(servers["broker"], group)) == 2
        time.sleep(3)   # both rebalanced (NOTIFY_CONSUMER_IDS_CHANGED) on the same member list
        bodies = [b"cluster-%03d" % i for i in range(200)]
        produce_plain(servers["broker"], topic, bodies)

        def received() -> list[bytes]:
            return [body_of(m) for c in consumers for m in c.of_kind("received")]

        assert consumers[0].wait_for(lambda: len(set(received()) & set(bodies)) == len(bodies), 90), \
            len(set(received()))
        time.sleep(2)   # nothing arrives twice later either
        got = [b for b in received() if b != b"warmup"]
        assert sorted(got) == sorted(bodies)                    # each exactly once
        per_instance = [len([m for m in c.of_kind("received") if body_of(m) != b"warmup"]) for c in consumers]
        assert all(n > 0 for n in per_instance), per_instance   # the queues were shared
    finally:
        for c in consumers:
            c.finish()


def test_broadcasting_instances_each_receive_all(servers: dict[str, Any]) -> None:
    root: Path = servers["root"]
    group, topic = "CID_CPP_BROADCAST", "CppBroadcastTopic"
    produce_plain(servers["broker"], topic, [b"before"])
    consumers = [CppProcess(root / f"home-bc-{i}", "push", servers["namesrv"], group, topic,
                            "--broadcast", "--instance", f"bc{i}") for i in range(2)]
    try:
        assert all(c.wait_for(lambda c=c: bool(c.of_kind("started")), 60) for c in consumers)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = call(servers["broker"], RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
            if r.code == 0 and len(orjson.loads(r.body_bytes())["connectionSet"]) == 2:
                break
            time.sleep(0.2)
        data = orjson.loads(r.body_bytes())
        assert data["messageModel"] == "BROADCASTING" and len(data["connectionSet"]) == 2
        time.sleep(3)   # each started at the queues' ends (broadcasting starts at GET_MAX_OFFSET)
        bodies = [b"broadcast-%02d" % i for i in range(40)]
        produce_plain(servers["broker"], topic, bodies)
        for c in consumers:
            assert c.wait_for(lambda c=c: {body_of(m) for m in c.of_kind("received")} >= set(bodies), 60)
        for c in consumers:
            got = [body_of(m) for m in c.of_kind("received") if body_of(m) != b"before"]
            assert sorted(got) == sorted(bodies)
    finally:
        for c in consumers:
            c.finish()


def test_orderly_consumer_sees_each_queue_in_order(servers: dict[str, Any]) -> None:
    root: Path = servers["root"]
    group, topic = "CID_CPP_ORDERLY", "CppOrderlyTopic"
    bodies = [b"ord-%03d" % i for i in range(120)]
    produce_plain(servers["broker"], topic, bodies)     # queue i % 4, in order
    consumer = CppProcess(root / "home-orderly", "push", servers["namesrv"], group, topic, "--orderly")
    try:
        assert consumer.wait_for(lambda: len(consumer.of_kind("received")) >= len(bodies), 90), \
            len(consumer.of_kind("received"))
        by_queue: dict[int, list[int]] = defaultdict(list)
        for m in consumer.of_kind("received"):
            by_queue[m["queue_id"]].append(int(body_of(m)[4:]))
        assert sorted(by_queue) == [0, 1, 2, 3]
        for queue_id, seen in by_queue.items():
            assert seen == sorted(seen), (queue_id, seen)           # in order
            assert seen == [i for i in range(120) if i % 4 == queue_id]
    finally:
        consumer.finish()


def test_a_failing_callback_retries_with_growing_count_then_the_dlq(servers: dict[str, Any]) -> None:
    root: Path = servers["root"]
    broker = servers["broker"]
    group, topic = "CID_CPP_RETRY", "CppRetryTopic"
    # two retries, then the dead-letter queue; the retry topic exists (and is routed) before
    # the consumer starts, so the client need not wait for its 30 s route refresh
    body = orjson.dumps({"groupName": group, "retryMaxTimes": 2, "retryQueueNums": 1})
    assert call(broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body).code == 0
    assert call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": f"%RETRY%{group}", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}).code == 0
    assert call(servers["namesrv"], RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{group}"},
                retry_until_ok=True).code == 0
    produce_plain(broker, topic, [b"ok-1", b"FAIL-me", b"ok-2"])
    consumer = CppProcess(root / "home-retry", "push", servers["namesrv"], group, topic, "--fail-prefix", "FAIL")
    try:
        def failing() -> list[dict[str, Any]]:
            return [m for m in consumer.of_kind("received") if body_of(m) == b"FAIL-me"]

        assert consumer.wait_for(lambda: len(failing()) >= 3, 90), failing()
        counts = [m["reconsume_times"] for m in failing()]
        assert counts[:3] == [0, 1, 2], counts
        assert all(m["topic"] == topic for m in failing())
        # after retryMaxTimes deliveries it is in %DLQ%<group>, with RocketMQ's properties
        dlq = f"%DLQ%{group}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = call(broker, RequestCode.GET_MAX_OFFSET, {"topic": dlq, "queueId": 0})
            if r.code == 0 and int(r.ext_fields["offset"]) >= 1:
                break
            time.sleep(0.3)
        assert int(r.ext_fields["offset"]) == 1
        pulled = call(broker, RequestCode.PULL_MESSAGE,
                      {"consumerGroup": "dlq-reader", "topic": dlq, "queueId": 0, "queueOffset": 0,
                       "maxMsgNums": 4, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
                       "subVersion": 0, "subscription": "*"})
        assert pulled.code == 0
        raw = pulled.body_bytes()
        assert b"FAIL-me" in raw
        for name in (b"RETRY_TOPIC\x01" + topic.encode(), b"ORIGIN_MESSAGE_ID\x01", b"REAL_TOPIC\x01"):
            assert name in raw, name
        time.sleep(2)
        assert len(failing()) == 3          # not delivered again after the DLQ
        assert {body_of(m) for m in consumer.of_kind("received")} >= {b"ok-1", b"ok-2"}
    finally:
        consumer.finish()


def test_tag_subscriptions_beside_sql92_groups_and_their_bloom_filter(tmp_path: Path) -> None:
    """A broker with SQL92 filtering and its bitmaps on (enablePropertyFilter,
    enableCalcFilterBitMap, enableConsumeQueueExt: tags codes in the ConsumeQueue become ext
    addresses): the C++ client's tag subscription still gets exactly its tags, beside a group
    of the project's client subscribed by SQL92."""
    from rocketstore.client import SQL92, ConsumeStatus, Message, MessageExt, Producer, PushConsumer

    reason = rocketmq_usable()
    if reason:
        pytest.skip(reason)
    namesrv, ns_addr = start_namesrv()
    broker = consumer = None
    cpp: CppProcess | None = None
    topic = "CppTagsBesideSql"
    try:
        props = write_properties(tmp_path / "broker.properties", brokerName="broker-sql", listenPort=0,
                                 namesrvAddr=ns_addr, storePathRootDir=tmp_path / "store",
                                 mappedFileSizeCommitLog=16 << 20, enablePropertyFilter="true",
                                 enableCalcFilterBitMap="true", enableConsumeQueueExt="true")
        broker, addr = start_broker(props, log_path=tmp_path / "broker.log")
        assert call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {"topic": topic, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}).code == 0
        sql_keys: list[str] = []
        lock = threading.Lock()

        def on_sql(messages: list[MessageExt]) -> ConsumeStatus:
            with lock:
                sql_keys.extend(m.keys[0] for m in messages)
            return ConsumeStatus.SUCCESS

        consumer = PushConsumer("SqlBesideCpp", namesrv_addr=ns_addr, rebalance_interval=2_000,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic, SQL92("amount > 60"))
        consumer.register_message_listener(on_sql)
        consumer.start()
        cpp = CppProcess(tmp_path / "home-tags", "push", ns_addr, "CID_CPP_TAGS", topic, "--tags", "T1 || T2")
        assert cpp.wait_for(lambda: bool(cpp.of_kind("started")), 60)
        filters = tmp_path / "store" / "config" / "consumerFilter.json"
        deadline = time.monotonic() + 60
        while not (filters.exists() and "SqlBesideCpp" in filters.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        tags_of, amount_of = {}, {}
        with Producer("PID_CPP_TAGS_SQL", namesrv_addr=ns_addr) as producer:
            for i in range(120):
                key, tag, amount = f"k-{i}", f"T{i % 3}", i % 100
                producer.send(Message(topic, key.encode(), tags=tag, keys=[key],
                                      properties={"amount": str(amount)}))
                tags_of[key], amount_of[key] = tag, amount
        want_tags = sorted(k for k, t in tags_of.items() if t in ("T1", "T2"))
        want_sql = sorted(k for k, a in amount_of.items() if a > 60)

        def cpp_keys() -> list[str]:
            return sorted(body_of(m).decode() for m in cpp.of_kind("received"))

        assert cpp.wait_for(lambda: len(cpp_keys()) >= len(want_tags), 90), len(cpp_keys())
        deadline = time.monotonic() + 60
        while len(sql_keys) < len(want_sql) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)       # nothing more arrives
        assert cpp_keys() == want_tags
        assert {m["tags"] for m in cpp.of_kind("received")} == {"T1", "T2"}
        with lock:
            assert sorted(sql_keys) == want_sql
    finally:
        if cpp is not None:
            cpp.finish()
        if consumer is not None:
            consumer.shutdown()
        if broker is not None:
            stop_process(broker)
        stop_process(namesrv)
