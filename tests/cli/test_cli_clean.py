"""``rocketstore clean PATH [--dry-run]`` and the retention lines of ``rocketstore stat``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import helpers

from rocketstore import Message, MessageStore, StoreConfig


def half_full(path: str) -> float:
    return 0.5


def make_store(root: Path, n: int = 300) -> list[str]:
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                         mapped_file_size_consume_queue=50 * 20, max_hash_slot_num=100,
                         max_index_num=400, commit_log_prefault_ahead=0)
    # whatever the host's disk: a full one would refuse the puts
    with MessageStore.open(root, config, disk_probe=half_full) as store:
        for i in range(n):
            store.put_message(Message(topic="t", body=b"x" * 900, keys=[f"k{i}"]), i % 2)
        assert store.wait_dispatched()
    return sorted(os.listdir(root / "commitlog"))


def reasons_besides_the_hour(report: dict) -> list[str]:
    # the delete hour (delete_when, "04") is the real clock's: at 04:xx "time" is a reason too
    return [r for r in report["reasons"] if r != "time"]


def test_clean_dry_run_lists_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    names = make_store(root)
    before = sorted(p.name for p in (root / "commitlog").iterdir())
    # --disk-usage: the plan does not depend on how full the host's disk is
    result = helpers.cli_run("clean", root, "--dry-run", "--disk-usage", "50")
    assert result.exit_code == 0, result.stderr
    assert "would delete  nothing" in result.stdout          # nothing is 72 h old
    result = helpers.cli_run("clean", root, "--dry-run", "--file-reserved-time", "0", "--json",
                             "--disk-usage", "50")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dryRun"] and reasons_besides_the_hour(report) == ["manual"]
    planned = [os.path.basename(d["path"]) for d in report["deleted"] if d["kind"] == "commitlog"]
    assert planned == names[:-1]
    assert any(d["kind"] == "consumequeue" for d in report["deleted"])
    # over the forced watermark the oldest go before they expire, never the newest
    result = helpers.cli_run("clean", root, "--dry-run", "--json", "--disk-usage", "87")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert reasons_besides_the_hour(report) == ["space", "manual", "forced"]
    assert [os.path.basename(d["path"]) for d in report["deleted"]
            if d["kind"] == "commitlog"] == names[:-1]
    assert sorted(p.name for p in (root / "commitlog").iterdir()) == before


def test_clean_disk_usage_only_plans(tmp_path: Path) -> None:
    root = tmp_path / "store"
    names = make_store(root, 100)
    result = helpers.cli_run("clean", root, "--disk-usage", "87")
    assert result.exit_code == 2 and "--disk-usage" in result.stderr
    result = helpers.cli_run("clean", root, "--dry-run", "--disk-usage", "101")
    assert result.exit_code == 2 and "--disk-usage" in result.stderr
    assert sorted(os.listdir(root / "commitlog")) == names


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
    names = make_store(root)
    result = helpers.cli_run("stat", root, "--disk-usage", "50")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "disk           50.0% used (taken from --disk-usage; measured: " in out
    assert "; ok\n" in out
    assert "watermarks     clean-up 75%, forced 85%, refuse puts 90%; files kept 72 h" in out
    assert "next cleanup   nothing to delete now" in out
    # over the forced watermark: the oldest files go before they expire
    out = helpers.cli_run("stat", root, "--disk-usage", "87").stdout
    assert "over the forced watermark: files deleted before they expire" in out
    assert f"next cleanup   would delete {len(names) - 1} commitlog" in out
    assert "(space, forced" in out or "(time, space, forced" in out
    out = helpers.cli_run("stat", root, "--disk-usage", "95").stdout
    assert "95.0% used" in out and "FULL: puts refused" in out
    st = json.loads(helpers.cli_run("stat", root, "--json").stdout)
    rt = st["retention"]
    assert rt["diskSpaceWarningLevelRatio"] == 90 and rt["disk"]["total"] > 0
    assert rt["nextRun"]["dryRun"] is True
    assert 0 <= rt["usedRatio"] <= 1          # measured without --disk-usage
