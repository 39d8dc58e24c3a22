"""BrokerConfig from broker.properties, and the broker's JSON tables: atomic writes that a
crash never tears, the .bak fallback, fastjson's unquoted keys, the system topics and groups,
topic creation rules, lock expiry."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.broker.json_table import JsonTableFile
from rocketstore.broker.processors.admin import message_queue_key
from rocketstore.broker.rebalance_lock import RebalanceLockManager
from rocketstore.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.common.atomic_file import FileSystem
from rocketstore.common.fastjson import dumps_object_keys as fastjson_dumps
from rocketstore.common.perm import PERM_INHERIT, PERM_READ, PERM_WRITE


def test_broker_properties_carry_broker_and_store_keys(caplog) -> None:
    text = io.StringIO(
        "brokerClusterName = C1\nbrokerName=b1\nbrokerId=0\nnamesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n"
        "brokerIP1=10.0.0.7\nlistenPort=20911\nautoCreateTopicEnable=false\ndefaultTopicQueueNums=4\n"
        "storePathRootDir=/data/rs\nflushDiskType=SYNC_FLUSH\nmessageDelayLevel=1s 2s\n"
        "waitTimeMillsInSendQueue=300\nsomethingElse=1\n")
    config = BrokerConfig.from_properties(text)
    assert (config.broker_cluster_name, config.broker_name, config.listen_port) == ("C1", "b1", 20911)
    assert config.namesrv_addrs == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert config.broker_ip1 == "10.0.0.7" and not config.auto_create_topic_enable
    assert config.wait_time_mills_in_send_queue == 300
    assert config.store.store_path_root_dir == "/data/rs"
    assert config.store.flush_disk_type == "SYNC_FLUSH" and config.store.message_delay_level == "1s 2s"
    assert "somethingElse" in caplog.text
    store = config.store_config_for(20911)
    assert store.store_host == "10.0.0.7:20911" and store.ha_listen_port == 20912
    assert config.fast_listen_port == 20909
    # RocketMQ's defaults
    default = BrokerConfig()
    assert default.listen_port == 10911 and default.default_topic_queue_nums == 8
    assert default.flush_consumer_offset_interval == 5000 and default.broker_permission == 6
    with pytest.raises(ValueError, match="listenPort"):
        BrokerConfig.from_properties(io.StringIO("listenPort=x\n"))
    with pytest.raises(ValueError, match="listen_port"):
        BrokerConfig(listen_port=70000)


class _PowerCutAtRename(FileSystem):
    def replace(self, src: str, dst: str) -> None:
        raise OSError("power cut")


def test_writes_are_atomic_and_fall_back_to_bak(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "topics.json")
    file = JsonTableFile(path)
    file.write(b'{"v": 1}')
    file.write(b'{"v": 2}')
    assert file.load() == {"v": 2}
    assert orjson.loads(Path(path + ".bak").read_bytes()) == {"v": 1}

    # a crash between writing the temp file and the rename: the old version is whole
    with pytest.raises(OSError):
        JsonTableFile(path, fs=_PowerCutAtRename()).write(b'{"v": 3}')
    assert file.load() == {"v": 2}
    # a torn main file (written by something else): the .bak copy is read
    Path(path + ".bak").write_bytes(b'{"v": 1}')
    Path(path).write_bytes(b'{"v": ')
    assert file.load() == {"v": 1}
    Path(path).unlink()
    assert file.load() == {"v": 1}
    Path(path + ".bak").write_bytes(b"garbage")
    Path(path).write_bytes(b"garbage too")
    with pytest.raises(ValueError, match="topics.json"):
        file.load()


def test_topic_table_rules(tmp_path: Path) -> None:
    config = BrokerConfig(broker_name="b1", broker_cluster_name="C1", default_topic_queue_nums=8)
    changes = []
    topics = TopicConfigManager(config, JsonTableFile(str(tmp_path / "topics.json")),
                                on_change=changes.append)
    for system in ("TBW102", "SELF_TEST_TOPIC", "C1", "b1", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX"):
        assert topics.select(system) is not None, system
    assert topics.select("TBW102").perm == PERM_INHERIT | PERM_READ | PERM_WRITE
    assert topics.select("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    created = topics.create_in_send("new", "TBW102", 16)
    assert (created.write_queue_nums, created.perm) == (8, PERM_READ | PERM_WRITE)    # capped by TBW102
    assert changes == [True]
    assert topics.create_in_send("other", "new", 4) is None         # "new" is not inheritable
    assert topics.create_in_send("other", "missing", 4) is None
    version = topics.data_version
    topics.persist()
    again = TopicConfigManager(config, JsonTableFile(str(tmp_path / "topics.json")))
    again.load()
    assert again.select("new") == created and again.data_version == version
    # fastjson's unquoted numbers in a RocketMQ-written file
    (tmp_path / "t2.json").write_text('{"dataVersion":{"counter":{"value":7},"timestamp":5},'
                                      '"topicConfigTable":{"x":{"perm":6,"readQueueNums":2,"writeQueueNums":2,'
                                      '"topicName":"x","topicSysFlag":0,"topicFilterType":"SINGLE_TAG","order":false}}}')
    third = TopicConfigManager(config, JsonTableFile(str(tmp_path / "t2.json")))
    third.load()
    assert third.select("x").read_queue_nums == 2 and third.data_version.counter == 7
    # a broker that may not write says so in what it registers
    readonly = TopicConfigManager(config.replace(broker_permission=PERM_READ), JsonTableFile(str(tmp_path / "t3.json")))
    assert readonly.registration_table()["TBW102"]["perm"] == PERM_READ


def test_subscription_groups_and_offsets(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(BrokerConfig(), JsonTableFile(str(tmp_path / "sub.json")))
    assert "TOOLS_CONSUMER" in groups.table
    assert groups.find("fresh").retry_max_times == 16
    groups.update(SubscriptionGroupConfig.from_json({"groupName": "g2", "retryMaxTimes": "3",
                                                     "consumeEnable": False}))
    groups.persist()
    again = SubscriptionGroupManager(BrokerConfig(auto_create_subscription_group=False),
                                     JsonTableFile(str(tmp_path / "sub.json")))
    again.load()
    assert again.table["g2"].retry_max_times == 3 and not again.table["g2"].consume_enable
    assert again.find("unknown") is None
    with pytest.raises(ValueError, match="retryMaxTimes"):
        SubscriptionGroupConfig.from_json({"groupName": "x", "retryMaxTimes": "many"})

    offsets = ConsumerOffsetManager(str(tmp_path))
    offsets.commit("g", "t", 0, 5)
    offsets.commit("g", "t", 1, 7)
    assert offsets.query("g", "t", 0) == 5 and offsets.query("g", "t", 9) == -1
    snapshot = offsets.snapshot()
    offsets.write(snapshot)
    assert offsets.snapshot() is None            # nothing changed since
    reread = ConsumerOffsetManager(str(tmp_path))
    reread.load()
    assert reread.query_queues("g", "t") == {0: 5, 1: 7}


@pytest.mark.parametrize("version, field", [
    ('{"counter":1,"timestamp":"soon"}', "dataVersion.timestamp"),
    ('{"counter":{"value":[1]},"timestamp":5}', "dataVersion.counter"),
])
def test_table_files_with_a_bad_data_version_name_file_and_field(tmp_path: Path, version: str,
                                                                  field: str) -> None:
    for name, key, manager in (("topics.json", "topicConfigTable", TopicConfigManager),
                               ("sub.json", "subscriptionGroupTable", SubscriptionGroupManager)):
        path = tmp_path / name
        path.write_text(f'{{"dataVersion":{version},"{key}":{{}}}}')
        with pytest.raises(ValueError, match=f"{name}: {field} must be an integer"):
            manager(BrokerConfig(), JsonTableFile(str(path))).load()
        assert path.read_text().startswith('{"dataVersion"')      # left as it was


def test_fastjson_object_keys() -> None:
    body = fastjson_dumps({"offsetTable": {message_queue_key("T", "b", 1): {"maxOffset": 3}}})
    assert body == b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"maxOffset":3}}}'


def test_queue_locks_expire() -> None:
    now = [0.0]
    locks = RebalanceLockManager(60_000, clock_ms=lambda: now[0])
    mq = ("T", "b", 0)
    assert locks.try_lock_batch("g", [mq], "c1") == [mq]
    assert locks.try_lock_batch("g", [mq], "c2") == []
    now[0] += 30_000
    assert locks.try_lock_batch("g", [mq], "c1") == [mq]     # renewed
    now[0] += 59_000
    assert locks.try_lock_batch("g", [mq], "c2") == []
    now[0] += 2_000
    assert locks.try_lock_batch("g", [mq], "c2") == [mq]     # c1's lock expired
    locks.unlock_batch("g", [mq], "c1")                       # not c1's any more
    assert locks.holder("g", mq) == "c2"
    locks.unlock_batch("g", [mq], "c2")
    assert locks.holder("g", mq) is None
