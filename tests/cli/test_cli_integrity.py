"""``rocketstore verify`` and ``rocketstore salvage``, on the RocketMQ 4.9.8 fixture: a store
RocketMQ wrote verifies clean; a damaged copy is named by verify and salvaged into a new store
that holds every valid record and verifies clean."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import helpers
from click.testing import Result

SEGMENT = 65536


def run(*args: str | int | os.PathLike[str]) -> Result:
    return helpers.cli_run(*args)


def _break_magic(store: Path, offset: int) -> None:
    seg = store / "commitlog" / f"{offset // SEGMENT * SEGMENT:020d}"
    with seg.open("r+b") as f:
        f.seek(offset % SEGMENT + 4)
        f.write(b"\xde\xad\xbe\xef")


def test_verify_a_store_rocketmq_wrote(rocketmq_store: Path,
                                       fixture_messages: list[dict[str, Any]]) -> None:
    result = run("verify", rocketmq_store)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "result         OK" in result.stdout
    data = json.loads(run("verify", rocketmq_store, "--json").stdout)
    assert data["ok"] is True and data["records"] == len(fixture_messages)
    assert data["consumeQueue"]["unitsChecked"] > 0 and data["index"]["itemsChecked"] > 0


def test_verify_names_commitlog_damage(rocketmq_store: Path,
                                       fixture_messages: list[dict[str, Any]]) -> None:
    victim = fixture_messages[300]
    _break_magic(rocketmq_store, victim["commitLogOffset"])
    result = run("verify", rocketmq_store)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: damage found: 1 damaged CommitLog range(s)")
    assert f"[{victim['commitLogOffset']}, " in result.stderr and "bad magic" in result.stderr
    assert result.stderr.count("\n") == 1
    data = json.loads(run("verify", rocketmq_store, "--json").stdout)
    assert data["ok"] is False and data["records"] == len(fixture_messages) - 1
    d = data["commitLog"]["damaged"][0]
    assert (d["start"], d["end"]) == (victim["commitLogOffset"],
                                      victim["commitLogOffset"] + victim["storeSize"])
    # what still points at the damaged record is counted with it, not as index damage
    assert data["index"]["count"] == 0 and data["consumeQueue"]["count"] == 0


def test_verify_names_queue_and_index_damage(rocketmq_store: Path) -> None:
    cq = sorted((rocketmq_store / "consumequeue").glob("*/*/*"))[0]
    with cq.open("r+b") as f:
        f.seek(3 * 20 + 8)
        f.write(struct.pack(">i", 7))           # a unit's size
    index = sorted((rocketmq_store / "index").iterdir())[0]
    with index.open("r+b") as f:
        f.seek(40 + 4 * 10)
        f.write(b"\x7f\x00\x00\x01")            # a hash slot
    result = run("verify", rocketmq_store)
    assert result.exit_code == 1, result.stdout
    assert f"{cq.parent.parent.name}:{cq.parent.name} unit 3" in result.stdout
    assert f"{index.name}: hash slot" in result.stdout
    assert "ConsumeQueue problem" in result.stderr and "IndexFile problem" in result.stderr


def test_salvage_copies_every_valid_record(rocketmq_store: Path, tmp_path: Path,
                                           fixture_messages: list[dict[str, Any]]) -> None:
    victim = fixture_messages[300]
    _break_magic(rocketmq_store, victim["commitLogOffset"])
    group_queue = (victim["topic"], victim["queueId"])
    (rocketmq_store / "config").mkdir(exist_ok=True)
    (rocketmq_store / "config" / "consumerOffset.json").write_text(json.dumps(
        {"offsetTable": {f"{victim['topic']}@g": {str(victim["queueId"]):
                                                   victim["queueOffset"] + 1}}}))
    before = {p: p.read_bytes() for p in (rocketmq_store / "commitlog").iterdir()}
    out = tmp_path / "salvaged"
    result = run("salvage", rocketmq_store, out)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert f"copied         {len(fixture_messages) - 1:,} record(s)" in result.stdout
    assert f"skipped        [{victim['commitLogOffset']:,}, " in result.stdout
    assert {p: p.read_bytes() for p in (rocketmq_store / "commitlog").iterdir()} == before
    assert run("verify", out).exit_code == 0
    dumped = [json.loads(x) for x in run("dump", out).stdout.splitlines()]
    kept = [m for m in fixture_messages if m is not victim]
    assert len(dumped) == len(kept)
    for got, want in zip(dumped, kept, strict=True):
        for field in ("topic", "queueId", "bodyCRC", "body_b64", "properties", "bornTimestamp",
                      "storeTimestamp", "bornHost", "storeHost", "sysFlag", "flag"):
            assert got[field] == want[field], field
    # each queue renumbered without the gap the lost record left
    by_queue: dict[tuple[str, int], list[int]] = {}
    for m in dumped:
        if m["sysFlag"] & 0xC in (0, 0x8):
            by_queue.setdefault((m["topic"], m["queueId"]), []).append(m["queueOffset"])
    for offsets in by_queue.values():
        assert offsets == list(range(len(offsets)))
    # the group that had consumed the lost record resumes after it
    moved = json.loads((out / "config" / "consumerOffset.json").read_text())
    assert moved["offsetTable"][f"{group_queue[0]}@g"][str(group_queue[1])] == \
        victim["queueOffset"]
    again = run("salvage", rocketmq_store, out)
    assert again.exit_code == 1 and "must be a new or empty directory" in again.stderr


def test_every_command_on_a_damaged_store_answers_in_one_line(
        rocketmq_store: Path, tmp_path: Path, fixture_messages: list[dict[str, Any]]) -> None:
    """Damage in every kind of file at once (a CommitLog record, a cut last segment, an
    IndexFile header, ConsumeQueue units, consumerOffset.json): every command that reads a
    store serves what is intact or fails with one line, never a traceback; the commands that
    find damage say so with exit code 1."""
    victim = fixture_messages[300]
    _break_magic(rocketmq_store, victim["commitLogOffset"])
    last = sorted((rocketmq_store / "commitlog").iterdir())[-1]
    os.chmod(last, 0o600)
    os.truncate(last, 1000)
    index = sorted((rocketmq_store / "index").iterdir())[0]
    with index.open("r+b") as f:
        f.seek(36)
        f.write(struct.pack(">i", -7))          # indexCount
    cq = sorted((rocketmq_store / "consumequeue").glob("orders/*/*"))[0]
    with cq.open("r+b") as f:
        f.write(bytes(60))                      # the first three units
    (rocketmq_store / "config").mkdir(exist_ok=True)
    (rocketmq_store / "config" / "consumerOffset.json").write_text('{"offsetTable": {')
    first = fixture_messages[0]
    commands: list[tuple[Any, ...]] = [
        ("stat", rocketmq_store), ("stat", rocketmq_store, "--json"),
        ("dump", rocketmq_store, "--no-body"),
        ("get", rocketmq_store, "-t", first["topic"], "-q", first["queueId"], "--offset", 0),
        ("query", rocketmq_store, "-t", first["topic"], "-k", first["uniqKey"]),
        ("view", rocketmq_store, first["msgId"]), ("offsets", rocketmq_store),
        ("recover", rocketmq_store, "--dry-run"), ("verify", rocketmq_store),
        ("verify", rocketmq_store, "--json"), ("clean", rocketmq_store, "--dry-run"),
        ("export", rocketmq_store, tmp_path / "parquet"),
        ("salvage", rocketmq_store, tmp_path / "salvaged"),
    ]
    codes = {}
    for args in commands:
        result = run(*args)
        label = " ".join(str(a) for a in args[:1] + args[2:])
        assert result.exit_code in (0, 1), (label, result.exit_code, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout, label
        errors = [x for x in result.stderr.splitlines() if x.startswith("Error: ")]
        assert len(errors) == (result.exit_code == 1), (label, result.stderr)
        assert not any(x.startswith((" ", "\t")) for x in result.stderr.splitlines()), label
        codes[label] = result.exit_code
    for label in ("stat", "stat --json", "dump --no-body", "recover --dry-run", "verify",
                  "offsets"):
        assert codes[label] == 1, (label, codes)
    # what is intact is still served, around every damaged file
    got = json.loads(run("view", rocketmq_store, first["msgId"]).stdout)
    assert got["commitLogOffset"] == first["commitLogOffset"]
    dumped = [json.loads(x)["commitLogOffset"]
              for x in run("dump", rocketmq_store, "--no-body").stdout.splitlines()]
    assert first["commitLogOffset"] in dumped and victim["commitLogOffset"] not in dumped
    assert run("verify", tmp_path / "salvaged").exit_code == 0
