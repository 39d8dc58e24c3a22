"""bench/ha.py's failover part: kill -> first SEND_OK on the new master, over N kills of the
master of a 3-replica SYNC_MASTER group in controller mode (see ha.py's docstring)."""
from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import statistics
import threading
import time
from typing import Any

import broker as B
from _common import TempDirs, markdown_table

from rocketstore.client import AsyncProducer, Message, SendStatus
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request

FAILOVER_TARGET_S = 5.0
#: the README's controller-mode heartbeat settings (ms)
BROKER_HEARTBEAT_MS = 500
CONTROLLER_HEARTBEAT_TIMEOUT_MS = 2000
SCAN_NOT_ACTIVE_MS = 500
POLL_NAME_SERVER_MS = 500
PRODUCERS = 4
GROUP = "bench-ha"
#: bounds of each wait (a loaded machine)
WAIT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_namesrv(root: str) -> B.Server:
    path = os.path.join(root, "namesrv.properties")
    with open(path, "w", encoding="latin-1") as f:
        f.write(f"listenPort=0\nenableControllerInNamesrv=true\n"
                f"controllerStorePath={os.path.join(root, 'controller')}\n"
                f"kvConfigPath={os.path.join(root, 'kv.json')}\n"
                f"scanNotActiveBrokerInterval={SCAN_NOT_ACTIVE_MS}\n")
    return B.start_server("namesrv", ["-m", "rocketstore.namesrv", "-c", path], B.NAMESRV_BOOT,
                          lambda m: f"{m.group(1)}:{m.group(2)}")


class Replica:
    """One broker of the group; start() again after a kill reuses its store and ports."""

    def __init__(self, dirs: TempDirs, broker_id: int, namesrv: str) -> None:
        self.root = dirs.new(f"replica{broker_id}")
        self.properties = {
            "brokerName": GROUP, "brokerId": broker_id, "brokerRole": "SYNC_MASTER",
            "listenPort": free_port(), "haListenPort": free_port(), "controllerAddr": namesrv,
            "enableControllerMode": "true", "brokerHeartbeatInterval": BROKER_HEARTBEAT_MS,
            "controllerHeartBeatTimeoutMills": CONTROLLER_HEARTBEAT_TIMEOUT_MS}
        self.namesrv = namesrv
        self.server: B.Server | None = None

    def start(self) -> None:
        self.server = B.start_broker(self.root, os.path.join(self.root, "store"), self.namesrv,
                                     **self.properties)

    @property
    def port(self) -> int:
        return int(self.properties["listenPort"])   # type: ignore[call-overload]

    def kill(self) -> None:
        if self.server is not None:
            self.server.proc.kill()
            self.server.proc.wait(10)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


async def group_state(namesrv: str) -> dict[str, Any] | None:
    client = RemotingClient()
    try:
        response = await client.invoke(namesrv, create_request(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {}, b"[]"), timeout=5)
    except Exception:  # noqa: BLE001 - the caller asks again
        return None
    finally:
        await client.close()
    if response.code != ResponseCode.SUCCESS:
        return None
    state: dict[str, Any] | None = json.loads(response.body_bytes()).get(GROUP)
    return state


async def wait_state(namesrv: str, ok: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        state = await group_state(namesrv)
        if state is not None and ok(state):
            return state
        await asyncio.sleep(0.1)
    raise RuntimeError(f"timed out after {WAIT_S} s waiting for {what}")


class Senders:
    """PRODUCERS producers of the project's client sending one at a time; when a SEND_OK came
    from which broker port."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self.oks: list[tuple[float, int]] = []
        self.stopping = False

    async def run_one(self, n: int) -> None:
        producer = AsyncProducer(f"bench_failover_{n}", namesrv_addr=self.namesrv,
                                 poll_name_server_interval=POLL_NAME_SERVER_MS,
                                 send_msg_timeout=3000)
        await producer.start()
        try:
            i = 0
            while not self.stopping:
                i += 1
                try:
                    result = await producer.send(Message(B.TOPIC, b"failover-%d-%d" % (n, i)))
                except Exception:  # noqa: BLE001 - the window: sends fail until the switch
                    await asyncio.sleep(0.05)
                    continue
                if result.send_status == SendStatus.SEND_OK:
                    port = int(result.offset_msg_id[8:16], 16)
                    self.oks.append((time.time(), port))
                await asyncio.sleep(0.01)
        finally:
            await producer.shutdown()

    def first_ok(self, since: float, port: int) -> float | None:
        times = [t for t, p in self.oks if t > since and p == port]
        return min(times) if times else None


async def kill_rounds(kills: int, replicas: list[Replica], namesrv: str) -> list[float]:
    loop = asyncio.get_running_loop()
    senders = Senders(namesrv)
    tasks = [asyncio.ensure_future(senders.run_one(n)) for n in range(PRODUCERS)]
    windows = []
    rng = random.Random()
    try:
        await wait_state(namesrv, lambda s: len(senders.oks) > 0 or any(t.done() for t in tasks),
                         "a first SEND_OK")
        for k in range(kills):
            state = await wait_state(namesrv, lambda s: s["syncStateSet"] == [1, 2, 3],
                                     "every replica in the SyncStateSet")
            old = state["masterBrokerId"]
            await asyncio.sleep(rng.uniform(0.3, 1.5))
            replicas[old - 1].kill()
            killed = time.time()
            state = await wait_state(namesrv, lambda s, old=old: s["masterBrokerId"] not in (-1, old),
                                     "a new master")
            port = replicas[state["masterBrokerId"] - 1].port
            deadline = time.monotonic() + WAIT_S
            while senders.first_ok(killed, port) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            first = senders.first_ok(killed, port)
            if first is None:
                raise RuntimeError(f"kill {k + 1}: no SEND_OK from the new master in {WAIT_S} s")
            windows.append(first - killed)
            print(f"  kill {k + 1}: master {old} -> {state['masterBrokerId']}, first SEND_OK "
                  f"{windows[-1]:.2f} s after the kill", flush=True)
            await loop.run_in_executor(None, replicas[old - 1].start)
    finally:
        senders.stopping = True
        await asyncio.gather(*tasks, return_exceptions=True)
    return windows


def measure_failover(kills: int, dirs: TempDirs) -> dict[str, object]:
    namesrv = start_namesrv(dirs.new("namesrv"))
    replicas = [Replica(dirs, i, namesrv.address) for i in (1, 2, 3)]
    try:
        for r in replicas:
            r.start()
        windows = asyncio.run(asyncio.wait_for(kill_rounds(kills, replicas, namesrv.address),
                                               kills * 4 * WAIT_S))
    finally:
        threads = [threading.Thread(target=r.stop) for r in replicas]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        namesrv.stop()
    med = statistics.median(windows)
    print(markdown_table(
        ["kills", "kill -> first SEND_OK on the new master: median s", "max s", "target"],
        [[str(len(windows)), f"{med:.2f}", f"{max(windows):.2f}",
          f"median <= {FAILOVER_TARGET_S:g} s: {'PASS' if med <= FAILOVER_TARGET_S else 'MISS'}"]]))
    print(f"(brokerHeartbeatInterval {BROKER_HEARTBEAT_MS} ms, controllerHeartBeatTimeoutMills "
          f"{CONTROLLER_HEARTBEAT_TIMEOUT_MS} ms, scanNotActiveBrokerInterval "
          f"{SCAN_NOT_ACTIVE_MS} ms, pollNameServerInterval {POLL_NAME_SERVER_MS} ms; "
          f"{PRODUCERS} producers; load average {os.getloadavg()[0]:.1f})")
    return {"windows_s": windows, "median_s": med, "max_s": max(windows)}
