"""``rocketstore console --store PATH``: a store directory shown read-only.

The console talks to brokers over the admin protocol only, so it serves a store directory the
way it serves a cluster: it starts a name server and a broker over PATH as subprocesses
(``python -m rocketstore.namesrv`` / ``python -m rocketstore.broker``) on 127.0.0.1, free
ports, and stops them when it stops (they also end with the console's process on Linux). The
broker runs with ``readOnly=true`` and ``brokerPermission=4`` (PERM_READ): it opens the store
read-only (no lock, no service, no file written: a store not shut down cleanly is served as
its valid prefix, never truncated), keeps its tables and consumer offsets in memory, and
answers sends NO_PERMISSION as RocketMQ does. Another process may write the store meanwhile
(read-only opens take no lock); what it appends after the broker started is not shown.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocketstore.common.perm import PERM_READ

log = logging.getLogger("rocketstore.console")

NAMESRV_BOOT = re.compile(r"The Name Server boot success\. listening on (\S+)")
BROKER_BOOT = re.compile(r"The broker\[[^,\]]*, (\S+)\] boot success")
#: lines of a server's output kept for its error message
KEPT_LINES = 200
#: the cluster the store's broker registers in
STORE_CLUSTER = "DefaultCluster"


class StoreServeError(Exception):
    """The store cannot be served (not a store, or its name server or broker did not start):
    the message is one line for the person who ran the console."""


def broker_name_for(path: str) -> str:
    """The store's directory name as a broker name (RocketMQ's topic characters only)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.basename(os.path.normpath(path))).strip("-.")
    return name[:64] or "broker-a"


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the console's process ends, however it ends."""
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class _Server:
    """One server subprocess and the lines it printed."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, cwd=cwd, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        threading.Thread(target=self._read, name=f"console-{name}-output", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            del self.lines[:-KEPT_LINES]
            self._queue.put(line)
            log.debug("%s: %s", self.name, line)
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float) -> str:
        """The first group of the line matching pattern; StoreServeError when the server
        ends or stays silent past timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreServeError(f"the {self.name} did not start in {timeout_s:.0f} s"
                                      f"{self._last_words()}")
            try:
                line = self._queue.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
                raise StoreServeError(self._failure())
            match = pattern.search(line)
            if match:
                return match.group(1)

    def _failure(self) -> str:
        """The server's own error line ("broker: ..."), else its last line."""
        prefix = f"{self.name}: "
        for line in reversed(self.lines):
            if line.startswith(prefix):
                return line[len(prefix):]
        return f"the {self.name} ended (exit status {self.proc.returncode}){self._last_words()}"

    def _last_words(self) -> str:
        said = [line for line in self.lines if line.strip()]
        return f": {said[-1][:300]}" if said else ""

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("console: the %s did not stop in %.0f s: killed", self.name, timeout_s)
                self.proc.kill()
                self.proc.wait(10)


class StoreServers:
    """A name server and a read-only broker over one store directory (see the module
    docstring). ``start()`` returns once both serve; ``stop()`` ends them."""

    def __init__(self, store_path: str, *, start_timeout_s: float = 300.0,
                 python: str = sys.executable) -> None:
        self.store_path = os.path.abspath(store_path)
        self.start_timeout_s = start_timeout_s
        self.python = python
        self.namesrv_addr = ""
        self.broker_addr = ""
        self._servers: list[_Server] = []
        self._scratch: str | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # the servers run the same rocketstore as the console, wherever it was imported from
        package_parent = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        env.pop("NAMESRV_ADDR", None)
        return env

    def _properties(self, scratch: str) -> str:
        path = os.path.join(scratch, "broker.properties")
        lines = {
            "brokerClusterName": STORE_CLUSTER,
            "brokerName": broker_name_for(self.store_path),
            "brokerPermission": str(PERM_READ),
            "readOnly": "true",
            "fastListenPortEnable": "false",
            "metricsExporterType": "DISABLE",
        }
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("# written by rocketstore console --store\n")
            fh.writelines(f"{key}={value}\n" for key, value in lines.items())
        return path

    def start(self, on_step: Callable[[str], None] | None = None) -> None:
        if not os.path.isdir(self.store_path):
            raise StoreServeError(f"{self.store_path} is not a directory" if os.path.exists(self.store_path)
                                  else f"{self.store_path} does not exist")
        self._scratch = tempfile.mkdtemp(prefix="rocketstore-console-store-")
        env, cwd = self._env(), self._scratch
        try:
            namesrv = _Server("namesrv", [self.python, "-m", "rocketstore.namesrv", "--listen-port", "0",
                                          "--bind-address", "127.0.0.1"], env, cwd)
            self._servers.append(namesrv)
            self.namesrv_addr = namesrv.wait_for(NAMESRV_BOOT, self.start_timeout_s)
            if on_step is not None:
                on_step(f"name server at {self.namesrv_addr}")
            broker = _Server("broker", [
                self.python, "-m", "rocketstore.broker", "-c", self._properties(self._scratch),
                "-n", self.namesrv_addr, "--listen-port", "0", "--bind-address", "127.0.0.1",
                "--store-path", self.store_path], env, cwd)
            self._servers.append(broker)
            self.broker_addr = broker.wait_for(BROKER_BOOT, self.start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the broker, then the name server (each SIGTERM, killed when it lingers)."""
        servers, self._servers = self._servers, []
        for server in reversed(servers):
            try:
                server.stop()
            except OSError as exc:
                log.warning("console: stopping the %s: %s", server.name, exc)
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def __enter__(self) -> StoreServers:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
