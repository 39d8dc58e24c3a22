"""One logging setup: the servers' --log-level is honoured, no record prints twice (the
``rocketstore`` group's handler and a server's are one), and a program that configures no
logging hears nothing from the package."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TESTS, run_python

import rocketstore

PACKAGE_ROOT = str(Path(rocketstore.__file__).resolve().parents[1])
BOOTED = re.compile(r"boot success")
NAMESRV_AT = re.compile(r"listening on ([\d.]+):(\d+)")


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_once(args: list[str], *, settle_s: float = 0.0, cwd: Path = TESTS
                ) -> tuple[str, str]:
    """Start ``python -m rocketstore ARGS``, wait for its boot line (60 s at most), let it run
    settle_s more, stop it with SIGTERM; its stdout and stderr."""
    env = {"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    proc = subprocess.Popen([sys.executable, "-m", "rocketstore", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(cwd))
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if BOOTED.search(line):
                break
        time.sleep(settle_s)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return "".join(lines) + out, err


def _messages(stderr: str) -> list[str]:
    """The log lines without their time stamps."""
    return [re.sub(r"^\S+ \S+ ", "", line) for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("verbose", [False, True])
def test_broker_lines_print_once(tmp_path: Path, verbose: bool) -> None:
    args = ["-v"] if verbose else []
    out, err = _serve_once([*args, "broker", "--listen-port", "0", "--store-path",
                            str(tmp_path / "store"), "-n", f"127.0.0.1:{_closed_port()}"],
                           settle_s=1.5, cwd=tmp_path)
    assert "boot success" in out, err[-3000:]
    lines = _messages(err)
    assert lines, "the broker logged nothing at INFO"
    # a record printed twice is the same line, time stamp included (a retry's record is not)
    stamped = [line for line in err.splitlines() if line.strip()]
    assert len(stamped) == len(set(stamped)), err
    assert sum("serving 127.0.0.1:" in line for line in lines) == 1, err


@pytest.mark.parametrize("args, debug_shown, info_shown", [
    (["namesrv", "--log-level", "DEBUG"], True, True),
    (["namesrv"], False, True),
    (["-v", "namesrv"], True, True),
    (["-v", "namesrv", "--log-level", "INFO"], False, True),
    (["namesrv", "--log-level", "warning"], False, False)])
def test_namesrv_log_level_is_honoured(tmp_path: Path, args: list[str], debug_shown: bool,
                                       info_shown: bool) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=0\nnotANameServerSetting=1\n", encoding="latin-1")
    out, err = _serve_once([*args, "-c", str(conf)], cwd=tmp_path)
    assert "The Name Server boot success. listening on 127.0.0.1:" in out, err[-3000:]
    lines = _messages(err)
    stamped = [line for line in err.splitlines() if line.strip()]
    assert len(stamped) == len(set(stamped)), err
    ignored = [line for line in lines if "notANameServerSetting" in line]
    assert len(ignored) == (1 if debug_shown else 0), err
    assert any(line.startswith("INFO ") for line in lines) == info_shown, err


def test_python_m_broker_takes_the_same_options(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "rocketstore.broker", "--help"],
                            capture_output=True, text=True, timeout=60, cwd=str(TESTS),
                            env={"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "Usage: python -m rocketstore.broker [OPTIONS]" in result.stdout
    for option in ("--config-file", "--namesrv-addr", "--listen-port", "--store-path", "--log-level"):
        assert option in result.stdout
    bad = subprocess.run([sys.executable, "-m", "rocketstore.namesrv", "--listen-port", "x"],
                         capture_output=True, text=True, timeout=60, cwd=str(TESTS),
                         env={"PYTHONPATH": PACKAGE_ROOT, "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "'x' is not a valid integer" in bad.stderr, bad.stderr


def test_a_program_without_logging_configuration_hears_nothing(tmp_path: Path) -> None:
    # no name server answers there: the consumer logs a warning at start
    code = f"""
from rocketstore.client import PullConsumer
consumer = PullConsumer("g", namesrv_addr="127.0.0.1:{_closed_port()}")
consumer.subscribe("orders", "*")
consumer.start()
consumer.shutdown()
print("done")
"""
    quiet = run_python(code, env={"HOME": str(tmp_path)})
    assert quiet.returncode == 0 and quiet.stdout.strip() == "done", quiet.stderr[-3000:]
    assert quiet.stderr == "", quiet.stderr
    loud = run_python("import logging; logging.basicConfig()\n" + code, env={"HOME": str(tmp_path)})
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "WARNING:rocketstore.client.consumer_base:route of orders not found at start" \
        in loud.stderr, loud.stderr[-3000:]
