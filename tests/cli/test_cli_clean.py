"""``rocketstore clean PATH [--dry-run]`` and the retention lines of ``rocketstore stat``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import helpers

from rocketstore import Message, MessageStore, StoreConfig


def make_store(root: Path, n: int = 300) -> list[str]:
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                         mapped_file_size_consume_queue=50 * 20, max_hash_slot_num=100,
                         max_index_num=400, commit_log_prefault_ahead=0)
    with MessageStore.open(root, config) as store:
        for i in range(n):
            store.put_message(Message(topic="t", body=b"x" * 900, keys=[f"k{i}"]), i % 2)
        assert store.wait_dispatched()
    return sorted(os.listdir(root / "commitlog"))


def test_clean_dry_run_lists_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    names = make_store(root)
    before = sorted(p.name for p in (root / "commitlog").iterdir())
    result = helpers.cli_run("clean", root, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "would delete  nothing" in result.stdout          # nothing is 72 h old
    result = helpers.cli_run("clean", root, "--dry-run", "--file-reserved-time", "0", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dryRun"] and report["reasons"] == ["manual"]
    planned = [os.path.basename(d["path"]) for d in report["deleted"] if d["kind"] == "commitlog"]
    assert planned == names[:-1]
    assert any(d["kind"] == "consumequeue" for d in report["deleted"])
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == before


def test_clean_deletes_expired_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    names = make_store(root)
    result = helpers.cli_run("clean", root, "--file-reserved-time", "0")
    assert result.exit_code == 0, result.stderr
    assert "deleted       " in result.stdout and names[0] in result.stdout
    assert sorted(os.listdir(root / "commitlog")) == names[-1:]
    assert f"min offset    0 -> {int(names[-1]):,}" in result.stdout
    with MessageStore.open(root, read_only=True) as store:
        assert store.get_min_phy_offset() == int(names[-1])
        got = store.get_message("g", "t", 0, 0)
        assert got.status.name == "OFFSET_TOO_SMALL" and got.next_begin_offset > 0


def test_stat_shows_disk_and_the_next_cleanup(tmp_path: Path) -> None:
    root = tmp_path / "store"
    make_store(root)
    result = helpers.cli_run("stat", root)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "disk           " in out and "% used" in out
    assert "watermarks     clean-up 75%, forced 85%, refuse puts 90%; files kept 72 h" in out
    assert "next cleanup   nothing to delete now" in out
    st = json.loads(helpers.cli_run("stat", root, "--json").stdout)
    rt = st["retention"]
    assert rt["diskSpaceWarningLevelRatio"] == 90 and rt["disk"]["total"] > 0
    assert rt["nextRun"]["dryRun"] is True
