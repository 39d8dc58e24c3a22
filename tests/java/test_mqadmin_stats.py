"""RocketMQ 4.9.8's mqadmin reading rocketstore's broker statistics: ``statsAll``
(VIEW_BROKER_STATS_DATA), ``brokerConsumeStats`` (GET_BROKER_CONSUME_STATS), ``brokerStatus``
and ``clusterList`` (GET_BROKER_RUNTIME_INFO), after Java-client sends and consumes: the
printed figures are the real ones (nonzero rates and 24 h counts, no ``null``)."""

from __future__ import annotations

import time
from pathlib import Path

from java_env import JavaPrograms, mqadmin
from rocketmq_runtime_keys import JAVA_RUNTIME_KEYS

TOPIC, GROUP, COUNT = "StatsTopic", "stats_group", 30


def run_admin(home: Path, *args: object) -> str:
    result = mqadmin(home, *args)
    assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-3000:])
    return result.stdout


def test_mqadmin_reads_the_broker_statistics(rs_cluster, java_programs: JavaPrograms, java_home: Path) -> None:
    namesrv = rs_cluster.namesrv_addr
    broker_addr = rs_cluster.brokers["broker-a"].address
    sent = java_programs.json_lines("RsJava", "send", namesrv, TOPIC, COUNT, "TagS")
    assert [s["status"] for s in sent] == ["SEND_OK"] * COUNT
    got = java_programs.json_lines("RsJava", "consume", namesrv, GROUP, TOPIC, COUNT, 60_000)
    assert len(got) == COUNT
    time.sleep(11)      # the broker's next 10-second snapshot of the minute lists

    out = run_admin(java_home, "statsAll", "-n", namesrv, "-t", TOPIC)
    rows = [line.split() for line in out.splitlines() if line.startswith(TOPIC)]
    assert rows, out
    # #Topic #Consumer Group #Accumulation #InTPS #OutTPS #InMsg24Hour #OutMsg24Hour
    (row,) = [r for r in rows if r[1] == GROUP]
    accumulation, in_tps, out_tps, in_24h, out_24h = int(row[2]), float(row[3]), float(row[4]), int(row[5]), int(row[6])
    # the consumer program may quit before committing its last batch: what it left is the lag
    assert 0 <= accumulation <= COUNT and in_tps > 0 and out_tps > 0, out
    assert in_24h == COUNT and out_24h == COUNT, out

    out = run_admin(java_home, "brokerConsumeStats", "-n", namesrv, "-b", broker_addr)
    assert f"Diff Total: {accumulation}" in out, out        # the same offsets, summed by the broker
    assert GROUP in out and "null" not in out

    out = run_admin(java_home, "brokerStatus", "-n", namesrv, "-b", broker_addr)
    table = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            table[key.strip()] = value.strip()
    assert JAVA_RUNTIME_KEYS <= set(table), sorted(JAVA_RUNTIME_KEYS - set(table))
    assert not [k for k, v in table.items() if v == "null"], out
    assert int(table["msgPutTotalTodayNow"]) >= COUNT and int(table["msgGetTotalTodayNow"]) >= COUNT
    assert int(table["putMessageTimesTotal"]) >= COUNT
    # the 10 s window (60 s and 600 s stay empty until the broker has run that long, as in RocketMQ)
    assert float(table["putTps"].split()[0]) >= 0 and float(table["getTransferedTps"].split()[0]) >= 0
    assert sum(int(part.split(":")[1]) for part in table["putMessageDistributeTime"].split()) >= COUNT
    assert table["commitLogDirCapacity"].startswith("Total : ")

    out = run_admin(java_home, "clusterList", "-n", namesrv)
    assert "broker-a" in out and "null" not in out, out
    line = next(line for line in out.splitlines() if "broker-a" in line)
    assert "ms)" in line and "nullms" not in line
    out = run_admin(java_home, "clusterList", "-n", namesrv, "-m")
    # #InTotalYest #OutTotalYest #InTotalToday #OutTotalToday
    totals = next(line for line in out.splitlines() if "broker-a" in line).split()[-4:]
    assert int(totals[2]) >= COUNT and int(totals[3]) >= COUNT, out
