"""RocketMQ 4.9.8's Java producer against a rocketstore SYNC_MASTER without a slave: its
SendResult says SLAVE_NOT_AVAILABLE (response code 11) and the message is stored, as with
RocketMQ's broker (the producer does not retry: retryAnotherBrokerWhenNotStoreOK is false)."""

from __future__ import annotations

from pathlib import Path

from cluster import Cluster
from conftest import start_java_facing_broker
from java_env import JavaPrograms, require_java


def test_java_producer_sees_slave_not_available(tmp_path: Path, java_programs: JavaPrograms) -> None:
    require_java()
    (tmp_path / "rocketstore").mkdir()
    cluster = Cluster(tmp_path / "rocketstore")
    try:
        cluster.start_namesrv()
        start_java_facing_broker(cluster, "broker-a", brokerRole="SYNC_MASTER")
        sent = java_programs.json_lines("RsJava", "send", cluster.namesrv_addr, "JavaSyncMaster", 5)
        assert [s["status"] for s in sent] == ["SLAVE_NOT_AVAILABLE"] * 5
        # stored all the same, once each: five distinct queue offsets
        assert len({(s["queueId"], s["queueOffset"]) for s in sent}) == 5
        got = java_programs.json_lines("RsJava", "consume", cluster.namesrv_addr,
                                       "java_sync_master_group", "JavaSyncMaster", 5, 60_000)
        assert sorted(m["body"] for m in got) == sorted(f"body-{i}" for i in range(5))
    finally:
        cluster.close()
