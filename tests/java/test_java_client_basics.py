"""RocketMQ 4.9.8's Java client and mqadmin against rocketstore's name server and broker:
the harness itself (tests/java/java_env.py) and the plainest round trip."""

from __future__ import annotations

from pathlib import Path

from java_env import JavaPrograms, mqadmin


def test_java_producer_and_push_consumer_round_trip(rs_cluster, java_programs: JavaPrograms) -> None:
    namesrv = rs_cluster.namesrv_addr
    sent = java_programs.json_lines("RsJava", "send", namesrv, "JavaBasics", 20, "TagA")
    assert [s["status"] for s in sent] == ["SEND_OK"] * 20
    assert len({(s["queueId"], s["queueOffset"]) for s in sent}) == 20

    got = java_programs.json_lines("RsJava", "consume", namesrv, "java_basics_group", "JavaBasics", 20, 60_000)
    assert sorted(m["body"] for m in got) == sorted(f"body-{i}" for i in range(20))
    by_id = {m["msgId"]: m for m in got}
    for s in sent:
        m = by_id[s["msgId"]]
        assert (m["queueId"], m["queueOffset"]) == (s["queueId"], s["queueOffset"])
        assert m["tags"] == "TagA" and m["keys"].startswith("key-")


def test_mqadmin_cluster_list_names_our_broker(rs_cluster, java_home: Path) -> None:
    result = mqadmin(java_home, "clusterList", "-n", rs_cluster.namesrv_addr)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TestCluster" in result.stdout and "broker-a" in result.stdout, result.stdout


def test_our_producer_against_java_servers_read_by_java_consumer(tmp_path: Path, java_programs: JavaPrograms
                                                                 ) -> None:
    from java_env import java_servers

    from rocketstore.client import Message, Producer

    with java_servers(tmp_path) as (namesrv, _broker):
        mqadmin(tmp_path / "admin-home", "updateTopic", "-n", namesrv.address, "-c", "JavaCluster",
                "-t", "FromPython", "-r", "4", "-w", "4")
        with Producer("py_to_java", namesrv_addr=namesrv.address) as producer:
            results = [producer.send(Message("FromPython", f"py-{i}".encode(), tags="T", keys=[f"k{i}"]))
                       for i in range(10)]
        assert all(r.send_status.name == "SEND_OK" for r in results)
        got = java_programs.json_lines("RsJava", "consume", namesrv.address, "java_reads_py", "FromPython",
                                       10, 60_000)
        assert sorted(m["body"] for m in got) == sorted(f"py-{i}" for i in range(10))
