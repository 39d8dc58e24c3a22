"""Name servers and brokers as subprocesses on 127.0.0.1 (free ports) for the system tests, and
raw protocol helpers to talk to them.

Each server is a child Python importing the same rocketstore as the tests, started from a
directory outside the checkout (with ``-m`` the unbuilt source tree would shadow it otherwise).
Everything a test starts is stopped at its end: SIGTERM, then SIGKILL after a bounded wait.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import rocketstore
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    create_request,
)

NAMESRV_BOOT = re.compile(r"listening on (\S+):(\d+)")
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?)\] boot success")
CHILD_CWD = str(Path(__file__).resolve().parent)
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def broker_available() -> bool:
    try:
        import rocketstore.broker.startup  # noqa: F401
    except ImportError:
        return False
    return True


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(rocketstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@dataclass
class Server:
    name: str
    args: list[str]
    boot: re.Pattern[str]
    proc: subprocess.Popen[str] | None = None
    address: str = ""
    output: list[str] = field(default_factory=list)

    def start(self, timeout: float = 90.0) -> Server:
        self.output = []
        self.proc = subprocess.Popen([sys.executable, *self.args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=CHILD_CWD)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = self.boot.search(line)
            if match:
                self.address = (f"{match.group(1)}:{match.group(2)}" if self.boot is NAMESRV_BOOT
                                else match.group(2))
                threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
                return self
        self.proc.kill()
        self.proc.wait(10)
        raise AssertionError(f"{self.name} did not start:\n{''.join(self.output)[-4000:]}")

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if len(self.output) < 20_000:
                self.output.append(line)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self) -> int:
        """Resident memory of the process now (from /proc)."""
        with open(f"/proc/{self.pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_SIZE

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return "".join(self.output)


def namesrv() -> Server:
    return Server("namesrv", ["-m", "rocketstore.namesrv", "--listen-port", "0"], NAMESRV_BOOT)


def broker(root: Path, name: str = "broker-a", namesrv_addr: str = "", **properties: object) -> Server:
    """A broker whose store is ``root/name`` (kept across restarts of the same Server)."""
    props: dict[str, object] = {
        "brokerClusterName": "SystemTestCluster",
        "brokerName": name,
        "brokerId": 0,
        "listenPort": 0,
        "storePathRootDir": str(root / name),
        "mappedFileSizeCommitLog": 16 * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 60_000,
        "fastListenPortEnable": "false",
        **({"namesrvAddr": namesrv_addr} if namesrv_addr else {}),
        **properties,
    }
    path = root / f"{name}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="latin-1")
    return Server(name, ["-m", "rocketstore.broker", "-c", str(path), "--log-level", "WARNING"], BROKER_BOOT)


@contextmanager
def running(*servers: Server) -> Iterator[tuple[Server, ...]]:
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in reversed(servers):
            server.stop()


# ---- raw frames ------------------------------------------------------------------------------


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    prefix = await reader.readexactly(4)
    (length,) = struct.unpack(">I", prefix)
    return prefix + await reader.readexactly(length)


async def create_topic(client: RemotingClient, address: str, topic: str, queues: int = 4) -> None:
    request = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"})
    response = await client.invoke(address, request, timeout=10)
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)


def send_request(topic: str, queue_id: int, body: bytes, group: str = "system_test_producer",
                 properties: str = "") -> RemotingCommand:
    """SEND_MESSAGE_V2 as a Java producer sends it."""
    return create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties + "WAIT\x01true\x02",
        "j": "0", "k": "false", "m": "false"}, body)


def pull_request(topic: str, queue_id: int, offset: int, group: str, max_msgs: int = 32) -> RemotingCommand:
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_msgs), "sysFlag": "4", "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})


def record_bodies(records: bytes) -> list[bytes]:
    """The bodies of CommitLog records back to back (docs/format.md 3.1: TOTALSIZE ... BODYLENGTH body
    TOPICLENGTH topic PROPERTIESLENGTH properties), each length checked."""
    bodies = []
    pos = 0
    while pos < len(records):
        (total,) = struct.unpack_from(">i", records, pos)
        assert 0 < total <= len(records) - pos, (pos, total)
        sys_flag = struct.unpack_from(">i", records, pos + 36)[0]
        born_host = 8 if sys_flag & 0x10 == 0 else 20  # IPv4 or IPv6 born host
        store_host = 8 if sys_flag & 0x20 == 0 else 20
        body_at = pos + 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_host + 8 + store_host + 4 + 8
        (body_length,) = struct.unpack_from(">i", records, body_at)
        bodies.append(bytes(records[body_at + 4 : body_at + 4 + body_length]))
        pos += total
    return bodies
