"""Transactional messages end to end: our TransactionProducer / AsyncTransactionProducer against
a rocketstore broker (subprocesses). Commit, rollback, unknown-then-checked, a producer that
never decides (discarded after transactionCheckMax checks), a broker SIGKILLed between
prepare and commit; consumers see no half or rolled-back message and each committed one once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster import Cluster, cluster, wait_for

from rocketstore.client import (
    AsyncTransactionProducer,
    LocalTransactionState,
    Message,
    MessageExt,
    MQClientError,
    PullConsumer,
    PullStatus,
    TransactionProducer,
)
from rocketstore.client.message import MessageQueue, decode_offset_msg_id

pytestmark = pytest.mark.slow

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
#: short check settings: a half is due 1 s after it was born, passes every 0.3 s, 3 checks
FAST_CHECK = {"transactionTimeOut": 1000, "transactionCheckInterval": 300, "transactionCheckMax": 3}
CLIENT = {"poll_name_server_interval": 1000, "heartbeat_broker_interval": 1000}


class Decisions:
    """A listener deciding by the message's KEYS: ``execute`` and ``check`` map a key to its
    answer (a key absent from ``check`` is UNKNOW); it counts the checks per key."""

    def __init__(self, execute: dict[str, LocalTransactionState],
                 check: dict[str, LocalTransactionState]) -> None:
        self.execute = execute
        self.check = check
        self.checked: Counter[str] = Counter()
        self.check_properties: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return self.execute[msg.keys[0]]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        key = msg.keys[0]
        with self.lock:
            self.checked[key] += 1
            self.check_properties.append(dict(msg.properties))
        return self.check.get(key, UNKNOW)


def start(c: Cluster, **check: object) -> None:
    c.start_namesrv()
    c.start_broker(**{**FAST_CHECK, **check})


def consume_all(c: Cluster, topic: str, group: str) -> list[MessageExt]:
    """Every message of the topic's queues from offset 0 (a pull consumer)."""
    out: list[MessageExt] = []
    with PullConsumer(group, namesrv_addr=c.namesrv_addr) as consumer:
        for mq in consumer.fetch_message_queues(topic):
            offset = 0
            for _ in range(1000):
                result = consumer.pull(mq, offset, 32)
                if result.pull_status is not PullStatus.FOUND:
                    break
                out.extend(result.messages)
                offset = result.next_begin_offset
    return out


def queue_max(c: Cluster, topic: str, group: str = "tx-probe") -> int:
    """Queue 0's max offset (-1 while the topic is in no route)."""
    with PullConsumer(group, namesrv_addr=c.namesrv_addr) as consumer:
        broker = next(iter(c.brokers))
        try:
            return consumer.max_offset(MessageQueue(topic, broker, 0))
        except MQClientError:
            return -1


def test_commit_rollback_and_checked_answers(tmp_path: Path) -> None:
    listener = Decisions(
        execute={"c1": COMMIT, "r1": ROLLBACK, "u-commit": UNKNOW, "u-rollback": UNKNOW, "c2": COMMIT},
        check={"u-commit": COMMIT, "u-rollback": ROLLBACK})
    c = Cluster(tmp_path)
    try:
        start(c)
        with TransactionProducer("tx-group", listener, namesrv_addr=c.namesrv_addr, **CLIENT) as producer:
            topic = "TxTopic"
            results = {}
            for key in ("c1", "r1", "u-commit", "u-rollback", "c2"):
                results[key] = producer.send_message_in_transaction(
                    Message(topic, f"body-{key}".encode(), keys=[key]), arg=key)
            assert {k: r.local_transaction_state for k, r in results.items()} == listener.execute
            # the committed ones at once, the unknown ones once the check answered
            assert wait_for(lambda: listener.checked["u-commit"] >= 1 and listener.checked["u-rollback"] >= 1, 20)
            assert wait_for(lambda: sorted(m.body for m in consume_all(c, topic, "probe"))
                            == [b"body-c1", b"body-c2", b"body-u-commit"], 20)
            got = consume_all(c, topic, "tx-consumer")
            assert Counter(m.body for m in got) == Counter({b"body-c1": 1, b"body-c2": 1, b"body-u-commit": 1})
            for m in got:
                assert m.sys_flag & 0xC == 0x8          # COMMIT_TYPE
                # the half's CommitLog offset (a checked one: its copy's, put back later)
                half = decode_offset_msg_id(results[m.keys[0]].offset_msg_id)[1]
                if m.keys[0] == "u-commit":
                    assert m.prepared_transaction_offset > half
                else:
                    assert m.prepared_transaction_offset == half
                assert m.msg_id == results[m.keys[0]].msg_id     # UNIQ_KEY kept
            # a checked message tells how often it was checked (a second check when the first
            # answer was slower than the 0.3 s interval); once answered, no more checks
            assert {p.get("TRANSACTION_CHECK_TIMES") for p in listener.check_properties} <= {"1", "2"}
            assert set(listener.checked) == {"u-commit", "u-rollback"}
            time.sleep(1.0)
            checked = dict(listener.checked)
            time.sleep(2.0)
            assert dict(listener.checked) == checked
            assert Counter(m.body for m in consume_all(c, topic, "tx-consumer-2")) == Counter(
                {b"body-c1": 1, b"body-c2": 1, b"body-u-commit": 1})
    finally:
        c.close()


def test_a_producer_that_never_decides_is_discarded_after_the_check_limit(tmp_path: Path) -> None:
    listener = Decisions(execute={"never": UNKNOW}, check={})
    c = Cluster(tmp_path)
    try:
        start(c)
        with TransactionProducer("tx-never", listener, namesrv_addr=c.namesrv_addr, **CLIENT) as producer:
            producer.send_message_in_transaction(Message("TxNever", b"undecided", keys=["never"]))
            assert wait_for(lambda: queue_max(c, "TRANS_CHECK_MAX_TIME_TOPIC") == 1, 30, 0.3)
            assert listener.checked["never"] == 3       # transactionCheckMax
            assert [p["TRANSACTION_CHECK_TIMES"] for p in listener.check_properties] == ["1", "2", "3"]
            assert consume_all(c, "TxNever", "never-consumer") == []
    finally:
        c.close()


def test_async_transaction_producer_with_coroutine_listener(tmp_path: Path) -> None:
    class AsyncListener:
        async def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            await asyncio.sleep(0)
            return UNKNOW if arg == "later" else (COMMIT if arg else ROLLBACK)

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return COMMIT

    async def main(namesrv: str) -> list:
        producer = AsyncTransactionProducer("tx-async", AsyncListener(), namesrv_addr=namesrv, **CLIENT)
        await producer.start()
        try:
            out = [await producer.send_message_in_transaction(Message("TxAsync", b"yes"), arg=True),
                   await producer.send_message_in_transaction(Message("TxAsync", b"no"), arg=False),
                   await producer.send_message_in_transaction(Message("TxAsync", b"later"), arg="later")]
            await asyncio.sleep(4)       # the check answers the third
            return out
        finally:
            await producer.shutdown()

    with cluster(tmp_path, brokers=()) as c:
        c.start_broker(**FAST_CHECK)
        results = asyncio.run(main(c.namesrv_addr))
        assert [r.local_transaction_state for r in results] == [COMMIT, ROLLBACK, UNKNOW]
        assert sorted(m.body for m in consume_all(c, "TxAsync", "async-consumer")) == [b"later", b"yes"]


def test_broker_killed_between_prepare_and_commit_resolves_by_check(tmp_path: Path) -> None:
    listener = Decisions(execute={}, check={"k1": COMMIT, "k2": ROLLBACK})
    c = Cluster(tmp_path)
    try:
        # no check before the kill: the halves wait for the restart
        start(c, transactionCheckInterval=60_000)
        with TransactionProducer("tx-kill", listener, namesrv_addr=c.namesrv_addr, **CLIENT) as producer:
            core = producer.core
            for key in ("k1", "k2"):
                sent = producer._run(core.prepare(Message("TxKill", f"body-{key}".encode(), keys=[key])))
                assert sent.send_status.name == "SEND_OK"
            assert consume_all(c, "TxKill", "kill-probe") == []
            c.brokers["broker-a"].kill()
            args = c.brokers["broker-a"].args
            path = Path(args[args.index("-c") + 1])
            text = path.read_text().replace("transactionCheckInterval=60000", "transactionCheckInterval=300")
            path.write_text(text)
            c.restart_broker("broker-a")
            assert wait_for(lambda: listener.checked["k1"] >= 1 and listener.checked["k2"] >= 1, 30, 0.2)
            assert wait_for(lambda: [m.body for m in consume_all(c, "TxKill", "kill-probe")] == [b"body-k1"], 20, 0.3)
            time.sleep(1.5)
            assert [m.body for m in consume_all(c, "TxKill", "kill-consumer")] == [b"body-k1"]
    finally:
        c.close()
