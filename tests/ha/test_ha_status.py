"""A master's view of its slaves' lag, in one process: bytes, and ms (how much older the first
record a slave lacks is than the master's newest, from the records' store times), whatever
the acknowledged offset (a record start, inside a record, the end); and the runtime-info keys
``rocketstore admin brokerStatus`` prints, the controller-mode epoch and SyncStateSet too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import make_config

from rocketstore import Message, MessageStore
from rocketstore.ha import HAService, SyncStateSet, ha_runtime_info
from rocketstore.ha.service import SlaveState


class Connection:
    """What the status reads of an HA connection."""

    def __init__(self, state: SlaveState) -> None:
        self.state = state


@pytest.fixture
def store(tmp_path: Path):  # noqa: ANN201
    store = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    for i in range(6):
        assert store.put_message(Message(topic="T", body=b"x" * 100, keys=[f"k{i}"]), 0).ok
        time.sleep(0.03)        # distinct store times
    try:
        yield store
    finally:
        store.shutdown()


def test_lag_in_bytes_and_ms(store: MessageStore) -> None:
    records = [(m.commitlog_offset, m.store_size, m.store_timestamp) for m in store.scan(0)]
    newest = records[-1][2]
    end = store.get_max_phy_offset()
    assert store.last_store_timestamp() == newest
    service = HAService(store, port=0)
    start2, size2, stamp2 = records[2]
    acks = {"at-a-record": start2, "inside-a-record": records[1][0] + 7, "caught-up": end,
            "inside-the-newest": records[-1][0] + 1, "no-report-yet": -1}
    service.connections = {Connection(SlaveState(a, ack_offset=o))  # type: ignore[misc]
                           for a, o in acks.items()}
    lags = {s["address"]: (s["lagBytes"], s["lagMs"]) for s in service.slaves()}
    assert lags["at-a-record"] == (end - start2, newest - stamp2)
    # inside record 1: the first record it lacks whole is record 2 (record 1's rest follows)
    assert lags["inside-a-record"] == (end - records[1][0] - 7, newest - stamp2)
    assert lags["caught-up"] == (0, 0)
    assert lags["inside-the-newest"] == (end - records[-1][0] - 1, 0)
    assert lags["no-report-yet"] == (None, None)
    assert newest - stamp2 >= 3 * 25          # three records later, each 30 ms apart

    info = ha_runtime_info("SYNC_MASTER", service, None)
    assert info["haSlaveLagMs_at-a-record"] == str(newest - stamp2)
    assert info["haSlaveLagBytes_at-a-record"] == str(end - start2)
    assert info["haSlaveLagMs_no-report-yet"] == "" and "haMasterEpoch" not in info

    service.sync_state_set = SyncStateSet(service, 1, members={1, 3}, epoch=4, master_epoch=7,
                                          epoch_start_offset=0, max_time_not_catchup_ms=3000)
    info = ha_runtime_info("SYNC_MASTER", service, None)
    assert (info["haMasterEpoch"], info["haSyncStateSet"], info["haSyncStateSetEpoch"]) == \
        ("7", "1,3", "4")


def test_the_newest_store_time_survives_a_restart(tmp_path: Path, store: MessageStore) -> None:
    newest = store.last_store_timestamp()
    store.shutdown()
    again = MessageStore.open(tmp_path / "m", make_config(tmp_path / "m"))
    try:
        assert again.last_store_timestamp() == newest
        assert again.store_timestamp_from(again.get_max_phy_offset()) == -1
    finally:
        again.shutdown()
