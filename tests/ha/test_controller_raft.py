"""A replicated controller: three standalone controllers agreeing through pysyncobj (the
``controller`` extra). A 2-replica group follows the leader; with the leader controller killed,
the other two still elect a new broker master when the broker master dies."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from ha_servers import replica, send_many, ss, wait_for, wait_taking_sends
from ports import free_port

from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

# find_spec, not an import: importing pysyncobj in this process would replace socket.inet_ntop
# (see rocketstore.controller.raft.import_pysyncobj)
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("pysyncobj") is None,
                       reason="the replicated controller needs pysyncobj "
                              "(pip install 'rocketstore[controller]')"),
    pytest.mark.skipif(not ss.broker_available(),
                       reason="the broker (rocketstore.broker) is not in this checkout"),
]


async def _ask(address: str, code: int, body: bytes | None = None) -> tuple[int, dict, dict]:
    client = RemotingClient()
    try:
        response = await client.invoke(address, create_request(code, {}, body), timeout=5)
    finally:
        await client.close()
    return response.code, dict(response.ext_fields), json.loads(response.body_bytes() or b"{}")


def leader_state(controllers: list[ss.Server]) -> tuple[ss.Server, dict] | None:
    """The leading controller and its view of broker-ha (None: no leader answers)."""
    for c in controllers:
        if not c.running:
            continue
        try:
            code, _, body = asyncio.run(_ask(c.address, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                             b"[]"))
        except Exception:   # noqa: BLE001 - a controller starting or gone
            continue
        if code == ResponseCode.SUCCESS and "broker-ha" in body:
            return c, body["broker-ha"]
    return None


def test_three_controllers_keep_electing_with_the_leader_gone(tmp_path: Path) -> None:
    raft_ports = [free_port() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(raft_ports))
    controllers = []
    for i in range(3):
        props = tmp_path / f"controller{i}.properties"
        props.write_text(f"listenPort={free_port()}\ncontrollerStorePath={tmp_path / f'ctl{i}'}\n"
                         f"scanNotActiveBrokerInterval=300\ncontrollerDLegerPeers={peers}\n"
                         f"controllerDLegerSelfId=n{i}\n", encoding="latin-1")
        controllers.append(ss.Server(f"controller{i}", ["-m", "rocketstore", "controller", "-c",
                                                        str(props)], ss.NAMESRV_BOOT))
    namesrv = ss.namesrv()
    brokers: list[ss.Server] = []
    try:
        for c in controllers:
            c.start()
        namesrv.start()
        addrs = ";".join(c.address for c in controllers)
        for i in (1, 2):
            server, _ = replica(tmp_path, f"b{i}", i, namesrv.address, controllerAddr=addrs)
            brokers.append(server.start())
        wait_for(lambda: (s := leader_state(controllers)) is not None
                 and s[1]["syncStateSet"] == [1, 2], 20, "both replicas in the SyncStateSet")
        asyncio.run(send_many(brokers[0].address, 20))
        found = leader_state(controllers)
        assert found is not None
        leader, state = found
        assert state["masterBrokerId"] == 1
        leader.kill()
        brokers[0].kill()
        wait_for(lambda: (s := leader_state(controllers)) is not None
                 and s[1]["masterBrokerId"] == 2, 30, "master 2 elected by the two controllers left")
        wait_taking_sends(brokers[1].address, 100)
        found = leader_state(controllers)
        assert found is not None and found[0] is not leader
        assert found[1]["masterEpoch"] == state["masterEpoch"] + 1
    finally:
        for b in brokers:
            b.stop()
        namesrv.stop()
        for c in controllers:
            c.stop()
