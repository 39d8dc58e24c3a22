"""A real full disk (issue 14 case 4, issue 17): a 16 MiB tmpfs mounted for a child process
(small_fs.py; skipped, saying why, where the sandbox cannot mount one), SYNC_FLUSH and
ASYNC_FLUSH. Filling it used to kill the process with SIGBUS (a failed posix_fallocate was
swallowed and the first write into the sparse segment faulted). Now every put gets a status,
nothing crashes, puts work again once there is room, and a reopen reads back every
acknowledged message that retention did not delete."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import small_fs
from helpers import assert_no_signal

CHILD = Path(__file__).with_name("full_disk_child.py")
FS_SIZE = 16 << 20

pytestmark = pytest.mark.skipif(small_fs.unavailable() is not None,
                                reason=str(small_fs.unavailable()))


def run_child(tmp_path: Path, *args: str) -> dict:
    proc = small_fs.run_on_tmpfs(CHILD, FS_SIZE, tmp_path / "mnt", *args, timeout=240)
    assert_no_signal(proc, f"full disk child {args}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
@pytest.mark.parametrize("segment, where", [(4 << 20, "next file"), (8 << 20, "same file")])
def test_a_full_disk_is_a_status_not_a_crash(tmp_path: Path, flush: str, segment: int,
                                             where: str) -> None:
    out = run_child(tmp_path, flush, "allocation", str(segment))
    assert out["before_full"] == {"PUT_OK": 200}
    assert out["used_after_ballast"] > 0.99
    # puts fill what was allocated, then fail with a status and a reason
    assert out["while_full"]["CREATE_MAPPED_FILE_FAILED"] == 50
    assert set(out["while_full"]) == {"PUT_OK", "CREATE_MAPPED_FILE_FAILED"}
    # ENOSPC says "no room on disk" whether the segment being written could not grow or the
    # next one could not be created, naming that file. Which one it is depends on how far the
    # prefault and allocation services got before the disk filled up, except that a 4 MiB
    # segment gets all its blocks at once (a 4 MiB chunk) and so always fills up.
    assert out["reasons"] == ["no room on disk for CommitLog file"], out["reasons"]
    last, last_full, size = out["last_segment"]
    assert size == segment and (last_full or where == "same file")
    named = last + size if last_full else last
    assert out["full_segments"] == [f"{named:020d}"], out
    status, stored, batch_reason = out["batch"]
    assert status == "CREATE_MAPPED_FILE_FAILED" and stored == 0
    assert "No space left on device" in batch_reason
    # room again: puts work at once, and dispatch catches up
    assert out["after_free_ok"] == 100 and out["dispatched"]
    assert out["clean_shutdown"]        # a shutdown on a full disk still ends cleanly
    back = out["readback"]
    assert back["missing_count"] == 0 and back["below_min"] == 0, back
    assert back["read"] == out["acked"] == back["scanned"]
    assert back["recovery"] == "end"


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_watermarks_on_a_real_disk(tmp_path: Path, flush: str) -> None:
    out = run_child(tmp_path, flush, "watermark", str(1 << 20))
    status, reason, used = out["refused"]
    assert status == "SERVICE_NOT_AVAILABLE" and reason.startswith("disk full: ")
    assert 0.90 < used < 1.0
    assert out["files_when_refused"] >= 2
    # three days later the periodic run deletes the expired files: accepted by themselves
    status, used = out["accepted_again"]
    assert status == "PUT_OK" and used <= 0.90
    assert out["files_after_cleanup"] == 1          # never the newest segment
    assert out["min_phy_after_cleanup"] > 0
    # the user fills the disk, and frees it
    assert out["refused_by_user"][0] == "SERVICE_NOT_AVAILABLE"
    assert out["accepted_after_user"][0] == "PUT_OK"
    assert set(out["statuses"]) == {"PUT_OK", "SERVICE_NOT_AVAILABLE"}
    assert out["reasons"] == ["disk full"] and out["dispatched"]
    back = out["readback"]
    assert back["missing_count"] == 0, back
    assert back["read"] + back["below_min"] == out["acked"] and back["read"] > 0
    assert back["scanned"] == back["read"]
