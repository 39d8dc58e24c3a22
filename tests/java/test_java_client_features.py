"""RocketMQ 4.9.8's Java client against rocketstore's name server and broker: the send modes
(sync, async, oneway, orderly, batch), delay levels, ZLIB-compressed bodies, tag filtering,
clustering and broadcasting push consumers, the orderly consumer, DefaultLitePullConsumer in
both modes and retries into the dead-letter queue. Each test is one run of
``programs/RsFeatures.java`` (its steps in one JVM), so the suite starts few JVMs."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from typing import Any

from java_env import JavaPrograms

from rocketstore.client import PullConsumer, PullStatus


def run(java_programs: JavaPrograms, steps: list[dict[str, Any]], timeout: float = 240
        ) -> dict[int, list[dict[str, Any]]]:
    """The lines each step printed, by step index."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in java_programs.json_lines("RsFeatures", json.dumps(steps), timeout=timeout):
        by_step[line.pop("step")].append(line)
    return by_step


def received(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a push or lite-pull step got (its closing "done" line checked)."""
    assert {"done": True} in lines, lines[-5:]
    return [m for m in lines if "topic" in m]     # (fastjson leaves out null fields)


def java_body(prefix: str, i: int, size: int) -> bytes:
    """RsFeatures.body: "prefix-i", padded with compressible text to size bytes."""
    text = f"{prefix}-{i}"
    if len(text) >= size:
        return text.encode()
    while len(text) < size:
        text += f" rocketstore compressible text {i}"
    return text[:size].encode()


def test_send_modes_batch_and_tag_filtering(rs_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_cluster.namesrv_addr
    send = {"op": "send", "namesrv": ns, "topic": "JfSend", "count": 6, "tags": ["TagA", "TagB", "TagC"]}
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfSend"], "queues": 4},
        {**send, "mode": "sync", "bodyPrefix": "sync", "keysPrefix": "s-"},
        {**send, "mode": "async", "bodyPrefix": "async"},
        {**send, "mode": "oneway", "bodyPrefix": "oneway"},
        {**send, "mode": "batch", "count": 5, "tags": ["TagC"], "bodyPrefix": "batch", "keysPrefix": "b-"},
        {"op": "push", "namesrv": ns, "group": "jf_all", "topic": "JfSend", "count": 23, "timeoutMs": 30_000,
         "lingerMs": 500},
        {"op": "push", "namesrv": ns, "group": "jf_tags", "topic": "JfSend", "expr": "TagA || TagB", "count": 12,
         "timeoutMs": 30_000, "lingerMs": 1_000},
    ])
    assert [r["status"] for r in out[1]] == ["SEND_OK"] * 6
    assert sorted(r["i"] for r in out[2] if r["status"] == "SEND_OK") == list(range(6)), out[2]
    assert [r["status"] for r in out[3]] == ["ONEWAY"] * 6
    (batch,) = out[4]
    assert batch["status"] == "SEND_OK" and len(batch["msgId"].split(",")) == 5

    everything = received(out[5])
    sent = [f"{mode}-{i}" for mode in ("sync", "async", "oneway") for i in range(6)]
    sent += [f"batch-{i}" for i in range(5)]
    assert Counter(m["body"] for m in everything) == Counter(sent)    # each once
    by_body = {m["body"]: m for m in everything}
    assert by_body["sync-4"]["tags"] == "TagB" and by_body["sync-4"]["keys"] == "s-4"
    assert by_body["batch-3"]["tags"] == "TagC" and by_body["batch-3"]["keys"] == "b-3"
    sync_ids = {r["msgId"]: (r["queueId"], r["queueOffset"]) for r in out[1]}
    for m in everything:
        if m["msgId"] in sync_ids:
            assert (m["queueId"], m["queueOffset"]) == sync_ids[m["msgId"]]

    filtered = received(out[6])
    wanted = [f"{mode}-{i}" for mode in ("sync", "async", "oneway") for i in range(6) if i % 3 != 2]
    assert Counter(m["body"] for m in filtered) == Counter(wanted)
    assert {m["tags"] for m in filtered} == {"TagA", "TagB"}


def test_orderly_sends_consumed_in_order_by_an_orderly_consumer(rs_cluster, java_programs: JavaPrograms
                                                                ) -> None:
    ns = rs_cluster.namesrv_addr
    keys, per_key = 4, 10
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfOrder"], "queues": 4},
        {"op": "send", "namesrv": ns, "topic": "JfOrder", "mode": "orderly", "count": keys * per_key,
         "orderKeys": keys},
        {"op": "push", "namesrv": ns, "group": "jf_order", "topic": "JfOrder", "orderly": True,
         "count": keys * per_key, "timeoutMs": 40_000, "lingerMs": 500},
    ])
    sent = out[1]
    assert all(r["status"] == "SEND_OK" for r in sent)
    queue_of = {r["key"]: r["queueId"] for r in sent}
    assert all(r["queueId"] == queue_of[r["key"]] for r in sent)      # same queue per key
    assert len(set(queue_of.values())) == keys
    for key in range(keys):    # in each queue, the send order is the queue order
        offsets = [r["queueOffset"] for r in sent if r["key"] == key]
        assert offsets == sorted(offsets)

    got = received(out[2])
    assert len(got) == keys * per_key
    for key in range(keys):
        bodies = [m["body"] for m in got if m["body"].startswith(f"order-{key}-")]
        assert bodies == [f"order-{key}-{seq}" for seq in range(per_key)]     # consumed in order
        assert {m["queueId"] for m in got if m["body"].startswith(f"order-{key}-")} == {queue_of[key]}


def test_delay_level_and_zlib_body_read_by_java_and_by_our_client(rs_cluster, java_programs: JavaPrograms
                                                                  ) -> None:
    ns = rs_cluster.namesrv_addr
    big = 10_000    # over compressMsgBodyOverHowmuch (4 KiB): the Java producer deflates it (ZLIB)
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfDelay", "JfBig"], "queues": 4},
        # level 3 is 1 s under the broker's messageDelayLevel (rs_cluster: every level 1 s)
        {"op": "push", "namesrv": ns, "group": "jf_delay", "topic": "JfDelay", "count": 2, "timeoutMs": 30_000,
         "queues": 4, "then": {"op": "send", "namesrv": ns, "topic": "JfDelay", "count": 2, "delayLevel": 3,
                               "bodyPrefix": "later", "tags": ["TagD"]}},
        {"op": "send", "namesrv": ns, "topic": "JfBig", "count": 2, "bodySize": big, "bodyPrefix": "big"},
        {"op": "push", "namesrv": ns, "group": "jf_big", "topic": "JfBig", "count": 2, "timeoutMs": 30_000},
    ])
    sends = [line for line in out[1] if "status" in line]
    assert [s["status"] for s in sends] == ["SEND_OK"] * 2
    sent_at = {f"later-{s['i']}": s["sentAt"] for s in sends}
    delayed = received(out[1])
    assert sorted(m["body"] for m in delayed) == ["later-0", "later-1"]
    for m in delayed:
        assert m["topic"] == "JfDelay" and m["tags"] == "TagD"
        assert m["properties"]["DELAY"] == "3"      # kept on delivery, as RocketMQ 4.9.8 keeps it
        # stored again to its real topic once due, and so consumed, a second after it was made
        # (bornTimestamp and receivedAt are both the client's clock)
        assert m["storeTimestamp"] - m["bornTimestamp"] >= 1_000
        assert m["receivedAt"] - m["bornTimestamp"] >= 1_000
        assert m["bornTimestamp"] <= sent_at[m["body"]]

    bodies = {hashlib.md5(java_body("big", i, big)).hexdigest(): i for i in range(2)}
    got = received(out[3])
    assert sorted(bodies[m["bodyMd5"]] for m in got) == [0, 1]
    assert all(m["bodyLen"] == big for m in got)
    # the stored record is the compressed one: our own client inflates it too
    expected = {java_body("big", i, big) for i in range(2)}
    found: list[bytes] = []
    with PullConsumer("jf_big_py", namesrv_addr=ns) as consumer:
        for mq in consumer.fetch_message_queues("JfBig"):
            result = consumer.pull(mq, 0, 32)
            if result.pull_status == PullStatus.FOUND:
                for msg in result.messages:
                    assert msg.sys_flag & 1         # COMPRESSED
                    found.append(bytes(msg.body))
    assert sorted(found) == sorted(expected)


def test_clustering_splits_the_queues_and_broadcasting_gives_each_consumer_all(
        rs_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_cluster.namesrv_addr
    n_clu, n_bc = 40, 20
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfClu", "JfBc"], "queues": 4},
        {"op": "push", "namesrv": ns, "group": "jf_clu", "topic": "JfClu", "consumers": 2, "queues": 4,
         "count": n_clu, "timeoutMs": 60_000, "lingerMs": 1_500,
         "then": {"op": "send", "namesrv": ns, "topic": "JfClu", "count": n_clu, "bodyPrefix": "clu"}},
        {"op": "push", "namesrv": ns, "group": "jf_bc", "topic": "JfBc", "consumers": 2, "queues": 4,
         "model": "BROADCASTING", "count": n_bc, "timeoutMs": 60_000, "lingerMs": 1_000,
         "then": {"op": "send", "namesrv": ns, "topic": "JfBc", "count": n_bc, "bodyPrefix": "bc"}},
    ])
    clustering = received(out[1])
    assert Counter(m["body"] for m in clustering) == Counter(f"clu-{i}" for i in range(n_clu))  # once each
    queues = {c: {m["queueId"] for m in clustering if m["consumer"] == c} for c in (0, 1)}
    assert queues[0] and queues[1] and not queues[0] & queues[1]      # the queues split between them

    broadcasting = received(out[2])
    for c in (0, 1):
        mine = [m["body"] for m in broadcasting if m["consumer"] == c]
        assert Counter(mine) == Counter(f"bc-{i}" for i in range(n_bc))   # each consumer gets all


def test_lite_pull_consumer_subscribe_and_assign(rs_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_cluster.namesrv_addr
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfLite"], "queues": 4},
        {"op": "send", "namesrv": ns, "topic": "JfLite", "count": 12, "bodyPrefix": "lite"},
        {"op": "litepull", "namesrv": ns, "group": "jf_lite_sub", "topic": "JfLite", "mode": "subscribe",
         "count": 12, "timeoutMs": 30_000},
        {"op": "litepull", "namesrv": ns, "group": "jf_lite_assign", "topic": "JfLite", "mode": "assign",
         "count": 12, "timeoutMs": 30_000},
    ])
    sent = {r["msgId"]: (r["queueId"], r["queueOffset"]) for r in out[1]}
    for step in (2, 3):
        got = received(out[step])
        assert sorted(m["body"] for m in got) == sorted(f"lite-{i}" for i in range(12))
        assert {m["msgId"]: (m["queueId"], m["queueOffset"]) for m in got} == sent


def test_retries_end_in_the_dlq(rs_cluster, java_programs: JavaPrograms) -> None:
    ns = rs_cluster.namesrv_addr
    max_reconsume = 2
    out = run(java_programs, [
        {"op": "topics", "namesrv": ns, "topics": ["JfRetry"], "queues": 4},
        {"op": "send", "namesrv": ns, "topic": "JfRetry", "count": 1, "bodyPrefix": "doomed", "tags": ["TagX"],
         "keysPrefix": "d-"},
        # RECONSUME_LATER every time: delivered 1 + max_reconsume times, then sent back to the DLQ
        {"op": "push", "namesrv": ns, "group": "jf_dlq", "topic": "JfRetry", "reconsumeLater": True,
         "maxReconsumeTimes": max_reconsume, "count": 1 + max_reconsume, "timeoutMs": 60_000,
         "lingerMs": 2_000},
        {"op": "push", "namesrv": ns, "group": "jf_dlq_reader", "topic": "%DLQ%jf_dlq", "count": 1,
         "timeoutMs": 30_000, "lingerMs": 500},
    ])
    (sent,) = out[1]
    deliveries = received(out[2])
    assert [m["reconsumeTimes"] for m in deliveries] == list(range(1 + max_reconsume))
    assert all(m["body"] == "doomed-0" and m["tags"] == "TagX" for m in deliveries)
    assert [m["topic"] for m in deliveries] == ["JfRetry"] * (1 + max_reconsume)   # restored by the client
    (dead,) = received(out[3])
    assert dead["topic"] == "%DLQ%jf_dlq" and dead["body"] == "doomed-0" and dead["keys"] == "d-0"
    assert dead["reconsumeTimes"] == 1 + max_reconsume
    props = dead["properties"]
    assert props["RETRY_TOPIC"] == "JfRetry" and props["DELAY"] == "0"
    assert props["UNIQ_KEY"] == sent["msgId"]
