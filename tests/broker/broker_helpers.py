"""Helpers of the broker tests: an in-process name server and broker on one event loop, request
builders, and subprocess servers (``python -m rocketstore.namesrv`` / ``rocketstore.broker``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

import rocketstore
from rocketstore.broker import BrokerConfig, BrokerController
from rocketstore.config import StoreConfig
from rocketstore.namesrv import NamesrvConfig, NamesrvController
from rocketstore.remoting import RemotingClient, RemotingCommand, create_request
from rocketstore.remoting.eventloop import run

T = TypeVar("T")

# Test modules pick the fixture up with `arun = broker_helpers.arun` (a conftest.py here would
# shadow tests/conftest.py, which other tests import by name).


@pytest.fixture
def arun() -> Callable[..., Any]:
    def runner(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return run(asyncio.wait_for(coro, timeout))

    return runner


def small_store(root: Path | str, **changes: Any) -> StoreConfig:
    """A store config with small files (tests write little)."""
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=4 << 20,
                       mapped_file_size_consume_queue=20 * 4096, max_hash_slot_num=4096,
                       max_index_num=4096 * 4, commit_log_prefault_ahead=0, **changes)


@dataclass
class Cluster:
    namesrv: NamesrvController
    broker: BrokerController
    client: RemotingClient

    @property
    def addr(self) -> str:
        return self.broker.address

    async def dispatched(self) -> None:
        """Wait until the store dispatched everything put so far (pulls see it)."""
        store = self.broker.store
        assert store is not None
        assert await asyncio.get_running_loop().run_in_executor(None, store.wait_dispatched, 10.0)

    async def call(self, code: int, ext: dict[str, Any] | None = None, body: Any = None,
                   timeout: float = 5.0) -> RemotingCommand:
        request = create_request(code, {k: str(v) for k, v in (ext or {}).items()}, body)
        return await self.client.invoke(self.addr, request, timeout)


@contextlib.asynccontextmanager
async def cluster(root: Path, store_changes: dict[str, Any] | None = None,
                  **broker_changes: Any) -> AsyncIterator[Cluster]:
    """A name server and a broker in this process (store under root), and a client."""
    store_opener = broker_changes.pop("store_opener", None)
    native_send = broker_changes.pop("native_send", True)
    config_file = broker_changes.pop("config_file", None)
    async with NamesrvController(NamesrvConfig(listen_port=0)) as namesrv:
        config = BrokerConfig(listen_port=0, namesrv_addr=namesrv.address,
                              store=small_store(root, **(store_changes or {})), **broker_changes)
        broker = BrokerController(config, store_opener=store_opener, native_send=native_send,
                                  config_file=config_file)
        await broker.start()
        try:
            async with RemotingClient() as client:
                yield Cluster(namesrv, broker, client)
        finally:
            await broker.stop()


def send_fields(topic: str, queue_id: int = 0, properties: str = "", **extra: Any) -> dict[str, Any]:
    fields = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
              "defaultTopicQueueNums": 4, "queueId": queue_id, "sysFlag": 0,
              "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": properties}
    fields.update(extra)
    return fields


def props(**values: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items())


def pull_fields(group: str, topic: str, queue_id: int, offset: int, *, suspend_ms: int = 0,
                sys_flag: int | None = None, subscription: str = "*", max_nums: int = 32,
                commit_offset: int = -1) -> dict[str, Any]:
    if sys_flag is None:
        sys_flag = 4 | (2 if suspend_ms else 0) | (1 if commit_offset >= 0 else 0)
    return {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
            "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": max(commit_offset, 0),
            "suspendTimeoutMillis": suspend_ms, "subVersion": 0, "subscription": subscription}


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(step)
    return True


# ---- subprocess servers ---------------------------------------------------------------------

# not the checkout: with -m, Python would import its unbuilt rocketstore/ source tree first
CHILD_CWD = str(Path(__file__).resolve().parent)
NAMESRV_BOOT = re.compile(r"listening on (\S+):(\d+)")
BROKER_BOOT = re.compile(r"The broker\[([^,]+), (\S+):(\d+)\] boot success")


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child Python that imports the same rocketstore as this test."""
    env = dict(os.environ)
    package_root = str(Path(rocketstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _start(args: list[str], boot: re.Pattern[str], what: str, log_path: Path | None = None
           ) -> tuple[subprocess.Popen[str], re.Match[str]]:
    stderr: Any = subprocess.PIPE if log_path is None else open(log_path, "a")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=stderr,
                            text=True, env=child_env(), cwd=CHILD_CWD)
    if log_path is not None:
        stderr.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = boot.search(line)
        if match:
            return proc, match
    proc.kill()
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"{what} did not start: {line!r} {(err or '')[-3000:]}")


def start_namesrv() -> tuple[subprocess.Popen[str], str]:
    proc, match = _start(["-m", "rocketstore.namesrv", "--listen-port", "0"], NAMESRV_BOOT, "name server")
    return proc, f"{match.group(1)}:{match.group(2)}"


def start_broker(properties: Path, *extra: str, log_path: Path | None = None
                 ) -> tuple[subprocess.Popen[str], str]:
    proc, match = _start(["-m", "rocketstore.broker", "-c", str(properties), *extra], BROKER_BOOT,
                         "broker", log_path)
    return proc, f"{match.group(2)}:{match.group(3)}"


def stop_process(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 30
                 ) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"process {proc.pid} did not stop on signal {sig}") from None
    return proc.returncode, out or ""


def write_properties(path: Path, **values: Any) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="latin-1")
    return path


def rocketmq_usable() -> str | None:
    """None when the C++ client (rocketmq 0.4.4) imports here, else why not."""
    try:
        result = subprocess.run([sys.executable, "-c", "import rocketmq.client"],
                                capture_output=True, text=True, timeout=60,
                                env=child_env(HOME=os.environ.get("TMPDIR", "/tmp")), cwd=CHILD_CWD)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"importing rocketmq.client failed: {exc}"
    if result.returncode != 0:
        return f"the rocketmq package (C++ client 0.4.4) is not usable here: {result.stderr.strip()[-300:]}"
    return None


def kill_quietly(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.communicate(timeout=10)
