"""Replication between rocketstore and Apache RocketMQ 4.9.8 (Java), both ways: a Java SLAVE
follows a rocketstore master, and a rocketstore slave follows a Java master. The slave's
CommitLog is byte-identical to its master's over the replicated range and its ConsumeQueue
files hold the same units."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from java_env import require_java, start_java_broker
from ports import free_low_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ha"))

from ha_servers import QUEUES, SEGMENT, TOPIC, ha_broker, send_many, ss, wait_for  # noqa: E402

from rocketstore.config import StoreConfig  # noqa: E402
from rocketstore.remoting import RemotingClient, RemotingCommand, ResponseCode  # noqa: E402
from rocketstore.store import MessageStore  # noqa: E402

CQ_FILE = 60_000


def read_store(root: Path) -> MessageStore:
    return MessageStore.open(root, StoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=CQ_FILE, max_hash_slot_num=5000, max_index_num=20000),
        read_only=True)


def max_offset(root: Path) -> int:
    with read_store(root) as store:
        return store.get_max_phy_offset()


def first_segment(root: Path) -> int:
    """Where a store's CommitLog starts (its first segment file); -1 when it has none."""
    names = sorted(p.name for p in (root / "commitlog").iterdir()) \
        if (root / "commitlog").is_dir() else []
    return int(names[0]) if names else -1


def log_bytes(root: Path, start: int, end: int) -> bytes:
    """CommitLog bytes [start, end) read from the segment files."""
    out = bytearray()
    for path in sorted((root / "commitlog").iterdir(), key=lambda p: p.name):
        base = int(path.name)
        if base + SEGMENT > start and base < end:
            data = path.read_bytes()
            out += data[max(0, start - base):min(SEGMENT, end - base)]
    return bytes(out)


#: RocketMQ fills a ConsumeQueue that starts past offset 0 with these units (fillPreBlank)
PRE_BLANK = (0).to_bytes(8, "big") + (0x7FFFFFFF).to_bytes(4, "big") + bytes(8)


def units(root: Path, queue_id: int) -> list[bytes]:
    """The ConsumeQueue units of TOPIC's queue (its first file), zero units at the end cut;
    the pre-blank units before a slave's first one are None."""
    path = root / "consumequeue" / TOPIC / str(queue_id) / f"{0:020d}"
    if not path.exists():
        return []
    data = path.read_bytes()
    out: list[bytes] = [data[i:i + 20] for i in range(0, len(data), 20)]
    while out and out[-1] == bytes(20):
        out.pop()
    return out


def same_units(master_root: Path, slave_root: Path, queue_id: int) -> bool:
    """The slave's units equal the master's from the slave's first real unit on."""
    mine, theirs = units(slave_root, queue_id), units(master_root, queue_id)
    first = next((i for i, u in enumerate(mine) if u != PRE_BLANK and u != bytes(20)), len(mine))
    return bool(theirs) and first < len(mine) and mine[first:] == theirs[first:]


def caught_up(master_root: Path, slave_root: Path) -> bool:
    start = first_segment(slave_root)
    if start < 0:
        return False
    end = max_offset(master_root)
    return log_bytes(slave_root, start, end) == log_bytes(master_root, start, end) and \
        all(same_units(master_root, slave_root, q) for q in range(QUEUES))


def assert_same(master_root: Path, slave_root: Path) -> None:
    start, end = first_segment(slave_root), max_offset(master_root)
    assert 0 <= start < end and end > 2 * SEGMENT
    replicated = log_bytes(slave_root, start, end)
    assert len(replicated) == end - start
    assert replicated == log_bytes(master_root, start, end)
    for queue_id in range(QUEUES):
        assert same_units(master_root, slave_root, queue_id)


async def call(address: str, request: RemotingCommand) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(address, request, timeout=10)
    finally:
        await client.close()


def java_properties() -> dict[str, object]:
    return {"mappedFileSizeCommitLog": SEGMENT, "mappedFileSizeConsumeQueue": CQ_FILE,
            "maxHashSlotNum": 5000, "maxIndexNum": 20000, "brokerName": "broker-ha",
            "brokerClusterName": "HaCluster", "flushCommitLogLeastPages": 0}


def test_java_slave_follows_rocketstore_master(tmp_path: Path) -> None:
    require_java()
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        master, master_ha = ha_broker(tmp_path, "master", namesrv_addr=namesrv.address)
        with ss.running(master):
            slave = start_java_broker(tmp_path, namesrv.address, name="java-slave",
                                      brokerId=1, brokerRole="SLAVE",
                                      haMasterAddress=f"127.0.0.1:{master_ha}",
                                      **java_properties())
            try:
                asyncio.run(send_many(master.address, 2000))
                slave_store = tmp_path / "java-slave" / "store"
                # RocketMQ's slave sends its first report a heartbeat interval (5 s) after it
                # connects: it starts at the master's last segment by then
                wait_for(lambda: caught_up(tmp_path / "master", slave_store), 90,
                         "the Java slave to catch up")
                assert_same(tmp_path / "master", slave_store)
                # what RocketMQ's slave answers a send: rocketstore's slave answers the same
                refused = asyncio.run(call(slave.address, ss.send_request(TOPIC, 0, b"no")))
                assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, \
                    (refused.code, refused.remark)
            finally:
                slave.stop()
        assert "HAService receive new connection" in master.log()


def test_rocketstore_slave_follows_java_master(tmp_path: Path) -> None:
    require_java()
    namesrv = ss.namesrv()
    with ss.running(namesrv):
        port = free_low_port(also=(-2, 1))
        java_master = start_java_broker(tmp_path, namesrv.address, name="java-master",
                                        listenPort=port, **java_properties())
        try:
            slave, _ = ha_broker(tmp_path, "slave", broker_id=1, role="SLAVE",
                                 namesrv_addr=namesrv.address)
            with ss.running(slave):
                asyncio.run(send_many(java_master.address, 2000))
                master_store = tmp_path / "java-master" / "store"
                wait_for(lambda: caught_up(master_store, tmp_path / "slave"), 90,
                         "our slave to catch up with the Java master")
                assert_same(master_store, tmp_path / "slave")
                assert first_segment(tmp_path / "slave") == 0
                with read_store(tmp_path / "slave") as ours, read_store(master_store) as theirs:
                    for key in ("k0", "k1999"):
                        assert [m.commitlog_offset for m in ours.query_message(TOPIC, key).messages] \
                            == [m.commitlog_offset for m in theirs.query_message(TOPIC, key).messages]
                assert "HAClient connected to master" in slave.log()
        finally:
            java_master.stop()
