"""The controller's decisions (ReplicasInfo) in process, the epoch file and the store's
CommitLog cut: only SyncStateSet members are elected, changes come only from the current master
with the current epochs, the state survives a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
import refcodec

from rocketstore.config import StoreConfig
from rocketstore.controller import ControllerError, ReplicasInfo
from rocketstore.message import Message
from rocketstore.store import (
    SIDE_FILE_PREFIX,
    EpochFile,
    MessageStore,
    last_consistent_offset,
    truncate_commit_log,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def beat(info: ReplicasInfo, broker_id: int, max_offset: int = 0) -> None:
    info.heartbeat("c", "g", broker_id, address=f"127.0.0.1:{1000 + broker_id}",
                   ha_address=f"127.0.0.1:{2000 + broker_id}", max_offset=max_offset,
                   timeout_ms=1000)


def group_of_three(tmp_path: Path, clock: Clock, **kw: bool) -> ReplicasInfo:
    info = ReplicasInfo(str(tmp_path / "ctl"), clock=clock, **kw)
    for i in (1, 2, 3):
        beat(info, i)
    group = info.group("g")
    assert group.master_id == 1 and group.master_epoch == 1
    info.alter_sync_state_set("g", 1, 1, {1, 2}, group.sync_state_set_epoch)
    return info


def test_a_replica_outside_the_sync_state_set_is_never_elected(tmp_path: Path) -> None:
    clock = Clock()
    info = group_of_three(tmp_path, clock)
    clock.now += 0.9
    beat(info, 2, 500)
    beat(info, 3, 900)      # the most data, but outside the set
    clock.now += 0.5        # master 1 silent 1.4 s
    assert info.scan_not_active() == ["g"]
    group = info.group("g")
    assert group.master_id == 2 and group.master_epoch == 2 and group.sync_state_set == {2}
    # 2 dies too: 3 is alive but not in the set, so the group has no master
    clock.now += 0.6
    beat(info, 3, 900)
    clock.now += 0.6
    info.scan_not_active()
    assert group.master_id is None and group.master_epoch == 3
    beat(info, 3, 900)
    assert group.master_id is None
    with pytest.raises(ControllerError) as err:
        info.elect("g", 3)
    assert err.value.code == "CONTROLLER_MASTER_NOT_AVAILABLE"


def test_elect_unclean_master_takes_a_replica_outside_the_set(tmp_path: Path) -> None:
    clock = Clock()
    info = group_of_three(tmp_path, clock, enable_elect_unclean_master=True)
    clock.now += 0.9
    beat(info, 3, 900)
    clock.now += 0.5
    info.scan_not_active()
    assert info.group("g").master_id == 3


def test_alter_sync_state_set_only_from_the_master_with_current_epochs(tmp_path: Path) -> None:
    info = group_of_three(tmp_path, Clock())
    group = info.group("g")
    epoch = group.sync_state_set_epoch
    for args, code in [((2, 1, {1, 2, 3}, epoch), "CONTROLLER_INVALID_MASTER"),
                       ((1, 0, {1, 2, 3}, epoch), "CONTROLLER_FENCED_MASTER_EPOCH"),
                       ((1, 1, {1, 2, 3}, epoch - 1), "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH"),
                       ((1, 1, {2, 3}, epoch), "CONTROLLER_INVALID_REPLICAS"),
                       ((1, 1, {1, 7}, epoch), "CONTROLLER_INVALID_REPLICAS")]:
        with pytest.raises(ControllerError) as err:
            info.alter_sync_state_set("g", *args)
        assert err.value.code == code
    assert group.sync_state_set == {1, 2} and group.sync_state_set_epoch == epoch
    info.alter_sync_state_set("g", 1, 1, {1, 2, 3}, epoch)
    assert group.sync_state_set == {1, 2, 3} and group.sync_state_set_epoch == epoch + 1


def test_the_state_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    info = group_of_three(tmp_path, clock)
    again = ReplicasInfo(str(tmp_path / "ctl"), clock=clock)
    a, b = info.group("g"), again.group("g")
    assert (b.master_id, b.master_epoch, b.sync_state_set, b.sync_state_set_epoch) == \
        (a.master_id, a.master_epoch, a.sync_state_set, a.sync_state_set_epoch)
    assert {r.address for r in b.replicas.values()} == {r.address for r in a.replicas.values()}
    # the restarted controller gives the master one timeout to heartbeat again
    assert again.scan_not_active() == []


def test_epoch_file_round_trip_and_consistent_point(tmp_path: Path) -> None:
    epochs = EpochFile(tmp_path)
    epochs.append(1, 0)
    epochs.append(2, 5000)
    assert EpochFile(tmp_path).entries == [(1, 0), (2, 5000)]
    with pytest.raises(ValueError, match="older"):
        epochs.append(0, 6000)
    (tmp_path / "epochFileCheckpoint").write_text("2\n123\n1-0\n2-5000\n")
    with pytest.raises(ValueError, match="checksum"):
        EpochFile(tmp_path)
    # the old master wrote epoch 1 up to 8000; the new master took over at 5000
    assert last_consistent_offset([(1, 0)], 8000, [(1, 0), (2, 5000)], 9000) == 5000
    # a slave behind: nothing to cut
    assert last_consistent_offset([(1, 0)], 3000, [(1, 0), (2, 5000)], 9000) == 3000
    assert last_consistent_offset([(1, 0), (3, 700)], 900, [(1, 0), (2, 500)], 900) == 500
    assert last_consistent_offset([], 0, [(1, 0)], 10) == 0


def test_truncate_commit_log_keeps_the_cut_bytes_and_recovery_trims_queues(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                         mapped_file_size_consume_queue=6000)
    offsets = []
    with MessageStore.open(root, config) as store:
        for i in range(600):    # several segments
            result = store.append_message(Message("T", f"body-{i:04d}".encode() * 10), 0)
            offsets.append(result.commitlog_offset)
        store.wait_dispatched()
        end = store.get_max_phy_offset()
    cut = offsets[300]
    with open(root / "commitlog" / f"{cut - cut % (64 * 1024):020d}", "rb") as f:
        f.seek(cut % (64 * 1024))
        first_cut = f.read(100)
    side = truncate_commit_log(root, cut, end)
    assert side is not None and Path(side).name == f"{SIDE_FILE_PREFIX}{cut}"
    assert len(Path(side).read_bytes()) == end - cut
    assert Path(side).read_bytes()[:100] == first_cut
    with MessageStore.open(root, config) as store:
        assert store.get_max_phy_offset() == cut
        assert store.get_max_offset_in_queue("T", 0) == 300
        assert store.append_message(Message("T", b"after"), 0).ok
        store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == 301
    assert truncate_commit_log(root, 10**9, 10**9) is None
    with pytest.raises(ValueError, match="end 5 is below offset 10"):
        truncate_commit_log(root, 10, 5)


def test_the_side_file_keeps_a_record_ending_in_zero_bytes(tmp_path: Path) -> None:
    """A record without properties (another writer's: a RocketMQ master's, say) ends with its
    properties length, two zero bytes: the side file holds the cut bytes up to the store's
    end, whatever their last bytes."""
    root = tmp_path / "store"
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                         mapped_file_size_consume_queue=6000, broker_role="SLAVE")
    common = {"topic": "T", "queueId": 0, "bornTimestamp": 1, "storeTimestamp": 2,
              "bornHost": "127.0.0.1:1", "storeHost": "127.0.0.1:2"}
    kept = refcodec.encode_record(queueOffset=0, commitLogOffset=0, body=b"kept",
                                  properties="KEYS\x01k", **common)
    cut = refcodec.encode_record(queueOffset=1, commitLogOffset=len(kept), body=b"cut",
                                 **common)
    assert cut.endswith(b"\0\0")
    with MessageStore.open(root, config) as store:
        end = store.append_commit_log(0, kept + cut)
    assert end == len(kept) + len(cut)
    side = truncate_commit_log(root, len(kept), end)
    assert side is not None and Path(side).read_bytes() == cut
