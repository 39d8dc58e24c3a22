"""Masters and slaves as subprocesses on 127.0.0.1 for the replication tests: free ports, the
HA port set explicitly, logs at INFO (the tests read the HA log lines), and ways to read a
running broker's CommitLog and stores."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "system"))

import system_servers as ss  # noqa: E402
from ports import free_port  # noqa: E402

from rocketstore.remoting import (  # noqa: E402
    RemotingClient,
    RequestCode,
    ResponseCode,
    create_request,
)

SEGMENT = 256 * 1024
TOPIC = "HaTopic"
QUEUES = 4


def ha_broker(root: Path, name: str, *, broker_id: int = 0, role: str = "ASYNC_MASTER",
              namesrv_addr: str = "", **properties: object) -> tuple[ss.Server, int]:
    """A broker (store root/name) and its HA port."""
    ha_port = free_port()
    props: dict[str, object] = {
        "brokerClusterName": "HaCluster", "brokerName": "broker-ha", "brokerId": broker_id,
        "brokerRole": role, "listenPort": free_port(), "haListenPort": ha_port,
        "storePathRootDir": str(root / name), "mappedFileSizeCommitLog": SEGMENT,
        "mappedFileSizeConsumeQueue": 60_000, "fastListenPortEnable": "false",
        "maxHashSlotNum": 5000, "maxIndexNum": 20000,
        "haSendHeartbeatInterval": 1000,
        **({"namesrvAddr": namesrv_addr} if namesrv_addr else {}),
        **properties,
    }
    path = root / f"{name}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="latin-1")
    server = ss.Server(name, ["-m", "rocketstore.broker", "-c", str(path), "--log-level", "INFO"],
                       ss.BROKER_BOOT)
    return server, ha_port


def commit_log_bytes(store_root: Path, start: int = 0) -> bytes:
    """The CommitLog of a store directory from start to the end of its last segment file."""
    out = bytearray()
    segments = [p for p in (store_root / "commitlog").iterdir() if p.name.isdigit()]
    for path in sorted(segments, key=lambda p: p.name):    # not a segment being made
        base = int(path.name)
        data = path.read_bytes()
        if base + len(data) <= start:
            continue
        out += data[max(0, start - base):]
    return bytes(out)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


async def send_many(address: str, count: int, first: int = 0, size: int = 300) -> list[bytes]:
    """count sends of distinct bodies (SEND_MESSAGE_V2, queues round robin); their bodies."""
    client = RemotingClient()
    bodies = []
    try:
        for i in range(first, first + count):
            body = f"m{i:07d}-".encode() + bytes([65 + i % 26]) * (size + i % 97)
            response = await client.invoke(address, ss.send_request(TOPIC, i % QUEUES, body,
                                                                     properties=f"KEYS\x01k{i}\x02"),
                                           timeout=10)
            assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
            bodies.append(body)
    finally:
        await client.close()
    return bodies


def run(coro):  # noqa: ANN001, ANN201 - a test helper
    return asyncio.run(coro)


def controller_namesrv(root: Path, port: int | None = None, **properties: object) -> ss.Server:
    """A name server with the controller in it (enableControllerInNamesrv), its state under
    root/controller; port fixed so a restart keeps controllerAddr."""
    props: dict[str, object] = {
        "listenPort": port or free_port(), "enableControllerInNamesrv": "true",
        "controllerStorePath": str(root / "controller"), "kvConfigPath": str(root / "kv.json"),
        "scanNotActiveBrokerInterval": 300, **properties,
    }
    path = root / "namesrv.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="latin-1")
    return ss.Server("namesrv", ["-m", "rocketstore.namesrv", "-c", str(path), "--log-level",
                                 "INFO"], ss.NAMESRV_BOOT)


#: the controller-mode settings the failover tests use: heartbeats every 300 ms, a master
#: silent 1.5 s is replaced
CONTROLLER_MODE = {"enableControllerMode": "true", "brokerHeartbeatInterval": 300,
                   "controllerHeartBeatTimeoutMills": 1500, "haMaxTimeSlaveNotCatchup": 3000,
                   "haSendHeartbeatInterval": 500}


def replica(root: Path, name: str, broker_id: int, namesrv_addr: str,
            **properties: object) -> tuple[ss.Server, int]:
    """A broker of the controller-mode group broker-ha, replica broker_id (its controller:
    the name server unless controllerAddr is given)."""
    return ha_broker(root, name, broker_id=broker_id, role="ASYNC_MASTER",
                     namesrv_addr=namesrv_addr,
                     **{"controllerAddr": namesrv_addr, **CONTROLLER_MODE, **properties})


def wait_taking_sends(address: str, first: int, timeout: float = 15) -> None:
    """Until the broker at address stores sends (a newly elected master switches at its next
    controller heartbeat)."""
    def sends() -> bool:
        try:
            run(send_many(address, 5, first=first))
        except Exception:   # noqa: BLE001 - still a slave, or restarting
            return False
        return True
    wait_for(sends, timeout, f"{address} taking sends", step=0.3)


async def ask(address: str, code: int, fields: dict[str, str] | None = None,
              body: bytes | None = None, timeout: float = 5) -> tuple[int, dict]:
    """One request; the answer's code and JSON body ({} when it has none)."""
    client = RemotingClient()
    try:
        response = await client.invoke(address, create_request(code, fields or {}, body),
                                       timeout=timeout)
    finally:
        await client.close()
    return response.code, json.loads(response.body_bytes() or b"{}")


def sync_state(controller: str, group: str = "broker-ha") -> dict:
    """The controller's view of a broker group (CONTROLLER_GET_SYNC_STATE_DATA)."""
    code, body = run(ask(controller, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b"[]"))
    assert code == ResponseCode.SUCCESS
    return body[group]


def broker_max_offset(address: str) -> int:
    """A running broker's CommitLog end (its GET_BROKER_EPOCH_CACHE answer)."""
    code, body = run(ask(address, RequestCode.GET_BROKER_EPOCH_CACHE))
    assert code == ResponseCode.SUCCESS
    return int(body["maxOffset"])


async def create_topic(address: str, topic: str = TOPIC, queues: int = QUEUES) -> None:
    client = RemotingClient()
    try:
        await ss.create_topic(client, address, topic, queues)
    finally:
        await client.close()


async def pull_all(address: str, queue_id: int, topic: str = TOPIC, group: str = "ha_test_cg",
                   max_requests: int = 100_000) -> list[bytes]:
    """Every body of a queue from offset 0, pulled (32 a request) until no more is found."""
    client = RemotingClient()
    bodies: list[bytes] = []
    try:
        offset = 0
        for _ in range(max_requests):
            response = await client.invoke(
                address, ss.pull_request(topic, queue_id, offset, group), timeout=10)
            if response.code != ResponseCode.SUCCESS:
                break
            got = ss.record_bodies(response.body)
            bodies += got
            offset = int(response.ext_fields.get("nextBeginOffset", offset + len(got)))
    finally:
        await client.close()
    return bodies
