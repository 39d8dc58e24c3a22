"""RocketMQ 4.x plain ACL on the broker (aclEnable=true), with the project's clients."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import broker_helpers
import orjson
import pytest
from broker_helpers import cluster, pull_fields, send_fields

from rocketstore.broker.acl import AclConfig, RemoteAddressPattern
from rocketstore.client import AsyncAdmin, AsyncProducer, Message, MessageQueue
from rocketstore.client.errors import MQBrokerError, MQClientError
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.remoting.acl import (
    SessionCredentials,
    calculate_signature,
    combine_request_content,
)

arun = broker_helpers.arun

ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
"""
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")
NO_ACCESS_KEY = ("org.apache.rocketmq.acl.common.AclException: No accessKey is configured, "
                 "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:664)")


def acl_cluster(tmp_path: Path, text: str = ACL):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(text)
    return cluster(tmp_path / "store", acl_enable=True, acl_file=str(acl_file))


async def call(cl, code: int, ext: dict | None = None, body: bytes | None = None,
               credentials: SessionCredentials | None = None):
    request = create_request(code, {k: str(v) for k, v in (ext or {}).items()}, body)
    if credentials is not None:
        credentials.sign(request)
    return await cl.client.invoke(cl.addr, request, 5)


def test_signature_is_hmac_sha1_over_sorted_values_and_body() -> None:
    content = combine_request_content({"topic": "T", "AccessKey": "ak", "Signature": "x",
                                       "_UNIQUE_KEY_QUERY": "true", "b": "1"}, b"body")
    assert content == b"ak1Tbody"
    # base64(HmacSHA1("12345678", "ak1Tbody")), as javax.crypto computes it
    import base64
    import hashlib
    import hmac
    assert calculate_signature(content, "12345678") == base64.b64encode(
        hmac.new(b"12345678", b"ak1Tbody", hashlib.sha1).digest()).decode()


def test_requests_are_checked_as_rocketmq_checks_them(arun, tmp_path) -> None:
    async def main() -> None:
        async with acl_cluster(tmp_path) as cl:
            r = await call(cl, RequestCode.GET_BROKER_RUNTIME_INFO)
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, NO_ACCESS_KEY)
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"x")
            assert r.code == ResponseCode.NO_PERMISSION
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"x", USER)
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"x",
                           SessionCredentials("RocketMQ", "wrong-secret"))
            assert r.code == ResponseCode.NO_PERMISSION
            assert "Check signature failed for accessKey=RocketMQ" in r.remark
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"x",
                           SessionCredentials("nobody", "12345678"))
            assert "No acl config for nobody" in r.remark
            for topic in ("topicA", "topicZ"):     # DENY, and the default DENY
                r = await call(cl, RequestCode.SEND_MESSAGE, send_fields(topic), b"x", USER)
                assert r.code == ResponseCode.NO_PERMISSION
                assert f"No default permission for topic:{topic}" in r.remark
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "T1", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}, None, USER)
            assert "Need admin permission for request code=17, but accessKey=RocketMQ is not" in r.remark
            await cl.dispatched()
            r = await call(cl, RequestCode.PULL_MESSAGE, pull_fields("groupA", "topicB", 0, 0), None, USER)
            assert "No default permission for group:groupA" in r.remark
            r = await call(cl, RequestCode.PULL_MESSAGE, pull_fields("groupB", "topicB", 0, 0), None, USER)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # the admin account may do anything
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicZ"), b"x", ADMIN)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # the broker registered with its name server with ACL on
            async with RemotingClient() as client:
                r = await client.invoke(cl.namesrv.address, create_request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "topicB"}), 5)
                assert r.code == ResponseCode.SUCCESS
            assert cl.broker.store.get_max_offset_in_queue("topicA", 0) == 0

    arun(main())


def test_project_clients_sign_with_their_credentials(arun, tmp_path) -> None:
    async def main() -> None:
        async with acl_cluster(tmp_path) as cl:
            ns = cl.namesrv.address
            async with AsyncAdmin(ns, config=None) as nobody:
                with pytest.raises(MQBrokerError) as refused:
                    await nobody.update_topic("topicB", broker_addr=cl.addr, read_queue_nums=2, write_queue_nums=2)
                assert refused.value.response_code == ResponseCode.NO_PERMISSION
            from rocketstore.client import ClientConfig
            async with AsyncAdmin(config=ClientConfig(namesrv_addr=ns, access_key="rocketmq2",
                                                      secret_key="12345678")) as admin:
                await admin.update_topic("topicB", broker_addr=cl.addr, read_queue_nums=2, write_queue_nums=2)
                await admin.update_topic("topicA", broker_addr=cl.addr, read_queue_nums=2, write_queue_nums=2)
            producer = AsyncProducer("PG", namesrv_addr=ns, access_key="RocketMQ", secret_key="12345678")
            await producer.start()
            try:
                result = await producer.send(Message("topicB", b"signed"))
                assert result.send_status.name == "SEND_OK"
                with pytest.raises((MQBrokerError, MQClientError)) as refused:
                    await producer.send(Message("topicA", b"refused"))
                assert "No default permission for topic:topicA" in str(refused.value)
            finally:
                await producer.shutdown()
            wrong = AsyncProducer("PG2", namesrv_addr=ns, access_key="RocketMQ", secret_key="not-the-secret")
            await wrong.start()
            try:
                with pytest.raises((MQBrokerError, MQClientError)) as refused:
                    await wrong.send(Message("topicB", b"refused"))
                assert "Check signature failed" in str(refused.value)
            finally:
                await wrong.shutdown()
            async with AsyncAdmin(config=ClientConfig(namesrv_addr=ns, access_key="RocketMQ",
                                                      secret_key="12345678")) as user:
                await cl.dispatched()
                got = await user.pull(MessageQueue("topicB", cl.broker.config.broker_name, 0), 0,
                                      group="groupB")
                got += await user.pull(MessageQueue("topicB", cl.broker.config.broker_name, 1), 0,
                                       group="groupB")
                assert [m.body for m in got] == [b"signed"]

    arun(main())


def test_white_lists_and_reload_without_restart(arun, tmp_path) -> None:
    async def main() -> None:
        async with acl_cluster(tmp_path) as cl:
            acl_file = cl.broker.acl_file
            assert acl_file is not None
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicC"), b"x", USER)
            assert r.code == ResponseCode.NO_PERMISSION
            text = ACL.replace("      - topicB=PUB|SUB", "      - topicB=PUB|SUB\n      - topicC=PUB")
            Path(acl_file.path).write_text(text)
            os.utime(acl_file.path, (time.time() + 5, time.time() + 5))
            for _ in range(100):
                r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicC"), b"x", USER)
                if r.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # an account's white list: its requests pass unsigned
            Path(acl_file.path).write_text(ACL.replace("    admin: false", "    whiteRemoteAddress: 127.0.0.1\n    admin: false"))
            os.utime(acl_file.path, (time.time() + 10, time.time() + 10))
            for _ in range(100):
                r = await call(cl, RequestCode.SEND_MESSAGE, dict(send_fields("topicA"), AccessKey="RocketMQ"), b"x")
                if r.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # the global white list: anything passes
            Path(acl_file.path).write_text(ACL.replace("10.10.103.*", "127.0.0.*"))
            os.utime(acl_file.path, (time.time() + 15, time.time() + 15))
            for _ in range(100):
                r = await call(cl, RequestCode.GET_BROKER_RUNTIME_INFO)
                if r.code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.05)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # a broken file keeps the accounts in force
            Path(acl_file.path).write_text("accounts: [oops")
            os.utime(acl_file.path, (time.time() + 20, time.time() + 20))
            await asyncio.sleep(0.6)
            r = await call(cl, RequestCode.GET_BROKER_RUNTIME_INFO)
            assert r.code == ResponseCode.SUCCESS

    arun(main())


def test_acl_admin_codes(arun, tmp_path) -> None:
    async def main() -> None:
        async with acl_cluster(tmp_path) as cl:
            path = cl.broker.acl_file.path
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newone", "secretKey": "12345678"}, None, ADMIN)
            assert (r.code, r.remark) == (ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                                          "The accessKey=newone and secretKey=12345678 cannot be null and length should longer than 6")
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newaccount", "secretKey": "12345678", "topicPerms": "t1=PUB,t2=SUB"}, None, USER)
            assert r.code == ResponseCode.NO_PERMISSION      # ACL changes need an admin account
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newaccount", "secretKey": "12345678", "defaultTopicPerm": "PUB",
                "topicPerms": "t1=PUB,t2=SUB", "groupPerms": "g1=SUB", "admin": "false",
                "whiteRemoteAddress": "10.0.0.*"}, None, ADMIN)
            assert r.code == ResponseCode.SUCCESS, r.remark
            config = AclConfig.parse(Path(path).read_text())
            account = config.accounts["newaccount"]
            assert account.topic_perms == ["t1=PUB", "t2=SUB"] and account.white_remote_address == "10.0.0.*"
            assert config.counter == 1
            newbie = SessionCredentials("newaccount", "12345678")
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("t1"), b"x", newbie)
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newaccount", "secretKey": "87654321", "topicPerms": "t1=DENY"}, None, ADMIN)
            assert r.code == ResponseCode.SUCCESS
            account = AclConfig.parse(Path(path).read_text()).accounts["newaccount"]
            assert account.secret_key == "87654321" and account.group_perms == ["g1=SUB"]
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("t1"), b"x", SessionCredentials("newaccount", "87654321"))
            assert "No default permission for topic:t1" in r.remark
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "another1", "secretKey": "12345678", "topicPerms": "t1=XYZ"}, None, ADMIN)
            assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
            assert r.remark.startswith("Parse resource permission error for t1=XYZ.")
            r = await call(cl, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "another2", "secretKey": "12345678", "whiteRemoteAddress": "abc"}, None, ADMIN)
            assert r.remark == "Netaddress examine Exception netaddress is abc"
            r = await call(cl, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, None, ADMIN)
            assert r.code == ResponseCode.SUCCESS
            assert orjson.loads(r.ext_fields["version"])["counter"] == 2
            assert path in orjson.loads(r.ext_fields["allAclFileVersion"])
            assert r.ext_fields["brokerAddr"] == cl.addr
            r = await call(cl, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, None, ADMIN)
            assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 54 not supported")
            r = await call(cl, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.10.1.*,192.168.1.1"},
                           None, ADMIN)
            assert r.code == ResponseCode.SUCCESS
            assert AclConfig.parse(Path(path).read_text()).global_white == ["10.10.1.*", "192.168.1.1"]
            r = await call(cl, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "nonsense"}, None, ADMIN)
            assert r.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
            r = await call(cl, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newaccount"}, None, ADMIN)
            assert r.code == ResponseCode.SUCCESS
            r = await call(cl, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newaccount"}, None, ADMIN)
            assert (r.code, r.remark) == (ResponseCode.DELETE_ACL_CONFIG_FAILED,
                                          "The accesskey[newaccount] corresponding to accessConfig has been deleted failed.")
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"x", SessionCredentials("newaccount", "87654321"))
            assert "No acl config for newaccount" in r.remark

    arun(main())


def test_fuzzed_access_keys_and_signatures_never_crash_the_broker(arun, tmp_path) -> None:
    rng = random.Random(31)

    def junk() -> str:
        alphabet = "abcXYZ019+/=%@|{}\"'\\ \u00e9\u4e2d\U0001f600\x00\x7f"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))

    async def main() -> None:
        async with acl_cluster(tmp_path) as cl:
            codes = [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE,
                     RequestCode.HEART_BEAT, RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.UNREGISTER_CLIENT,
                     RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, 9999]
            for i in range(400):
                ext = {"AccessKey": rng.choice(["RocketMQ", "rocketmq2", junk()]), "Signature": junk()}
                if rng.random() < 0.3:
                    ext.pop("AccessKey")
                for _ in range(rng.randrange(0, 4)):
                    ext[junk() or "k"] = junk()
                body = os.urandom(rng.randrange(0, 64)) if rng.random() < 0.5 else None
                request = create_request(rng.choice(codes), ext, body)
                r = await cl.client.invoke(cl.addr, request, 5)
                assert r.code in (ResponseCode.NO_PERMISSION, ResponseCode.REQUEST_CODE_NOT_SUPPORTED), (i, r.code, r.remark)
            r = await call(cl, RequestCode.SEND_MESSAGE, send_fields("topicB"), b"still serving", USER)
            assert r.code == ResponseCode.SUCCESS

    arun(main())


def test_white_address_patterns() -> None:
    assert RemoteAddressPattern("*").match("1.2.3.4")
    assert RemoteAddressPattern("192.168.0.*").match("192.168.0.9")
    assert not RemoteAddressPattern("192.168.0.*").match("192.168.1.9")
    assert RemoteAddressPattern("10.0.0.1-20").match("10.0.0.20")
    assert not RemoteAddressPattern("10.0.0.1-20").match("10.0.0.21")
    assert RemoteAddressPattern("10.0.0.{1,2,3}").match("10.0.0.2")
    assert not RemoteAddressPattern("10.0.0.{1,2,3}").match("10.0.0.4")
    assert RemoteAddressPattern("::1").match("0:0:0:0:0:0:0:1")
    for bad in ("abc", "1.2.3", "1.2.3.300", "1.2.3.9-2"):
        with pytest.raises(ValueError, match="white remote address"):
            RemoteAddressPattern(bad)
