"""The command line: ``rocketstore dump`` against the RocketMQ 4.9.8 fixture, its errors, and
``rocketstore demo``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import helpers
import pytest
from click.testing import Result

import rocketstore

# Fields of messages.jsonl that describe the fixture, not the record: dump does not make them.
BOOKKEEPING = ("seq", "note", "inConsumeQueue", "indexed")
SEGMENT = 65536  # the fixture's CommitLog file size


def run(*args: str | int | os.PathLike[str]) -> Result:
    return helpers.cli_run(*args)


def expected_record(line: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k not in BOOKKEEPING}


def parse_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout_bytes.decode("utf-8").splitlines()]


def assert_clean_error(result: Result, *needles: str) -> None:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stderr.startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def flip(path: Path, offset: int, mask: int = 0xFF) -> None:
    """XOR one byte of the CommitLog at a global offset (segments of the fixture's size)."""
    seg = path / "commitlog" / f"{offset // SEGMENT * SEGMENT:020d}"
    with seg.open("r+b") as f:
        f.seek(offset % SEGMENT)
        (byte,) = f.read(1)
        f.seek(offset % SEGMENT)
        f.write(bytes([byte ^ mask]))


# ---- dump: the fixture, field by field -----------------------------------------------------


def test_dump_reproduces_every_field_of_the_fixture(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    result = run("dump", rocketmq_store)
    assert result.exit_code == 0, result.stderr
    got = parse_lines(result)
    assert len(fixture_messages) == 600
    assert len(got) == len(fixture_messages)
    for i, (line, expected) in enumerate(zip(got, fixture_messages, strict=True)):
        assert line == expected_record(expected), f"line {i} (seq {expected['seq']}) differs"
        assert list(line) == list(expected_record(expected)), f"line {i}: field order"


def test_dump_lines_are_compact_utf8_like_the_fixture(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    result = run("dump", rocketmq_store, "--limit", "5")
    raw = result.stdout_bytes.decode("utf-8").splitlines()
    for text, expected in zip(raw, fixture_messages, strict=False):
        reference = json.dumps(expected_record(expected), ensure_ascii=False,
                               separators=(",", ":"))
        assert text == reference


def test_dump_of_the_commitlog_directory_itself(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    result = run("dump", rocketmq_store / "commitlog")
    assert result.exit_code == 0, result.stderr
    assert parse_lines(result) == [expected_record(m) for m in fixture_messages]


def test_dump_to_an_output_file(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    result = run("dump", rocketmq_store, "--output", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [expected_record(m) for m in fixture_messages]


def test_dump_limit_and_from_offset(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    expected = [expected_record(m) for m in fixture_messages]
    assert parse_lines(run("dump", rocketmq_store, "--limit", "7")) == expected[:7]
    assert parse_lines(run("dump", rocketmq_store, "--limit", "0")) == []

    start = fixture_messages[250]["commitLogOffset"]
    assert parse_lines(run("dump", rocketmq_store, "--from-offset", start)) == expected[250:]
    got = parse_lines(run("dump", rocketmq_store, "--from-offset", start, "--limit", "3"))
    assert got == expected[250:253]

    # Across a segment boundary: the record after the big body's END_FILE blank.
    big = next(i for i, m in enumerate(fixture_messages) if m["bodyLen"] == 40000)
    blank_start = (fixture_messages[big - 1]["commitLogOffset"]
                   + fixture_messages[big - 1]["storeSize"])
    got = parse_lines(run("dump", rocketmq_store, "--from-offset", blank_start, "--limit", "2"))
    assert got == expected[big:big + 2]

    last = fixture_messages[-1]
    end = last["commitLogOffset"] + last["storeSize"]
    result = run("dump", rocketmq_store, "--from-offset", end)
    assert result.exit_code == 0 and result.stdout == ""


def test_dump_no_body(rocketmq_store: Path, fixture_messages: list[dict[str, Any]]) -> None:
    got = parse_lines(run("dump", rocketmq_store, "--no-body", "--limit", "10"))
    assert len(got) == 10
    for line, expected in zip(got, fixture_messages, strict=False):
        want = expected_record(expected)
        del want["body_b64"]
        assert line == want


def test_dump_from_offset_inside_a_record_is_an_error(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    inside = fixture_messages[10]["commitLogOffset"] + 3
    assert_clean_error(run("dump", rocketmq_store, "--from-offset", inside),
                       f"--from-offset {inside}", "not the start of a record")


# ---- dump: errors --------------------------------------------------------------------------


def test_dump_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert_clean_error(run("dump", missing), str(missing), "does not exist")


def test_dump_of_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert_clean_error(run("dump", tmp_path), "not a store")
    assert_clean_error(run("dump", tmp_path / "notes.txt"), "not a directory")


@pytest.mark.parametrize("where", ["magic", "body", "tail"])
def test_dump_of_a_corrupt_record_names_its_offset(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]], where: str
) -> None:
    # magic: a middle segment; body: only the CRC can tell; tail: in the last segment, where
    # opening the store (recovery) finds it first.
    index = {"magic": 300, "body": 450, "tail": 595}[where]
    record = fixture_messages[index]
    assert record["bodyLen"] > 0
    offset = record["commitLogOffset"]
    if where != "body":
        flip(rocketmq_store, offset + 4)
    else:  # the last body byte
        tail = 1 + len(record["topic"].encode()) + 2 + len(record["propertiesString"].encode())
        flip(rocketmq_store, offset + record["storeSize"] - tail - 1, 0x01)
    result = run("dump", rocketmq_store)
    assert_clean_error(result, f"offset {offset}", "damaged")
    if where == "body":
        assert "CRC" in result.stderr
    # Every record but the damaged one was written out, intact: damage is skipped, never the
    # end of the dump (the error comes after the records).
    assert parse_lines(result) == [expected_record(m) for i, m in enumerate(fixture_messages)
                                   if i != index]
    # --limit that stops before the corrupt record is a clean dump.
    ok = run("dump", rocketmq_store, "--limit", str(index))
    assert ok.exit_code == 0, ok.stderr
    assert len(parse_lines(ok)) == index


def test_dump_of_a_truncated_segment(rocketmq_store: Path,
                                     fixture_messages: list[dict[str, Any]]) -> None:
    """A segment cut short: the records in the part that is left and in every later segment
    are dumped; the error names the segment and the damaged range."""
    seg = rocketmq_store / "commitlog" / f"{2 * SEGMENT:020d}"
    os.truncate(seg, 1000)
    result = run("dump", rocketmq_store)
    lost = [m for m in fixture_messages
            if m["commitLogOffset"] + m["storeSize"] > 2 * SEGMENT + 1000
            and m["commitLogOffset"] < 3 * SEGMENT]
    assert_clean_error(result, seg.name, f"offset {lost[0]['commitLogOffset']}..{3 * SEGMENT}")
    assert parse_lines(result) == [expected_record(m) for m in fixture_messages
                                   if m not in lost]


def test_dump_of_an_empty_store_prints_nothing(tmp_path: Path) -> None:
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    result = run("dump", tmp_path / "store")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""


# ---- demo ----------------------------------------------------------------------------------


def test_demo_writes_verifies_and_reports(tmp_path: Path) -> None:
    path = tmp_path / "demo"
    result = run("demo", path, "--messages", "3000")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    for needle in ("3,000 messages", "put_message ", "put_messages", "msgs/s", "MB/s", "scan",
                   "verify       OK", "CommitLog segment", "first records", "orders", "audit",
                   "clicks"):
        assert needle in out, needle
    # The store it leaves is a real one: dump reads back every message.
    dumped = parse_lines(run("dump", path))
    assert len(dumped) == 3000
    assert {d["topic"] for d in dumped} == {"orders", "audit", "clicks"}
    assert {d["tags"] for d in dumped if d["topic"] == "orders"} == {"paid", "shipped",
                                                                       "refunded"}
    assert any(d["sysFlag"] & 0x10 for d in dumped), "some IPv6 born hosts"
    assert all(d["bodyLen"] == 256 for d in dumped)
    assert max(d["queueId"] for d in dumped if d["topic"] == "orders") == 7


def test_demo_rolls_segments_appends_and_cleans_up(tmp_path: Path) -> None:
    path = tmp_path / "demo"
    args = ("--messages", "1500", "--segment-size", "131072", "--body-size", "600",
            "--batch", "64", "--topics", "orders,payments")
    first = run("demo", path, *args)
    assert first.exit_code == 0, first.stderr
    assert len(list((path / "commitlog").iterdir())) > 3
    second = run("demo", path, *args)  # appends to the earlier store, verifies its own part
    assert second.exit_code == 0, second.stderr
    assert "verify       OK: 1,500 messages" in second.stdout
    assert len(parse_lines(run("dump", path))) == 3000

    gone = tmp_path / "gone"
    result = run("demo", gone, "--messages", "200", "--no-keep")
    assert result.exit_code == 0, result.stderr
    assert not gone.exists()


def test_demo_on_a_locked_store(tmp_path: Path) -> None:
    path = tmp_path / "demo"
    with rocketstore.MessageStore.open(path, rocketstore.StoreConfig(
            store_path_root_dir=str(path), mapped_file_size_commit_log=1 << 20)):
        assert_clean_error(run("demo", path, "--messages", "10", "--append"),
                           "is locked by another writer")


def test_demo_appends_to_a_store_it_did_not_make_only_when_told(tmp_path: Path) -> None:
    path = tmp_path / "mine"
    with rocketstore.MessageStore.open(path, rocketstore.StoreConfig(
            store_path_root_dir=str(path), mapped_file_size_commit_log=1 << 20)) as store:
        assert store.put_message(rocketstore.Message("mine", b"precious"), 0).ok
    # Without a terminal there is nobody to ask: the demo refuses and says how to go on.
    refused = run("demo", path, "--messages", "10")
    assert_clean_error(refused, "no demo made", "orders, audit, clicks", "--append")
    assert [d["topic"] for d in parse_lines(run("dump", path))] == ["mine"]

    appended = run("demo", path, "--messages", "10", "--append")
    assert appended.exit_code == 0, appended.stderr
    assert "verify       OK: 10 messages" in appended.stdout
    assert len(parse_lines(run("dump", path))) == 11
    # Still not a demo store: the next demo asks again.
    assert_clean_error(run("demo", path, "--messages", "10"), "--append")


def test_progress_bars_on_request_or_on_a_terminal_only(tmp_path: Path) -> None:
    quiet = run("demo", tmp_path / "quiet", "--messages", "300")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    shown = run("demo", tmp_path / "shown", "--messages", "300", "--progress")
    assert shown.exit_code == 0, shown.stderr
    assert "writing" in shown.stderr and "reading" in shown.stderr

    out = tmp_path / "out.jsonl"
    quiet = run("dump", tmp_path / "shown", "--output", out)
    assert quiet.exit_code == 0 and quiet.stderr == ""
    shown = run("dump", tmp_path / "shown", "--output", out, "--progress")
    assert shown.exit_code == 0 and "dumping" in shown.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 300

    quiet = run("verify", tmp_path / "shown")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
    shown = run("verify", tmp_path / "shown", "--progress")
    assert shown.exit_code == 0 and "verifying" in shown.stderr, shown.stderr
    assert "result         OK" in shown.stdout


def test_output_goes_to_stdout_without_click_get_binary_stream(
        rocketmq_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """click.get_binary_stream is deprecated (click 9 removes it)."""
    def removed(name: str) -> None:
        raise AssertionError(f"click.get_binary_stream({name!r}) was called")

    monkeypatch.setattr(click, "get_binary_stream", removed)
    assert len(parse_lines(run("dump", rocketmq_store, "--limit", "3"))) == 3
    got = parse_lines(run("get", rocketmq_store, "-t", "orders", "-q", 0, "--offset", 0,
                          "-n", 2))
    assert got[0]["messageCount"] == 2 and len(got) == 3


def test_verbose_logs_to_stderr(rocketmq_store: Path) -> None:
    result = run("--verbose", "dump", rocketmq_store, "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert "INFO rocketstore.cli.store: dumped 1 records" in result.stderr
    assert len(parse_lines(result)) == 1


def test_demo_refuses_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    assert_clean_error(run("demo", tmp_path, "--messages", "10"), "not a store")
    assert (tmp_path / "precious.txt").read_text() == "keep me"


# ---- entry points --------------------------------------------------------------------------


def test_python_dash_m_help(tmp_path: Path) -> None:
    package_parent = Path(rocketstore.__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(package_parent), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "rocketstore", "--help"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stdout and "dump" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "rocketstore", "dump", "--help"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and "--from-offset" in proc.stdout


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert rocketstore.__version__ in result.stdout
