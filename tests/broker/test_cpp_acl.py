"""RocketMQ's C++ client (``rocketmq`` 0.4.4, ``set_session_credentials``) against a
rocketstore broker with plain ACL on: right credentials send and pull, wrong ones are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from broker_helpers import (
    CHILD_CWD,
    child_env,
    rocketmq_usable,
    start_broker,
    start_namesrv,
    stop_process,
    write_properties,
)

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).resolve().parent / "cpp_acl_script.py")
ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicB=PUB|SUB
"""


def run_client(tmp_path: Path, namesrv: str, topic: str, access_key: str, secret_key: str,
               count: int) -> list[dict]:
    home = tmp_path / f"home-{access_key}-{secret_key}-{topic}"
    home.mkdir()
    result = subprocess.run([sys.executable, SCRIPT, namesrv, topic, "CPP_ACL_GROUP", access_key, secret_key,
                             str(count)], capture_output=True, text=True, timeout=120,
                            env=child_env(HOME=str(home)), cwd=CHILD_CWD)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_cpp_client_with_right_and_wrong_credentials(tmp_path: Path) -> None:
    reason = rocketmq_usable()
    if reason:
        pytest.skip(reason)
    (tmp_path / "plain_acl.yml").write_text(ACL)
    namesrv, ns_addr = start_namesrv()
    broker = None
    try:
        props = write_properties(tmp_path / "broker.properties", brokerName="broker-cpp-acl", listenPort=0,
                                 namesrvAddr=ns_addr, storePathRootDir=tmp_path / "store",
                                 mappedFileSizeCommitLog=16 << 20, aclEnable="true")
        broker, _ = start_broker(props, log_path=tmp_path / "broker.log")
        lines = run_client(tmp_path, ns_addr, "topicB", "RocketMQ", "12345678", 3)
        assert [line for line in lines if line["kind"] == "sent"] == [{"kind": "sent", "status": 0}] * 3, lines
        assert lines[-1] == {"kind": "pulled", "bodies": ["cpp-acl-0", "cpp-acl-1", "cpp-acl-2"]}, lines
        lines = run_client(tmp_path, ns_addr, "topicB", "RocketMQ", "wrong-secret", 2)
        assert [line["kind"] for line in lines] == ["error", "error"], lines
        lines = run_client(tmp_path, ns_addr, "topicC", "RocketMQ", "12345678", 1)
        assert [line["kind"] for line in lines] == ["error"], lines
        log = (tmp_path / "broker.log").read_text()
        assert "Traceback" not in log
    finally:
        if broker is not None:
            code, _ = stop_process(broker)
            assert code == 0
        stop_process(namesrv)
