"""``rocketstore broker -c broker.properties`` as a process: it registers with the name server,
serves, and on SIGTERM stops cleanly (store flushed and closed, offsets and tables written)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import broker_helpers
import orjson
from broker_helpers import (
    CHILD_CWD,
    child_env,
    kill_quietly,
    send_fields,
    start_broker,
    start_namesrv,
    stop_process,
    write_properties,
)

from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

arun = broker_helpers.arun


def test_broker_process_serves_and_stops_cleanly_on_sigterm(arun, tmp_path: Path) -> None:
    store = tmp_path / "store"
    namesrv, ns_addr = start_namesrv()
    broker = None
    try:
        props = write_properties(tmp_path / "broker.properties", brokerName="broker-t",
                                 brokerClusterName="ClusterT", listenPort=0, namesrvAddr=ns_addr,
                                 storePathRootDir=store, mappedFileSizeCommitLog=1 << 20,
                                 flushDiskType="SYNC_FLUSH")
        broker, addr = start_broker(props, log_path=tmp_path / "broker.log")

        async def main() -> None:
            async with RemotingClient() as client:
                async def call(code: int, ext: dict, body: bytes | None = None):
                    return await client.invoke(addr, create_request(code, {k: str(v) for k, v in ext.items()}, body), 5)

                for i in range(3):
                    r = await call(RequestCode.SEND_MESSAGE, send_fields("proc", 0), b"p%d" % i)
                    assert r.code == ResponseCode.SUCCESS, r.remark
                r = await call(RequestCode.UPDATE_CONSUMER_OFFSET,
                               {"consumerGroup": "g", "topic": "proc", "queueId": 0, "commitOffset": 2})
                assert r.code == 0
                # the name server knows the broker and its new topic
                for _ in range(50):
                    route = await client.invoke(ns_addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "proc"}), 5)
                    if route.code == 0:
                        break
                    await asyncio.sleep(0.1)
                assert route.code == 0
                data = orjson.loads(route.body_bytes())
                assert data["brokerDatas"][0]["brokerName"] == "broker-t"
                assert data["brokerDatas"][0]["brokerAddrs"]["0"] == addr

        arun(main())
        # a second broker on the same store is refused with one line
        other = write_properties(tmp_path / "other.properties", listenPort=0, storePathRootDir=store)
        result = subprocess.run([sys.executable, "-m", "rocketstore.broker", "-c", str(other)],
                                capture_output=True, text=True, env=child_env(), cwd=CHILD_CWD, timeout=60)
        assert result.returncode == 1 and "broker:" in result.stderr and "Traceback" not in result.stderr
        code, out = stop_process(broker, signal.SIGTERM)
        assert code == 0, (tmp_path / "broker.log").read_text()[-3000:]
        assert "The broker[broker-t] shut down." in out
        assert not (store / "abort").exists()          # a clean shutdown
        offsets = orjson.loads((store / "config" / "consumerOffset.json").read_bytes())
        assert offsets["offsetTable"]["proc@g"] == {"0": 2}
        topics = orjson.loads((store / "config" / "topics.json").read_bytes())
        assert topics["topicConfigTable"]["proc"]["writeQueueNums"] == 4
        assert "ClusterT" in topics["topicConfigTable"]
    finally:
        if broker is not None:
            kill_quietly(broker)
        stop_process(namesrv)


def test_broker_command_refuses_a_bad_config(tmp_path: Path) -> None:
    props = write_properties(tmp_path / "broker.properties", listenPort="ten", storePathRootDir=tmp_path)
    result = subprocess.run([sys.executable, "-m", "rocketstore", "broker", "-c", str(props)],
                            capture_output=True, text=True, env=child_env(), cwd=CHILD_CWD, timeout=60)
    assert result.returncode == 2 and "listenPort" in result.stderr
    props = write_properties(tmp_path / "broker.properties", flushDiskType="SOMETIMES", storePathRootDir=tmp_path)
    result = subprocess.run([sys.executable, "-m", "rocketstore", "broker", "-c", str(props)],
                            capture_output=True, text=True, env=child_env(), cwd=CHILD_CWD, timeout=60)
    assert result.returncode == 2 and "flushDiskType" in result.stderr


def test_the_broker_process_freezes_what_its_start_built() -> None:
    import gc

    from rocketstore.broker.startup import freeze_startup_objects

    before = gc.get_freeze_count()
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() > before
        assert gc.get_count()[0] < 100     # collected first: nothing young was frozen with it
    finally:
        gc.unfreeze()
