"""Plain ACL against RocketMQ 4.9.8: its Java client (AclClientRPCHook) and mqadmin against an
ACL-enabled rocketstore broker, and rocketstore's signing against RocketMQ's own broker."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from java_env import RMQ_JAVA, java_servers, mqadmin

from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.remoting.acl import SessionCredentials

ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""


def test_java_client_signs_for_rocketstore(rs_cluster, java_programs, tmp_path) -> None:
    # the ACL file by default: plain_acl.yml beside the broker's properties file
    (rs_cluster.root / "plain_acl.yml").write_text(ACL)
    props = Path(rs_cluster.root / "broker-a.properties")
    props.write_text(props.read_text(encoding="latin-1") + "aclEnable=true\n", encoding="latin-1")
    rs_cluster.restart_broker("broker-a")
    ns = rs_cluster.namesrv_addr
    lines = java_programs.json_lines("RsAcl", ns, "topicB", "RocketMQ", "12345678", 5, "aclGroup")
    assert lines[0] == {"op": "send", "ok": 5, "error": None}
    assert lines[1] == {"op": "pull", "count": 5, "error": None}
    lines = java_programs.json_lines("RsAcl", ns, "topicB", "RocketMQ", "wrong-secret", 2, "aclGroup")
    assert lines[0]["ok"] == 0 and "Check signature failed for accessKey=RocketMQ" in lines[0]["error"]
    lines = java_programs.json_lines("RsAcl", ns, "topicC", "RocketMQ", "12345678", 2, "aclGroup")
    assert lines[0]["ok"] == 0 and "No default permission for topic:topicC" in lines[0]["error"]


def _tools_home(tmp_path: Path, access_key: str, secret_key: str) -> Path:
    home = tmp_path / "rmq-tools-home"
    (home / "conf").mkdir(parents=True)
    shared = RMQ_JAVA.parent.parent / "conf"
    shutil.copy(shared / "logback_tools.xml", home / "conf" / "logback_tools.xml")
    (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\nsecretKey: {secret_key}\n")
    return home


def test_mqadmin_acl_commands_against_rocketstore(rs_cluster, java_home, tmp_path, monkeypatch) -> None:
    (rs_cluster.root / "plain_acl.yml").write_text(ACL)
    props = Path(rs_cluster.root / "broker-a.properties")
    props.write_text(props.read_text(encoding="latin-1") + "aclEnable=true\n", encoding="latin-1")
    broker = rs_cluster.restart_broker("broker-a")
    monkeypatch.setenv("ROCKETMQ_HOME", str(_tools_home(tmp_path, "rocketmq2", "12345678")))
    addr = broker.address
    r = mqadmin(java_home, "updateAclConfig", "-b", addr, "-a", "newaccount", "-s", "12345678",
                "-t", "t1=PUB,t2=SUB", "-i", "DENY", "-u", "SUB")
    assert "update plain access config to" in r.stdout, r.stdout + r.stderr
    acl = (rs_cluster.root / "plain_acl.yml").read_text()
    assert "newaccount" in acl and "t1=PUB" in acl
    r = mqadmin(java_home, "updateGlobalWhiteAddr", "-b", addr, "-g", "10.10.1.*")
    assert "update global white remote addresses to" in r.stdout, r.stdout + r.stderr
    r = mqadmin(java_home, "clusterAclConfigVersion", "-b", addr)
    assert "broker-a" in r.stdout and "TestCluster" in r.stdout, r.stdout + r.stderr
    r = mqadmin(java_home, "deleteAclConfig", "-b", addr, "-a", "newaccount")
    assert "delete plain access config account from" in r.stdout, r.stdout + r.stderr
    assert "newaccount" not in (rs_cluster.root / "plain_acl.yml").read_text()
    # mqadmin signs with a non-admin account: its admin commands are refused
    monkeypatch.setenv("ROCKETMQ_HOME", str(_tools_home(tmp_path / "user", "RocketMQ", "12345678")))
    r = mqadmin(java_home, "updateTopic", "-b", addr, "-t", "someTopic")
    assert "Need admin permission for request code=17" in r.stdout + r.stderr


def test_rocketstore_signs_for_rocketmq_broker(tmp_path, monkeypatch) -> None:
    from java_env import require_java

    require_java()
    home = tmp_path / "rmqhome"
    (home / "conf").mkdir(parents=True)
    shared = RMQ_JAVA.parent.parent / "conf"
    for name in ("logback_broker.xml", "logback_namesrv.xml", "logback_tools.xml"):
        shutil.copy(shared / name, home / "conf" / name)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    with java_servers(tmp_path, aclEnable="true") as (_, broker):
        async def main() -> list[tuple[int, str | None]]:
            out = []
            async with RemotingClient() as client:
                for credentials in (SessionCredentials("RocketMQ", "12345678"),
                                    SessionCredentials("RocketMQ", "wrong-secret")):
                    request = create_request(RequestCode.SEND_MESSAGE, {
                        "producerGroup": "PG", "topic": "topicB", "defaultTopic": "TBW102",
                        "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                        "bornTimestamp": "1", "flag": "0", "properties": "KEYS\x01k\x02"}, "é body".encode())
                    credentials.sign(request)
                    r = await client.invoke(broker.address, request, 10)
                    out.append((r.code, r.remark))
            return out

        (ok, refused) = asyncio.run(main())
    assert ok[0] == ResponseCode.SUCCESS, ok
    assert "Check signature failed for accessKey=RocketMQ" in (refused[1] or "")


pytestmark = pytest.mark.slow
