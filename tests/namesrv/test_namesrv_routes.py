"""The name server in-process: registration, routes, cluster info, expiry, connection loss."""

from __future__ import annotations

import asyncio
import io

import namesrv_helpers
import orjson
import pytest
from namesrv_helpers import FakeClock, wait_until

from rocketstore.broker.registration import (
    BrokerIdentity,
    BrokerRegistrar,
    build_register_broker_request,
)
from rocketstore.namesrv import (
    DataVersion,
    NamesrvConfig,
    NamesrvController,
    RouteInfoManager,
    decode_topic_route_data,
    topic_config,
)
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.remoting.route_bodies import body_crc32, encode_register_broker_body

MASTER = BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")
SLAVE = BrokerIdentity("DefaultCluster", "broker-a", 1, "127.0.0.1:10921", "127.0.0.1:10922")
OTHER = BrokerIdentity("OtherCluster", "broker-b", 0, "127.0.0.1:20911", "127.0.0.1:20912")
TOPICS = {
    "TopicTest": topic_config("TopicTest", 4, 4),
    "orders": topic_config("orders", 8, 8, perm=4),
}

arun = namesrv_helpers.arun


def config(**changes: object) -> NamesrvConfig:
    return NamesrvConfig(listen_port=0, **changes)  # type: ignore[arg-type]


async def route(client: RemotingClient, addr: str, topic: str):  # type: ignore[no-untyped-def]
    return await client.invoke(addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def test_register_and_route(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            registrar = BrokerRegistrar(client, namesrv.address, MASTER)
            (outcome,) = await registrar.register_broker_all(TOPICS, DataVersion(1, 1))
            assert outcome.ok and outcome.result is not None
            assert outcome.result.master_addr is None  # a master is told nothing

            response = await route(client, namesrv.address, "TopicTest")
            assert response.code == ResponseCode.SUCCESS
            # RocketMQ 4.9.4+'s layout: sorted keys, broker ids as quoted strings.
            assert orjson.loads(response.body_bytes()) == {
                "brokerDatas": [
                    {"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
                ],
                "filterServerTable": {},
                "queueDatas": [
                    {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
                ],
            }
            assert response.body_bytes().startswith(b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"}')
            parsed = decode_topic_route_data(response.body_bytes())
            assert parsed.broker_datas[0].master_addr() == "127.0.0.1:10911"
            assert parsed.queue_datas[0].write_queue_nums == 4

            # The slave learns its master and the master's HA address.
            slave = BrokerRegistrar(client, namesrv.address, SLAVE)
            (outcome,) = await slave.register_broker_all(TOPICS, DataVersion(1, 1))
            assert outcome.result is not None
            assert outcome.result.master_addr == "127.0.0.1:10911"
            assert outcome.result.ha_server_addr == "127.0.0.1:10912"
            body = orjson.loads((await route(client, namesrv.address, "orders")).body_bytes())
            assert body["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
            assert body["queueDatas"][0]["perm"] == 4

    arun(main())


def test_unknown_topic_is_17(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            response = await route(client, namesrv.address, "nope")
            assert response.code == ResponseCode.TOPIC_NOT_EXIST == 17
            assert "nope" in (response.remark or "") and response.body is None
            # A binary-header request is answered in binary, same code.
            request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "nope"}, serialize_type=1)
            response = await client.invoke(namesrv.address, request)
            assert response.code == 17 and response.serialize_type == 1

    arun(main())


def test_cluster_info_and_topic_list(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            await BrokerRegistrar(client, namesrv.address, MASTER).register_broker_all(TOPICS, DataVersion(1, 1))
            await BrokerRegistrar(client, namesrv.address, OTHER).register_broker_all(
                {"b-only": topic_config("b-only")}, DataVersion(1, 1)
            )
            response = await client.invoke(namesrv.address, create_request(RequestCode.GET_BROKER_CLUSTER_INFO))
            info = orjson.loads(response.body_bytes())
            assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"], "OtherCluster": ["broker-b"]}
            assert info["brokerAddrTable"]["broker-b"] == {
                "brokerAddrs": {"0": "127.0.0.1:20911"}, "brokerName": "broker-b", "cluster": "OtherCluster"
            }
            response = await client.invoke(
                namesrv.address, create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            )
            assert sorted(orjson.loads(response.body_bytes())["topicList"]) == ["TopicTest", "b-only", "orders"]
            response = await client.invoke(
                namesrv.address, create_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "OtherCluster"})
            )
            assert orjson.loads(response.body_bytes())["topicList"] == ["b-only"]

    arun(main())


def test_broker_expiry_by_injected_clock(arun) -> None:
    async def main() -> None:
        clock = FakeClock()
        namesrv = NamesrvController(config(scan_not_active_broker_interval=20), clock)
        # The broker has its own connection: the name server closes it when the broker expires.
        async with namesrv, RemotingClient() as client, RemotingClient() as broker_client:
            await BrokerRegistrar(broker_client, namesrv.address, MASTER).register_broker_all(TOPICS, DataVersion(1, 1))
            clock.advance(119)
            await asyncio.sleep(0.1)  # several scans: still within 120 s
            assert (await route(client, namesrv.address, "TopicTest")).code == 0
            # A re-registration renews it.
            await BrokerRegistrar(broker_client, namesrv.address, MASTER).register_broker_all(TOPICS, DataVersion(1, 1))
            clock.advance(100)
            await asyncio.sleep(0.1)
            assert (await route(client, namesrv.address, "TopicTest")).code == 0
            clock.advance(21)
            assert await wait_until(lambda: not namesrv.route_info.broker_live_table, 5)
            assert (await route(client, namesrv.address, "TopicTest")).code == 17
            assert namesrv.route_info.broker_addr_table == {} and namesrv.route_info.cluster_addr_table == {}
            assert await wait_until(lambda: not broker_client.addresses, 5)  # its connection was closed

    arun(main())


def test_broker_dropped_when_its_connection_closes(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as querier:
            broker_client = RemotingClient()
            await BrokerRegistrar(broker_client, namesrv.address, MASTER).register_broker_all(TOPICS, DataVersion(1, 1))
            # A client connection closing changes nothing.
            await route(querier, namesrv.address, "TopicTest")
            querier.close_connection(namesrv.address)
            await asyncio.sleep(0.1)
            assert (await route(querier, namesrv.address, "TopicTest")).code == 0
            await broker_client.close()
            assert await wait_until(lambda: not namesrv.route_info.broker_live_table, 5)
            assert (await route(querier, namesrv.address, "TopicTest")).code == 17

    arun(main())


def test_unregister(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            registrar = BrokerRegistrar(client, namesrv.address, MASTER)
            await registrar.register_broker_all(TOPICS, DataVersion(1, 1))
            (outcome,) = await registrar.unregister_broker_all()
            assert outcome.ok
            assert (await route(client, namesrv.address, "TopicTest")).code == 17
            assert namesrv.route_info.cluster_addr_table == {}

    arun(main())


def test_periodic_registration_and_stop(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            registrar = BrokerRegistrar(client, namesrv.address, MASTER)
            calls = 0

            def source():  # type: ignore[no-untyped-def]
                nonlocal calls
                calls += 1
                return TOPICS, DataVersion(1, calls)

            registrar.start_periodic(source, period=0.05)
            assert await wait_until(lambda: calls >= 3, 5)
            assert (await route(client, namesrv.address, "TopicTest")).code == 0
            await registrar.stop()
            assert (await route(client, namesrv.address, "TopicTest")).code == 17

    arun(main())


def test_bad_registrations_are_answered_not_crashed(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as namesrv, RemotingClient() as client:
            good = build_register_broker_request(MASTER, TOPICS, DataVersion(1, 1))

            bad_crc = build_register_broker_request(MASTER, TOPICS, DataVersion(1, 1))
            bad_crc.ext_fields["bodyCrc32"] = str(body_crc32(bad_crc.body_bytes()) ^ 1)
            response = await client.invoke(namesrv.address, bad_crc)
            assert response.code == ResponseCode.SYSTEM_ERROR and response.remark == "crc32 not match"

            compressed = build_register_broker_request(MASTER, TOPICS, DataVersion(1, 1))
            compressed.ext_fields["compressed"] = "true"
            response = await client.invoke(namesrv.address, compressed)
            assert response.code == ResponseCode.SYSTEM_ERROR and "compressed" in (response.remark or "")

            for body in (b"{nope", b"[]", orjson.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"readQueueNums": "x"}}}})):
                bad_body = build_register_broker_request(MASTER, TOPICS, DataVersion(1, 1))
                bad_body.body = body
                bad_body.ext_fields["bodyCrc32"] = "0"
                response = await client.invoke(namesrv.address, bad_body)
                assert response.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in (response.remark or ""), body

            missing = build_register_broker_request(MASTER, TOPICS, DataVersion(1, 1))
            del missing.ext_fields["brokerName"]
            response = await client.invoke(namesrv.address, missing)
            assert response.code == ResponseCode.SYSTEM_ERROR and "'brokerName'" in (response.remark or "")

            response = await client.invoke(namesrv.address, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC))
            assert response.code == ResponseCode.SYSTEM_ERROR and "'topic'" in (response.remark or "")

            response = await client.invoke(namesrv.address, create_request(RequestCode.PULL_MESSAGE))
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

            assert namesrv.route_info.broker_live_table == {}
            assert (await client.invoke(namesrv.address, good)).code == 0

    arun(main())


def test_several_name_servers_side_by_side(arun) -> None:
    async def main() -> None:
        async with NamesrvController(config()) as first, NamesrvController(config()) as second:
            async with RemotingClient() as client:
                unreachable = "127.0.0.1:1"
                registrar = BrokerRegistrar(client, f"{first.address};{second.address};{unreachable}", MASTER, timeout=2)
                outcomes = await registrar.register_broker_all(TOPICS, DataVersion(1, 1))
                assert [o.ok for o in outcomes] == [True, True, False]
                for namesrv in (first, second):
                    assert (await route(client, namesrv.address, "TopicTest")).code == 0
                await first.stop()
                assert (await route(client, second.address, "TopicTest")).code == 0

    arun(main())


# ---- the route table alone ---------------------------------------------------------------


def test_topic_config_changes_follow_the_data_version() -> None:
    table = RouteInfoManager(clock=FakeClock())
    table.register_broker("c", "a:1", "b", 0, "a:2", {"t": topic_config("t", 4, 4)}, DataVersion(1, 1))
    # Same version: the (unchanged-by-contract) table is not re-read.
    table.register_broker("c", "a:1", "b", 0, "a:2", {"t": topic_config("t", 8, 8)}, DataVersion(1, 1))
    assert table.topic_queue_table["t"]["b"].write_queue_nums == 4
    table.register_broker("c", "a:1", "b", 0, "a:2", {"t": topic_config("t", 8, 8)}, DataVersion(2, 2))
    assert table.topic_queue_table["t"]["b"].write_queue_nums == 8
    # A slave's topics are not route data.
    table.register_broker("c", "a:3", "b", 1, "a:4", {"slave-only": topic_config("slave-only")}, DataVersion(1, 1))
    assert "slave-only" not in table.topic_queue_table


def test_slave_promoted_to_master_keeps_one_record() -> None:
    table = RouteInfoManager(clock=FakeClock())
    table.register_broker("c", "a:1", "b", 1, "a:2", None, DataVersion())
    table.register_broker("c", "a:1", "b", 0, "a:2", None, DataVersion())
    assert table.broker_addr_table["b"].broker_addrs == {0: "a:1"}


def test_write_perm_and_delete_topic() -> None:
    table = RouteInfoManager(clock=FakeClock())
    table.register_broker("c", "a:1", "b", 0, "a:2", dict(TOPICS), DataVersion(1, 1))
    assert table.wipe_write_perm_of_broker("b") == 2
    assert table.topic_queue_table["TopicTest"]["b"].perm == 4
    assert table.add_write_perm_of_broker("b") == 2
    assert table.topic_queue_table["TopicTest"]["b"].perm == 6
    table.delete_topic("orders")
    assert table.get_all_topic_list() == ["TopicTest"]
    table.delete_topic("TopicTest", "c")
    assert table.pickup_topic_route_data("TopicTest") is None


def test_filter_servers_in_route() -> None:
    table = RouteInfoManager(clock=FakeClock())
    table.register_broker("c", "a:1", "b", 0, "a:2", dict(TOPICS), DataVersion(1, 1), ["f:1", "f:2"])
    route = table.pickup_topic_route_data("TopicTest")
    assert route is not None and route["filterServerTable"] == {"a:1": ["f:1", "f:2"]}


def test_route_decoder_reads_old_fastjson_keys() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b","cluster":"c"}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    route = decode_topic_route_data(body)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


def test_register_body_round_trip() -> None:
    from rocketstore.remoting.route_bodies import decode_register_broker_body

    body = encode_register_broker_body(TOPICS, DataVersion(5, 6), ["f:1"])
    decoded = decode_register_broker_body(body)
    assert decoded.data_version == DataVersion(5, 6) and decoded.filter_server_list == ["f:1"]
    assert decoded.topic_config_table["orders"]["perm"] == 4
    assert orjson.loads(body)["topicConfigSerializeWrapper"]["dataVersion"] == {"counter": 6, "timestamp": 5}


def test_config_from_properties() -> None:
    text = (
        "# a namesrv.properties\n"
        "listenPort=19876\n"
        "bindAddress = 0.0.0.0\n"
        "orderMessageEnable: true\n"
        "kvConfigPath=/tmp/kv\\\n"
        "  Config.json\n"
        "somethingElse=ignored\n"
        "serverChannelMaxIdleTimeSeconds=30\n"
    )
    cfg = NamesrvConfig.from_properties(io.StringIO(text))
    assert cfg.listen_port == 19876 and cfg.bind_address == "0.0.0.0" and cfg.order_message_enable
    assert cfg.kv_config_path == "/tmp/kvConfig.json" and cfg.server_channel_max_idle_time_seconds == 30
    assert NamesrvConfig.from_properties(io.StringIO(text), listen_port=1).listen_port == 1
    with pytest.raises(ValueError, match="listenPort"):
        NamesrvConfig.from_properties(io.StringIO("listenPort=abc\n"))
    with pytest.raises(ValueError, match="orderMessageEnable"):
        NamesrvConfig.from_properties(io.StringIO("orderMessageEnable=yes\n"))
    defaults = NamesrvConfig()
    assert defaults.listen_port == 9876 and defaults.bind_address == "127.0.0.1"


def test_query_data_version(arun) -> None:
    async def main() -> None:
        clock = FakeClock()
        async with NamesrvController(config(), clock) as namesrv, RemotingClient() as client:
            ext = {"brokerAddr": MASTER.broker_addr, "brokerName": "broker-a", "clusterName": "DefaultCluster", "brokerId": "0"}

            async def query(version: DataVersion):  # type: ignore[no-untyped-def]
                request = create_request(RequestCode.QUERY_DATA_VERSION, dict(ext), orjson.dumps(version.to_json()))
                return await client.invoke(namesrv.address, request)

            assert (await query(DataVersion(1, 1))).ext_fields["changed"] == "true"  # never registered
            await BrokerRegistrar(client, namesrv.address, MASTER).register_broker_all(TOPICS, DataVersion(1, 1))
            clock.advance(60)
            response = await query(DataVersion(1, 1))
            assert response.ext_fields["changed"] == "false"
            assert orjson.loads(response.body_bytes()) == {"counter": 1, "timestamp": 1}
            assert namesrv.route_info.broker_live_table[MASTER.broker_addr].last_update_timestamp == clock()
            assert (await query(DataVersion(2, 2))).ext_fields["changed"] == "true"

    arun(main())
