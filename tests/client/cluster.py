"""Name servers and brokers as subprocesses on 127.0.0.1 (free ports), for the client tests.

Each server is a child Python importing the same rocketstore as the test. Everything started
through a :class:`Cluster` is stopped when it closes (SIGTERM, then SIGKILL after 15 s).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import rocketstore


def require_broker() -> None:
    try:
        import rocketstore.broker.startup  # noqa: F401
    except ImportError:
        pytest.skip("the broker (rocketstore.broker.startup) is not in this checkout")

NAMESRV_BOOT = re.compile(r"listening on (\S+):(\d+)")
BROKER_BOOT = re.compile(r"The broker\[([^,\]]+), (\S+?)\] boot success")
# not the checkout: with -m, Python would import its unbuilt rocketstore/ source tree first
CHILD_CWD = str(Path(__file__).resolve().parent)
#: Delay levels for tests: every level one second, so retries and delayed messages come quickly.
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(rocketstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[str]
    address: str
    output: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def _start(name: str, args: list[str], boot: re.Pattern[str], address_of: Callable[[re.Match[str]], str],
           timeout: float = 60.0) -> Server:
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=child_env(), cwd=CHILD_CWD)
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        match = boot.search(line)
        if match:
            server = Server(name, proc, address_of(match), output, args)
            threading.Thread(target=_drain, args=(proc, output), daemon=True).start()
            return server
    proc.kill()
    rest = proc.communicate(timeout=10)[0] or ""
    raise AssertionError(f"{name} did not start:\n{''.join(output)[-3000:]}{rest[-3000:]}")


def _drain(proc: subprocess.Popen[str], output: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if len(output) < 20_000:
            output.append(line)


class Cluster:
    """Name servers and brokers started for one test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.namesrvs: list[Server] = []
        self.brokers: dict[str, Server] = {}

    def start_namesrv(self) -> Server:
        server = _start("namesrv", ["-m", "rocketstore.namesrv", "--listen-port", "0"], NAMESRV_BOOT,
                        lambda m: f"{m.group(1)}:{m.group(2)}")
        self.namesrvs.append(server)
        return server

    @property
    def namesrv_addr(self) -> str:
        return ";".join(s.address for s in self.namesrvs)

    def start_broker(self, name: str = "broker-a", *, namesrv_addr: str | None = None, **properties: object) -> Server:
        require_broker()
        store = self.root / name
        props = {
            "brokerClusterName": "TestCluster",
            "brokerName": name,
            "brokerId": 0,
            "namesrvAddr": namesrv_addr or self.namesrv_addr,
            "listenPort": 0,
            "storePathRootDir": str(store),
            "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 60_000,
            "fastListenPortEnable": "false",
            "messageDelayLevel": FAST_DELAY_LEVELS,
            **properties,
        }
        path = self.root / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="latin-1")
        server = _start(name, ["-m", "rocketstore.broker", "-c", str(path), "--log-level", "WARNING"],
                        BROKER_BOOT, lambda m: m.group(2))
        self.brokers[name] = server
        return server

    def restart_broker(self, name: str) -> Server:
        old = self.brokers[name]
        old.stop()
        server = _start(name, old.args, BROKER_BOOT, lambda m: m.group(2))
        self.brokers[name] = server
        return server

    def close(self) -> None:
        for server in [*self.brokers.values(), *self.namesrvs]:
            server.stop()


@contextmanager
def cluster(root: Path, brokers: tuple[str, ...] = ("broker-a",), namesrvs: int = 1) -> Iterator[Cluster]:
    c = Cluster(root)
    try:
        for _ in range(namesrvs):
            c.start_namesrv()
        for name in brokers:
            c.start_broker(name)
        yield c
    finally:
        c.close()


def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
