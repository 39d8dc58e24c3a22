"""Failover rounds (issue 27): a 3-replica group in controller mode (SYNC_MASTER, SYNC_FLUSH;
the controller inside the name server), 8 producers with the project's client and 4 with the
C++ client (rocketmq 0.4.4), all subprocesses on 127.0.0.1, sending all along. Each round
SIGKILLs the master at a random moment; the controller elects a new master without any command;
the producers carry on; the killed broker restarts, cuts what only it had, rejoins the
SyncStateSet and its CommitLog equals the master's over their common range. At the end every
message whose send returned SEND_OK is consumed (pulled by body). The window from each kill to
the next SEND_OK stored by the new master is printed per round.

The C++ client refreshes its routes every 30 s only, so after a switch its sends fail until
its next refresh: its producers carry on more slowly (their SEND_OKs are checked all the same).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ha_servers import (
    QUEUES,
    broker_max_offset,
    commit_log_bytes,
    controller_namesrv,
    create_topic,
    pull_all,
    replica,
    run,
    ss,
    sync_state,
    wait_for,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

from broker_helpers import rocketmq_usable  # noqa: E402

from rocketstore.store import SIDE_FILE_PREFIX  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ss.broker_available(),
                       reason="the broker (rocketstore.broker) is not in this checkout"),
]

ROUNDS = int(os.environ.get("FAILOVER_ROUNDS", "20"))
PROJECT_PRODUCERS = 8
CPP_PRODUCERS = 4
SCRIPT = str(Path(__file__).resolve().parent / "failover_producer.py")
#: generous bounds for a loaded 2-core machine
ELECTION_S = 20
FIRST_SEND_OK_S = 30
REJOIN_S = 60


class Producer:
    """A producer subprocess; its SEND_OKs (body, time, broker port) as they come."""

    def __init__(self, client: str, name: str, namesrv: str, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, SCRIPT, client, namesrv, "FailoverTopic", name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=ss.child_env(HOME=str(home)), cwd=ss.CHILD_CWD)
        self.oks: list[tuple[str, float, int]] = []
        self.other: list[str] = []
        self.summary: dict = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        import json
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                item = json.loads(line)
            except ValueError:
                if len(self.other) < 200:
                    self.other.append(line)
                continue
            if "ok" in item:
                self.oks.append((item["ok"], item["t"], item["port"]))
            else:
                self.summary = item

    def finish(self, timeout: float = 30) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)


def first_ok_after(producers: list[Producer], since: float, port: int) -> float | None:
    times = [t for p in producers for _, t, p_port in list(p.oks) if t > since and p_port == port]
    return min(times) if times else None


def assert_same_bytes(root: Path, brokers: list[ss.Server], master_id: int) -> int:
    """Every replica's CommitLog equals the master's over their common range; that range."""
    ends = [broker_max_offset(b.address) for b in brokers]
    common = min(ends)
    reference = commit_log_bytes(root / f"b{master_id}")[:common]
    for i in range(1, len(brokers) + 1):
        assert commit_log_bytes(root / f"b{i}")[:common] == reference, \
            f"replica {i}'s CommitLog differs from master {master_id}'s below {common}"
    return common


def one_round(round_no: int, root: Path, namesrv: ss.Server, brokers: list[ss.Server],
              producers: list[Producer], rng: random.Random) -> float:
    """Kill the master at a random moment, see the next master take sends, bring the killed
    one back and check the replicas agree; the window from the kill to the next SEND_OK."""
    old = sync_state(namesrv.address)["masterBrokerId"]
    victim = brokers[old - 1]
    side_files = set((root / f"b{old}").glob(f"{SIDE_FILE_PREFIX}*"))
    time.sleep(rng.uniform(0.2, 1.2))       # a random moment of the sends
    victim.kill()
    killed_at = time.time()
    wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] not in (-1, old),
             ELECTION_S, f"round {round_no}: a new master after {old}")
    new = sync_state(namesrv.address)["masterBrokerId"]
    port = brokers[new - 1].port
    wait_for(lambda: first_ok_after(producers, killed_at, port) is not None,
             FIRST_SEND_OK_S, f"round {round_no}: a SEND_OK stored by master {new}")
    window = first_ok_after(producers, killed_at, port) - killed_at    # type: ignore[operator]
    victim.start(timeout=REJOIN_S)
    wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2, 3],
             REJOIN_S, f"round {round_no}: replica {old} back in the SyncStateSet")
    common = assert_same_bytes(root, brokers, new)
    cut = sum(p.stat().st_size for p in
              set((root / f"b{old}").glob(f"{SIDE_FILE_PREFIX}*")) - side_files)
    print(f"round {round_no:2d}: master {old} killed, {new} elected; kill -> SEND_OK "
          f"{window:.2f} s; {old} cut {cut} bytes only it had and rejoined; CommitLogs equal "
          f"over [0, {common})", flush=True)
    return window


def test_failover_rounds(tmp_path: Path) -> None:
    why = rocketmq_usable()
    if why:
        pytest.skip(why)
    rng = random.Random()
    namesrv = controller_namesrv(tmp_path).start()
    sync = {"brokerRole": "SYNC_MASTER", "flushDiskType": "SYNC_FLUSH"}
    brokers = [replica(tmp_path, f"b{i}", i, namesrv.address, **sync)[0] for i in (1, 2, 3)]
    producers: list[Producer] = []
    windows: list[float] = []
    try:
        brokers[0].start()
        wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] == 1, 20, "master 1")
        for b in brokers[1:]:
            b.start()
        for b in brokers:
            run(create_topic(b.address, "FailoverTopic", QUEUES))
        wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2, 3], 30,
                 "every replica in the SyncStateSet")
        producers = [Producer("project", f"py{i}", namesrv.address, tmp_path / f"home-py{i}")
                     for i in range(PROJECT_PRODUCERS)]
        producers += [Producer("cpp", f"cpp{i}", namesrv.address, tmp_path / f"home-cpp{i}")
                      for i in range(CPP_PRODUCERS)]
        wait_for(lambda: all(p.oks for p in producers), 60, "a SEND_OK from every producer")
        started = time.monotonic()
        for round_no in range(1, ROUNDS + 1):
            windows.append(one_round(round_no, tmp_path, namesrv, brokers, producers, rng))
        print(f"{ROUNDS} rounds in {time.monotonic() - started:.0f} s; kill -> SEND_OK median "
              f"{statistics.median(windows):.2f} s, max {max(windows):.2f} s", flush=True)
        for p in producers:
            p.finish()
        master_id = sync_state(namesrv.address)["masterBrokerId"]
        master = brokers[master_id - 1]
        end = broker_max_offset(master.address)
        wait_for(lambda: all(broker_max_offset(b.address) >= end for b in brokers), 30,
                 "every replica at the master's end")
        assert assert_same_bytes(tmp_path, brokers, master_id) == end
        consumed: set[bytes] = set()
        for queue_id in range(QUEUES):
            consumed.update(run(pull_all(master.address, queue_id, "FailoverTopic")))
        acknowledged = {body.encode() for p in producers for body, _, _ in p.oks}
        missing = acknowledged - consumed
        per_client = {kind: sum(len(p.oks) for p in producers if p.name.startswith(kind))
                      for kind in ("py", "cpp")}
        print(f"SEND_OK: {per_client}; consumed {len(consumed)} distinct bodies", flush=True)
        assert per_client["py"] > 0 and per_client["cpp"] > 0
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    finally:
        for p in producers:
            if p.proc.poll() is None:
                p.finish(timeout=10)
        for b in brokers:
            b.stop()
        namesrv.stop()
