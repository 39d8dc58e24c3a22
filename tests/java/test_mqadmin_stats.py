"""RocketMQ 4.9.8's mqadmin reading rocketstore's broker statistics: ``statsAll``
(VIEW_BROKER_STATS_DATA), ``brokerConsumeStats`` (GET_BROKER_CONSUME_STATS), ``brokerStatus``
and ``clusterList`` (GET_BROKER_RUNTIME_INFO), after Java-client sends and consumes: the
printed figures are the real ones (nonzero rates and 24 h counts, no ``null``)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from java_env import JavaPrograms, MqadminSession
from rocketmq_runtime_keys import JAVA_RUNTIME_KEYS

TOPIC, GROUP, COUNT = "StatsTopic", "stats_group", 30


def test_mqadmin_reads_the_broker_statistics(rs_cluster, java_programs: JavaPrograms, java_home: Path) -> None:
    namesrv = rs_cluster.namesrv_addr
    broker_addr = rs_cluster.brokers["broker-a"].address
    sent = java_programs.json_lines("RsJava", "send", namesrv, TOPIC, COUNT, "TagS")
    assert [s["status"] for s in sent] == ["SEND_OK"] * COUNT
    got = java_programs.json_lines("RsJava", "consume", namesrv, GROUP, TOPIC, COUNT, 60_000)
    assert len(got) == COUNT
    consumed_at = time.monotonic()

    with contextlib.closing(MqadminSession(java_programs, java_home, cwd=java_home.parent)) as admin:
        def run_admin(*args: object) -> str:
            out, err = admin.run(*args)
            assert out.strip() and "Exception" not in err, (args, out[-2000:], err[-3000:])
            return out

        # what needs no snapshot first, while the broker's next 10-second snapshot of the minute
        # lists comes (statsAll reads it; brokerStatus the rates of the last 10 s)
        consume_stats = run_admin("brokerConsumeStats", "-n", namesrv, "-b", broker_addr)
        cluster = run_admin("clusterList", "-n", namesrv)
        cluster_totals = run_admin("clusterList", "-n", namesrv, "-m")
        time.sleep(max(0.0, consumed_at + 11 - time.monotonic()))
        out = run_admin("statsAll", "-n", namesrv, "-t", TOPIC)
        status = run_admin("brokerStatus", "-n", namesrv, "-b", broker_addr)

    rows = [line.split() for line in out.splitlines() if line.startswith(TOPIC)]
    assert rows, out
    # #Topic #Consumer Group #Accumulation #InTPS #OutTPS #InMsg24Hour #OutMsg24Hour
    (row,) = [r for r in rows if r[1] == GROUP]
    accumulation, in_tps, out_tps, in_24h, out_24h = int(row[2]), float(row[3]), float(row[4]), int(row[5]), int(row[6])
    # the consumer program may quit before committing its last batch: what it left is the lag
    assert 0 <= accumulation <= COUNT and in_tps > 0 and out_tps > 0, out
    assert in_24h == COUNT and out_24h == COUNT, out

    assert f"Diff Total: {accumulation}" in consume_stats, consume_stats  # the same offsets, summed by the broker
    assert GROUP in consume_stats and "null" not in consume_stats

    table = {}
    for line in status.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            table[key.strip()] = value.strip()
    assert JAVA_RUNTIME_KEYS <= set(table), sorted(JAVA_RUNTIME_KEYS - set(table))
    assert not [k for k, v in table.items() if v == "null"], status
    assert int(table["msgPutTotalTodayNow"]) >= COUNT and int(table["msgGetTotalTodayNow"]) >= COUNT
    assert int(table["putMessageTimesTotal"]) >= COUNT
    # the 10 s window (60 s and 600 s stay empty until the broker has run that long, as in RocketMQ)
    assert float(table["putTps"].split()[0]) >= 0 and float(table["getTransferedTps"].split()[0]) >= 0
    assert sum(int(part.split(":")[1]) for part in table["putMessageDistributeTime"].split()) >= COUNT
    assert table["commitLogDirCapacity"].startswith("Total : ")

    assert "broker-a" in cluster and "null" not in cluster, cluster
    line = next(line for line in cluster.splitlines() if "broker-a" in line)
    assert "ms)" in line and "nullms" not in line
    # #InTotalYest #OutTotalYest #InTotalToday #OutTotalToday
    totals = next(line for line in cluster_totals.splitlines() if "broker-a" in line).split()[-4:]
    assert int(totals[2]) >= COUNT and int(totals[3]) >= COUNT, cluster_totals
