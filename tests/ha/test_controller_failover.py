"""Automatic failover (controller mode) with subprocesses on 127.0.0.1: a name server with the
controller in it and a 3-replica group. SIGKILL the master: the controller elects a slave of the
SyncStateSet, the project's producer carries on; the killed broker restarts, cuts what only it
had (the side file) and converges byte for byte as a slave; the restarted controller keeps its
state."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from ha_servers import (
    TOPIC,
    broker_max_offset,
    commit_log_bytes,
    controller_namesrv,
    replica,
    send_many,
    ss,
    sync_state,
    wait_for,
    wait_taking_sends,
)
from ports import free_port

from rocketstore.cli import main as cli_main
from rocketstore.client import AsyncProducer, Message, SendStatus
from rocketstore.store import SIDE_FILE_PREFIX

pytestmark = pytest.mark.skipif(not ss.broker_available(),
                                reason="the broker (rocketstore.broker) is not in this checkout")


async def produce_through(namesrv: str, kill: asyncio.Event, killed_at: list[float],
                          first_ok_after_kill: list[float], count: int) -> list[str]:
    """Send count messages with the project's producer; after kill is set, the time of the
    first SEND_OK."""
    producer = AsyncProducer("FailoverProducer", namesrv_addr=namesrv,
                             poll_name_server_interval=200, send_msg_timeout=2000,
                             retry_times_when_send_failed=2)
    await producer.start()
    sent = []
    try:
        for i in range(count):
            if i == count // 3:
                kill.set()
                await asyncio.sleep(0)
            try:
                result = await producer.send(Message(TOPIC, f"f{i:05d}".encode() * 20))
            except Exception:       # noqa: BLE001 - the window: sends fail until the switch
                await asyncio.sleep(0.05)
                continue
            if result.send_status == SendStatus.SEND_OK:
                sent.append(result.msg_id)
                if killed_at and not first_ok_after_kill:
                    first_ok_after_kill.append(time.monotonic())
    finally:
        await producer.shutdown()
    return sent


def admin(namesrv: str, *args: str) -> dict:
    result = CliRunner().invoke(cli_main, ["admin", args[0], "-n", namesrv, *args[1:]])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def converged(root: Path, brokers: list[ss.Server], namesrv: str) -> None:
    """New sends reach every replica; their CommitLogs are byte-identical up to the master's
    end; every replica is back in the SyncStateSet."""
    state = sync_state(namesrv)
    master = brokers[state["masterBrokerId"] - 1]
    wait_taking_sends(master.address, 1000 + state["masterEpoch"] * 100)
    asyncio.run(send_many(master.address, 30, first=1010 + state["masterEpoch"] * 100))
    end = broker_max_offset(master.address)
    wait_for(lambda: all(broker_max_offset(b.address) == end for b in brokers), 20,
             "every replica at the master's end")
    reference = commit_log_bytes(root / f"b{state['masterBrokerId']}")[:end]
    for i in range(1, len(brokers) + 1):
        assert commit_log_bytes(root / f"b{i}")[:end] == reference, f"b{i} differs"
    wait_for(lambda: sync_state(namesrv)["syncStateSet"] == list(range(1, len(brokers) + 1)),
             15, "every replica in the SyncStateSet")


def test_kill_the_master_a_slave_of_the_set_takes_over_and_the_old_master_rejoins(
        tmp_path: Path) -> None:
    namesrv = controller_namesrv(tmp_path).start()
    brokers: list[ss.Server] = []
    try:
        for i in (1, 2, 3):
            server, _ = replica(tmp_path, f"b{i}", i, namesrv.address)
            brokers.append(server.start())
        master = brokers[0]
        wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] == 1, 10, "master 1")
        asyncio.run(send_many(master.address, 200))
        wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2, 3], 15,
                 "both slaves in the SyncStateSet")

        # SIGKILL the master while the project's producer sends; the window from the kill
        # to the next SEND_OK
        async def failover() -> tuple[list[str], float]:
            kill, killed_at, first_ok = asyncio.Event(), [], []

            async def killer() -> None:
                await kill.wait()
                master.kill()
                killed_at.append(time.monotonic())
            task = asyncio.ensure_future(killer())
            sent = await produce_through(namesrv.address, kill, killed_at, first_ok, 150)
            await task
            assert first_ok, "no SEND_OK after the kill"
            return sent, first_ok[0] - killed_at[0]
        sent, window = asyncio.run(failover())
        print(f"failover window (kill to first SEND_OK on the new master): {window:.2f} s")
        assert len(sent) >= 100
        state = sync_state(namesrv.address)
        assert state["masterBrokerId"] in (2, 3) and state["masterEpoch"] == 2
        # the killed broker comes back as a slave and converges
        master.start()
        converged(tmp_path, brokers, namesrv.address)

        # records only the master has: its slaves stopped, the master killed, the slaves back
        master_id = sync_state(namesrv.address)["masterBrokerId"]
        master = brokers[master_id - 1]
        others = [b for i, b in enumerate(brokers, 1) if i != master_id]
        for b in others:
            b.stop()
        asyncio.run(send_many(master.address, 20, first=5000))
        alone_end = broker_max_offset(master.address)
        master.kill()
        for b in others:
            b.start()
        wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] not in (-1, master_id),
                 15, "a new master of the SyncStateSet")
        master.start()
        old_root = tmp_path / f"b{master_id}"
        side_files = list(old_root.glob(f"{SIDE_FILE_PREFIX}*"))
        assert len(side_files) == 1, master.log()[-3000:]
        cut = int(side_files[0].name[len(SIDE_FILE_PREFIX):])
        assert cut < alone_end and side_files[0].stat().st_size == alone_end - cut
        converged(tmp_path, brokers, namesrv.address)

        # the admin commands
        state = sync_state(namesrv.address)
        shown = admin(namesrv.address, "getSyncStateSet", "-a", namesrv.address, "--json")
        assert shown["broker-ha"]["masterBrokerId"] == state["masterBrokerId"]
        epochs = admin(namesrv.address, "getBrokerEpoch", "-b", "broker-ha", "--json")
        assert len(epochs) == 3
        for body in epochs.values():
            assert body["epochList"][-1]["epoch"] == state["masterEpoch"]
        meta = admin(namesrv.address, "getControllerMetaData", "-a", namesrv.address, "--json")
        assert meta["controllerLeaderAddress"] == namesrv.address
        refused = CliRunner().invoke(cli_main, ["admin", "electMaster", "-n", namesrv.address,
                                                "-a", namesrv.address, "-bn", "broker-ha",
                                                "-b", "9"])
        assert refused.exit_code != 0 and "no replica can be elected" in refused.output

        # the controller restarted keeps its state (same port: controllerAddr unchanged)
        before = sync_state(namesrv.address)
        namesrv.stop()
        namesrv.start()
        after = sync_state(namesrv.address)
        for key in ("masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch"):
            assert after[key] == before[key], key
        time.sleep(2)   # past the heartbeat timeout: nobody was deposed
        assert sync_state(namesrv.address)["masterEpoch"] == before["masterEpoch"]
    finally:
        for b in brokers:
            if b.running:
                try:
                    os.kill(b.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            b.stop()
        namesrv.stop()


def test_standalone_controller_serves_a_2_replica_group(tmp_path: Path) -> None:
    props = tmp_path / "controller.properties"
    port = free_port()
    props.write_text(f"listenPort={port}\ncontrollerStorePath={tmp_path / 'ctl'}\n"
                     "scanNotActiveBrokerInterval=300\n", encoding="latin-1")
    controller = ss.Server("controller", ["-m", "rocketstore", "controller", "-c", str(props)],
                           ss.NAMESRV_BOOT)
    namesrv = ss.namesrv()
    brokers: list[ss.Server] = []
    try:
        controller.start()
        namesrv.start()
        for i in (1, 2):
            server, _ = replica(tmp_path, f"b{i}", i, namesrv.address,
                                controllerAddr=controller.address)
            brokers.append(server.start())
        wait_for(lambda: sync_state(controller.address)["syncStateSet"] == [1, 2], 15,
                 "both replicas in the SyncStateSet")
        brokers[0].kill()
        wait_for(lambda: sync_state(controller.address)["masterBrokerId"] == 2, 15, "master 2")
        wait_taking_sends(brokers[1].address, 100)
        assert (tmp_path / "ctl" / "replicasInfo.json").exists()
    finally:
        for b in brokers:
            b.stop()
        namesrv.stop()
        controller.stop()


def test_a_slave_that_left_the_sync_state_set_is_never_elected(tmp_path: Path) -> None:
    namesrv = controller_namesrv(tmp_path).start()
    brokers: list[ss.Server] = []
    try:
        for i in (1, 2, 3):
            server, _ = replica(tmp_path, f"b{i}", i, namesrv.address)
            brokers.append(server.start())
        wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2, 3], 15,
                 "every replica in the SyncStateSet")
        brokers[2].stop()       # behind longer than haMaxTimeSlaveNotCatchup (3 s): it leaves
        asyncio.run(send_many(brokers[0].address, 20))
        wait_for(lambda: sync_state(namesrv.address)["syncStateSet"] == [1, 2], 15,
                 "replica 3 out of the SyncStateSet")
        brokers[0].kill()
        brokers[1].kill()
        wait_for(lambda: sync_state(namesrv.address)["masterBrokerId"] == -1, 15,
                 "the group without a master")
        # replica 3 comes back alone: alive, but never in sync, so never master
        with pytest.raises(AssertionError, match="did not start"):
            brokers[2].start(timeout=6)
        state = sync_state(namesrv.address)
        assert state["masterBrokerId"] == -1 and state["syncStateSet"] == [1, 2]
        assert "has no master yet" in brokers[2].log()
    finally:
        for b in brokers:
            b.stop()
        namesrv.stop()
