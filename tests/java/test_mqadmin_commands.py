"""RocketMQ 4.9.8's mqadmin, command by command, against rocketstore's name server and broker
(README.md, "RocketMQ's mqadmin against rocketstore"): each case asserts what the command
prints, as it prints it against RocketMQ's own servers. One name server and broker serve the
whole module; the cases run in order (later ones use what earlier ones made)."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from java_env import JavaPrograms, MqadminSession, require_java
from ports import free_low_port

_CLIENT_TESTS = str(Path(__file__).resolve().parents[1] / "client")
if _CLIENT_TESTS not in sys.path:
    sys.path.insert(0, _CLIENT_TESTS)

from cluster import NAMESRV_BOOT, Cluster, _start, wait_for  # noqa: E402

from rocketstore.client import (  # noqa: E402
    AdminClient,
    ConsumeStatus,
    Message,
    MQClientError,
    Producer,
    PushConsumer,
)
from rocketstore.common.java_properties import parse_properties  # noqa: E402

pytestmark = pytest.mark.slow


@dataclass
class AdminEnv:
    cluster: Cluster
    root: Path
    broker: str
    mqadmin: MqadminSession
    #: what earlier cases found (a message id, its queue)
    state: dict[str, str] = field(default_factory=dict)

    @property
    def namesrv(self) -> str:
        return self.cluster.namesrv_addr

    def run(self, *args: str) -> str:
        stdout, stderr = self.mqadmin.run(*args, "-n", self.namesrv)
        return stdout + "\n--stderr--\n" + stderr


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, java_programs: JavaPrograms) -> Iterator[AdminEnv]:
    require_java()
    root = tmp_path_factory.mktemp("mqadmin")
    # in root: consumerStatus writes each member's running info under the working directory
    session = MqadminSession(java_programs, root / "home", cwd=root)
    (root / "rocketstore").mkdir()
    cluster = Cluster(root / "rocketstore")
    conf = root / "namesrv.properties"
    conf.write_text(f"kvConfigPath={root / 'kvConfig.json'}\n", encoding="latin-1")
    producer = consumer = None
    try:
        cluster.namesrvs.append(_start(
            "namesrv", ["-m", "rocketstore.namesrv", "--listen-port", "0", "-c", str(conf)], NAMESRV_BOOT,
            lambda m: f"{m.group(1)}:{m.group(2)}"))
        port = free_low_port(also=(-2,))
        cluster.start_broker("broker-a", listenPort=port, fastListenPortEnable="true", brokerIP1="127.0.0.1")
        # an online producer group (`producer`, `producerConnection`) and consumer group
        # (`consumerConnection`, `consumerStatus`, `consumerProgress`)
        producer = Producer("AdminPG", namesrv_addr=cluster.namesrv_addr)
        producer.start()
        sent = producer.send(Message("AdminWarm", b"warm", keys=["warmkey"]))
        consumer = PushConsumer("AdminCG", namesrv_addr=cluster.namesrv_addr,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET", persist_consumer_offset_interval=500)
        consumer.subscribe("AdminWarm", "*")
        consumer.register_message_listener(lambda messages: ConsumeStatus.SUCCESS)
        consumer.start()
        # the group is online before a command looks for it: its retry topic (made by its
        # first heartbeat) has a route at the name server and its member a connection
        with AdminClient(namesrv_addr=cluster.namesrv_addr) as admin:
            assert wait_for(lambda: _group_online(admin, "AdminCG"), 30), "AdminCG never online"
        yield AdminEnv(cluster, root, f"127.0.0.1:{port}", session, {"warm_id": sent.offset_msg_id})
    finally:
        session.close()
        for client in (consumer, producer):
            if client is not None:
                client.shutdown()
        cluster.close()


def _group_online(admin: AdminClient, group: str) -> bool:
    try:
        admin.topic_route(f"%RETRY%{group}")
        return bool(admin.consumer_connection(group).get("connectionSet"))
    except MQClientError:
        return False


def expect(*patterns: str) -> Callable[[AdminEnv, str], None]:
    """Each pattern (a regex, ``{state}`` fields filled in) is found in the output."""
    def check(env: AdminEnv, out: str) -> None:
        for pattern in patterns:
            wanted = pattern.format(broker=env.broker, **env.state)
            assert re.search(wanted, out, re.M), f"{wanted!r} not in:\n{out[-4000:]}"
    return check


def _sent(env: AdminEnv, out: str) -> None:
    match = re.search(r"^broker-a\s+(\d+)\s+SEND_OK\s+([0-9A-F]{32,})\s*$", out, re.M)
    assert match, out
    env.state.update(qid=match.group(1), msg_id=match.group(2))


def _broker_file(env: AdminEnv, out: str) -> None:
    """updateBrokerConfig wrote the broker's properties file (the -c file)."""
    written = parse_properties((env.root / "rocketstore" / "broker-a.properties").read_text(encoding="latin-1"))
    assert written["fileReservedTime"] == "72" and written["autoCreateTopicEnable"] == "false"
    assert "noSuchKey" not in written


def _exported(env: AdminEnv, out: str) -> None:
    meta = orjson.loads((env.root / "export" / "metadata.json").read_bytes())
    assert "AdminT" in meta["topicConfigTable"] and "AdminG" in meta["subscriptionGroupTable"]


def both(*checks: Callable[[AdminEnv, str], None]) -> Callable[[AdminEnv, str], None]:
    def check(env: AdminEnv, out: str) -> None:
        for one in checks:
            one(env, out)
    return check


CASES: list[tuple[str, tuple[str, ...], Callable[[AdminEnv, str], None]]] = [
    ("updateTopic", ("updateTopic", "-c", "TestCluster", "-t", "AdminT", "-r", "4", "-w", "4"),
     expect(r"^create topic to {broker} success\.$", r"TopicConfig \[topicName=AdminT, readQueueNums=4, "
            r"writeQueueNums=4, perm=RW-")),
    ("topicList", ("topicList", "-c"), expect(r"^TestCluster\s+AdminT\s*$", r"^TestCluster\s+TBW102\s*$")),
    ("topicRoute", ("topicRoute", "-t", "AdminT"),
     expect(r'"brokerAddrs":\{{0:"{broker}"', r'"readQueueNums":4', r'"perm":6')),
    ("topicClusterList", ("topicClusterList", "-t", "AdminT"), expect(r"^TestCluster$")),
    ("updateTopicPerm", ("updateTopicPerm", "-t", "AdminT", "-b", "{broker}", "-p", "6"),
     expect(r"^new perm equals to the old one!$")),
    ("updateSubGroup", ("updateSubGroup", "-c", "TestCluster", "-g", "AdminG"),
     expect(r"^create subscription group to {broker} success\.$")),
    ("getConsumerConfig", ("getConsumerConfig", "-g", "AdminG"),
     expect(r"^=+TestCluster:broker-a=+$", r"^groupName\s+=  AdminG$", r"^retryMaxTimes\s+=  16$")),
    ("sendMessage", ("sendMessage", "-t", "AdminT", "-p", "hello", "-k", "adminkey", "-c", "TagA"), _sent),
    ("topicStatus", ("topicStatus", "-t", "AdminT"), expect(r"^broker-a\s+{qid}\s+0\s+1\s+\d{{4}}-")),
    ("queryMsgByKey", ("queryMsgByKey", "-t", "AdminT", "-k", "adminkey"), expect(r"^{msg_id}\s+{qid}\s+0$")),
    # by the broker's id (store host + CommitLog offset); a client's UNIQ_KEY is no such id
    ("queryMsgById", ("queryMsgById", "-i", "{warm_id}"),
     expect(r"^Topic:\s+AdminWarm$", r"^Keys:\s+\[warmkey\]$", r"^Queue Offset:\s+0$")),
    ("queryMsgByUniqueKey", ("queryMsgByUniqueKey", "-t", "AdminT", "-i", "{msg_id}"),
     expect(r"^Topic:\s+AdminT$", r"^Keys:\s+\[adminkey\]$")),
    ("queryMsgByOffset", ("queryMsgByOffset", "-t", "AdminT", "-b", "broker-a", "-i", "{qid}", "-o", "0"),
     expect(r"^Topic:\s+AdminT$", r"^Queue Offset:\s+0$")),
    ("printMsg", ("printMsg", "-t", "AdminT", "-d", "true"),
     expect(r"^minOffset=0, maxOffset=1, MessageQueue \[topic=AdminT, brokerName=broker-a, queueId={qid}\]$",
            r"^MSGID: {msg_id} MessageExt \[brokerName=broker-a, queueId={qid}, ", r"BODY: hello")),
    ("printMsgByQueue", ("printMsgByQueue", "-t", "AdminT", "-a", "broker-a", "-i", "{qid}", "-p", "true"),
     expect(r"^MSGID: {msg_id} MessageExt \[brokerName=broker-a, queueId={qid}, ")),
    ("queryCq", ("queryCq", "-t", "AdminT", "-q", "{qid}", "-i", "0", "-c", "1"),
     expect(r"max: 1, min: 0", r"ConsumeQueueData\{{physicOffset=\d+, physicSize=\d+, tagsCode=\d+")),
    ("consumeMessage", ("consumeMessage", "-t", "AdminT", "-g", "AdminG"),
     expect(r"^Consume ok$", r"^MSGID: {msg_id} ")),
    ("sendMsgStatus", ("sendMsgStatus", "-b", "broker-a", "-c", "2", "-s", "16"),
     expect(r"^rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK")),
    ("checkMsgSendRT", ("checkMsgSendRT", "-t", "AdminT", "-a", "3", "-s", "128"),
     expect(r"^broker-a\s+\d\s+true\s+\d+$", r"^Avg RT: ")),
    ("producer", ("producer", "-b", "{broker}"),
     expect(r"^producer group \(AdminPG\) instance : clientId=\S+,remoteIP=127\.0\.0\.1:\d+, language=\w+, "
            r"version=\d+, lastUpdateTimestamp=\d+$")),
    ("producerConnection", ("producerConnection", "-g", "AdminPG", "-t", "AdminWarm"),
     expect(r"^0001\s+\S+@\S+\s+127\.0\.0\.1:\d+\s+\w+\s+V\d+_\d+_\d+")),
    ("producerConnection offline", ("producerConnection", "-g", "NoSuchPG", "-t", "AdminT"),
     expect(r"CODE: 1  DESC: the producer group\[NoSuchPG\] not exist")),
    ("consumerProgress", ("consumerProgress",), expect(r"^#Group\s+#Count\s+#Version",
                                                        r"^AdminCG\s+1\s+V\d+_\d+_\d+\s+PUSH\s+CLUSTERING")),
    ("consumerProgress group", ("consumerProgress", "-g", "AdminCG"),
     expect(r"^AdminWarm\s+broker-a\s+\d+\s+\d+\s+\d+\s+")),
    ("consumerConnection", ("consumerConnection", "-g", "AdminCG"),
     expect(r"^\S+@\S+\s+127\.0\.0\.1:\d+\s+\w+\s+V\d+_\d+_\d+\s*$", r"^AdminWarm\s+\*\s*$",
            r"^ConsumeType: CONSUME_PASSIVELY$", r"^MessageModel: CLUSTERING$")),
    ("consumerStatus", ("consumerStatus", "-g", "AdminCG"),
     expect(r"^1\s+\S+@\S+\s+V\d+_\d+_\d+\s+\d+/\S+$", r"Same subscription in the same group of consumer")),
    ("resetOffsetByTime", ("resetOffsetByTime", "-g", "AdminG", "-t", "AdminT", "-s", "now"),
     expect(r"^rollback consumer offset by specified group\[AdminG\], topic\[AdminT\], force\[true\]",
            r"^broker-a\s+{qid}\s+[1-9]\d*\s*$")),
    ("skipAccumulatedMessage", ("skipAccumulatedMessage", "-g", "AdminG", "-t", "AdminT"),
     expect(r"^broker-a\s+{qid}\s+[1-9]\d*\s*$")),
    # the source group's %RETRY% route is needed (as against RocketMQ): the online group has one
    ("cloneGroupOffset", ("cloneGroupOffset", "-s", "AdminCG", "-d", "AdminCG2", "-t", "AdminWarm"),
     expect(r"^clone group offset success\. srcGroup\[AdminCG\], destGroup=\[AdminCG2\], topic\[AdminWarm\]$")),
    ("updateKvConfig", ("updateKvConfig", "-s", "NS1", "-k", "k1", "-v", "v1"),
     expect(r"^create or update kv config to namespace success\.$")),
    ("deleteKvConfig", ("deleteKvConfig", "-s", "NS1", "-k", "k1"), expect(r"^delete kv config from namespace success\.$")),
    ("updateOrderConf put", ("updateOrderConf", "-t", "AdminT", "-m", "put", "-v", "broker-a:4"),
     expect(r"^update orderConf success\. topic=\[AdminT\], orderConf=\[broker-a:4\]$")),
    ("updateOrderConf get", ("updateOrderConf", "-t", "AdminT", "-m", "get"),
     expect(r"^get orderConf success\. topic=\[AdminT\], orderConf=\[broker-a:4\]")),
    ("updateOrderConf delete", ("updateOrderConf", "-t", "AdminT", "-m", "delete"),
     expect(r"^delete orderConf success\. topic=\[AdminT\]$")),
    ("wipeWritePerm", ("wipeWritePerm", "-b", "broker-a"),
     expect(r"^wipe write perm of broker\[broker-a\] in name server\[[\d.:]+\] OK, \d+$")),
    ("addWritePerm", ("addWritePerm", "-b", "broker-a"),
     expect(r"^add write perm of broker\[broker-a\] in name server\[[\d.:]+\] OK, \d+$")),
    ("allocateMQ", ("allocateMQ", "-t", "AdminT", "-i", "1.1.1.1@1,2.2.2.2@2"),
     expect(r'"1\.1\.1\.1@1":\[\{{"brokerName":"broker-a","queueId":\d,"topic":"AdminT"\}}')),
    ("getNamesrvConfig", ("getNamesrvConfig",),
     expect(r"^orderMessageEnable\s+=  false$", r"^configBlackList\s+=  configBlackList;configStorePath;kvConfigPath$")),
    ("updateNamesrvConfig", ("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"),
     expect(r"^update name server config success!\[[\d.:]+\]$", r"^orderMessageEnable : true$")),
    ("updateNamesrvConfig black list", ("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x"),
     expect(r"CODE: 16  DESC: Can not update config in black list\.")),
    ("updateBrokerConfig", ("updateBrokerConfig", "-b", "{broker}", "-k", "fileReservedTime", "-v", "72"),
     expect(r"^update broker config success, {broker}$")),
    ("getBrokerConfig", ("getBrokerConfig", "-b", "{broker}"),
     expect(r"^=+{broker}=+$", r"^brokerName\s+=  broker-a$", r"^fileReservedTime\s+=  72$",
            r"^brokerClusterName\s+=  TestCluster$", r"^serverChannelMaxIdleTimeSeconds\s+=  120$")),
    ("updateBrokerConfig cluster", ("updateBrokerConfig", "-c", "TestCluster", "-k", "autoCreateTopicEnable",
                                    "-v", "false"),
     both(expect(r"^update broker config success, {broker}$"), _broker_file)),
    ("getBrokerConfig cluster", ("getBrokerConfig", "-c", "TestCluster"),
     expect(r"^=+Master: {broker}=+$", r"^autoCreateTopicEnable\s+=  false$", r"^fileReservedTime\s+=  72$")),
    ("updateBrokerConfig bad value", ("updateBrokerConfig", "-b", "{broker}", "-k", "fileReservedTime", "-v", "x"),
     expect(r"CODE: 1  DESC: property 'fileReservedTime' \(field file_reserved_time\): ")),
    ("updateBrokerConfig black list", ("updateBrokerConfig", "-b", "{broker}", "-k", "brokerConfigPath", "-v", "/x"),
     expect(r"CODE: 16  DESC: Can not update config in black list\.")),
    ("cleanExpiredCQ", ("cleanExpiredCQ", "-c", "TestCluster"), expect(r"^success$")),
    ("deleteExpiredCommitLog", ("deleteExpiredCommitLog", "-c", "TestCluster"), expect(r"^success$")),
    ("cleanUnusedTopic", ("cleanUnusedTopic", "-c", "TestCluster"), expect(r"^success$")),
    ("updateAclConfig", ("updateAclConfig", "-b", "{broker}", "-a", "RocketMQ", "-s", "12345678"),
     expect(r"CODE: 209  DESC: ACL is not enabled")),
    ("deleteAclConfig", ("deleteAclConfig", "-b", "{broker}", "-a", "RocketMQ"), expect(r"CODE: 210  DESC: ACL is not")),
    ("updateGlobalWhiteAddr", ("updateGlobalWhiteAddr", "-b", "{broker}", "-g", "10.10.*"),
     expect(r"CODE: 211  DESC: ACL is not enabled")),
    ("clusterAclConfigVersion", ("clusterAclConfigVersion", "-c", "TestCluster"),
     expect(r"CODE: 1  DESC: ACL is not enabled")),
    ("queryMsgTraceById", ("queryMsgTraceById", "-i", "{msg_id}"),
     expect(r"The topic\[RMQ_SYS_TRACE_TOPIC\] not matched route info")),
    # the statistics' figures are checked where they are made; here: each command answers
    ("clusterList", ("clusterList",), expect(r"^TestCluster\s+broker-a\s+0\s+{broker}\s+V4_9_8\s")),
    ("brokerStatus", ("brokerStatus", "-b", "{broker}"),
     expect(r"^brokerVersionDesc\s+: V4_9_8$", r"^commitLogMaxOffset\s+: \d+$")),
    ("statsAll", ("statsAll",), expect(r"^#Topic\s+#Consumer Group\s+#Accumulation\s+#InTPS")),
    ("exportMetadata", ("exportMetadata", "-c", "TestCluster", "-f", "{root}/export"),
     both(expect(r"^export \S+/metadata\.json success$"), _exported)),
    ("exportConfigs", ("exportConfigs", "-c", "TestCluster", "-f", "{root}/export"),
     expect(r"^export \S+/configs\.json success$")),
    ("exportMetrics", ("exportMetrics", "-c", "TestCluster", "-f", "{root}/export"),
     expect(r"^export \S+/metrics\.json success$")),
    ("deleteSubGroup", ("deleteSubGroup", "-c", "TestCluster", "-g", "AdminG"),
     expect(r"^delete subscription group \[AdminG\] from broker \[{broker}\] in cluster \[TestCluster\] success\.$")),
    ("deleteTopic", ("deleteTopic", "-c", "TestCluster", "-t", "AdminT"),
     expect(r"^delete topic \[AdminT\] from cluster \[TestCluster\] success\.$",
            r"^delete topic \[AdminT\] from NameServer success\.$")),
]


@pytest.mark.parametrize("args,check", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mqadmin_command(env: AdminEnv, args: tuple[str, ...], check: Callable[[AdminEnv, str], None]) -> None:
    if ("{msg_id}" in " ".join(args) or "{qid}" in " ".join(args)) and "msg_id" not in env.state:
        pytest.skip("sendMessage did not run first")
    filled = [a.format(broker=env.broker, root=env.root, **env.state) for a in args]
    out = env.run(*filled)
    check(env, out)


def _numbers_out(text: str) -> list[str]:
    """Output lines with numbers, ids and addresses made alike, and mqadmin's stack frames and
    'see the FAQ' line (which differ between its own runs) left out."""
    lines = []
    for line in text.splitlines():
        if line.startswith("\tat ") or "rocketmq.apache.org/docs/faq" in line or line.startswith("\t..."):
            continue
        lines.append(re.sub(r"[0-9A-F]{24,}|\d+", "N", line.replace("JavaCluster", "TestCluster")))
    return lines


def _properties_shown(text: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)\s+=  (.*)$", text, re.M))


def test_mqadmin_answers_as_against_java_servers(env: AdminEnv, tmp_path: Path, java_programs: JavaPrograms
                                                 ) -> None:
    """The same commands against RocketMQ 4.9.8's own name server and broker: the same output
    (numbers aside), and getBrokerConfig shows every key of Java's that rocketstore has."""
    from java_env import java_servers

    from rocketstore.broker.config import BROKER_PROPERTY_KEYS
    from rocketstore.broker.live_config import FIXED_BROKER_PROPERTIES
    from rocketstore.config import PROPERTY_KEYS

    java_mqadmin = MqadminSession(java_programs, tmp_path / "home", cwd=tmp_path)
    with java_servers(tmp_path) as (java_namesrv, java_broker), contextlib.closing(java_mqadmin):
        def both_ways(*args: str) -> tuple[str, str]:
            stdout, stderr = java_mqadmin.run(*[a.format(broker=java_broker.address, cluster="JavaCluster")
                                                for a in args], "-n", java_namesrv.address)
            ours = env.run(*[a.format(broker=env.broker, cluster="TestCluster") for a in args])
            return stdout + "\n--stderr--\n" + stderr, ours

        java, ours = both_ways("getBrokerConfig", "-b", "{broker}")
        java_keys, our_keys = _properties_shown(java), _properties_shown(ours)
        known = set(BROKER_PROPERTY_KEYS.values()) | set(PROPERTY_KEYS.values()) | set(FIXED_BROKER_PROPERTIES)
        assert sorted((java_keys.keys() & known) - our_keys.keys()) == []
        for key, value in FIXED_BROKER_PROPERTIES.items():
            assert (key, java_keys[key]) == (key, value)
        for args in (
            ("updateTopic", "-c", "{cluster}", "-t", "CmpT", "-r", "1", "-w", "1"),
            ("sendMessage", "-t", "CmpT", "-p", "same", "-k", "cmpkey"),
            ("queryCq", "-t", "CmpT", "-q", "0", "-i", "0", "-c", "1"),
            ("queryCq", "-t", "CmpT", "-q", "0", "-i", "5", "-c", "1"),         # no such index
            ("updateBrokerConfig", "-b", "{broker}", "-k", "fileReservedTime", "-v", "48"),
            ("updateBrokerConfig", "-b", "{broker}", "-k", "brokerConfigPath", "-v", "/x"),
            ("cleanExpiredCQ", "-c", "{cluster}"),
            ("cleanUnusedTopic", "-c", "{cluster}"),
            ("deleteExpiredCommitLog", "-c", "{cluster}"),
            ("updateKvConfig", "-s", "NS2", "-k", "k", "-v", "v"),
            ("updateOrderConf", "-t", "CmpT", "-m", "put", "-v", "broker-a:1"),
            ("updateOrderConf", "-t", "CmpT", "-m", "get"),
        ):
            java, ours = both_ways(*args)
            assert _numbers_out(ours) == _numbers_out(java), (args, java, ours)
        # the ACL codes: the same failure code (RocketMQ's remark is its NullPointerException's)
        java, ours = both_ways("updateAclConfig", "-b", "{broker}", "-a", "RocketMQ", "-s", "12345678")
        assert "CODE: 209  DESC: " in java and "CODE: 209  DESC: " in ours
