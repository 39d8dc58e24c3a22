"""The checkpoint and abort files across shutdowns, crashes and interpreter exits."""
from __future__ import annotations

import struct
import time
from typing import Any

import pytest
import refcodec
from store_faults import (
    SLOTS,
    fill,
    message,
    open_store,
    run_python,
    touch_abort,
)

# ---- checkpoint and abort files -------------------------------------------------------------

@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_checkpoint_after_shutdown(tmp_path, flush):
    root = tmp_path / "store"
    with open_store(root, flush_disk_type=flush, max_index_num=60) as store:
        fill(store, "cp", 150)
    raw = (root / "checkpoint").read_bytes()
    assert len(raw) == 4096
    cp = refcodec.read_checkpoint(root / "checkpoint")
    assert cp == dict(zip(["physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"],
                          struct.unpack_from(">qqq", raw, 0), strict=True))
    assert raw[24:] == bytes(4096 - 24)
    records = list(refcodec.iter_commitlog(root))
    newest = records[-1].storeTimestamp
    assert cp["physicMsgTimestamp"] == newest
    assert cp["logicsMsgTimestamp"] == newest
    full = []
    for f in sorted((root / "index").iterdir()):
        header, _, _ = refcodec.read_index_file(f, SLOTS, 60)
        if header["indexCount"] >= 60:
            full.append(header)
    assert full, "the test wants full IndexFiles"
    # the endTimestamp of a full IndexFile (the newest one: see
    # test_checkpoint_index_timestamp_is_the_newest_full_file)
    assert cp["indexMsgTimestamp"] == full[-1]["endTimestamp"]
    assert 0 < cp["indexMsgTimestamp"] <= newest


def test_checkpoint_index_timestamp_is_the_newest_full_file(tmp_path, monkeypatch):
    """Regression: full IndexFiles are flushed on their own threads; when an older file's
    msync finished last, the checkpoint's indexMsgTimestamp went back to its endTimestamp
    (found by this suite, fixed in 06413a8). Here the first full file's flush is slowed on purpose."""
    from rocketstore.store.index_service import IndexService
    real = IndexService._flush_full
    first: list[Any] = []

    def slow_first(self, f):        # the first full file's msync is slow
        if not first:
            first.append(f)
        if f is first[0]:
            time.sleep(0.3)
        return real(self, f)

    monkeypatch.setattr(IndexService, "_flush_full", slow_first)
    root = tmp_path / "store"
    with open_store(root, max_index_num=60) as store:
        for i in range(150):
            store.put_message(*message("cpi", i)[:2])
            if i % 20 == 0:
                time.sleep(0.02)    # the files fill at different store times
    cp = refcodec.read_checkpoint(root / "checkpoint")
    full = [refcodec.read_index_file(f, SLOTS, 60)[0] for f in sorted((root / "index").iterdir())]
    full = [h for h in full if h["indexCount"] >= 60]
    assert len({h["endTimestamp"] for h in full}) > 1
    assert cp["indexMsgTimestamp"] == full[-1]["endTimestamp"]


def test_abort_file_lifecycle(tmp_path):
    root = tmp_path / "store"
    store = open_store(root)
    assert (root / "abort").exists()
    assert store.recovery.abnormal is False
    fill(store, "ab", 3)
    store.shutdown()
    assert not (root / "abort").exists()
    store.shutdown()                        # idempotent
    with open_store(root) as store:
        assert (root / "abort").exists()
        assert store.recovery.abnormal is False
        assert store.recovery.records == 3
    assert not (root / "abort").exists()
    with pytest.raises(RuntimeError):       # an exception inside the block still shuts down
        with open_store(root) as store:
            raise RuntimeError("boom")
    assert not (root / "abort").exists() and not store.is_running
    touch_abort(root)
    with open_store(root) as store:
        assert store.recovery.abnormal is True and store.recovery.records == 3


@pytest.mark.parametrize("ending", ["return", "exception", "sys.exit", "os._exit", "SIGKILL"])
def test_interpreter_exit(tmp_path, ending):
    """A process that never calls shutdown: the atexit hook removes the abort file on every
    interpreter exit; os._exit and SIGKILL skip it and the next open is abnormal."""
    root = tmp_path / "store"
    tail = {"return": "", "exception": "raise RuntimeError('unhandled')",
            "sys.exit": "sys.exit(3)", "os._exit": "os._exit(0)",
            "SIGKILL": "os.kill(os.getpid(), signal.SIGKILL)"}[ending]
    code = f"""
        import os, signal, sys
        from store_faults import open_store, fill
        store = open_store({str(root)!r}, flush_disk_type="SYNC_FLUSH")
        fill(store, "exit", 5)
        assert os.path.exists(os.path.join({str(root)!r}, "abort"))
        {tail}
    """
    proc = run_python(code)
    clean = ending in ("return", "exception", "sys.exit")
    assert (root / "abort").exists() is not clean, proc.stderr
    with open_store(root) as store:
        assert store.recovery.abnormal is not clean
        assert len(list(store.scan(check_crc=True))) == 5
