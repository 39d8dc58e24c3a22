"""``rocketstore admin`` against a broker with plain ACL on: ``--access-key``/``--secret-key``
(or $ROCKETSTORE_ACCESS_KEY / $ROCKETSTORE_SECRET_KEY) sign every request; without them, or
with a wrong secret, the broker refuses (NO_PERMISSION)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from cluster import Cluster, wait_for

from rocketstore.cli import main
from rocketstore.client.config import ACCESS_KEY_ENV, SECRET_KEY_ENV

pytestmark = pytest.mark.slow

ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclT=PUB|SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""


def test_admin_and_send_sign_with_the_credentials_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ACCESS_KEY_ENV, raising=False)
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    c = Cluster(tmp_path)
    try:
        c.start_namesrv()
        c.start_broker("broker-a", aclEnable="true", aclFile=str(acl_file))
        ns = c.namesrv_addr
        create = ["updateTopic", "-n", ns, "-c", "TestCluster", "-t", "AclT", "-r", "2", "-w", "2"]
        result = CliRunner().invoke(main, ["admin", *create])
        assert result.exit_code == 1 and "No accessKey is configured" in result.output, result.output

        result = CliRunner().invoke(main, ["admin", *create, "--access-key", "RocketMQ", "--secret-key", "12345678"])
        assert result.exit_code == 1 and "16" in result.output, result.output      # not an admin account

        result = CliRunner().invoke(main, ["admin", *create, "--access-key", "rocketmq2", "--secret-key", "wrong"])
        assert result.exit_code == 1 and "signature" in result.output.lower(), result.output

        result = CliRunner().invoke(main, ["admin", *create, "--access-key", "rocketmq2", "--secret-key", "12345678"])
        assert result.exit_code == 0, result.output

        result = CliRunner().invoke(main, ["admin", *create, "--access-key", "rocketmq2"])
        assert result.exit_code == 1 and "--access-key and --secret-key go together" in result.output

        # the client commands, with the account from the environment
        env = {ACCESS_KEY_ENV: "RocketMQ", SECRET_KEY_ENV: "12345678"}
        send = ["sendMessage", "-n", ns, "-t", "AclT", "-p", "signed", "-k", "acl-1", "--json"]
        result = CliRunner().invoke(main, ["admin", *send], env=env)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["sendStatus"] == "SEND_OK"
        result = CliRunner().invoke(main, ["admin", *send], env={ACCESS_KEY_ENV: "RocketMQ", SECRET_KEY_ENV: "bad"})
        assert result.exit_code == 1, result.output

        def found() -> bool:
            got = CliRunner().invoke(main, ["admin", "consumeMessage", "-n", ns, "-t", "AclT", "--json"], env=env)
            return got.exit_code == 0 and [m["body"] for m in json.loads(got.output)] == ["signed"]
        assert wait_for(found, 15, step=0.5)
        result = CliRunner().invoke(main, ["admin", "consumeMessage", "-n", ns, "-t", "AclT", "--json"])
        assert result.exit_code == 1, result.output                          # unsigned: refused
    finally:
        c.close()
