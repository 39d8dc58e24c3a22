"""Crash tests: writer processes (tests/crash_writer.py) are killed with SIGKILL at random
moments (fixed seed) while several threads put messages; then the store is reopened here and
checked against what the writers were told (PUT_OK lines) and against an independent decode
of the files (tests/refcodec.py).

What every verification checks (``_verify``):
- recovery was abnormal when a writer had the store open at the kill (abort file left);
- the CommitLog decodes cleanly with the reference codec (CRC checked) up to the store's end,
  the native scan (check_crc) agrees record for record, and every record is byte-identical
  (body, properties, topic, queue id, flag) to the message its X-SEQ property names, once;
- every acknowledged message is there, at the offset, queue id and queue offset it was given
  (SYNC_FLUSH; also ASYNC_FLUSH without the transient pool, since SIGKILL does not lose the
  page cache); with the transient store pool, acknowledged but uncommitted messages may be
  lost, as a suffix of the log or in damaged ranges;
- the store's end and damaged ranges are what an independent walk under the damage policy
  finds (refcodec.walk_commitlog); damage only with the transient pool (its commit memcpy
  may write the end of a range first), where the lost records' offsets become blank units;
- queue offsets are dense per queue (0..n-1, each once, in CommitLog order) but for records
  lost in damaged bytes;
- every ConsumeQueue unit (store API and the files read by refcodec) points at the record with
  that topic, queue and queue offset, with its size and tags code;
- every key (KEYS tokens, UNIQ_KEY) is found by query_message, and the raw index lookup of a
  unique key gives exactly that record (no stale or duplicated items);
- new puts get the next queue offsets, are dispatched and indexed; a clean shutdown removes
  the abort file and writes the checkpoint.

Rounds run in series on one store directory; sometimes a second writer is started on the
crashed store before verifying (it recovers, writes, and may itself be killed during its
recovery), and with SYNC_FLUSH sometimes the "lost unflushed tail" of a power failure is
simulated by zeroing the CommitLog after the last acknowledged record. After every kill: no
0-byte segment; after every open: no '.<name>.creating' leftover.

These rounds found (all fixed since, each with a deterministic regression test in
test_durability.py): 0-byte segments from a kill during file creation that made the store
unopenable; records torn inside their properties kept by recovery; IndexFiles with a zero
header re-indexing everything (duplicated items); records before the replay start lost from
the index; leaked '.creating' files.

Set CRASH_KEEP=1 to keep a copy of each store as recovery found it (for debugging).
"""
from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crash_writer as cw
import helpers
import pytest
import refcodec

import rocketstore
from rocketstore import MessageStore
from rocketstore.message import GetMessageStatus, PutMessageStatus

PACKAGE_PARENT = Path(rocketstore.__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
WRITER = TESTS / "crash_writer.py"
SEED = 20261122


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the rocketstore this test imported (an in-place build, or the installed package in CI;
    # the repository root would shadow an installed package with uncompiled sources)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT), *helpers.TEST_PATHS,
                                         env.get("PYTHONPATH", "")])
    env["OPENBLAS_NUM_THREADS"] = "1"       # the fork server forks: keep it single-threaded
    env["OMP_NUM_THREADS"] = "1"
    return env


def _no_core() -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class ForkServer:
    """crash_writer.py serve: forks pre-imported writers (no interpreter start-up per round)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), "serve"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, text=True, env=_child_env(), cwd=str(TESTS),
            preexec_fn=_no_core)

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError("fork server did not answer")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server exited ({self.proc.poll()})")
        return json.loads(line)

    def run(self, spec: dict[str, Any], kill_after: float | None) -> tuple[int, int]:
        """Fork a writer; SIGKILL it kill_after seconds later. (exit code, signal)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()
        pid = self._read(30)["pid"]
        if kill_after is not None:
            time.sleep(kill_after)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            done = self._read(120)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise
        assert done["pid"] == pid
        return done["exit"], done["signal"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_direct(spec: dict[str, Any], kill_after_ready: float | None) -> tuple[int, int]:
    """The writer in a fresh interpreter; SIGKILL it kill_after_ready s after READY."""
    proc = subprocess.Popen([sys.executable, str(WRITER), "run", json.dumps(spec)],
                            env=_child_env(), cwd=str(TESTS), preexec_fn=_no_core)
    try:
        if kill_after_ready is not None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if os.path.exists(spec["out"]) and b"READY" in Path(spec["out"]).read_bytes():
                    break
                time.sleep(0.005)
            time.sleep(kill_after_ready)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        rc = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (rc, 0) if rc >= 0 else (0, -rc)


@pytest.fixture(scope="module")
def fork_server():
    server = ForkServer()
    yield server
    server.close()


# ---- bookkeeping ---------------------------------------------------------------------------

@dataclass
class Acked:
    offset: int
    size: int
    queue_id: int
    queue_offset: int
    msg_id: str


@dataclass
class WriterRun:
    ready: bool = False
    done: bool = False
    acked: dict[tuple[str, int, int], Acked] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def parse_output(path: str) -> WriterRun:
    run = WriterRun()
    if not os.path.exists(path):
        return run
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "READY":
            run.ready = True
        elif parts[0] == "DONE":
            run.done = True
        elif parts[0] == "OK":
            if len(parts) < 9:      # a line the kill cut short: not an acknowledgement
                continue
            wid, tid, seq, off, size, qid, qoff, mid = parts[1:9]
            run.acked[(wid, int(tid), int(seq))] = Acked(int(off), int(size), int(qid),
                                                         int(qoff), mid)
        elif parts[0] == "ERROR":
            run.errors.append(line)
    return run


def seq_key(props: dict[str, str]) -> tuple[str, int, int]:
    wid, tid, seq = props["X-SEQ"].split(":")
    return wid, int(tid), int(seq)


@dataclass
class Series:
    """One store directory crashed again and again, and what must be in it."""

    root: str
    cfg: dict[str, Any]                     # crash_writer spec keys fixed for the series
    acked: dict[tuple[str, int, int], Acked] = field(default_factory=dict)
    parent_puts: int = 0
    verified: int = 0

    def spec(self, wid: str, out: str, **extra: Any) -> dict[str, Any]:
        return {**self.cfg, "root": self.root, "out": out, "wid": wid, **extra}


# ---- damage: the "lost unflushed tail" of a power failure ---------------------------------

def zero_after(root: str, offset: int, file_size: int) -> int:
    """Zero the CommitLog from offset on (the rest of its file and every later file, which
    stay as preallocated zero files). Returns the bytes that were not already zero."""
    changed = 0
    for seg in sorted((Path(root) / "commitlog").iterdir()):
        if not seg.name.isdigit():
            continue        # a hidden '.<name>.creating' leftover
        start = int(seg.name)
        if start + file_size <= offset:
            continue
        pos = max(0, offset - start)
        with open(seg, "r+b") as f:
            f.seek(pos)
            old = f.read(file_size - pos)
            changed += len(old) - old.count(0)
            f.seek(pos)
            f.write(bytes(file_size - pos))
    return changed


def empty_segments(root: str) -> list[str]:
    """0-byte CommitLog / ConsumeQueue segments: there must be none, whenever the kill came
    (files are created under a hidden name and renamed in, so a kill inside MappedFile
    creation leaves no empty segment that would make the next open refuse the store)."""
    found = []
    for base in (Path(root) / "commitlog", Path(root) / "consumequeue"):
        for dirpath, _, names in os.walk(base):
            found += [os.path.join(dirpath, n) for n in names
                      if n.isdigit() and os.path.getsize(os.path.join(dirpath, n)) == 0]
    return found


def _hidden_files(root: str) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names
                if n.startswith(".") and n.endswith(".creating")]
    return out


# ---- verification --------------------------------------------------------------------------

def _check_collision(store, topic: str, key: str, phy: int,
                     by_offset: dict[int, refcodec.RefRecord], label: str) -> None:
    """A raw index hit for topic#key at phy that is not the key's record must be a record
    with a key of the same hash (31-bit hashes do collide), never a stale item."""
    want = refcodec.index_key_hash(f"{topic}#{key}")
    rec = by_offset.get(phy)
    assert rec is not None, (
        f"{label}: index item for {topic}#{key} points at {phy}, not a record start (stale)")
    hashes = {refcodec.index_key_hash(f"{rec.topic}#{k}")
              for k in [*(rec.keys or "").split(), rec.uniqKey] if k}
    assert want in hashes, (
        f"{label}: index item for {topic}#{key} points at {phy}, a record with other keys "
        f"({rec.keys!r}, {rec.uniqKey!r}): stale index item")


def _verify(series: Series, *, expect_abnormal: bool | None, all_acked_kept: bool,
            label: str, new_keys: set[tuple[str, int, int]] | None = None) -> dict[str, Any]:
    root, cfg = series.root, series.cfg
    calls: list[tuple[int, int]] = []
    store = MessageStore.open(root, cw.store_config({**cfg, "root": root}),
                              progress=lambda d, t: calls.append((d, t)))
    try:
        rep = store.recovery
        assert rep is not None
        assert os.path.exists(os.path.join(root, "abort")), f"{label}: no abort file while open"
        if expect_abnormal is not None:
            assert rep.abnormal is expect_abnormal, f"{label}: {rep}"
        assert rep.stop_status in ("end", "corrupt"), rep
        # -- leftovers of a file creation the kill interrupted (hidden '.<name>.creating'
        # files, a whole segment each) are removed at open (a leak found by these rounds)
        assert not _hidden_files(root), f"{label}: leftovers kept: {_hidden_files(root)}"
        # -- the CommitLog, decoded independently (CRC checked) under the damage policy
        # (README "Integrity"); the store's end and damaged ranges agree, the native scan
        # (which skips damage) agrees record for record
        walk = refcodec.walk_commitlog(root, cfg["cl_size"])
        records = walk.records
        max_phy = store.get_max_phy_offset()
        assert rep.end_offset == max_phy
        assert max_phy == walk.end, (
            f"{label}: store ends at {max_phy}, records end at {walk.end} ({rep})")
        assert [(d["start"], d["end"]) for d in rep.damaged_ranges] == walk.damaged, (
            label, rep.damaged_ranges, walk.damaged)
        # SIGKILL keeps the page cache: only the pool's copy into the file (a memcpy that
        # may write its end first) can leave a hole before valid records
        assert not walk.damaged or cfg.get("pool"), (label, walk.damaged)
        damaged_bytes = sum(b - a for a, b in walk.damaged)
        native = [(m.commitlog_offset, m.store_size, bytes(m.body), m.properties)
                  for m in store.scan(check_crc=True)]
        assert [n[:2] for n in native] == [(r.commitLogOffset, r.storeSize) for r in records]
        # -- every record is the message its X-SEQ names, byte for byte, once
        by_key: dict[tuple[str, int, int], refcodec.RefRecord] = {}
        by_offset = {r.commitLogOffset: r for r in records}
        for r, n in zip(records, native, strict=True):
            key = seq_key(r.properties)
            assert key not in by_key, f"{label}: {key} stored twice"
            by_key[key] = r
            d = cw.derive(*key)
            assert r.body == d["body"] == n[2], f"{label}: body of {key} differs"
            assert r.properties == d["properties"] == n[3], f"{label}: properties of {key}"
            assert (r.topic, r.queueId, r.flag) == (d["topic"], d["queue_id"], d["flag"])
        # -- acknowledged messages
        lost = []
        for key, a in series.acked.items():
            r = by_key.get(key)
            if r is None:
                in_damage = any(lo <= a.offset < hi for lo, hi in walk.damaged)
                if all_acked_kept or (a.offset + a.size <= max_phy and not in_damage):
                    pytest.fail(f"{label}: acknowledged message {key} at {a.offset} lost "
                                f"(end {max_phy}, {rep})")
                lost.append(key)
                continue
            assert (r.commitLogOffset, r.storeSize, r.queueId, r.queueOffset, r.msgId) == (
                a.offset, a.size, a.queue_id, a.queue_offset, a.msg_id), (label, key)
        for key in lost:
            del series.acked[key]
        # -- dense queue offsets, ConsumeQueues agree with the log
        queues: dict[tuple[str, int], list[refcodec.RefRecord]] = defaultdict(list)
        for r in records:
            queues[(r.topic, r.queueId)].append(r)
        next_offsets: dict[tuple[str, int], int] = {}
        for (topic, qid), recs in queues.items():
            # dense, but for the records lost in damaged bytes (blank units stand for them)
            offsets = [r.queueOffset for r in recs]
            assert offsets == sorted(set(offsets)), f"{label}: {topic}/{qid} offsets repeat"
            missing = offsets[-1] + 1 - len(offsets)
            assert missing * 91 <= damaged_bytes, (
                f"{label}: queue offsets of {topic}/{qid} are not dense")
            by_qoff = {r.queueOffset: r for r in recs}
            want = [(by_qoff[q].commitLogOffset, by_qoff[q].storeSize, by_qoff[q].tagsCode)
                    if q in by_qoff else (0, 0x7FFFFFFF, 0) for q in range(offsets[-1] + 1)]
            next_offsets[(topic, qid)] = offsets[-1] + 1
            cq = store.consume_queues.find(topic, qid)
            assert cq is not None and cq.min_offset == 0 and cq.max_offset == len(want), (
                label, topic, qid, cq, len(want))
            got: list[tuple[int, int, int]] = []
            while len(got) < len(want):
                units = cq.read_units(len(got), 4096)
                assert units is not None, (label, topic, qid, len(got))
                got += [(int(u["offset"]), int(u["size"]), int(u["tags_code"])) for u in units]
            assert got == want, f"{label}: ConsumeQueue {topic}/{qid} differs from the log"
            on_disk = refcodec.read_consume_queue(Path(root) / "consumequeue" / topic / str(qid))
            assert on_disk == want, f"{label}: ConsumeQueue files of {topic}/{qid}"
            res = store.get_message("crash-check", topic, qid, 0, 8)
            assert res.status == GetMessageStatus.FOUND
            assert [m.commitlog_offset for m in res.messages] == [r.commitLogOffset
                                                                    for r in recs[:8]]
        for cq in store.consume_queues.all():
            if (cq.topic, cq.queue_id) not in queues:
                assert cq.max_offset == 0, f"{label}: {cq} has units but no records"
        # -- IndexFile: every key finds its record; unique keys find exactly it
        store.wait_dispatched()
        for r in records:
            if new_keys is not None and seq_key(r.properties) not in new_keys \
                    and random.random() > 0.2:
                continue    # older records were checked in earlier rounds: sample them
            keys = (r.keys or "").split()
            for key in [*keys, r.uniqKey]:
                found = store.query_message(r.topic, key, 64).messages
                if r.commitLogOffset not in [m.commitlog_offset for m in found]:
                    pytest.fail(f"{label}: query_message({r.topic!r}, {key!r}) misses "
                                f"{r.commitLogOffset} ({rep})")
                if not key.startswith("G"):
                    raw = store.index_service.query_offsets(r.topic, key, 64, 0, 2**62)
                    count = raw.count(r.commitLogOffset)
                    assert count == 1, (
                        f"{label}: raw index lookup of {key!r} gives {raw}: "
                        f"{r.commitLogOffset} missing or duplicated")
                    for other in raw:
                        if other != r.commitLogOffset:
                            _check_collision(store, r.topic, key, other, by_offset, label)
        # -- progress callback followed the scan
        if rep.files_scanned:
            assert calls and all(t == calls[0][1] for _, t in calls)
            assert [d for d, _ in calls] == sorted(d for d, _ in calls)
        # -- new puts continue every queue
        wid = f"P{series.parent_puts}"
        series.parent_puts += 1
        seq = 0
        for topic in cw.TOPICS:
            for qid in range(cw.QUEUES):
                expected_qoff = next_offsets.get((topic, qid), 0)
                assert store.next_queue_offset(topic, qid) == expected_qoff, (label, topic, qid)
                while True:     # a message for this queue, derived like the writers' ones
                    d = cw.derive(wid, 0, seq)
                    seq += 1
                    if (d["topic"], d["queue_id"]) == (topic, qid):
                        break
                r = store.put_message(cw.make_message(d), qid)
                assert r.status == PutMessageStatus.PUT_OK, (label, r.status)
                assert r.queue_offset == expected_qoff, (label, topic, qid)
                series.acked[(wid, 0, seq - 1)] = Acked(
                    r.commitlog_offset, r.wrote_bytes, qid, r.queue_offset, r.msg_id)
                put_end = r.commitlog_offset + r.wrote_bytes
        # with the transient store pool the puts are visible (and dispatched) once committed;
        # wait_dispatched alone does not wait for that (see test_durability.py::
        # test_wait_dispatched_waits_for_the_commit)
        deadline = time.monotonic() + 10
        while store.get_max_phy_offset() < put_end:
            assert time.monotonic() < deadline, f"{label}: puts never committed"
            time.sleep(0.005)
        assert store.wait_dispatched()
        for topic in cw.TOPICS:
            for qid in range(cw.QUEUES):
                cq = store.consume_queues.find(topic, qid)
                assert cq is not None and cq.max_offset == next_offsets.get((topic, qid), 0) + 1, (
                    f"{label}: the new put to {topic}/{qid} got no ConsumeQueue unit ({cq}, "
                    f"{rep})")
        last = store.look_message_by_offset(
            max(a.offset for a in series.acked.values()))
        assert last is not None and last.properties["X-SEQ"].startswith(wid)
        assert store.query_message(last.topic, last.uniq_key).messages
        last_ts = last.store_timestamp
    finally:
        store.shutdown()
    assert not os.path.exists(os.path.join(root, "abort")), f"{label}: abort file left"
    cp = refcodec.read_checkpoint(os.path.join(root, "checkpoint"))
    assert cp["physicMsgTimestamp"] == last_ts, (label, cp, last_ts)
    series.verified += 1
    return {"records": len(records), "report": rep, "acked_lost": len(lost)}


# ---- the rounds ----------------------------------------------------------------------------

def _series_config(rng: random.Random, flush: str, **extra: Any) -> dict[str, Any]:
    cfg = {
        "flush": flush,
        "cl_size": rng.choice([64 * 1024, 96 * 1024, 128 * 1024]),
        "cq_size": 20 * rng.choice([40, 64, 128]),
        "slots": rng.choice([32, 64, 97]),
        "index_num": rng.choice([200, 300, 1000]),
    }
    cfg.update(extra)
    return cfg


def _writer_extra(rng: random.Random, flush: str, pool: bool) -> dict[str, Any]:
    threads = rng.randint(1, 5)
    return {
        "threads": threads,
        "batch_threads": [t for t in range(threads) if rng.random() < 0.25],
        # enough that most writers are still writing when the kill comes (0.04-0.25 s for
        # ASYNC_FLUSH): a writer that finishes first is verified but tests no crash. The pace
        # (at least twice the longest kill delay for the whole run) keeps that true on a
        # machine, or a put path, fast enough to write them all first
        "max_per_thread": 800 if flush == "SYNC_FLUSH" else 8000,
        "min_seconds": 0.9 if flush == "SYNC_FLUSH" else 0.5,
    }


def _kill_delay(rng: random.Random, flush: str) -> float:
    r = rng.random()
    if r < 0.15:
        return rng.uniform(0.0, 0.04)     # during open / recovery / the first puts
    return rng.uniform(0.04, 0.45 if flush == "SYNC_FLUSH" else 0.25)


def crash_rounds(tmp_path: Path, runner, rounds: int, seed: int, flushes: list[str], *,
                 rounds_per_series: int = 6, pool_every: int = 0, warm_every: int = 0
                 ) -> dict[str, int]:
    """Run `rounds` killed writers in series of `rounds_per_series` on one store; verify after
    each (or after a chained second writer)."""
    rng = random.Random(seed)
    random.seed(seed)
    stats = defaultdict(int)
    series: Series | None = None
    done_in_series = 0
    n_series = 0
    pending: dict[tuple[str, int, int], Acked] = {}
    # is the abort file there? "abort" / "clean" / None (unknown: a writer was killed
    # between creating it and saying READY)
    state: str | None = "clean"
    round_no = 0
    while round_no < rounds:
        if series is None or done_in_series >= rounds_per_series:
            flush = flushes[n_series % len(flushes)]
            extra: dict[str, Any] = {}
            if pool_every and n_series % pool_every == pool_every - 1:
                flush = "ASYNC_FLUSH"
                extra.update(pool=True, pool_size=rng.choice([2, 3]))
            if warm_every and n_series % warm_every == warm_every - 1:
                extra.update(warm=True)
            series = Series(str(tmp_path / f"s{n_series}"), _series_config(rng, flush, **extra))
            n_series += 1
            done_in_series = 0
            state = "clean"
        cfg = series.cfg
        flush = cfg["flush"]
        pool = bool(cfg.get("pool"))
        wid = f"w{round_no}"
        out = str(tmp_path / f"out-{round_no}")
        spec = series.spec(wid, out, **_writer_extra(rng, flush, pool))
        delay = _kill_delay(rng, flush)
        exit_code, sig = runner(spec, delay)
        round_no += 1
        done_in_series += 1
        stats["rounds"] += 1
        run = parse_output(out)
        assert not run.errors, run.errors
        assert sig == signal.SIGKILL or (exit_code == 0 and run.done), (
            f"writer {wid} ended with exit {exit_code}, signal {sig}")
        stats["killed"] += sig == signal.SIGKILL
        stats["killed_before_ready"] += not run.ready
        stats["acked"] += len(run.acked)
        series.acked.update(run.acked)
        pending.update(run.acked)
        if run.ready:
            state = "clean" if run.done else "abort"
        elif state != "abort":
            state = None
        if sig == signal.SIGKILL:
            assert not empty_segments(series.root), f"writer {wid} left 0-byte segments"
            stats["creating_leftovers"] += len(_hidden_files(series.root))
        # with the transient store pool an acknowledged message may be lost, and a second
        # writer would reuse its offsets: verify after every pool writer
        if not pool and round_no < rounds and done_in_series < rounds_per_series \
                and rng.random() < 0.2:
            stats["chained"] += 1
            continue        # another writer recovers this crashed store before we look
        if flush == "SYNC_FLUSH" and state == "abort" and rng.random() < 0.3 and series.acked:
            floor = max(a.offset + a.size for a in series.acked.values())
            if zero_after(series.root, floor + rng.randint(0, 6000), cfg["cl_size"]):
                stats["lost_tail"] += 1
        if os.environ.get("CRASH_KEEP"):        # debugging: keep the store as recovery saw it
            shutil.copytree(series.root, f"{series.root}.before-{round_no}")
        checked = _verify(series, expect_abnormal={"abort": True, "clean": False}.get(state),
                all_acked_kept=not pool,
                label=f"round {round_no} ({flush}{', pool' if pool else ''}"
                      f"{', warm' if cfg.get('warm') else ''}, delay {delay:.3f})",
                new_keys=set(pending))
        stats["verified"] += 1
        stats["abnormal"] += state == "abort"
        stats["acked_lost_uncommitted"] += checked["acked_lost"]     # pool only

        pending = {}
        state = "clean"
    print(f"crash rounds (seed {seed}): {dict(stats)}")
    return dict(stats)


# ---- tests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_crash_rounds(tmp_path, fork_server, flush):
    """26 killed writers per flush mode (52 in all) with a fixed seed."""
    seed = SEED + (0 if flush == "SYNC_FLUSH" else 1)
    stats = crash_rounds(tmp_path, fork_server.run, 26, seed, [flush])
    assert stats["rounds"] == 26
    assert stats["killed"] >= 20, stats        # most runs are killed before their limit
    assert stats["abnormal"] >= 10, stats
    assert stats["acked"] > 1000, stats


def test_crash_transient_store_pool(tmp_path):
    """ASYNC_FLUSH with the transient store pool, writers in fresh interpreters: acknowledged
    but uncommitted messages may be lost, only as a suffix; everything else holds."""
    stats = crash_rounds(tmp_path, lambda spec, d: run_direct(spec, d), 3, SEED + 2,
                         ["ASYNC_FLUSH"], rounds_per_series=3, pool_every=1)
    assert stats["rounds"] == 3 and stats["verified"] >= 2


def test_crash_warm_mapped_files(tmp_path):
    """SYNC_FLUSH with warm_mapped_file_enable (files warmed by the allocate service)."""
    stats = crash_rounds(tmp_path, lambda spec, d: run_direct(spec, d), 2, SEED + 3,
                         ["SYNC_FLUSH"], rounds_per_series=2, warm_every=1)
    assert stats["rounds"] == 2 and stats["verified"] >= 1


@pytest.mark.slow
def test_crash_rounds_many(tmp_path, fork_server):
    """40 killed writers: SYNC and ASYNC series, every fourth series with the transient store
    pool, every fifth with warm mapped files (about 25 s: a round costs ~0.6 s of the suite's
    25-minute budget, which the suite had gone over with 160, 96 and 64)."""
    stats = crash_rounds(tmp_path, fork_server.run, 40, SEED + 100,
                         ["SYNC_FLUSH", "ASYNC_FLUSH"], rounds_per_series=8,
                         pool_every=4, warm_every=5)
    assert stats["rounds"] == 40
    assert stats["killed"] >= 33, stats
