"""A broker over a store opened read-only (readOnly=true, brokerPermission=4), what
``rocketstore console --store`` runs: sends are refused NO_PERMISSION with RocketMQ's remark,
reads, pulls, key queries and admin requests are served (topics the store holds without a
topics.json included), and no file of the store changes, a store not shut down cleanly
included (served as found, never truncated)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import broker_helpers
import pytest
from broker_helpers import cluster, pull_fields, send_fields

from rocketstore import Message, MessageStore
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.controller import BrokerController
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.common.perm import PERM_READ
from rocketstore.config import StoreConfig
from rocketstore.remoting import RequestCode, ResponseCode

arun = broker_helpers.arun
SMALL = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 20 * 1000}


def file_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def write_store(root: Path, count: int = 30) -> None:
    with MessageStore.open(root, StoreConfig(store_path_root_dir=str(root), **SMALL)) as store:
        for i in range(count):
            store.put_message(Message(topic="orders", body=f"order {i}".encode(), tags="paid",
                                      keys=[f"o-{i}"]), queue_id=i % 3)


def read_only_changes() -> dict[str, object]:
    return {"broker_permission": PERM_READ}


def test_sends_are_refused_reads_served_and_no_file_changes(arun, tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_store(root)
    before = file_hashes(root)

    async def main() -> None:
        async with cluster(root, {"read_only": True}, **read_only_changes()) as cl:
            assert cl.broker.store is not None and cl.broker.store.read_only
            # the topic the store holds, though it has no topics.json, with its 3 queues
            assert cl.broker.topics.select("orders").read_queue_nums == 3
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("orders", 0), b"refused")
            assert r.code == ResponseCode.NO_PERMISSION
            assert r.remark == "the broker[127.0.0.1] sending message is forbidden"
            r = await cl.call(RequestCode.PULL_MESSAGE, pull_fields("G", "orders", 1, 0, commit_offset=0))
            assert r.code == ResponseCode.SUCCESS and r.body
            r = await cl.call(RequestCode.QUERY_MESSAGE, {"topic": "orders", "key": "o-7", "maxNum": 32,
                                                          "beginTimestamp": 0, "endTimestamp": 1 << 62})
            assert r.code == ResponseCode.SUCCESS and b"order 7" in r.body_bytes()
            # admin writes change the broker's memory only: nothing reaches the disk
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "fresh", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "G", "topic": "orders", "queueId": 0, "commitOffset": 5})
            assert r.code == ResponseCode.SUCCESS
            # it cannot be made writable while it runs
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "must not have PERM_WRITE" in r.remark
            assert cl.broker.config.broker_permission == PERM_READ
            r = await cl.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert r.code == ResponseCode.SUCCESS and loads_fastjson(r.body_bytes())["table"]
            cl.broker._persist_offsets()

    arun(main())
    assert file_hashes(root) == before


def test_a_store_not_shut_down_cleanly_is_served_as_found(arun, tmp_path: Path) -> None:
    root = tmp_path / "store"
    # a writer that dies without closing: its abort file stays, recovery would run
    script = textwrap.dedent(f"""
        import os
        from rocketstore import Message, MessageStore, StoreConfig
        store = MessageStore.open({str(root)!r}, StoreConfig(store_path_root_dir={str(root)!r},
                                  flush_disk_type="SYNC_FLUSH", **{SMALL!r}))
        for i in range(20):
            store.put_message(Message(topic="orders", body=b"crash %d" % i, keys=["c-%d" % i]), queue_id=0)
        store.wait_dispatched()
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env=broker_helpers.child_env(),
                   cwd=broker_helpers.CHILD_CWD)
    assert (root / "abort").exists()
    before = file_hashes(root)

    async def main() -> None:
        async with cluster(root, {"read_only": True}, **read_only_changes()) as cl:
            r = await cl.call(RequestCode.GET_MAX_OFFSET, {"topic": "orders", "queueId": 0})
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "20"

    arun(main())
    assert file_hashes(root) == before


def test_read_only_needs_a_permission_without_write(tmp_path: Path) -> None:
    store = StoreConfig(store_path_root_dir=str(tmp_path), read_only=True)
    with pytest.raises(ValueError, match="broker_permission must not have PERM_WRITE"):
        BrokerConfig(store=store)
    assert BrokerConfig(store=store, broker_permission=PERM_READ).store.read_only


def test_a_directory_that_is_not_a_store_is_refused(arun, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    config = BrokerConfig(listen_port=0, namesrv_addr=None, broker_permission=PERM_READ,
                          store=StoreConfig(store_path_root_dir=str(tmp_path), read_only=True))

    async def main() -> None:
        with pytest.raises(FileNotFoundError, match="is not a store: it has no CommitLog directory"):
            await BrokerController(config).start()

    arun(main())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
