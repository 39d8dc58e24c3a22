"""The records rocketstore's broker stores for RocketMQ 4.9.8's Java client equal, field by
field, those RocketMQ 4.9.8's own broker stores for the same sends: plain sends with tags and
keys, user properties, a batch, a delayed message (its SCHEDULE_TOPIC_XXXX record and the one
delivered to its real topic), a retry (send-back) record, a DLQ record and a ZLIB-compressed
body. Only what differs between any two sends is left out: timestamps, hosts' ports, offsets,
UNIQ_KEY and the ORIGIN_MESSAGE_ID that names an offset."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from java_env import JavaPrograms, java_servers, mqadmin

from rocketstore.store import MessageStore

CLUSTER = "TestCluster"          # the rs_cluster's name: CLUSTER is stored in every record
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)
TOPICS = ("CmpPlain", "CmpBatch", "CmpDelay", "CmpRetry")
#: the compression codec of sysFlag (bits 8-10), compared on its own to name it in a failure
CODEC_BITS = 0x700
#: the comparison's fields of a record; per-send ones (timestamps, offsets, ports) are not here
FIELDS = ("topic", "queue_id", "flag", "body_crc", "reconsume_times", "prepared_transaction_offset")


def scenario(namesrv: str) -> list[dict[str, Any]]:
    """The Java client's sends, the same for both brokers."""
    base = {"namesrv": namesrv, "op": "send"}
    return [
        {**base, "topic": "CmpPlain", "count": 2, "tags": ["TagA"], "keysPrefix": "key-"},
        {**base, "topic": "CmpPlain", "count": 1, "bodyPrefix": "props", "props": {"color": "red", "size": "L"}},
        {**base, "topic": "CmpBatch", "count": 3, "mode": "batch", "tags": ["TagB"], "keysPrefix": "bk-"},
        {**base, "topic": "CmpPlain", "count": 1, "bodyPrefix": "zlib", "bodySize": 8192, "tags": ["TagZ"]},
        {**base, "topic": "CmpDelay", "count": 1, "bodyPrefix": "delayed", "delayLevel": 2, "tags": ["TagD"]},
        {"op": "push", "namesrv": namesrv, "group": "cmp_delay", "topic": "CmpDelay", "count": 1,
         "timeoutMs": 30_000},
        {**base, "topic": "CmpRetry", "count": 1, "bodyPrefix": "retried", "tags": ["TagR"], "keysPrefix": "rk-"},
        # delivered twice (reconsumeTimes 0 and 1), then sent back a second time: to %DLQ%cmp_retry
        {"op": "push", "namesrv": namesrv, "group": "cmp_retry", "topic": "CmpRetry", "count": 2,
         "reconsumeLater": True, "maxReconsumeTimes": 1, "timeoutMs": 40_000, "lingerMs": 2_000},
    ]


def create_topics(home: Path, broker_addr: str) -> None:
    for topic in TOPICS:
        result = mqadmin(home, "updateTopic", "-b", broker_addr, "-t", topic, "-r", 1, "-w", 1)
        assert result.returncode == 0 and "success" in result.stdout, result.stdout + result.stderr[-2000:]


def run_scenario(java_programs: JavaPrograms, namesrv: str) -> list[dict[str, Any]]:
    lines = java_programs.json_lines("RsFeatures", json.dumps(scenario(namesrv)), timeout=180)
    done = [line for line in lines if "done" in line]
    assert done == [{"done": True, "step": 5}, {"done": True, "step": 7}], lines
    return lines


def _canonical_length(properties: dict[str, str]) -> int:
    """The bytes of a properties text holding each name once."""
    return len("\x02".join(f"{k}\x01{v}" for k, v in properties.items()).encode())


def stored(root: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Every record of the store at root, by (topic, queue id) in queue order, as compared:
    UNIQ_KEY only by its presence, ORIGIN_MESSAGE_ID by naming the first delivery's record
    (its offsetMsgId, which names the broker's port and an offset)."""
    by_queue: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    first_of_body: dict[bytes, str] = {}
    with MessageStore.open(root, read_only=True) as store:
        for msg in store.scan(0, check_crc=True):
            body = bytes(msg.body)
            first_of_body.setdefault(body, msg.msg_id)
            record = {name: getattr(msg, name) for name in FIELDS}
            record["sys_flag_but_codec"] = msg.sys_flag & ~CODEC_BITS
            record["codec"] = msg.sys_flag & CODEC_BITS
            record["body"] = body
            record["born_ip"] = msg.born_host.rsplit(":", 1)[0]
            record["store_ip"] = msg.store_host.rsplit(":", 1)[0]
            props = dict(msg.properties)
            record["has_uniq_key"] = bool(props.pop("UNIQ_KEY", None))
            origin = props.pop("ORIGIN_MESSAGE_ID", None)
            record["origin_is_first_record"] = None if origin is None else origin == first_of_body[body]
            record["properties"] = props
            # a name stored twice (RocketMQ's batch encoder appends the request's properties to
            # each message's): the size as if each were stored once, and the repeats' bytes
            repeated = len(msg.properties_string.encode()) - _canonical_length(msg.properties)
            record["store_size_names_once"] = msg.store_size - repeated
            record["repeated_bytes"] = repeated
            by_queue[(msg.topic, msg.queue_id)].append(record)
    return dict(by_queue)


def differences(java: dict[tuple[str, int], list[dict[str, Any]]],
                ours: dict[tuple[str, int], list[dict[str, Any]]], *, skip: frozenset[str]) -> list[str]:
    found = []
    if sorted(java) != sorted(ours):
        found.append(f"queues: Java {sorted(java)}, rocketstore {sorted(ours)}")
    for queue in sorted(set(java) & set(ours)):
        if len(java[queue]) != len(ours[queue]):
            found.append(f"{queue}: Java stored {len(java[queue])} records, rocketstore {len(ours[queue])}")
        for n, (j, o) in enumerate(zip(java[queue], ours[queue], strict=False)):
            for name in j:
                if name not in skip and j[name] != o[name]:
                    found.append(f"{queue}[{n}].{name}: Java {j[name]!r:.300}, rocketstore {o[name]!r:.300}")
    return found


@pytest.mark.slow
def test_records_equal_those_of_rocketmq_4_9_8_for_the_same_java_sends(
        tmp_path: Path, rs_cluster, java_programs: JavaPrograms) -> None:
    java_root = tmp_path / "java"
    java_root.mkdir()
    rs_broker = rs_cluster.brokers["broker-a"]

    def against_rocketstore() -> None:
        create_topics(tmp_path / "admin-home-rs", rs_broker.address)
        run_scenario(java_programs, rs_cluster.namesrv_addr)

    # both brokers at once: the scenario mostly waits (delay levels, redeliveries, lingering)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ours_done = pool.submit(against_rocketstore)
        with java_servers(java_root, brokerClusterName=CLUSTER, messageDelayLevel=FAST_DELAY_LEVELS,
                          flushDiskType="ASYNC_FLUSH") as (namesrv, broker):
            create_topics(tmp_path / "admin-home-java", broker.address)
            run_scenario(java_programs, namesrv.address)
        ours_done.result()
    # stopped: a copy of its store, opened read-only
    java_store = tmp_path / "java-store-copy"
    shutil.copytree(java_root / "broker-a" / "store", java_store)
    rs_broker.stop()

    java = stored(java_store)
    ours = stored(rs_cluster.root / "broker-a")
    found = differences(java, ours, skip=frozenset({"repeated_bytes"}))
    assert not found, "stored records differ from RocketMQ 4.9.8's:\n" + "\n".join(found)

    # what the comparison saw: every kind of record, the properties RocketMQ stores for each
    plain = ours[("CmpPlain", 0)]
    assert [r["properties"] for r in plain[:3]] == [
        {"KEYS": "key-0", "TAGS": "TagA", "CLUSTER": CLUSTER}, {"KEYS": "key-1", "TAGS": "TagA", "CLUSTER": CLUSTER},
        {"color": "red", "size": "L", "CLUSTER": CLUSTER}]       # no WAIT: RocketMQ does not store it
    assert plain[3]["sys_flag_but_codec"] & 1 and len(plain[3]["body"]) < 8192     # ZLIB, as sent
    delayed = {"REAL_TOPIC": "CmpDelay", "REAL_QID": "0", "DELAY": "2", "WAIT": "true", "TAGS": "TagD",
               "CLUSTER": CLUSTER}
    assert ours[("SCHEDULE_TOPIC_XXXX", 1)][0]["properties"] == delayed
    assert ours[("CmpDelay", 0)][0]["properties"] == delayed       # DELAY and WAIT kept on delivery
    retried = {"REAL_TOPIC": "%RETRY%cmp_retry", "REAL_QID": "0", "RETRY_TOPIC": "CmpRetry", "KEYS": "rk-0",
               "TAGS": "TagR", "CLUSTER": CLUSTER, "WAIT": "false"}
    assert ours[("%RETRY%cmp_retry", 0)][0]["properties"] == {**retried, "DELAY": "3"}
    assert ours[("%DLQ%cmp_retry", 0)][0]["properties"] == {**retried, "DELAY": "0"}
    assert ours[("%DLQ%cmp_retry", 0)][0]["origin_is_first_record"] is True
    assert [r["reconsume_times"] for r in ours[("%DLQ%cmp_retry", 0)]] == [2]
    # RocketMQ's batch records hold the request's WAIT twice (the message's and the request's);
    # rocketstore keeps a name once: the same properties, the repeated pair's bytes fewer
    for queue, records in java.items():
        for j, o in zip(records, ours[queue], strict=True):
            assert o["repeated_bytes"] == 0
            assert j["repeated_bytes"] == (len("WAIT\x01true\x02") if queue == ("CmpBatch", 0) else 0)
            # the compression codec (sysFlag bits 8-10) is kept as the client sent it (item 1)
            assert o["codec"] == j["codec"], (queue, j["codec"], o["codec"])
