"""The name server's KV config (100-102, 219: persisted, carried into routes as orderTopicConf)
and its own settings over the wire (GET/UPDATE_NAMESRV_CONFIG 319/318)."""

from __future__ import annotations

from pathlib import Path

import namesrv_helpers
import orjson

from rocketstore.common.java_properties import parse_properties
from rocketstore.namesrv import DataVersion, NamesrvConfig, NamesrvController, topic_config
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

arun = namesrv_helpers.arun


def test_kv_config_and_namesrv_config(arun, tmp_path: Path) -> None:
    kv_path = tmp_path / "kv" / "kvConfig.json"
    conf = tmp_path / "namesrv.properties"
    conf.write_text("# mine\nlistenPort=0\n", encoding="latin-1")
    config = NamesrvConfig(listen_port=0, kv_config_path=str(kv_path), config_store_path=str(conf))

    async def main() -> None:
        async with NamesrvController(config, config_file=conf) as namesrv, RemotingClient() as client:
            async def call(code: int, ext: dict[str, str] | None = None, body: bytes | None = None):
                return await client.invoke(namesrv.address, create_request(code, ext or {}, body), 5)

            ns = {"namespace": "ORDER_TOPIC_CONFIG"}
            assert (await call(RequestCode.PUT_KV_CONFIG, {**ns, "key": "ordered", "value": "broker-a:4"})).code == 0
            r = await call(RequestCode.GET_KV_CONFIG, {**ns, "key": "ordered"})
            assert (r.code, r.ext_fields["value"]) == (0, "broker-a:4")
            r = await call(RequestCode.GET_KVLIST_BY_NAMESPACE, ns)
            assert orjson.loads(r.body_bytes()) == {"table": {"ordered": "broker-a:4"}}
            assert orjson.loads(kv_path.read_bytes()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"ordered": "broker-a:4"}}}
            # a route carries it once orderMessageEnable is on (at once: a live setting)
            namesrv.route_info.register_broker("C", "127.0.0.1:1", "broker-a", 0, "127.0.0.1:2",
                                               {"ordered": topic_config("ordered")}, DataVersion(), [], None)
            r = await call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ordered"})
            assert "orderTopicConf" not in orjson.loads(r.body_bytes())
            r = await call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\nnoSuchKey=1\n")
            assert r.code == 0
            r = await call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ordered"})
            assert orjson.loads(r.body_bytes())["orderTopicConf"] == "broker-a:4"
            shown = parse_properties((await call(RequestCode.GET_NAMESRV_CONFIG)).body_bytes().decode())
            assert shown["orderMessageEnable"] == "true" and shown["kvConfigPath"] == str(kv_path)
            assert shown["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
            assert conf.read_text(encoding="latin-1") == "# mine\nlistenPort=0\norderMessageEnable=true\n"
            # RocketMQ's black list; a bad value named
            r = await call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            r = await call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=sure\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "orderMessageEnable" in r.remark
            # delete; an absent key
            assert (await call(RequestCode.DELETE_KV_CONFIG, {**ns, "key": "ordered"})).code == 0
            r = await call(RequestCode.GET_KV_CONFIG, {**ns, "key": "ordered"})
            assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                          "No config item, Namespace: ORDER_TOPIC_CONFIG Key: ordered")
            assert (await call(RequestCode.GET_KVLIST_BY_NAMESPACE, ns)).code == ResponseCode.QUERY_NOT_FOUND

        # a restart reads the table back
        (kv_path).write_bytes(orjson.dumps({"configTable": {"N": {"k": "v"}}}))
        restarted = NamesrvController(config)
        await restarted.start()
        try:
            assert restarted.kv.get("N", "k") == "v"
        finally:
            await restarted.stop()

    arun(main())


def test_unreadable_kv_file_is_named_and_ignored(arun, tmp_path: Path, caplog) -> None:
    kv_path = tmp_path / "kvConfig.json"
    kv_path.write_text("{not json", encoding="utf-8")

    async def main() -> None:
        async with NamesrvController(NamesrvConfig(listen_port=0, kv_config_path=str(kv_path))) as namesrv:
            assert namesrv.kv.table == {}

    arun(main())
    assert str(kv_path) in caplog.text
