"""A broker whose name servers do not answer says so once, plainly, registers again with
back-off, and says once that it registered when a name server comes up."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from broker_helpers import (
    CHILD_CWD,
    child_env,
    start_broker,
    stop_process,
    write_properties,
)
from ports import free_port


def test_broker_waits_for_a_name_server_with_back_off(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "broker.log"
    props = write_properties(tmp_path / "broker.properties", listenPort=0,
                             namesrvAddr=f"127.0.0.1:{port}", storePathRootDir=tmp_path / "store")
    broker, _ = start_broker(props, log_path=log)
    namesrv = None
    try:
        assert broker.stdout is not None
        after_boot = broker.stdout.readline()
        assert after_boot.startswith("The broker[broker-a] is not registered: no name server "
                                     f"answers at 127.0.0.1:{port}"), after_boot
        time.sleep(2.5)  # retries after 1 s and 2 s: no new warning
        namesrv = subprocess.Popen([sys.executable, "-m", "rocketstore.namesrv", "--listen-port",
                                    str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, env=child_env(), cwd=CHILD_CWD)
        assert namesrv.stdout is not None
        assert "boot success" in namesrv.stdout.readline()
        deadline = time.monotonic() + 30  # the next retry is at most 8 s away
        while time.monotonic() < deadline and "registered with name server" not in log.read_text():
            time.sleep(0.2)
    finally:
        stop_process(broker)
        if namesrv is not None:
            stop_process(namesrv)
    lines = log.read_text().splitlines()
    unreachable = [line for line in lines if "no name server reachable" in line]
    assert len(unreachable) == 1, lines
    assert f"127.0.0.1:{port} (Connection refused)" in unreachable[0]
    assert "registering again in 1 s" in unreachable[0]
    assert sum(f"registered with name server 127.0.0.1:{port}" in line for line in lines) == 1, lines
    assert not [line for line in lines if "failed" in line], lines
