"""``rocketstore admin``: mqadmin's commands against a real name server and broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from cluster import cluster, wait_for

from rocketstore.cli import main
from rocketstore.client import ConsumeStatus, Message, Producer, PushConsumer

pytestmark = pytest.mark.slow


def admin(namesrv: str, *args: str, ok: bool = True) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["admin", args[0], "-n", namesrv, *args[1:]])
    if ok:
        assert result.exit_code == 0, result.output
    return result.exit_code, result.output


def admin_json(namesrv: str, *args: str) -> object:
    return json.loads(admin(namesrv, *args, "--json")[1])


def test_admin_commands(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        ns = c.namesrv_addr
        broker_addr = c.brokers["broker-a"].address
        out = admin(ns, "updateTopic", "-c", "TestCluster", "-t", "AdminT", "-r", "4", "-w", "4")[1]
        assert f"create topic to {broker_addr} success" in out
        assert "AdminT" in admin_json(ns, "topicList")["topicList"]
        route = admin_json(ns, "topicRoute", "-t", "AdminT")
        assert route["queueDatas"][0]["writeQueueNums"] == 4
        assert "broker-a" in admin(ns, "topicRoute", "-t", "AdminT")[1]

        sent = admin_json(ns, "sendMessage", "-t", "AdminT", "-p", "hello", "-k", "key1 key2", "-c", "TagA")
        assert sent["sendStatus"] == "SEND_OK"
        # the broker's ConsumeQueue and index follow its CommitLog a few ms behind
        assert wait_for(lambda: sum(r["maxOffset"] for r in admin_json(ns, "topicStatus", "-t", "AdminT")) == 1, 10)
        status = admin_json(ns, "topicStatus", "-t", "AdminT")
        assert len(status) == 4 and sum(r["maxOffset"] for r in status) == 1
        assert "#Max Offset" in admin(ns, "topicStatus", "-t", "AdminT")[1]

        (by_key,) = admin_json(ns, "queryMsgByKey", "-t", "AdminT", "-k", "key2")
        assert by_key["body"] == "hello" and by_key["tags"] == "TagA" and by_key["keys"] == ["key1", "key2"]
        assert admin_json(ns, "queryMsgById", "-i", sent["offsetMsgId"])["body"] == "hello"
        assert admin_json(ns, "queryMsgById", "-i", sent["msgId"], "-t", "AdminT")["offsetMsgId"] == sent["offsetMsgId"]
        assert "hello" in admin(ns, "queryMsgById", "-i", sent["offsetMsgId"])[1]
        at_offset = admin_json(ns, "queryMsgByOffset", "-t", "AdminT", "-b", "broker-a", "-i",
                               str(sent["queueId"]), "-o", "0")
        assert at_offset["msgId"] == sent["msgId"]
        assert [m["body"] for m in admin_json(ns, "consumeMessage", "-t", "AdminT")] == ["hello"]
        assert "1 message(s)" in admin(ns, "consumeMessage", "-t", "AdminT")[1]

        (row,) = admin_json(ns, "clusterList")
        assert (row["cluster"], row["brokerName"], row["address"]) == ("TestCluster", "broker-a", broker_addr)
        assert "#InTPS" in admin(ns, "clusterList")[1]
        assert admin_json(ns, "brokerStatus", "-b", broker_addr)

        with Producer("AdminPG", namesrv_addr=ns) as producer:
            for i in range(9):
                producer.send(Message("AdminT", f"m{i}".encode()))
            got: list[bytes] = []
            consumer = PushConsumer("AdminCG", namesrv_addr=ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                    persist_consumer_offset_interval=500)
            consumer.subscribe("AdminT")
            consumer.register_message_listener(lambda msgs: got.extend(m.body for m in msgs) or ConsumeStatus.SUCCESS)
            consumer.start()
            try:
                assert wait_for(lambda: len(got) == 10, 30)

                def caught_up() -> bool:
                    progress = admin_json(ns, "consumerProgress", "-g", "AdminCG", "-t", "AdminT")
                    return sum(r["consumerOffset"] for r in progress["offsetTable"]) == 10
                assert wait_for(caught_up, 15, step=0.5)
                progress = admin_json(ns, "consumerProgress", "-g", "AdminCG")
                assert progress["diffTotal"] == 0
                assert "Diff Total: 0" in admin(ns, "consumerProgress", "-g", "AdminCG")[1]
                connection = admin_json(ns, "consumerConnection", "-g", "AdminCG")
                assert [conn["clientId"] for conn in connection["connectionSet"]] == [consumer.client_id]
                producers = admin_json(ns, "producerConnection", "-g", "AdminPG", "-t", "AdminT")
                assert [conn["clientId"] for conn in producers["connectionSet"]] == [producer.client_id]

                got.clear()
                reset = admin_json(ns, "resetOffsetByTime", "-g", "AdminCG", "-t", "AdminT", "-s", "0")
                assert sorted(r["offset"] for r in reset) == [0, 0, 0, 0]
                assert wait_for(lambda: len(got) >= 10, 30)     # the online member consumes again
                assert sorted(got) == sorted([b"hello"] + [f"m{i}".encode() for i in range(9)])
            finally:
                consumer.shutdown()

        admin(ns, "deleteTopic", "-t", "AdminT", "-c", "TestCluster")
        assert "AdminT" not in admin_json(ns, "topicList")["topicList"]

        code, out = admin(ns, "topicRoute", "-t", "Missing", ok=False)
        assert code == 1 and out.strip().count("\n") == 0 and "does not exist" in out
        code, out = admin(ns, "updateTopic", "-t", "X", ok=False)
        assert code == 1 and "exactly one" in out


def test_admin_without_a_name_server_is_one_line(tmp_path: Path) -> None:
    code, out = admin("127.0.0.1:1", "topicList", ok=False)
    assert code == 1 and out.strip().count("\n") == 0 and "name server" in out
