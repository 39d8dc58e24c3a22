"""The README's examples run as written: every ``python`` and ``bash`` block, in the README's
order, where the README leaves the reader (one scratch directory standing in for the
reader's; the name server and broker started by the quick start's shell block, on free ports
substituted for 9876 and 10911, as are the replica group's example ports). A block marked ``<!-- readme-test: skip: REASON -->`` is not
run; blocks that need Spark (pyspark and Java) or RocketMQ's C++ client skip where those are
absent. Blocks without a language are output or file listings, not code."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ports import free_low_port

import rocketstore

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PACKAGE_ROOT = Path(rocketstore.__file__).resolve().parents[1]
SKIP_MARK = re.compile(r"<!-- readme-test: skip: (.+?) -->")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUNNABLE = {"python": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
#: what makes a shell block the one that starts the servers
STARTS_SERVERS = "rocketstore namesrv"


@dataclass(frozen=True)
class Block:
    line: int
    language: str          # "python" or "bash"
    code: str
    skip: str | None       # the README's reason not to run it

    @property
    def id(self) -> str:
        return f"{self.language}@{self.line}"


def readme_blocks() -> list[Block]:
    text = README.read_text("utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        language = RUNNABLE.get(match.group(1))
        if language is None:
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = SKIP_MARK.search(before)
        blocks.append(Block(text[:match.start()].count("\n") + 1, language, match.group(2),
                            mark.group(1) if mark else None))
    return blocks


BLOCKS = readme_blocks()
SERVER_BLOCK = next(i for i, b in enumerate(BLOCKS) if STARTS_SERVERS in b.code and not b.skip)


def _missing(block: Block) -> str | None:
    """Why this machine cannot run the block (None: it can)."""
    if "pyspark" in block.code:
        if importlib.util.find_spec("pyspark") is None:
            return "pyspark is not installed (pip install '.[spark]')"
        if shutil.which("java") is None:
            return "Spark needs Java on PATH"
    if "rocketmq.client" in block.code:
        probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True,
                               text=True, timeout=60)
        if probe.returncode != 0:
            return "RocketMQ's C++ client (pip install rocketmq) is not usable here"
    return None


#: the README's example ports besides the quick start's (9876, 10911): the replica group's name
#: server and brokers (each broker also listens on its port - 2 and + 1)
OTHER_NAMESRV_PORTS = ("9886",)
OTHER_BROKER_PORTS = ("10921", "10931", "10941")


@dataclass
class Reader:
    """The reader's session: a directory, an environment, the servers' ports."""

    home: Path
    env: dict[str, str]
    namesrv_port: int
    broker_port: int
    #: the README's other example ports -> free ones
    other_ports: dict[str, int]

    def substitute(self, code: str) -> str:
        ports = {"9876": self.namesrv_port, "10911": self.broker_port, **self.other_ports}
        return re.sub(r"\b(" + "|".join(ports) + r")\b", lambda m: str(ports[m.group(1)]), code)

    def run(self, block: Block, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        code = self.substitute(block.code)
        args = [sys.executable, "-c", code] if block.language == "python" else ["bash", "-e", "-c", code]
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              cwd=str(self.home), env=self.env)


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    home = tmp_path_factory.mktemp("reader")
    bin_dir = home / ".bin"
    bin_dir.mkdir()
    # the `rocketstore` command of the package under test (an installed one, or this checkout)
    shim = bin_dir / "rocketstore"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m rocketstore "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = dict(os.environ, HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("NAMESRV_ADDR", None)
    # a broker also listens on P - 2 (its fast port) and P + 1 (HA)
    others = {p: free_low_port() for p in OTHER_NAMESRV_PORTS}
    others.update({p: free_low_port((-2, 1)) for p in OTHER_BROKER_PORTS})
    yield Reader(home, env, free_low_port(), free_low_port((-2, 1)), others)


def _logs_written_since(home: Path, started: float, tail_chars: int = 6000) -> str:
    """The tails of the logs a block's servers wrote, for a failure's message."""
    logs = sorted(p for p in home.rglob("*.log") if p.stat().st_mtime >= started)
    return "".join(f"--- {p.relative_to(home)}\n{p.read_text(errors='replace')[-tail_chars:]}\n"
                   for p in logs)


@pytest.fixture(scope="module")
def servers(reader: Reader) -> Iterator[None]:
    """The quick start's shell block, run: it leaves a name server and a broker running in the
    background, stopped here at the end."""
    block = BLOCKS[SERVER_BLOCK]
    pid_file = reader.home / ".server-pids"
    # the servers' process ids, however the script ends
    script = Block(block.line, block.language,
                   f"trap 'jobs -p > {pid_file}' EXIT\n{block.code}", None)
    try:
        started = time.time()
        result = reader.run(script, timeout=180)
        assert result.returncode == 0, (
            f"README line {block.line}: {result.stdout[-2000:]}{result.stderr[-3000:]}\n"
            + _logs_written_since(reader.home, started, tail_chars=2000))
        yield
    finally:
        pids = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _param(index: int, block: Block) -> object:
    marks = [pytest.mark.slow] if "pyspark" in block.code else []
    return pytest.param(index, id=block.id, marks=marks)


def test_the_readme_marks_its_blocks() -> None:
    text = README.read_text("utf-8")
    assert "readme-test: skip:" in text and "tests/test_readme.py" in text
    assert len(BLOCKS) >= 6
    unmarked_installs = [b.id for b in BLOCKS if not b.skip and b.language == "bash"
                         and re.search(r"^\s*pip install", b.code, re.M)]
    assert not unmarked_installs, f"blocks that install must be marked: {unmarked_installs}"


@pytest.mark.parametrize("index", [_param(i, b) for i, b in enumerate(BLOCKS)])
def test_readme_block_runs_as_written(index: int, reader: Reader,
                                      request: pytest.FixtureRequest) -> None:
    block = BLOCKS[index]
    if block.skip:
        pytest.skip(f"README line {block.line} is marked: {block.skip}")
    missing = _missing(block)
    if missing:
        pytest.skip(f"README line {block.line}: {missing}")
    if index >= SERVER_BLOCK:
        request.getfixturevalue("servers")
        if index == SERVER_BLOCK:
            return  # the fixture ran it
    started = time.time()
    result = reader.run(block)
    assert result.returncode == 0, (
        f"README line {block.line} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}\n"
        + _logs_written_since(reader.home, started))
    for marker, check in CHECKS:
        if marker in block.code:
            check(result.stdout, reader)


def _quick_start(stdout: str, reader: Reader) -> None:
    assert stdout.strip().splitlines()[-1] == "[b'order 0 paid', b'order 1 paid', b'order 2 paid']"


def _cpp_consumer(stdout: str, reader: Reader) -> None:
    # the C++ client's callback thread prints beside ours: lines may run together
    assert "b'hello'" in stdout, stdout


def _spark(stdout: str, reader: Reader) -> None:
    """The streaming query committed everything it read to its group."""
    assert stdout.strip().splitlines()[-1] == \
        "{'orders:0': 250, 'orders:1': 250, 'orders:2': 250, 'orders:3': 250}", stdout[-3000:]


#: what some blocks must print (a block is recognised by a piece of its code)
CHECKS = [
    ('PushConsumer("orders-consumer"', _quick_start),
    ('PushConsumer("billing")', _cpp_consumer),
    ('option("commitToGroup", "billing")', _spark),
]
