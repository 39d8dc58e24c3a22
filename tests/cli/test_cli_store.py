"""The store commands of the command line against the RocketMQ 4.9.8 fixture: ``stat``,
``query``, ``get``, ``view`` and ``recover``, their errors, and the IndexFile size options."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import helpers
import pytest
from click.testing import Result

import rocketstore
from rocketstore import Message, MessageStore, StoreConfig

BOOKKEEPING = ("seq", "note", "inConsumeQueue", "indexed")
ROLLBACK = 0xC
LONG_MAX = 2**63 - 1
FIXTURE_SIZES = {"mapped_file_size_commit_log": 65536, "mapped_file_size_consume_queue": 2000,
                 "max_hash_slot_num": 200, "max_index_num": 800}


def run(*args: str | int | os.PathLike[str]) -> Result:
    return helpers.cli_run(*args)


def ok(*args: str | int | os.PathLike[str]) -> Result:
    result = run(*args)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(x) for x in result.stdout_bytes.decode("utf-8").splitlines()]


def assert_clean_error(result: Result, *needles: str, code: int = 1) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert "Error: " in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def expected_record(line: dict[str, Any], body: bool = True) -> dict[str, Any]:
    d = {k: v for k, v in line.items() if k not in BOOKKEEPING}
    if not body:
        del d["body_b64"]
    return d


def fixture_config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), **FIXTURE_SIZES)


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    package_parent = str(Path(rocketstore.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def by_offset(fixture_messages: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {m["commitLogOffset"]: m for m in fixture_messages}


# ---- stat ----------------------------------------------------------------------------------


def test_stat_json_describes_the_fixture(
        rocketmq_store: Path, fixture_consumequeue: list[dict[str, Any]],
        fixture_messages: list[dict[str, Any]]) -> None:
    st = json.loads(ok("stat", rocketmq_store, "--json").stdout)
    got = {(t["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"], q["messages"])
           for t in st["topics"] for q in t["queues"]}
    want = {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"], q["unitCount"])
            for q in fixture_consumequeue}
    assert len(want) == 6
    assert got == want
    assert st["topicCount"] == 4 and st["queueCount"] == 6
    assert st["messages"] == sum(q["unitCount"] for q in fixture_consumequeue)
    last = fixture_messages[-1]
    cl = st["commitLog"]
    assert (cl["minOffset"], cl["maxOffset"]) == (0, last["commitLogOffset"] + last["storeSize"])
    assert cl["endStatus"] == "end"
    assert st["dispatchBehindBytes"] == 0

    def on_disk(pattern: str) -> tuple[int, int]:
        files = [p for p in rocketmq_store.glob(pattern) if p.is_file()]
        return len(files), sum(p.stat().st_size for p in files)

    assert (cl["files"], cl["bytes"], cl["fileSize"]) == (10, 10 * 65536, 65536)
    cq = st["consumeQueue"]
    assert (cq["files"], cq["bytes"]) == on_disk("consumequeue/*/*/*")
    assert (cq["fileSize"], cq["queues"]) == (2000, 6)
    ix = st["index"]
    assert (ix["files"], ix["bytes"]) == on_disk("index/*") == (3, 3 * 16840)
    assert (ix["hashSlots"], ix["indexNum"], ix["fileSize"]) == (200, 800, 16840)

    physic, logics, index = struct.unpack(">qqq",
                                          (rocketmq_store / "checkpoint").read_bytes()[:24])
    assert st["checkpoint"] == {"physicMsgTimestamp": physic, "logicsMsgTimestamp": logics,
                                "indexMsgTimestamp": index}
    assert st["abortFile"] is False and st["lastShutdownClean"] is True
    assert st["writerRunning"] is False
    # stat is read-only: nothing was created or changed
    assert not (rocketmq_store / "lock").exists() and not (rocketmq_store / "abort").exists()


def test_stat_table(rocketmq_store: Path, fixture_consumequeue: list[dict[str, Any]]) -> None:
    out = ok("stat", rocketmq_store).stdout
    for needle in ("clean (no abort file)", "offsets 0 .. 635,655", "10 file(s)",
                   "64.0 KiB each", "2,000 B each", "200 hash slots, 800 items each",
                   "dispatch lag   0 bytes", "589 in 6 queue(s) of 4 topic(s)", "%RETRY%cg1",
                   "T127-abcdefghij"):
        assert needle in out, needle
    rows = [line.split() for line in out.splitlines()]
    for q in fixture_consumequeue:
        if q["topic"].startswith("T127"):
            continue
        assert [q["topic"], str(q["queueId"]), f"{q['minOffset']:,}", f"{q['maxOffset']:,}",
                f"{q['unitCount']:,}"] in rows


def test_stat_reports_an_unclean_shutdown(rocketmq_store: Path) -> None:
    (rocketmq_store / "abort").touch()
    st = json.loads(ok("stat", rocketmq_store, "--json").stdout)
    assert st["abortFile"] is True and st["lastShutdownClean"] is False
    assert st["queueCount"] == 6
    assert "UNCLEAN" in ok("stat", rocketmq_store).stdout
    assert (rocketmq_store / "abort").exists()


# ---- query ---------------------------------------------------------------------------------


def true_matches(q: dict[str, Any], by_offset: dict[int, dict[str, Any]], max_num: int = 64
                 ) -> list[int]:
    """matchingOffsets minus ROLLBACK records (never indexed): the newest max_num, ascending."""
    hits = sorted(o for o in q["matchingOffsets"] if by_offset[o]["sysFlag"] & 0xC != ROLLBACK)
    return hits[-max_num:]


def test_query_returns_exactly_the_true_matches(
        rocketmq_store: Path, fixture_index_queries: list[dict[str, Any]],
        fixture_messages: list[dict[str, Any]], by_offset: dict[int, dict[str, Any]]) -> None:
    assert len(fixture_index_queries) == 49
    colliding = 0
    for q in fixture_index_queries:
        got = lines(ok("query", rocketmq_store, "--topic", q["topic"], "--key", q["key"]))
        offsets = [d["commitLogOffset"] for d in got]
        assert offsets == true_matches(q, by_offset), q["why"]
        bad = {c["commitLogOffset"] for c in q["collidingReturned"]}
        colliding += bool(bad)
        assert not bad & set(offsets), q["why"]
        for d in got:
            assert d == expected_record(by_offset[d["commitLogOffset"]])
    assert colliding == 12


def test_query_max_and_time_window(rocketmq_store: Path,
                                   fixture_index_queries: list[dict[str, Any]],
                                   by_offset: dict[int, dict[str, Any]]) -> None:
    hot = next(q for q in fixture_index_queries if q["key"] == "audit-hot")
    everything = true_matches(hot, by_offset, LONG_MAX)
    assert len(everything) == 99

    def query(*extra: str | int) -> list[int]:
        result = ok("query", rocketmq_store, "-t", "audit", "-k", "audit-hot", "--no-body",
                    *extra)
        got = lines(result)
        assert all("body_b64" not in d for d in got)
        return [d["commitLogOffset"] for d in got]

    assert query() == everything[-64:]  # RocketMQ's default cap
    assert query("--max", 200) == everything
    assert query("--max", 5) == everything[-5:]
    stamps = sorted(by_offset[o]["storeTimestamp"] for o in everything)
    begin, end = stamps[20], stamps[60]
    want = [o for o in everything if begin <= by_offset[o]["storeTimestamp"] <= end]
    assert 30 < len(want) < 99
    assert query("--begin", begin, "--end", end, "--max", 200) == want
    assert query("--begin", stamps[-1] + 1) == []


def test_query_without_matches_or_index_files(rocketmq_store: Path) -> None:
    result = ok("query", rocketmq_store, "-t", "orders", "-k", "no-such-key")
    assert result.stdout == ""
    for p in (rocketmq_store / "index").iterdir():
        p.unlink()
    result = ok("query", rocketmq_store, "-t", "orders", "-k", "cust-0")
    assert result.stdout == ""
    assert "IndexFiles" in result.stderr


# ---- get -----------------------------------------------------------------------------------


def pull_all(store: Path, topic: str, queue_id: int, *extra: str
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pull the whole queue from 0 on, following nextBeginOffset: (result lines, messages)."""
    heads: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    offset = 0
    while True:
        got = lines(ok("get", store, "--topic", topic, "--queue", queue_id, "--offset", offset,
                       "--no-body", *extra))
        head, found = got[0], got[1:]
        assert head["messageCount"] == len(found)
        heads.append(head)
        messages += found
        if head["status"] not in ("FOUND", "NO_MATCHED_MESSAGE"):
            return heads, messages
        assert head["nextBeginOffset"] > offset
        offset = head["nextBeginOffset"]


def test_get_returns_the_consumequeue_units(
        rocketmq_store: Path, fixture_consumequeue: list[dict[str, Any]],
        by_offset: dict[int, dict[str, Any]]) -> None:
    for q in fixture_consumequeue:
        heads, messages = pull_all(rocketmq_store, q["topic"], q["queueId"])
        assert [(m["queueOffset"], m["commitLogOffset"], m["storeSize"], m["tagsCode"])
                for m in messages] == [
            (u["queueOffset"], u["commitLogOffset"], u["size"], u["tagsCode"])
            for u in q["units"]]
        for m in messages:
            assert m == expected_record(by_offset[m["commitLogOffset"]], body=False)
        assert all(h["messageCount"] <= 32 for h in heads)
        assert {(h["minOffset"], h["maxOffset"]) for h in heads} == {
            (q["minOffset"], q["maxOffset"])}
        assert heads[-1]["status"] == "OFFSET_OVERFLOW_ONE"
        assert heads[-1]["nextBeginOffset"] == q["maxOffset"]


def test_get_batches_and_bodies(rocketmq_store: Path, by_offset: dict[int, dict[str, Any]]
                                ) -> None:
    got = lines(ok("get", rocketmq_store, "-t", "orders", "-q", 2, "--offset", 10, "--max", 7))
    head, messages = got[0], got[1:]
    assert head == {"status": "FOUND", "nextBeginOffset": 17, "minOffset": 0, "maxOffset": 134,
                    "messageCount": 7}
    assert [m["queueOffset"] for m in messages] == list(range(10, 17))
    assert messages == [expected_record(by_offset[m["commitLogOffset"]]) for m in messages]


def test_get_with_a_tag_subscription(rocketmq_store: Path,
                                     fixture_consumequeue: list[dict[str, Any]],
                                     by_offset: dict[int, dict[str, Any]]) -> None:
    units = next(q for q in fixture_consumequeue
                 if q["topic"] == "orders" and q["queueId"] == 0)["units"]
    want = [u["commitLogOffset"] for u in units
            if by_offset[u["commitLogOffset"]]["tags"] in ("paid", "📦")]
    assert 0 < len(want) < len(units)
    _heads, messages = pull_all(rocketmq_store, "orders", 0, "--subscription", "paid || 📦",
                                "--group", "cg1")
    assert [m["commitLogOffset"] for m in messages] == want


def test_get_statuses_past_the_end(rocketmq_store: Path) -> None:
    head = lines(ok("get", rocketmq_store, "-t", "audit", "-q", 0, "--offset", 120))[0]
    assert head["status"] == "OFFSET_OVERFLOW_ONE" and head["messageCount"] == 0
    head, *rest = lines(ok("get", rocketmq_store, "-t", "audit", "-q", 0, "--offset", 500))
    assert head["status"] == "OFFSET_OVERFLOW_BADLY" and rest == []


# ---- view ----------------------------------------------------------------------------------


def test_view_by_msg_id(rocketmq_store: Path, fixture_messages: list[dict[str, Any]]) -> None:
    ipv6 = next(m for m in fixture_messages if len(m["msgId"]) == 56)
    rollback = next(m for m in fixture_messages if m["sysFlag"] & 0xC == ROLLBACK)
    for m in (fixture_messages[0], fixture_messages[331], ipv6, rollback,
              fixture_messages[-1]):
        assert lines(ok("view", rocketmq_store, m["msgId"])) == [expected_record(m)]
    m = fixture_messages[7]
    assert lines(ok("view", rocketmq_store, m["msgId"].lower(), "--no-body")) == [
        expected_record(m, body=False)]


def test_view_errors(rocketmq_store: Path, fixture_messages: list[dict[str, Any]]) -> None:
    assert_clean_error(run("view", rocketmq_store, "xyz"), "bad message id")
    assert_clean_error(run("view", rocketmq_store, "Z" * 32), "bad message id")
    inside = fixture_messages[3]["msgId"][:-4] + "%04X" % (
        fixture_messages[3]["commitLogOffset"] + 5)
    assert_clean_error(run("view", rocketmq_store, inside), "no message")
    past = fixture_messages[3]["msgId"][:-8] + "7FFFFFFF"
    assert_clean_error(run("view", rocketmq_store, past), "no message", "635,655")


# ---- recover -------------------------------------------------------------------------------


def test_recover_after_an_unclean_shutdown(
        rocketmq_store: Path, fixture_messages: list[dict[str, Any]],
        fixture_consumequeue: list[dict[str, Any]],
        fixture_index_queries: list[dict[str, Any]],
        by_offset: dict[int, dict[str, Any]]) -> None:
    (rocketmq_store / "abort").touch()
    dry = json.loads(ok("recover", rocketmq_store, "--dry-run", "--json").stdout)
    assert dry["abnormal"] is True and dry["truncatedBytes"] == 0
    assert (rocketmq_store / "abort").exists(), "--dry-run changes nothing"

    report = json.loads(ok("recover", rocketmq_store, "--json").stdout)
    assert report["abnormal"] is True
    assert report["stopStatus"] == "end" and report["truncatedBytes"] == 0
    assert report["endOffset"] == 635655
    assert report["records"] > 0 and report["dispatchedRecords"] > 0
    assert not (rocketmq_store / "abort").exists()

    # The store reads back: every record, every queue, the keys.
    dumped = lines(ok("dump", rocketmq_store))
    assert dumped == [expected_record(m) for m in fixture_messages]
    st = json.loads(ok("stat", rocketmq_store, "--json").stdout)
    assert st["lastShutdownClean"] is True
    assert {(t["topic"], q["queueId"], q["maxOffset"]) for t in st["topics"]
            for q in t["queues"]} == {(q["topic"], q["queueId"], q["maxOffset"])
                                      for q in fixture_consumequeue}
    q = next(q for q in fixture_index_queries if q["key"] == "cust-0")
    got = lines(ok("query", rocketmq_store, "-t", q["topic"], "-k", q["key"]))
    assert [d["commitLogOffset"] for d in got] == true_matches(q, by_offset)

    again = ok("recover", rocketmq_store).stdout
    assert "recovery     normal" in again and "shutdown     clean" in again


def test_recover_feeds_a_progress_bar(rocketmq_store: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar (tqdm, shown on a terminal only) follows the CommitLog scan to its end."""
    import io

    import rocketstore.cli.common as cli

    bars: list[Any] = []
    real = cli.tqdm

    def visible_tqdm(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(disable=False, file=io.StringIO(), mininterval=0)
        bars.append(real(*args, **kwargs))
        return bars[-1]

    monkeypatch.setattr(cli, "tqdm", visible_tqdm)
    (rocketmq_store / "abort").touch()
    ok("recover", rocketmq_store)
    (bar,) = bars
    assert bar.total > 0 and bar.n == bar.total
    assert "recovering" in bar.fp.getvalue()


def test_recover_cuts_a_torn_tail(rocketmq_store: Path,
                                  fixture_messages: list[dict[str, Any]]) -> None:
    last = fixture_messages[-1]
    seg = rocketmq_store / "commitlog" / f"{last['commitLogOffset'] // 65536 * 65536:020d}"
    with seg.open("r+b") as f:  # break the last record's magic code
        f.seek(last["commitLogOffset"] % 65536 + 4)
        f.write(b"\0\0\0\0")
    (rocketmq_store / "abort").touch()
    result = run("recover", rocketmq_store, "--dry-run")
    # a dry run that finds something to give up says so with its exit code
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert f"torn tail at offset {last['commitLogOffset']}" in result.stderr
    dry = result.stdout
    assert "recovery     abnormal" in dry
    assert f"stopped      at an invalid record at {last['commitLogOffset']:,}" in dry
    assert "would give up" in dry and "nothing was changed" in dry
    report = json.loads(ok("recover", rocketmq_store, "--json").stdout)
    assert report["abnormal"] is True and report["stopStatus"] == "corrupt"
    assert report["endOffset"] == last["commitLogOffset"]
    # everything after the end up to the end of its segment (the data and the unused tail)
    assert report["truncatedBytes"] >= last["storeSize"]
    dumped = lines(ok("dump", rocketmq_store))
    assert dumped == [expected_record(m) for m in fixture_messages[:-1]]
    st = json.loads(ok("stat", rocketmq_store, "--json").stdout)
    assert st["commitLog"]["maxOffset"] == last["commitLogOffset"]
    queue = next(q for t in st["topics"] if t["topic"] == last["topic"] for q in t["queues"]
                 if q["queueId"] == last["queueId"])
    assert queue["maxOffset"] == last["queueOffset"]  # its unit is gone too


def test_store_held_by_another_process(rocketmq_store: Path, tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\n"
         "from rocketstore import MessageStore, StoreConfig\n"
         f"config = StoreConfig(store_path_root_dir=sys.argv[1], **{FIXTURE_SIZES!r})\n"
         "with MessageStore.open(sys.argv[1], config):\n"
         "    print('open', flush=True)\n"
         "    sys.stdin.readline()\n",
         str(rocketmq_store)],
        cwd=tmp_path, env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "open\n", (
            writer.stderr.read() if writer.stderr else "")
        assert_clean_error(run("recover", rocketmq_store), "locked", "another process")
        st = json.loads(ok("stat", rocketmq_store, "--json").stdout)
        assert st["writerRunning"] is True and st["abortFile"] is True
        if st["writerPid"] is not None:  # known where /proc/locks is
            assert st["writerPid"] == writer.pid
        assert st["lastShutdownClean"] is None and st["queueCount"] == 6
        assert "writer         running" in ok("stat", rocketmq_store).stdout
        got = lines(ok("get", rocketmq_store, "-t", "audit", "-q", 0, "--offset", 0, "-n", 3))
        assert got[0]["status"] == "FOUND" and len(got) == 4
    finally:
        writer.communicate("\n", timeout=60)
    assert writer.returncode == 0
    assert not (rocketmq_store / "abort").exists()


def test_python_dash_m_stat(rocketmq_store: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "rocketstore", "stat", str(rocketmq_store),
                           "--json"], cwd=tmp_path, env=subprocess_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["queueCount"] == 6


# ---- argument errors -----------------------------------------------------------------------


def test_bad_arguments_are_clean_errors(rocketmq_store: Path, tmp_path: Path) -> None:
    usage = 2  # click's usage errors
    assert_clean_error(run("get", rocketmq_store, "--queue", 0, "--offset", 0),
                       "Missing option", "--topic", code=usage)
    assert_clean_error(run("get", rocketmq_store, "-t", "orders", "--queue", -1, "--offset", 0),
                       "--queue", code=usage)
    assert_clean_error(run("get", rocketmq_store, "-t", "orders", "-q", 0, "--offset", -5),
                       "--offset", code=usage)
    assert_clean_error(run("get", rocketmq_store, "-t", "orders", "-q", 0, "--offset", 0,
                           "--max", 0), "--max", code=usage)
    assert_clean_error(run("query", rocketmq_store, "--key", "k"), "--topic", code=usage)
    assert_clean_error(run("query", rocketmq_store, "-t", "orders"), "--key", code=usage)
    assert_clean_error(run("view", rocketmq_store), "MSG_ID", code=usage)

    assert_clean_error(run("get", rocketmq_store, "-t", "orders", "-q", 7, "--offset", 0),
                       "no queue 7", "0, 1, 2")
    assert_clean_error(run("get", rocketmq_store, "-t", "nope", "-q", 0, "--offset", 0),
                       "'nope'", "'orders'")
    assert_clean_error(run("get", rocketmq_store, "-t", "orders", "-q", 0, "--offset", 0,
                           "--subscription", "||"), "subscription")
    assert_clean_error(run("query", rocketmq_store, "-t", "orders", "-k", ""), "--key")
    assert_clean_error(run("query", rocketmq_store, "-t", "orders", "-k", "k", "--begin", 9,
                           "--end", 3), "--begin 9 is after --end 3")
    missing = tmp_path / "missing"
    for command in ("stat", "recover"):
        assert_clean_error(run(command, missing), "does not exist")
    assert_clean_error(run("stat", tmp_path), "not a store")


def test_topics_are_checked_alike_with_a_one_line_error(rocketmq_store: Path,
                                                        tmp_path: Path) -> None:
    illegal = "topic 'a b' has an illegal character ' '"
    for command in (("query", rocketmq_store, "-t", "a b", "-k", "k"),
                    ("get", rocketmq_store, "-t", "a b", "-q", 0, "--offset", 0),
                    ("demo", tmp_path / "demo", "--topics", "orders,a b", "-n", 10)):
        result = run(*command)
        assert_clean_error(result, illegal)
        assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert_clean_error(run("query", rocketmq_store, "-t", "x" * 128, "-k", "k"),
                       "--topic", "at most 127")
    assert not (tmp_path / "demo").exists()


def test_view_of_a_client_msg_id_points_to_query(rocketmq_store: Path,
                                                 fixture_messages: list[dict[str, Any]]
                                                 ) -> None:
    m = next(m for m in fixture_messages if m["uniqKey"] and len(m["uniqKey"]) == 32)
    result = run("view", rocketmq_store, m["uniqKey"])
    assert_clean_error(result, f"no message with offset msgId {m['uniqKey']}",
                       f"if {m['uniqKey']} is a UNIQ_KEY (client msgId) use `rocketstore query",
                       f"-t TOPIC -k {m['uniqKey']}`")
    assert result.stderr.count("\n") == 1
    # ... and the hint finds it
    got = lines(ok("query", rocketmq_store, "-t", m["topic"], "-k", m["uniqKey"]))
    assert m["commitLogOffset"] in [d["commitLogOffset"] for d in got]


def test_store_warnings_are_one_line_too(rocketmq_store: Path) -> None:
    """What recovery repairs is in the command's report; with --verbose the store's own log
    lines show too, one line each (never a traceback)."""
    index_file = sorted((rocketmq_store / "index").iterdir())[0]
    with index_file.open("r+b") as f:
        f.write(b"\xff" * 40)
    result = ok("recover", rocketmq_store)
    assert f"index        {index_file.name}: rebuilt from CommitLog" in result.stdout
    assert "indexCount" in result.stdout
    with index_file.open("r+b") as f:
        f.write(b"\xff" * 40)
    result = ok("-v", "recover", rocketmq_store)
    assert "is damaged (indexCount" in result.stderr and "Traceback" not in result.stderr
    assert all(" rocketstore." in line for line in result.stderr.splitlines())


# ---- JSON keys -----------------------------------------------------------------------------

CAMEL_CASE = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def assert_camel_case(data: Any, where: str = "", data_keyed: tuple[str, ...] = ()) -> None:
    """Every key is camelCase, except those of the maps named in data_keyed (keyed by topic,
    queue or group), whose values are checked in turn."""
    if isinstance(data, list):
        for i, item in enumerate(data):
            assert_camel_case(item, f"{where}[{i}]", data_keyed)
    elif isinstance(data, dict):
        for key, value in data.items():
            if where.rsplit(".", 1)[-1] not in data_keyed:
                assert CAMEL_CASE.match(key), f"{where}.{key}"
            assert_camel_case(value, f"{where}.{key}", data_keyed)


def test_json_output_uses_camel_case_keys(rocketmq_store: Path, tmp_path: Path) -> None:
    from rocketstore.store.consumer_offset_file import commit_group_offsets

    commit_group_offsets(str(rocketmq_store), "cg-test", {"orders:0": 7})
    offsets = json.loads(ok("offsets", rocketmq_store).stdout)
    assert_camel_case(offsets, data_keyed=("queues", "groups", "cg-test"))
    assert set(offsets) == {"store", "commitLog", "queues", "groups"}
    assert offsets["commitLog"] == {"minOffset": 0, "maxOffset": 635655}
    assert offsets["queues"]["orders:2"] == {"minOffset": 0, "maxOffset": 134}
    assert offsets["groups"] == {"cg-test": {"orders:0": 7}}

    assert_camel_case(json.loads(ok("stat", rocketmq_store, "--json").stdout))
    (rocketmq_store / "abort").touch()
    report = json.loads(ok("recover", rocketmq_store, "--json").stdout)
    assert_camel_case(report)
    assert report["abnormal"] is True and report["durationSeconds"] >= 0
    exported = json.loads(ok("export", rocketmq_store, tmp_path / "out", "--json").stdout)
    assert_camel_case(exported)
    assert exported["rows"] > 0 and len(exported["exported"]) == 9
    head = lines(ok("get", rocketmq_store, "-t", "orders", "-q", 0, "--offset", 0, "-n", 1))[0]
    assert_camel_case(head)


# ---- IndexFile sizes -----------------------------------------------------------------------


def test_index_sizes_that_the_file_size_does_not_tell(tmp_path: Path) -> None:
    """64 slots / 400 items (not RocketMQ's 4 items per slot): the commands read the geometry
    from the file's data without options; --hash-slots/--index-num set new files' geometry."""
    root = tmp_path / "store"
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=65536,
                         mapped_file_size_consume_queue=2000, max_hash_slot_num=64,
                         max_index_num=400)
    with MessageStore.open(root, config) as store:
        for i in range(40):
            store.put_message(Message("t", b"x" * 50, tags="A", keys=f"k{i % 10}"), i % 2)
        assert store.wait_dispatched()
    (index_file,) = (root / "index").iterdir()
    assert index_file.stat().st_size == 40 + 4 * 64 + 20 * 400

    for sizes in ((), ("--hash-slots", 64), ("--index-num", 400),
                  ("--hash-slots", 64, "--index-num", 400)):
        st = json.loads(ok("stat", root, "--json", *sizes).stdout)
        assert (st["index"]["hashSlots"], st["index"]["indexNum"]) == (64, 400)
        got = lines(ok("query", root, "-t", "t", "-k", "k1", *sizes))
        assert [d["keys"] for d in got] == ["k1"] * 4
    ok("dump", root)
    assert json.loads(ok("verify", root, "--json").stdout)["ok"] is True
    assert_clean_error(run("stat", root, "--hash-slots", 63), "--hash-slots 63", "8,296")
    report = json.loads(ok("recover", root, "--json").stdout)
    assert report["abnormal"] is False
    assert index_file.stat().st_size == 40 + 4 * 64 + 20 * 400


# ---- offsets, export, spark-ingest (issue 5) ------------------------------------------------

def test_offsets_lists_every_queue_and_group(rocketmq_store: Path,
                                             fixture_consumequeue: list[dict[str, Any]]) -> None:
    from rocketstore.store.consumer_offset_file import commit_group_offsets

    commit_group_offsets(str(rocketmq_store), "cg-test", {"orders:0": 7})
    data = json.loads(ok("offsets", rocketmq_store).output)
    text = json.dumps(data)
    for q in fixture_consumequeue:
        assert f"{q['topic']}:{q['queueId']}" in text
    assert "cg-test" in text and "7" in text


def test_export_parquet_is_idempotent(rocketmq_store: Path, tmp_path: Path,
                                      fixture_messages: list[dict[str, Any]]) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    ok("export", rocketmq_store, "--format", "parquet", out)
    files = sorted(out.glob("*.parquet"))
    assert len(files) == 9      # the sealed segments; the last one is still open
    rows = sum(pq.read_metadata(f).num_rows for f in files)
    last_segment_start = 589824
    assert rows == sum(1 for m in fixture_messages if m["commitLogOffset"] < last_segment_start)
    before = {f.name: f.stat().st_mtime_ns for f in files}
    ok("export", rocketmq_store, "--format", "parquet", out)
    assert {f.name: f.stat().st_mtime_ns for f in sorted(out.glob("*.parquet"))} == before


@pytest.mark.slow
def test_spark_ingest_to_parquet(rocketmq_store: Path, tmp_path: Path,
                                 fixture_messages: list[dict[str, Any]]) -> None:
    pytest.importorskip("pyspark")
    import pyarrow.parquet as pq

    out = tmp_path / "ingested"
    ok("spark-ingest", rocketmq_store, "--to", "parquet", out)
    table = pq.read_table(out)
    assert table.num_rows == len(fixture_messages)
    assert sorted(table.column("commitlog_offset").to_pylist()) == sorted(
        m["commitLogOffset"] for m in fixture_messages)
