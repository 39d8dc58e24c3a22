"""Apache RocketMQ 4.9.8 in Java (``../shared/rocketmq-4.9.8-java`` beside the repository) as a
peer for the tests: its client programs (``programs/*.java``, compiled once per session), its
mqadmin, and its own name server and broker as subprocesses.

Every test that needs it calls :func:`require_java` (or uses a fixture that does), which skips
with the reason where the folder, Java 17, javac or the Debian jars its ``setup.sh`` names are
absent. RocketMQ's servers listen on every interface: they get ports below 32768 (the kernel's
ephemeral range starts above) and only ever see loopback traffic.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster import Server, _drain
from ports import free_low_port

RMQ_JAVA_DIR = Path(os.environ.get(
    "ROCKETSTORE_RMQ_JAVA_DIR",
    Path(__file__).resolve().parents[2] / "../shared/rocketmq-4.9.8-java")).resolve()
RMQ_JAVA = RMQ_JAVA_DIR / "bin" / "rmq-java"
PROGRAMS = Path(__file__).resolve().parent / "programs"
#: One jar of those ../shared/rocketmq-4.9.8-java/setup.sh installs, to tell whether it ran.
_DEBIAN_JAR = Path("/usr/share/java/netty-common.jar")
_JAVA_VERSION = re.compile(r'version "(\d+)')

NAMESRV_BOOT = re.compile(r"The Name Server boot success")
BROKER_BOOT = re.compile(r"The broker\[[^\]]+\] boot success")


def java_missing() -> str | None:
    """None when RocketMQ 4.9.8's Java tools can run here, else why not."""
    if not RMQ_JAVA.is_file():
        return (f"Apache RocketMQ 4.9.8 (Java) is not at {RMQ_JAVA_DIR}: it comes with the "
                "project's shared/ folder beside the repository (or set ROCKETSTORE_RMQ_JAVA_DIR)")
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} (Java 17) is not installed: .ci/run installs it with apt"
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"java -version failed: {exc}"
    match = _JAVA_VERSION.search(out.stderr + out.stdout)
    if not match or int(match.group(1)) < 17:
        return f"RocketMQ 4.9.8 here needs Java 17; java -version says {out.stderr.strip()[:200]!r}"
    if not _DEBIAN_JAR.exists():
        return (f"the Debian jars RocketMQ 4.9.8 needs are not installed ({_DEBIAN_JAR} is absent): "
                f"run {RMQ_JAVA_DIR / 'setup.sh'} as root (.ci/run does)")
    return None


_MISSING: list[str | None] = []


def require_java() -> None:
    """Skips the calling test when RocketMQ 4.9.8's Java tools cannot run here."""
    if not _MISSING:
        _MISSING.append(java_missing())
    if _MISSING[0] is not None:
        pytest.skip(_MISSING[0])


def java_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for rmq-java: ``user.home`` in the test's folder (RocketMQ writes its
    logs, its store and the client's offsets under it)."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["JAVA_OPT_EXT"] = " ".join(filter(None, (f"-Duser.home={home}", extra.pop("JAVA_OPT_EXT", ""))))
    env.update(extra)
    return env


class JavaPrograms:
    """The test programs of ``programs/`` compiled against RocketMQ 4.9.8's client."""

    def __init__(self, classes: Path, home: Path) -> None:
        self.classes = classes
        self.home = home

    def run(self, main: str, *args: object, timeout: float = 180, check: bool = True,
            props: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Runs a program's main class; ``props`` become -D system properties."""
        opts = " ".join(f"-D{k}={v}" for k, v in (props or {}).items())
        env = java_env(self.home, EXTRA_CP=str(self.classes), JAVA_OPT_EXT=opts)
        result = subprocess.run([str(RMQ_JAVA), "run", main, *map(str, args)], capture_output=True,
                                text=True, timeout=timeout, env=env)
        if check and result.returncode != 0:
            raise AssertionError(f"{main} {' '.join(map(str, args))} exited {result.returncode}:\n"
                                 f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
        return result

    def json_lines(self, main: str, *args: object, **kwargs: Any) -> list[dict[str, Any]]:
        """The JSON objects a program printed, a line each (other lines are ignored)."""
        out = self.run(main, *args, **kwargs).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def start(self, main: str, *args: object, props: dict[str, str] | None = None
              ) -> subprocess.Popen[str]:
        """A program running in the background (a consumer waiting for messages)."""
        opts = " ".join(f"-D{k}={v}" for k, v in (props or {}).items())
        env = java_env(self.home, EXTRA_CP=str(self.classes), JAVA_OPT_EXT=opts)
        return subprocess.Popen([str(RMQ_JAVA), "run", main, *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)


class MqadminSession:
    """RocketMQ 4.9.8's mqadmin, command after command in one JVM (``programs/MqadminSession.java``):
    what each command prints, as a JVM of its own would print it, without a JVM start each."""

    _MARKER = b"\x00mqadmin "

    def __init__(self, programs: JavaPrograms, home: Path, cwd: Path) -> None:
        self._argv = [str(RMQ_JAVA), "run", "MqadminSession"]
        self._env = java_env(home, EXTRA_CP=str(programs.classes), JAVA_OPT_EXT="-Djava.security.manager=allow")
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[tuple[str, str] | None] = queue.Queue()

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=self._env, cwd=self._cwd)
        threading.Thread(target=self._read_answers, args=(proc, self._answers), daemon=True).start()
        return proc

    def _read_answers(self, proc: subprocess.Popen[bytes], answers: queue.Queue[tuple[str, str] | None]) -> None:
        assert proc.stdout is not None
        parts: list[str] = []
        for line in iter(proc.stdout.readline, b""):
            if not line.startswith(self._MARKER):
                continue                                   # a line of the JVM's own
            parts.append(proc.stdout.read(int(line[len(self._MARKER):])).decode("utf-8", "replace"))
            if len(parts) == 2:
                answers.put((parts[0], parts[1]))
                parts = []
        answers.put(None)

    def run(self, *args: object, timeout: float = 60) -> tuple[str, str]:
        """One command's stdout and stderr."""
        line = "\t".join(map(str, args))
        assert "\n" not in line, args
        if self._proc is None or self._proc.poll() is not None:
            self._answers = queue.Queue()
            self._proc = self._start()
        assert self._proc.stdin is not None
        self._proc.stdin.write(line.encode() + b"\n")
        self._proc.stdin.flush()
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise AssertionError(f"mqadmin {line!r} gave no answer in {timeout} s") from None
        if answer is None:
            code = self._proc.wait(timeout=30)
            raise AssertionError(f"the mqadmin session exited {code} during {line!r}")
        return answer

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._proc.wait(timeout=30)
            self._proc = None


def compile_programs(out: Path) -> Path:
    """Compiles every ``programs/*.java`` into ``out``; returns it."""
    out.mkdir(parents=True, exist_ok=True)
    classpath = subprocess.run([str(RMQ_JAVA), "classpath"], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip()
    sources = sorted(str(p) for p in PROGRAMS.glob("*.java"))
    result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(out),
                             *sources], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"javac failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return out


def mqadmin(home: Path, *args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """RocketMQ 4.9.8's admin tool; exit status and output as it gives them."""
    return subprocess.run([str(RMQ_JAVA), "mqadmin", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=java_env(home))


@dataclass
class JavaServer(Server):
    """A RocketMQ 4.9.8 name server or broker started by :func:`start_java_namesrv` or
    :func:`start_java_broker`: a :class:`cluster.Server` with its ``user.home``."""

    home: Path = field(default_factory=Path)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        return super().stop(sig, timeout)        # a JVM takes longer to stop than our servers

    @property
    def log_text(self) -> str:
        """What the server printed, and its main log file (broker.log / namesrv.log)."""
        logs = self.home / "logs" / "rocketmqlogs"
        text = "".join(self.output)
        for name in ("broker.log", "namesrv.log"):
            with contextlib.suppress(OSError):
                text += (logs / name).read_text(errors="replace")
        return text


def _start_java(name: str, args: list[str], boot: re.Pattern[str], address: str, home: Path,
                timeout: float = 120.0) -> JavaServer:
    proc = subprocess.Popen([str(RMQ_JAVA), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=java_env(home))
    assert proc.stdout is not None
    output: list[str] = []
    # the boot line comes on stdout; a reader thread keeps the deadline in force while it waits
    reader = threading.Thread(target=_drain, args=(proc, output), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(boot.search(line) for line in list(output)):
            return JavaServer(name, proc, address, output, home=home)
        time.sleep(0.1)
    server = JavaServer(name, proc, address, output, home=home)
    server.kill()
    raise AssertionError(f"RocketMQ 4.9.8 {name} did not start:\n{server.log_text[-5000:]}")


def start_java_namesrv(root: Path) -> JavaServer:
    port = free_low_port()
    conf = root / "namesrv.properties"
    conf.write_text(f"listenPort={port}\n", encoding="latin-1")
    return _start_java("namesrv", ["namesrv", "-c", str(conf)], NAMESRV_BOOT, f"127.0.0.1:{port}",
                       root / "namesrv-home")


def start_java_broker(root: Path, namesrv_addr: str, name: str = "broker-a", **properties: object
                      ) -> JavaServer:
    """RocketMQ 4.9.8's broker with its store under ``root/name``; ``properties`` add to or
    replace its broker.conf (RocketMQ's keys)."""
    port = int(properties.pop("listenPort", 0)) or free_low_port(also=(-2, 1))
    store = root / name / "store"
    conf_values: dict[str, object] = {
        "brokerClusterName": "JavaCluster",
        "brokerName": name,
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": port,
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": store,
        "storePathCommitLog": store / "commitlog",
        "mappedFileSizeCommitLog": 64 * 1024 * 1024,
        "deleteWhen": "04",
        "fileReservedTime": 48,
        "autoCreateTopicEnable": "true",
        "diskMaxUsedSpaceRatio": 99,
        **properties,
    }
    conf = root / f"{name}.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in conf_values.items()), encoding="latin-1")
    return _start_java(name, ["broker", "-c", str(conf)], BROKER_BOOT, f"127.0.0.1:{port}",
                       root / f"{name}-home")


@contextlib.contextmanager
def java_servers(root: Path, **broker_properties: object) -> Iterator[tuple[JavaServer, JavaServer]]:
    """RocketMQ 4.9.8's name server and one broker, stopped at the end."""
    namesrv = start_java_namesrv(root)
    broker = None
    try:
        broker = start_java_broker(root, namesrv.address, **broker_properties)
        yield namesrv, broker
    finally:
        if broker is not None:
            broker.stop()
        namesrv.stop()
