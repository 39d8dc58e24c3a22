"""RocketMQ 4.9.8's TransactionMQProducer against rocketstore's name server and broker: commit,
rollback, and unknown answers resolved by the broker's CHECK_TRANSACTION_STATE (commit and
rollback); consumers (Java's and ours) see each committed message once and nothing else."""

from __future__ import annotations

import time

from conftest import start_java_facing_broker
from java_env import JavaPrograms

from rocketstore.client import PullConsumer

FAST_CHECK = {"transactionTimeOut": 1000, "transactionCheckInterval": 300, "transactionCheckMax": 3}


def test_java_transaction_producer_commit_rollback_and_checks(tmp_path, java_programs: JavaPrograms) -> None:
    from cluster import Cluster

    cluster = Cluster(tmp_path)
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a", **FAST_CHECK)
        namesrv = cluster.namesrv_addr
        out = java_programs.json_lines(
            "RsTransaction", "send", namesrv, "JavaTx", "java_tx_group", 8000,
            "c:COMMIT:ROLLBACK", "r:ROLLBACK:COMMIT", "uc:UNKNOW:COMMIT", "ur:UNKNOW:ROLLBACK")
        sends = {o["key"]: o for o in out if "key" in o}
        checks = [o for o in out if "check" in o]
        assert {k: (s["status"], s["state"]) for k, s in sends.items()} == {
            "c": ("SEND_OK", "COMMIT_MESSAGE"), "r": ("SEND_OK", "ROLLBACK_MESSAGE"),
            "uc": ("SEND_OK", "UNKNOW"), "ur": ("SEND_OK", "UNKNOW")}
        # only the unknown ones were checked (once each, twice when an answer was slower than
        # the 0.3 s interval), with their real topic
        assert sorted(set(c["check"] for c in checks)) == ["uc", "ur"]
        assert all(c["topic"] == "JavaTx" and c["times"] in ("1", "2") for c in checks)
        assert {c["check"]: c["transactionId"] for c in checks} == {k: sends[k]["msgId"] for k in ("uc", "ur")}

        got = java_programs.json_lines("RsJava", "consume", namesrv, "java_tx_reader", "JavaTx", 2, 60_000)
        assert sorted(m["body"] for m in got) == ["tx-c", "tx-uc"]
        ours = []
        with PullConsumer("py_tx_reader", namesrv_addr=namesrv,
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
            consumer.subscribe("JavaTx")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                ours.extend(consumer.poll(timeout=0.5))
        assert sorted(m.body for m in ours) == [b"tx-c", b"tx-uc"]
        assert {m.msg_id for m in ours} == {sends["c"]["msgId"], sends["uc"]["msgId"]}
    finally:
        cluster.close()
