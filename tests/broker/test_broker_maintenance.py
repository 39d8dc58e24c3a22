"""UPDATE_BROKER_CONFIG (settings in force at once, written to the broker's properties file),
CLEAN_EXPIRED_CONSUMEQUEUE and CLEAN_UNUSED_TOPIC over the wire."""

from __future__ import annotations

import asyncio
from pathlib import Path

import broker_helpers
from broker_helpers import cluster, send_fields

from rocketstore.common.java_properties import parse_properties
from rocketstore.remoting import RequestCode, ResponseCode

arun = broker_helpers.arun


def broker_config_text(body: bytes | None) -> dict[str, str]:
    return parse_properties((body or b"").decode())


def test_update_broker_config_takes_effect_and_persists(arun, tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text("# my broker\nbrokerName = broker-a\nfileReservedTime=48\n", encoding="latin-1")

    async def main() -> None:
        async with cluster(tmp_path / "store", config_file=conf) as cl:
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("live", 0), b"before")
            assert r.code == ResponseCode.SUCCESS
            body = b"brokerPermission=4\nfileReservedTime=10\nlistenPort=12345\nnoSuchSetting=1\n"
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=body)
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            # in force at once: the broker takes no writes (native send path and name server)
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("live", 0), b"refused")
            assert r.code == ResponseCode.NO_PERMISSION and "sending message is forbidden" in r.remark
            assert cl.broker.store is not None and cl.broker.store.config.file_reserved_time == 10
            shown = broker_config_text((await cl.call(RequestCode.GET_BROKER_CONFIG)).body_bytes())
            assert shown["brokerPermission"] == "4" and shown["fileReservedTime"] == "10"
            assert shown["listenPort"] == "0"       # written to the file: in force at the next start
            # the file keeps its lines and gets every known key; the unknown one is dropped
            text = conf.read_text(encoding="latin-1")
            assert text.startswith("# my broker\nbrokerName = broker-a\n")
            assert parse_properties(text) == {"brokerName": "broker-a", "fileReservedTime": "10",
                                              "brokerPermission": "4", "listenPort": "12345"}
            # a bad value is refused whole, naming the key; nothing changes
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG,
                              body=b"brokerPermission=6\nfileReservedTime=ten\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "fileReservedTime" in r.remark
            assert cl.broker.config.broker_permission == 4 and conf.read_text(encoding="latin-1") == text
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=99\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "brokerPermission" in r.remark
            # RocketMQ's black list
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/tmp/x\n")
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            # writable again: the send path takes the new permission
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("live", 0), b"after")
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "1"
            # an empty body changes nothing
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG)
            assert r.code == ResponseCode.SUCCESS

    arun(main())


def test_update_broker_config_reaches_the_name_server(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
            assert r.code == ResponseCode.SUCCESS
            perms: set[int] = set()
            for _ in range(100):
                perms = {q.perm for q in cl.namesrv.route_info.topic_queue_table.get("TBW102", {}).values()}
                if perms == {4}:
                    break
                await asyncio.sleep(0.05)
            assert perms == {4}

    arun(main())


def test_clean_expired_consume_queue_and_unused_topic(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            store = cl.broker.store
            assert store is not None
            body = b"x" * 200_000
            for _ in range(20):         # 4.0 MB: the first 4 MiB CommitLog file
                assert (await cl.call(RequestCode.SEND_MESSAGE, send_fields("old", 0), body)).code == 0
            for _ in range(2):          # the next file
                assert (await cl.call(RequestCode.SEND_MESSAGE, send_fields("new", 0), body)).code == 0
            await cl.dispatched()
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=0\n")
            assert r.code == ResponseCode.SUCCESS
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: store.clean_files(manual=True))
            assert store.get_min_phy_offset() == 4 << 20
            assert "old" in store.topics()
            r = await cl.call(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
            assert r.code == ResponseCode.SUCCESS
            assert "old" not in store.topics() and store.queues("new") == [0]
            assert not (tmp_path / "store" / "consumequeue" / "old").exists()
            # a put to the forgotten queue starts it again at 0, as RocketMQ's does
            r = await cl.call(RequestCode.SEND_MESSAGE, send_fields("old", 0), b"again")
            assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
            await cl.dispatched()
            # cleanUnusedTopic: the queues of topics the broker no longer has
            cl.broker.topics.delete("new")
            r = await cl.call(RequestCode.CLEAN_UNUSED_TOPIC)
            assert r.code == ResponseCode.SUCCESS
            assert "new" not in store.topics() and "old" in store.topics()

    arun(main())


def test_update_broker_config_that_cannot_be_written_changes_nothing(arun, tmp_path: Path) -> None:
    conf = tmp_path / "a-directory"
    conf.mkdir()

    async def main() -> None:
        async with cluster(tmp_path / "store", config_file=conf) as cl:
            r = await cl.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
            assert r.code == ResponseCode.SYSTEM_ERROR and "properties file" in r.remark
            assert cl.broker.config.broker_permission == 6

    arun(main())
