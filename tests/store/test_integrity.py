"""Issue 14's "what was seen", each as a regression test: damage never destroys intact data.

1. one bad page in the middle of the CommitLog used to delete a healthy segment;
2. a damaged IndexFile that is not the newest refused every read, then lost its keys;
3. one misaligned ConsumeQueue unit stopped dispatch for good;
5. header fields the CRC does not cover (topic, queue offset, store host port) refused the
   store, overflowed, or created thousands of files; a failed open kept its files open;
6. a damaged ConsumeQueue read as empty, a bad consumerOffset.json printed a traceback, a
   short last segment refused every command.
"""
from __future__ import annotations

import json
import logging
import os
import random
import struct
from pathlib import Path

import helpers
import pytest
from helpers import cli_run

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.layout import StoreFormatError

MiB = 1 << 20
INDEX = {"max_hash_slot_num": 100, "max_index_num": 400}    # RocketMQ's 4 items a slot


def _config(root: Path, **changes) -> StoreConfig:
    values = {"store_path_root_dir": str(root), "mapped_file_size_commit_log": MiB,
              "mapped_file_size_consume_queue": 20 * 2000, "max_hash_slot_num": 500,
              "max_index_num": 2000, "store_host": helpers.STORE_HOST}
    values.update(changes)
    return StoreConfig(**values)


def _open(root: Path, read_only: bool = False, **changes) -> MessageStore:
    return MessageStore.open(root, _config(root, **changes), read_only=read_only)


def _messages(n: int, seed: int = 14) -> list[tuple[Message, int]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = rng.randbytes(200 + rng.randrange(60))
        out.append((Message(("orders", "audit")[i % 2], body, tags=f"t{i % 3}",
                            keys=[f"k{i}"]), i % 4))
    return out


def _write(root: Path, n: int, **changes) -> list:
    with _open(root, **changes) as store:
        results = [store.put_message(m, q) for m, q in _messages(n)]
        assert all(r.ok for r in results)
        assert store.wait_dispatched()
    return results


def _pull_all(store: MessageStore, topic: str, qid: int) -> list[int]:
    """CommitLog offsets of every message get_message serves, following next_begin_offset."""
    got, offset = [], store.get_min_offset_in_queue(topic, qid)
    for _ in range(10_000):
        if offset >= store.get_max_offset_in_queue(topic, qid):
            break
        r = store.get_message("g", topic, qid, offset, 64)
        assert r.next_begin_offset > offset, (topic, qid, offset, r.status)
        got += [m.commitlog_offset for m in r.messages]
        offset = r.next_begin_offset
    return got


def _served(store: MessageStore) -> set[int]:
    return {o for t in ("orders", "audit") for q in range(4) for o in _pull_all(store, t, q)}


def _patch(root: Path, offset: int, data: bytes, segment: int = MiB) -> None:
    seg = root / "commitlog" / f"{offset - offset % segment:020d}"
    with open(seg, "r+b") as f:
        f.seek(offset % segment)
        f.write(data)


# ---- 1. one bad page in the middle of the CommitLog ----------------------------------------


@pytest.fixture(scope="module")
def two_segments(tmp_path_factory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("seen1") / "store"
    results = _write(root, 5000)
    assert len(list((root / "commitlog").iterdir())) == 2
    return root, results


def _copy(src: Path, dst: Path) -> Path:
    import shutil
    shutil.copytree(src, dst)
    return dst


def test_bad_page_keeps_every_other_record(two_segments, tmp_path, caplog):
    """4 KiB of garbage at offset 500,000 of segment 0: recovery used to give up 1,597,090
    bytes, delete the intact segment 1 and leave 1,372 of 5,000 messages (WARNING only).
    Now only the records the garbage overlaps are lost; every other record is served by
    get_message, query_message and scan; the range is reported (report, describe, ERROR)."""
    src, results = two_segments
    root = _copy(src, tmp_path / "store")
    _patch(root, 500_000, random.Random(1).randbytes(4096))
    hit = [r for r in results if r.commitlog_offset < 504_096
           and r.commitlog_offset + r.wrote_bytes > 500_000]
    intact = [r for r in results if r not in hit]
    assert len(hit) < 20
    with caplog.at_level(logging.ERROR, logger="rocketstore.store"), _open(root) as store:
        rep = store.recovery
        assert rep.truncated_bytes == 0 and rep.stop_status == "end"
        assert len(rep.damaged_ranges) == 1
        d = rep.damaged_ranges[0]
        assert d["start"] == hit[0].commitlog_offset
        assert d["end"] == hit[-1].commitlog_offset + hit[-1].wrote_bytes
        assert store.describe()["damage"]["commitLog"] == rep.damaged_ranges
        assert any("damage" in r.message and r.levelno == logging.ERROR for r in caplog.records)
        assert len(list((root / "commitlog").iterdir())) == 2       # segment 1 kept
        scanned = [m.commitlog_offset for m in store.scan(check_crc=True)]
        assert scanned == [r.commitlog_offset for r in intact]
        assert _served(store) == {r.commitlog_offset for r in intact}
        for i in (0, len(results) // 2, len(results) - 1):
            if results[i] in intact:
                msg = _messages(i + 1)[i][0]
                got = store.query_message(msg.topic, f"k{i}").messages
                assert [m.commitlog_offset for m in got] == [results[i].commitlog_offset]
        # a put goes to the log's real end
        r = store.put_message(Message("orders", b"after"), 0)
        assert r.commitlog_offset == results[-1].commitlog_offset + results[-1].wrote_bytes
    # a reopen knows the range (config/damagedRanges.json), read-only too
    with _open(root, read_only=True) as store:
        assert [(d.start, d.end) for d in store.damaged_ranges] == [(d["start"], d["end"])]


def test_pull_over_damage_says_what_it_skipped(two_segments, tmp_path, caplog):
    """get_message goes on past a unit whose record lies in a damaged range: the skip comes
    back in GetMessageResult.damaged (queue offset and range) and is logged at ERROR."""
    src, results = two_segments
    root = _copy(src, tmp_path / "store")
    _patch(root, 500_000, random.Random(1).randbytes(4096))
    hit = [(i, r) for i, r in enumerate(results) if r.commitlog_offset < 504_096
           and r.commitlog_offset + r.wrote_bytes > 500_000]
    assert hit
    for read_only in (False, True):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="rocketstore.store"), \
                _open(root, read_only=read_only) as store:
            (damaged,) = store.damaged_ranges
            by_queue: dict[tuple[str, int], list[int]] = {}
            for i, r in hit:
                by_queue.setdefault((("orders", "audit")[i % 2], i % 4), []).append(
                    r.queue_offset)
            for (topic, qid), lost in by_queue.items():
                res = store.get_message("g", topic, qid, lost[0], 4)
                assert res.status.name == "FOUND", res.status
                assert [q for q, _ in res.damaged] == lost
                assert {(d.start, d.end) for _, d in res.damaged} == {(damaged.start,
                                                                        damaged.end)}
                assert res.messages[0].queue_offset == lost[-1] + 1
                assert res.next_begin_offset > lost[-1] + 1
            assert sum(f"{damaged.start:,}" in x.getMessage() and x.levelno == logging.ERROR
                       and "skips" in x.getMessage() for x in caplog.records) >= len(hit)


def test_bad_page_through_the_command_line(two_segments, tmp_path):
    """recover --dry-run used to predict 1,048,576 bytes given up and exit 0; dump
    --from-offset 1048576 printed nothing."""
    src, results = two_segments
    root = _copy(src, tmp_path / "store")
    _patch(root, 500_000, random.Random(1).randbytes(4096))
    (root / "abort").touch()
    dry = cli_run("recover", root, "--dry-run")
    assert dry.exit_code == 1 and "Traceback" not in dry.stderr
    assert "would give up 0 CommitLog byte(s)" in dry.stdout
    assert "damaged CommitLog range" in dry.stderr
    seg1 = [r for r in results if r.commitlog_offset >= MiB]
    dump = cli_run("dump", root, "--from-offset", MiB, "--no-body")
    assert dump.exit_code == 0, dump.stderr
    assert [json.loads(x)["commitLogOffset"] for x in dump.stdout.splitlines()] == [
        r.commitlog_offset for r in seg1]
    real = cli_run("recover", root)
    assert real.exit_code == 1 and "damaged CommitLog range" in real.stderr
    assert "gave up 0 CommitLog byte(s)" in real.stdout
    assert len(list((root / "commitlog").iterdir())) == 2
    st = cli_run("stat", root, "--json")
    assert st.exit_code == 1 and "Traceback" not in st.stderr
    assert json.loads(st.stdout)["messages"] == 5000   # the queues keep their units


# ---- 2. a damaged IndexFile that is not the newest --------------------------------------


def test_damaged_older_index_file_is_read_around_then_rebuilt(tmp_path, caplog):
    """A damaged header in an IndexFile that is not the newest: stat, get, dump and query
    refused the store; a writable open dropped the file (a traceback, exit 0) and indexed
    again only from the newest remaining file's end: the dropped file's keys were lost."""
    root = tmp_path / "store"
    results = _write(root, 1500, **INDEX)
    names = sorted(p.name for p in (root / "index").iterdir())
    assert len(names) >= 3
    victim = root / "index" / names[1]
    original = victim.read_bytes()
    with open(victim, "r+b") as f:
        f.seek(36)
        f.write(struct.pack(">i", 999_999))         # indexCount out of range
    for args in (("stat", root), ("dump", root, "--limit", 1),
                 ("get", root, "-t", "orders", "-q", 0, "--offset", 0),
                 ("query", root, "-t", "orders", "-k", "k2")):
        r = cli_run(*args)
        assert "Traceback" not in r.stderr and r.exit_code in (0, 1), (args, r.stderr)
        assert r.exit_code == 0 or "damage found" in r.stderr, (args, r.stderr)
        assert r.stdout.strip(), (args, r.stderr)
    query = cli_run("query", root, "-t", "orders", "-k", "k2")
    assert [json.loads(x)["commitLogOffset"] for x in query.stdout.splitlines()] == [
        results[2].commitlog_offset]
    dump = cli_run("dump", root, "--limit", 1, "--no-body")
    assert json.loads(dump.stdout.splitlines()[0])["commitLogOffset"] == 0
    sample = range(0, 1500, 7)
    msgs = _messages(1500)

    def check(store: MessageStore) -> None:
        for i in sample:
            got = store.query_message(msgs[i][0].topic, f"k{i}").messages
            assert [m.commitlog_offset for m in got] == [results[i].commitlog_offset], i

    with _open(root, read_only=True, **INDEX) as store:
        assert names[1] in store.index_service.damaged_files
        check(store)                # the damaged file's range comes from the CommitLog
    with caplog.at_level(logging.WARNING), _open(root, **INDEX) as store:
        assert any(names[1] in x for x in store.recovery.index_files_repaired)
        check(store)
        assert not store.index_service.holes
    assert not [r for r in caplog.records if r.exc_info], "a traceback in the log"
    # rebuilt with exactly the items it had (the neighbours keep the keys they hold)
    assert victim.read_bytes() == original
    with _open(root, read_only=True, **INDEX) as store:
        assert not store.index_service.damaged_files
        check(store)


def test_index_file_damaged_in_its_slots_is_found_at_query_time(tmp_path):
    """Damage a header check cannot see (garbage in the hash slots of an older file) is
    found by the first query that reads the file (IndexFile.check); that query and later
    ones read its range from the CommitLog, and the next writable open rebuilds it."""
    root = tmp_path / "store"
    results = _write(root, 1200, **INDEX)
    names = sorted(p.name for p in (root / "index").iterdir())
    victim = root / "index" / names[0]
    with open(victim, "r+b") as f:
        f.seek(40 + 4 * 100)
        f.write(random.Random(3).randbytes(4 * 50))
    msgs = _messages(1200)
    with _open(root, **INDEX) as store:
        for i in range(0, 300, 3):
            got = store.query_message(msgs[i][0].topic, f"k{i}").messages
            assert [m.commitlog_offset for m in got] == [results[i].commitlog_offset], i
        assert names[0] in store.index_service.damaged_files
    with _open(root, **INDEX) as store:
        assert any(names[0] in x for x in store.recovery.index_files_repaired)
        assert store.index_service.files[0].check() is None


# ---- 3. a misaligned ConsumeQueue unit ----------------------------------------------------


def test_short_newest_unit_does_not_stop_dispatch(tmp_path):
    """The newest unit of a queue, its size field 8 bytes short: recovery restarted dispatch
    inside a record ("bad magic code") and every later put was stored but never dispatched,
    after every reopen."""
    root = tmp_path / "store"
    results = _write(root, 200)
    qdir = root / "consumequeue" / "orders" / "0"
    seg = sorted(qdir.iterdir())[0]
    n = 50      # orders:0 got messages 0, 4, 8, ...: 50 units
    data = bytearray(seg.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, (n - 1) * 20)
    assert off == results[196].commitlog_offset
    struct.pack_into(">qiq", data, (n - 1) * 20, off, size - 8, tags)
    seg.write_bytes(bytes(data))
    for round_no in range(2):
        with _open(root) as store:
            rs = [store.put_message(Message("orders", b"new%d" % i, keys=[f"n{round_no}-{i}"]),
                                    0) for i in range(5)]
            assert store.wait_dispatched(5)
            got = _pull_all(store, "orders", 0)
            assert got[-5:] == [r.commitlog_offset for r in rs]
            assert results[196].commitlog_offset in got
            for i, r in enumerate(rs):
                found = store.query_message("orders", f"n{round_no}-{i}").messages
                assert [m.commitlog_offset for m in found] == [r.commitlog_offset]
            if round_no == 0:       # cut back to its last good unit, dispatched again
                assert any(q.startswith("orders:0") for q in store.recovery.queues_repaired), \
                    store.recovery.queues_repaired


# ---- 5. header fields the CRC does not cover ---------------------------------------------


def _record_fields(results, i: int) -> tuple[int, int]:
    return results[i].commitlog_offset, results[i].wrote_bytes


@pytest.mark.parametrize("read_only_first", [False, True])
def test_flipped_topic_bit_is_damage(tmp_path, read_only_first):
    """'audit' -> '!udit': a writable open dispatched it (creating its ConsumeQueue
    directory) and then refused it, so every later open failed with ValueError."""
    root = tmp_path / "store"
    results = _write(root, 40)
    phy, size = _record_fields(results, 11)      # an 'audit' record
    body_len = 200
    rec = (root / "commitlog" / f"{0:020d}").read_bytes()[phy:phy + size]
    body_len = struct.unpack_from(">i", rec, 84)[0]
    topic_at = phy + 88 + body_len + 1
    _patch(root, topic_at, b"!")
    for read_only in (read_only_first, not read_only_first, False, True):
        with _open(root, read_only=read_only) as store:
            assert [(d.start, d.end) for d in store.damaged_ranges] == [(phy, phy + size)]
            assert "!udit" not in store.topics()
            assert phy not in {m.commitlog_offset for m in store.scan()}
            assert len(_served(store)) == 39
    assert not (root / "consumequeue" / "!udit").exists()


@pytest.mark.parametrize("read_only_first", [False, True])
@pytest.mark.parametrize("queue_offset", [2**62, 100_000, -5, 9])
def test_damaged_queue_offset_is_damage(tmp_path, queue_offset, read_only_first):
    """QUEUEOFFSET 2^62 made the writable open fail with OverflowError; a large one made
    re-dispatch create every ConsumeQueue file up to it (about 20,000, then EMFILE). One
    that an earlier record of its queue holds (9: the victim's is 12) made the next records
    of the queue look like a gap: intact records were marked damaged instead of it."""
    root = tmp_path / "store"
    results = _write(root, 60)
    victim = 50
    phy, size = _record_fields(results, victim)
    _patch(root, phy + 20, struct.pack(">q", queue_offset))
    (root / "config" / "queueOffsets.json").unlink()    # as after a crash: units rebuilt
    import shutil
    shutil.rmtree(root / "consumequeue")
    (root / "abort").touch()
    for read_only in (read_only_first, not read_only_first, read_only_first):
        with _open(root, read_only=read_only) as store:
            files = sum(len(files) for _, _, files in os.walk(root / "consumequeue"))
            assert files <= 8, files
            served = _served(store)
            assert served == {r.commitlog_offset for i, r in enumerate(results) if i != victim}
            assert (phy, phy + size) in [(d.start, d.end) for d in store.damaged_ranges]


def test_store_host_port_out_of_range_is_damage(tmp_path):
    """A STOREHOST port >= 2^31 made view_message raise OverflowError."""
    root = tmp_path / "store"
    results = _write(root, 20)
    phy, size = _record_fields(results, 7)
    _patch(root, phy + 56 + 8 + 4, struct.pack(">I", 0x9000_0000))
    # the id such a record would have: its port is no TCP port (no such message, no overflow)
    damaged_id = results[7].msg_id[:8] + "90000000" + results[7].msg_id[16:]
    with _open(root, read_only=True) as store:
        assert store.view_message(damaged_id) is None
        assert store.view_message(results[7].msg_id) is None
        assert store.view_message(results[8].msg_id).commitlog_offset == results[8].commitlog_offset
        assert [(d.start, d.end) for d in store.damaged_ranges] == [(phy, phy + size)]
    view = cli_run("view", root, damaged_id)
    errors = [x for x in view.stderr.splitlines() if x.startswith("Error: ")]
    assert view.exit_code == 1 and len(errors) == 1, view.stderr
    assert f"no message with offset msgId {damaged_id}" in errors[0]


def _open_files_under(root: Path) -> tuple[int, int]:
    """(descriptors, mappings) of this process on files under root."""
    prefix = str(root)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(prefix):
                fds += 1
        except OSError:
            pass
    with open("/proc/self/maps") as f:
        maps = sum(1 for line in f if prefix in line)
    return fds, maps


def test_failed_open_releases_its_files(tmp_path):
    """A failed open left about 20 descriptors and mappings open until the garbage collector
    ran: now it closes everything it took before the error leaves open()."""
    import gc
    root = tmp_path / "store"
    _write(root, 300, mapped_file_size_commit_log=64 * 1024)
    (root / "consumequeue" / "orders" / "0" / "notes.txt").write_text("not a segment")
    gc.collect()
    gc.disable()
    try:
        for read_only in (False, True):
            with pytest.raises(StoreFormatError, match="notes.txt"):
                _open(root, read_only=read_only)
            assert _open_files_under(root) == (0, 0)
    finally:
        gc.enable()


# ---- 6. smaller ---------------------------------------------------------------------------


def test_damaged_consume_queue_reads_right_in_a_read_only_stat(tmp_path):
    """A damaged ConsumeQueue showed zero messages in a read-only stat (a writable open
    rebuilt it correctly)."""
    root = tmp_path / "store"
    _write(root, 400)
    seg = sorted((root / "consumequeue" / "orders" / "2").iterdir())[0]
    data = bytearray(seg.read_bytes())
    data[0:200] = bytes(200)                       # the first ten units zeroed
    seg.write_bytes(bytes(data))
    st = cli_run("stat", root, "--json")
    assert st.exit_code == 1 and "ConsumeQueue" in st.stderr
    queues = {(t["topic"], q["queueId"]): q["messages"]
              for t in json.loads(st.stdout)["topics"] for q in t["queues"]}
    assert queues[("orders", 2)] == 100 and sum(queues.values()) == 400
    with _open(root, read_only=True) as store:
        assert len(_pull_all(store, "orders", 2)) == 100
    with _open(root) as store:
        assert len(_pull_all(store, "orders", 2)) == 100


@pytest.mark.parametrize("text", ['{"offsetTable": {"t@g": {"0": null}}}', "{nope", "\x00\xff"])
def test_bad_consumer_offsets_file_is_a_one_line_error(tmp_path, text):
    root = tmp_path / "store"
    _write(root, 10)
    (root / "config" / "consumerOffset.json").write_text(text, errors="surrogateescape")
    r = cli_run("offsets", root)
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1
    assert "consumerOffset.json" in r.stderr


def test_short_last_segment_is_read_up_to_its_cut(tmp_path):
    """A last segment truncated to a non-segment size made every command refuse the store,
    dump included, with no way to read the intact segments before it."""
    root = tmp_path / "store"
    results = _write(root, 600, mapped_file_size_commit_log=64 * 1024)
    segs = sorted((root / "commitlog").iterdir())
    cut = 10_000
    os.truncate(segs[-1], cut)
    end = int(segs[-1].name) + cut
    kept = [r for r in results if r.commitlog_offset + r.wrote_bytes <= end]
    dump = cli_run("dump", root, "--no-body")
    assert dump.exit_code == 1 and segs[-1].name in dump.stderr
    assert len(dump.stdout.splitlines()) == len(kept)
    st = cli_run("stat", root)
    assert st.exit_code == 1 and "Traceback" not in st.stderr
    with _open(root, mapped_file_size_commit_log=64 * 1024) as store:
        assert [m.commitlog_offset for m in store.scan()] == [r.commitlog_offset for r in kept]
        assert store.put_message(Message("orders", b"x"), 0).ok
    assert os.path.getsize(segs[-1]) == 64 * 1024
    with _open(root, read_only=True) as store:
        assert _served(store) >= {r.commitlog_offset for r in kept}


def test_columnar_reads_skip_damage(two_segments, tmp_path):
    """read_range (and the record-aligned ranges Spark plans) return every intact record
    around a damaged range, each once."""
    src, results = two_segments
    root = _copy(src, tmp_path / "store")
    _patch(root, 500_000, random.Random(1).randbytes(4096))
    intact = [r.commitlog_offset for r in results if r.commitlog_offset >= 504_096
              or r.commitlog_offset + r.wrote_bytes <= 500_000]
    for read_only in (True, False):
        with _open(root, read_only=read_only) as store:
            got = store.read_range_table(0, include_body=False).column(
                "commitlog_offset").to_pylist()
            assert got == intact
            ranges = store.plan_ranges(100_000)
            pieces = [o for a, b in ranges for o in store.read_range_table(
                a, b, include_body=False, align=False).column("commitlog_offset").to_pylist()]
            assert pieces == intact
            assert store.align_to_record(500_100) == min(o for o in intact if o > 500_000)
