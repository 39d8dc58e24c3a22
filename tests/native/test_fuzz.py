"""Fuzzing: thousands of random corruptions (truncation, zeroed ranges, bit flips, int32
overwrites of header fields) of CommitLog segments.

(a) On raw bytes, record.scan_region / record_status / decode_message never crash and only call
    "ok" what the independent reference decoder (refcodec) accepts too.
(b) MessageStore.open on a corrupted copy of a store either succeeds, and then everything it
    scans is a valid record with its CRC and the store works on, or raises a clear Python
    exception. Never a crash.

Both run in child processes (fixed seeds), so a segfault is a test failure and not the end of
the test run. The functions below are what the children run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import sys
from pathlib import Path

import pytest
import refcodec
from helpers import assert_no_signal, native_dict, open_store, ref_dict, run_python
from rocketmq_fixture import FIXTURE_DIR

from rocketstore import CorruptRecordError, Message
from rocketstore._native import record

BYTES_CASES = 6000  # split over the seeds below
BYTES_SEEDS = (101, 202, 303)
STORE_CASES = 50
STORE_SEED = 4242
FIXTURE_COMMITLOG = FIXTURE_DIR / "store" / "commitlog"
INT32_SPECIALS = (0, 1, -1, 7, 8, 90, 91, 92, 2**31 - 1, -(2**31), 0x7FFF, 0xFFFF, 65536)
HOSTS4 = ("10.0.0.1:1000", "192.168.7.9:65535")
HOSTS6 = ("[fd00::a]:10911", "[2001:db8::1]:7")
FuzzSegment = tuple[int, bytes, list[refcodec.RefRecord]]


# ---------------------------------------------------------------------------- the corpus


def build_small_store(root: str | os.PathLike[str]) -> None:
    """A deterministic small store over several 64 KiB segments: every record shape."""
    rng = random.Random(99)
    with open_store(root) as store:
        for i in range(220):
            body = rng.randbytes(rng.choice((0, 1, 17, 300, 1500, 2900)))
            msg = Message(
                rng.choice(("orders", "audit", "%RETRY%g1", "T" * 127)),
                body,
                tags=rng.choice((None, "paid", "订单", "📦")),
                keys=rng.choice((None, [f"k{i}"], ["a", "🔑b"])),
                properties=rng.choice((None, {"region": "华东"}, {"n": str(i)})),
                flag=rng.choice((0, -1, 2**31 - 1)),
                born_host=rng.choice((None, *HOSTS4, *HOSTS6)),
                store_host=rng.choice((None, None, *HOSTS6)),
                sys_flag=rng.choice((0, 0, 0, 4, 8, 12)),
                reconsume_times=rng.choice((0, 3)),
            )
            if rng.random() < 0.2:
                r = store.put_messages([msg, Message("audit", b"b" * 50)], [i % 3, 0])
            else:
                r = store.put_message(msg, i % 3)
            assert r.ok, r


def load_segments(commitlog: Path) -> list[FuzzSegment]:
    """(base offset, bytes, records) of each segment, records decoded by refcodec."""
    out = []
    for p in sorted(commitlog.iterdir()):
        data = p.read_bytes()
        base = int(p.name)
        recs, pos = [], 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">iI", data, pos)
            if magic != refcodec.MESSAGE_MAGIC:
                break
            rec = refcodec.decode_record(data, pos)
            recs.append(rec)
            pos += size
        out.append((base, data, recs))
    return out


# ---------------------------------------------------------------------------- corruptions


def _field_offsets(rec: refcodec.RefRecord, base: int) -> dict[str, tuple[int, int]]:
    """Absolute positions (in the segment) and widths of a record's header fields."""
    start = rec.commitLogOffset - base
    bh = 16 if rec.sysFlag & 0x10 else 4
    sh = 16 if rec.sysFlag & 0x20 else 4
    body_len_at = 48 + bh + 4 + 8 + sh + 4 + 4 + 8
    topic_at = body_len_at + 4 + rec.bodyLen
    fields = {
        "size": (0, 4),
        "magic": (4, 4),
        "crc": (8, 4),
        "queue_id": (12, 4),
        "flag": (16, 4),
        "queue_offset": (20, 8),
        "phy": (28, 8),
        "sys_flag": (36, 4),
        "born_ts": (40, 8),
        "born_port": (48 + bh, 4),
        "store_ts": (48 + bh + 4, 8),
        "body_len": (body_len_at, 4),
        "topic_len": (topic_at, 1),
        "props_len": (topic_at + 1 + len(rec.topic.encode()), 2),
    }
    return {k: (start + off, width) for k, (off, width) in fields.items()}


def _protected(recs: list[refcodec.RefRecord], base: int) -> set[int]:
    """Bytes of each record's QUEUEID: a huge stored queue id is a separate, known bug (see
    test_store_basic.test_largest_queue_id_does_not_crash); full-store fuzzing keeps them."""
    out: set[int] = set()
    for r in recs:
        at = r.commitLogOffset - base + 12
        out.update(range(at, at + 4))
    return out


def corrupt(
    rng: random.Random,
    data: bytes,
    base: int,
    recs: list[refcodec.RefRecord],
    *,
    allow_truncate: bool,
    protect: set[int] | frozenset[int] = frozenset(),
) -> tuple[bytearray, list[str]]:
    buf = bytearray(data)
    used = (recs[-1].commitLogOffset - base + recs[-1].storeSize) if recs else 64
    used = min(len(buf), used + 16)
    done = []
    kinds = ["zero", "flip", "field", "field", "random", "copy", "blank"]
    if allow_truncate:
        kinds.append("truncate")
    for _ in range(rng.choice((1, 1, 2, 3))):
        kind = rng.choice(kinds)
        if kind == "truncate":
            cut = rng.randrange(0, len(buf) + 1) if rng.random() < 0.3 else rng.randrange(used)
            del buf[cut:]
            done.append(f"truncate@{cut}")
        elif kind == "zero" and buf:
            at = rng.randrange(len(buf) if rng.random() < 0.2 else max(1, min(used, len(buf))))
            n = rng.choice((1, 4, 8, 50, 500, 5000))
            # keep protected bytes as they are (zero is harmless there anyway)
            buf[at : at + n] = bytes(len(buf[at : at + n]))
            done.append(f"zero@{at}+{n}")
        elif kind == "flip" and buf:
            for _ in range(rng.choice((1, 1, 2, 8))):
                if recs and rng.random() < 0.6:
                    r = rng.choice(recs)
                    at = r.commitLogOffset - base + rng.randrange(min(r.storeSize, 120))
                else:
                    at = rng.randrange(min(used, len(buf)))
                if at < len(buf) and at not in protect:
                    buf[at] ^= 1 << rng.randrange(8)
                    done.append(f"flip@{at}")
        elif kind == "field" and recs:
            r = rng.choice(recs)
            fields = _field_offsets(r, base)
            name = rng.choice(sorted(fields))
            at, width = fields[name]
            if any(a in protect for a in range(at, at + width)) or at + width > len(buf):
                continue
            if width == 1:
                buf[at] = rng.randrange(256)
            elif width == 2:
                buf[at : at + 2] = struct.pack(">H", rng.randrange(65536))
            else:
                choices = (
                    *INT32_SPECIALS,
                    r.storeSize - 1,
                    r.storeSize + 1,
                    2 * r.storeSize,
                    len(buf),
                    r.bodyLen + 1,
                    rng.randrange(-(2**31), 2**31),
                )
                value = rng.choice(choices) & 0xFFFFFFFF
                if name == "magic":
                    value = rng.choice((refcodec.BLANK_MAGIC, value))
                buf[at + width - 4 : at + width] = struct.pack(">I", value)
                if width == 8 and rng.random() < 0.5:
                    buf[at : at + 4] = struct.pack(">I", rng.randrange(2**32))
            done.append(f"{name}@{at}")
        elif kind == "random" and buf:
            at = rng.randrange(min(used, len(buf)))
            n = rng.choice((1, 3, 16, 200))
            for i in range(at, min(at + n, len(buf))):
                if i not in protect:
                    buf[i] = rng.randrange(256)
            done.append(f"random@{at}+{n}")
        elif kind == "copy" and len(recs) >= 2:
            # a whole valid record in the wrong place: its PHYSICALOFFSET no longer matches
            src, dst = rng.sample(recs, 2)
            s_at, d_at = src.commitLogOffset - base, dst.commitLogOffset - base
            chunk = data[s_at : s_at + src.storeSize]
            if not (set(range(d_at, d_at + len(chunk))) & protect) and d_at + len(chunk) <= len(
                buf
            ):
                buf[d_at : d_at + len(chunk)] = chunk
                done.append(f"copy{s_at}->{d_at}")
        elif kind == "blank" and recs:
            # an END_FILE marker where a record was, with a random remaining size
            r = rng.choice(recs)
            at = r.commitLogOffset - base
            remaining = rng.choice(
                (8, 7, 0, -1, len(buf) - at, len(buf) - at + 1, rng.randrange(2**31))
            )
            if not ({at + 12, at + 13, at + 14, at + 15} & protect):
                buf[at : at + 8] = struct.pack(">iI", remaining, refcodec.BLANK_MAGIC)
                done.append(f"blank@{at}={remaining}")
    return buf, done


# ---------------------------------------------------------------------------- (a) raw bytes


def ref_verdict(buf: bytes, pos: int, *, check_crc: bool) -> refcodec.RefRecord | str:
    """The reference decoder's record at pos, or 'utf8' when it is valid except for non-UTF-8
    topic/properties text (RocketMQ decodes those with replacement characters, as the native
    decoder does), or 'reject'."""
    try:
        return refcodec.decode_record(buf, pos, check_crc=check_crc)
    except refcodec.RefDecodeError as e:
        return "utf8" if "not UTF-8" in str(e) else "reject"


def check_ok_record(
    buf: bytes, pos: int, size: int, expected_phy: int | None, *, check_crc: bool, where: str
) -> None:
    verdict = ref_verdict(buf, pos, check_crc=check_crc)
    assert verdict != "reject", f"{where}: native ok, refcodec rejects the record at {pos}"
    if verdict == "utf8":
        total, magic = struct.unpack_from(">iI", buf, pos)
        assert (total, magic) == (size, refcodec.MESSAGE_MAGIC), where
        if expected_phy is not None:
            assert struct.unpack_from(">q", buf, pos + 28)[0] == expected_phy, where
        return
    assert isinstance(verdict, refcodec.RefRecord)
    assert verdict.storeSize == size, f"{where}: size {size} != ref {verdict.storeSize}"
    if expected_phy is not None:
        assert verdict.commitLogOffset == expected_phy, f"{where}: phy at {pos}"
    m = record.decode_message(buf, pos, check_crc=check_crc)
    if verdict.topic != "SCHEDULE_TOPIC_XXXX":
        assert native_dict(m) == ref_dict(verdict), f"{where}: fields differ at {pos}"


def _unchanged(buf: bytes, orig: bytes, pos: int, size: int, valid: set[int]) -> bool:
    return pos in valid and buf[pos : pos + size] == orig[pos : pos + size]


def check_bytes(
    buf: bytes, orig: bytes, base: int, valid: set[int], rng: random.Random, where: str
) -> dict[str, int]:
    stats = {"ok": 0, "checked": 0}
    n = len(buf)
    res = record.scan_region(buf, 0, check_crc=True, base_offset=base)
    assert res.stop_status in ("end", "blank", "corrupt"), where
    assert 0 <= res.stop_position <= n, where
    expect_pos = 0
    for off, size in zip(res.offsets.tolist(), res.sizes.tolist(), strict=True):
        assert off == expect_pos and size >= 91 and off + size <= n, where
        expect_pos = off + size
        stats["ok"] += 1
        if not _unchanged(buf, orig, off, size, valid):
            stats["checked"] += 1
            check_ok_record(buf, off, size, base + off, check_crc=True, where=where)
    assert res.stop_position == expect_pos, where
    p = res.stop_position
    if res.stop_status == "blank":
        size, magic = struct.unpack_from(">iI", buf, p)
        assert magic == refcodec.BLANK_MAGIC and 8 <= size <= n - p, where
    elif res.stop_status == "end":
        assert p == n or n - p < 8 or buf[p : p + 8] == bytes(8), where
    else:
        assert res.reason, where
        verdict = ref_verdict(buf, p, check_crc=True)
        assert not (
            isinstance(verdict, refcodec.RefRecord) and verdict.commitLogOffset == base + p
        ), f"{where}: native says corrupt ({res.reason}) at {p}, refcodec accepts it"
    # without CRC or position checks, from a random start, bounded by a random end
    start = rng.randrange(n + 1)
    end = rng.randrange(start, n + 1)
    res2 = record.scan_region(buf, start, end, check_crc=False)
    assert start <= res2.stop_position <= end, where
    for off, size in zip(res2.offsets.tolist(), res2.sizes.tolist(), strict=True):
        assert start <= off and off + size <= end, where
        if not _unchanged(buf, orig, off, size, valid):
            check_ok_record(buf[:end], off, size, None, check_crc=False, where=where)
    # record_status / decode_message at record starts and at random positions
    positions = sorted(valid)[:: max(1, len(valid) // 8)] + [rng.randrange(n + 1) for _ in range(6)]
    for pos in positions:
        if pos > n:
            continue
        crc = rng.random() < 0.7
        status, size, reason = record.record_status(buf, pos, check_crc=crc)
        assert status in ("ok", "blank", "end", "corrupt"), where
        if status == "ok":
            assert reason is None and pos + size <= n, where
            if not _unchanged(buf, orig, pos, size, valid):
                check_ok_record(buf, pos, size, None, check_crc=crc, where=where)
            m = record.decode_message(buf, pos, check_crc=crc)
            assert m.store_size == size and len(m.record) == size, where
        else:
            assert status == "end" or reason, where
            try:
                record.decode_message(buf, pos, check_crc=crc)
            except CorruptRecordError:
                pass
            else:
                raise AssertionError(f"{where}: decode_message accepted a {status} record")
    return stats


def bytes_fuzz(seed: int, cases: int) -> dict[str, int]:
    """Run `cases` corruptions of the small store's and the RocketMQ fixture's segments."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        build_small_store(tmp)
        segments = load_segments(Path(tmp) / "commitlog")
    if FIXTURE_COMMITLOG.is_dir():     # the fixture's segments too, when they are here
        segments += load_segments(FIXTURE_COMMITLOG)
    rng = random.Random(seed)
    totals = {"cases": 0, "ok": 0, "checked": 0}
    for case in range(cases):
        base, data, recs = rng.choice(segments)
        buf, done = corrupt(rng, data, base, recs, allow_truncate=True)
        valid = {r.commitLogOffset - base for r in recs}
        where = f"seed {seed} case {case} segment {base}: {done}"
        stats = check_bytes(bytes(buf), data, base, valid, rng, where)
        totals["cases"] += 1
        totals["ok"] += stats["ok"]
        totals["checked"] += stats["checked"]
    return totals


BYTES_CHILD = """
import json, sys
import test_fuzz
totals = test_fuzz.bytes_fuzz(int(sys.argv[1]), int(sys.argv[2]))
print("TOTALS", json.dumps(totals))
"""


@pytest.mark.parametrize("seed", BYTES_SEEDS)
def test_corrupt_bytes_never_crash_and_agree_with_reference(seed: int) -> None:
    cases = BYTES_CASES // len(BYTES_SEEDS)
    proc = run_python(BYTES_CHILD, args=[str(seed), str(cases)], timeout=300)
    assert_no_signal(proc, f"bytes fuzz seed {seed}")
    assert proc.returncode == 0, proc.stderr[-6000:]
    totals = json.loads(proc.stdout.split("TOTALS", 1)[1])
    assert totals["cases"] == cases
    assert totals["checked"] > cases // 10  # corrupted-but-valid records were really checked


def test_scan_region_argument_bounds() -> None:
    rec = refcodec.encode_record(
        topic="t",
        queueId=0,
        queueOffset=0,
        commitLogOffset=0,
        body=b"x",
        bornTimestamp=1,
        bornHost="1.2.3.4:5",
        storeTimestamp=2,
        storeHost="1.2.3.4:5",
    )
    buf = rec * 3
    assert len(record.scan_region(buf, 0, check_crc=True, base_offset=0)) == 1  # all say phy 0
    assert len(record.scan_region(buf, 0, check_crc=True)) == 3  # position not checked
    res = record.scan_region(buf, 0, check_crc=False)
    assert len(res) == 3 and res.stop_status == "end"
    assert record.scan_region(buf, 0, len(rec) + 50, check_crc=False).stop_status == "corrupt"
    assert record.scan_region(buf, 0, len(rec) + 5, check_crc=False).stop_status == "end"
    assert record.scan_region(buf, 0, check_crc=False, max_records=2).stop_status == "limit"
    assert len(record.scan_region(b"", 0)) == 0
    assert record.scan_region(buf, len(buf)).stop_status == "end"
    for bad in (-1, len(buf) + 1):
        with pytest.raises(ValueError):
            record.scan_region(buf, bad)
    with pytest.raises(ValueError):
        record.record_status(buf, len(buf) + 1)
    for n in range(len(rec)):
        assert record.record_status(rec[:n], 0)[0] in ("end", "corrupt")


# ---------------------------------------------------------------------------- (b) whole stores

STORE_CHILD = """
import hashlib, json, os, sys, traceback
import refcodec
from helpers import open_store
from rocketstore import CorruptRecordError, Message

def digest(root):
    d = os.path.join(root, "commitlog")
    return {n: hashlib.sha1(open(os.path.join(d, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(d))}

def valid(raw):
    try:
        refcodec.decode_record(raw, 0, check_crc=True)
        return True
    except refcodec.RefDecodeError as e:
        return "not UTF-8" in str(e)

def scan_all(store):
    # (records, error offset): a CorruptRecordError ends the scan cleanly; it can only come
    # from files that normal recovery does not read (all but the last three, as RocketMQ).
    records = []
    try:
        for m in store.scan(check_crc=True):
            records.append(m)
    except CorruptRecordError as e:
        return records, e.offset
    return records, None

def run(root, read_only):
    before = digest(root)
    abnormal = os.path.exists(os.path.join(root, "abort"))
    try:
        store = open_store(root, read_only=read_only)
    except Exception as e:
        return {"opened": False, "error": type(e).__name__, "message": str(e),
                "mro": [c.__name__ for c in type(e).__mro__]}
    out = {"opened": True}
    with store:
        records, error_at = scan_all(store)
        assert error_at is None or not abnormal, f"abnormal recovery missed {error_at}"
        offs = [m.commitlog_offset for m in records]
        assert offs == sorted(set(offs)), "scan out of order"
        bad = [m.commitlog_offset for m in records if not valid(bytes(m.record))]
        assert not bad, f"invalid records served: {bad[:5]}"
        end = store.recovery.end_offset
        assert not offs or offs[-1] < end, (offs[-1], store.recovery)
        out["records"] = len(records)
        out["scan_error"] = error_at
        if not read_only:
            # (read-only opens: see test_read_only_open_stops_at_the_recovered_end)
            assert store.get_max_phy_offset() == end, (store.recovery, store.get_max_phy_offset())
            r = store.put_message(Message("after", b"recovered"), 0)
            assert r.ok, r
            assert r.commitlog_offset >= end
            m = store.look_message_by_offset(r.commitlog_offset)
            assert bytes(m.body) == b"recovered"
            new_at = r.commitlog_offset
    if read_only:
        assert digest(root) == before, "a read-only open changed files"
    else:
        with open_store(root, read_only=True) as again:
            got, error2 = scan_all(again)
            if error_at is None:
                assert error2 is None, error2
                assert [m.commitlog_offset for m in got[:-1]] == offs, "reopen lost records"
                assert bytes(got[-1].body) == b"recovered"
            else:
                # the old corrupt record may now lie in the window recovery checks (fewer
                # files after truncation): then the log ends there; either way, a prefix
                got_offs = [m.commitlog_offset for m in got]
                assert got_offs == [*offs, new_at][: len(got_offs)], "reopen changed records"
                assert error2 in (None, error_at), (error2, error_at)
    return out

cases = json.loads(sys.argv[1])
for i, (root, read_only) in enumerate(cases):
    print("CASE", i, root, flush=True)
    try:
        result = run(root, read_only)
    except BaseException as e:
        result = {"opened": True, "failure": traceback.format_exc()}
    print("RESULT", json.dumps(result), flush=True)
"""

CLEAR_ERRORS = {"ValueError", "OSError"}  # StoreFormatError, CorruptRecordError, ... subclass


def _corrupt_store_copy(
    rng: random.Random, src: Path, dst: Path, segments: list[FuzzSegment], case: int
) -> list[str]:
    shutil.copytree(src, dst)
    commitlog = dst / "commitlog"
    done = []
    kind = rng.random()
    if kind < 0.06:
        # structural damage: a missing, a short, or a stray file -> a clear load error
        victim = rng.choice(sorted(commitlog.iterdir()))
        what = rng.choice(("delete", "shorten", "stray"))
        if what == "delete":
            victim.unlink()
        elif what == "shorten":
            victim.write_bytes(victim.read_bytes()[: rng.randrange(victim.stat().st_size)])
        else:
            (commitlog / "junk.tmp").write_bytes(b"x")
        return [f"{what} {victim.name}"]
    targets = rng.sample(segments, rng.choice((1, 1, 2)))
    if case % 5 == 0:  # bias towards the newest segments, which recovery reads
        targets = [segments[-1]]
    for base, data, recs in targets:
        buf, what = corrupt(
            rng, data, base, recs, allow_truncate=False, protect=_protected(recs, base)
        )
        assert len(buf) == len(data)
        (commitlog / f"{base:020d}").write_bytes(bytes(buf))
        done += [f"{base}:{w}" for w in what]
    if rng.random() < 0.3:
        (dst / "abort").write_bytes(b"")  # as after a crash: abnormal recovery
        done.append("abort")
    return done


def test_corrupt_store_open_never_crashes(tmp_path: Path) -> None:
    src = tmp_path / "pristine"
    build_small_store(src)
    segments = load_segments(src / "commitlog")
    assert len(segments) >= 4
    rng = random.Random(STORE_SEED)
    cases, notes = [], []
    for i in range(STORE_CASES):
        dst = tmp_path / f"case{i:03d}"
        notes.append(_corrupt_store_copy(rng, src, dst, segments, i))
        cases.append((str(dst), i % 4 == 3))
    proc = run_python(STORE_CHILD, args=[json.dumps(cases)], timeout=600)
    lines = proc.stdout.splitlines()
    started = [ln for ln in lines if ln.startswith("CASE")]
    if proc.returncode < 0:
        last = int(started[-1].split()[1]) if started else -1
        pytest.fail(
            f"store open crashed (signal {-proc.returncode}) on case {last}: "
            f"{notes[last] if last >= 0 else '?'}\n{proc.stderr[-4000:]}"
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(ln.split(" ", 1)[1]) for ln in lines if ln.startswith("RESULT")]
    assert len(results) == STORE_CASES
    opened = 0
    for i, r in enumerate(results):
        assert "failure" not in r, f"case {i} {notes[i]}:\n{r.get('failure')}"
        if r["opened"]:
            opened += 1
        else:
            assert CLEAR_ERRORS & set(r["mro"]) and r["message"], (
                f"case {i} {notes[i]}: unclear error {r['error']}: {r['message']}"
            )
    assert opened >= STORE_CASES // 2  # most corruptions are recovered from, not refused


HUGE_STORED_QUEUE_ID = """
import os, resource, struct, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))   # a bad alloc fails, not the box
from helpers import open_store
from rocketstore import Message
root = sys.argv[1]
with open_store(root) as s:
    rs = [s.put_message(Message("T", b"x" * 10), 0) for _ in range(5)]
with open(os.path.join(root, "commitlog", "0" * 20), "r+b") as f:
    f.seek(rs[3].commitlog_offset + 12)          # QUEUEID: not covered by the body CRC
    f.write(struct.pack(">i", 2**31 - 1))
open(os.path.join(root, "abort"), "w").close()   # abnormal recovery re-dispatches it
try:
    with open_store(root) as s:
        print("OPENED", s.recovery.end_offset, len(list(s.scan(check_crc=True))))
except (ValueError, MemoryError) as e:
    print("REFUSED", type(e).__name__, e)
"""


def test_stored_huge_queue_id_does_not_crash_recovery(tmp_path: Path) -> None:
    proc = run_python(HUGE_STORED_QUEUE_ID, args=[str(tmp_path)], timeout=120)
    assert_no_signal(proc, "recovery of a record with queue id 2**31-1")
    assert proc.returncode == 0, proc.stdout + proc.stderr


if __name__ == "__main__":  # quick manual run: python tests/test_fuzz.py SEED CASES
    print(bytes_fuzz(int(sys.argv[1]), int(sys.argv[2])))
