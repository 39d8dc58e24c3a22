#!/usr/bin/env python
"""Append (and read-back) throughput of rocketstore's CommitLog against references measured in
the same run on the same encoded bytes.

Workload: 1,000,000 messages with 100 B bodies and 300,000 with 1 KiB bodies, one
topic "bench", 8 queues round-robin, a tag and one key per message (plus the UNIQ_KEY the store
generates), ASYNC_FLUSH, a fresh store for every timed run.

Rows, per body size:
  Message construction          building the Message objects; excluded from every put timing
  put_message                   one MessageStore.put_message call per message
  put_messages                  MessageStore.put_messages in batches (--batch, default 1,000)
  (a) physical limit            create + posix_fallocate + mmap a segment file of the store's
                                size (as the store creates its segments), then one sequential
                                copy of the exact bytes the store wrote, in 1 MiB numpy slice
                                assignments
  (a') pwrite                   the same bytes written with os.pwrite (1 MiB) into a fallocate'd
                                file: the write(2) path, without mmap's first-touch page faults
                                (information only, no target uses it)
  (b) lmdb                      the same records as values under 8-byte big-endian sequence keys,
                                one write transaction per 1,000; txn.put vs cursor.putmulti and
                                writemap on/off are all tried, the fastest is reported
  (c) struct.pack_into loop     plain Python encoding the same fields (header, body, topic,
                                properties bytes, zlib.crc32 of the body) into a fallocate'd mmap;
                                its output is checked byte for byte against the store's
  scan                          MessageStore.scan over the store (a MessageExt per record, body
                                touched), then the native walk alone (record.scan_region, with and
                                without CRC); reference: raw sequential read of the same bytes
                                from an already faulted-in mmap (1 MiB copies), as the store's
                                mapping is after recovery
Then a breakdown of where a put's time goes (--no-breakdown to skip).

Before each timed run the script touches and frees ~2x the run's bytes of memory
(_common.prefault; --no-prefault to skip), so VM memory reclaim does not land on random runs.

The script never asserts on the targets; it prints PASS/MISS for each.
Usage: python bench/append.py [--quick] [--n100 N] [--n1k N] [--batch 1000] [--repeat 3]
                              [--clock wall|cpu] [--dir DIR] [--json out.json]
"""
from __future__ import annotations

import argparse
import gc
import mmap
import os
import struct
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

import _common as C
import numpy as np

C.ensure_importable()

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore._native import record, record_writer  # noqa: E402
from rocketstore._native.mapped_file import MappedFile  # noqa: E402

TOPIC = "bench"
TAGS = ("TagA", "TagB", "TagC", "TagD")
MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
# CommitLog record (v1, IPv4 hosts) up to and including BODYLENGTH: 88 bytes (docs/format.md).
HEADER = struct.Struct(">iIIiiqqiq8sq8siqi")
CHUNK = C.MiB


# ---- workload -------------------------------------------------------------------------------
class Workload:
    """The inputs of n messages (bodies, tags, keys, queue ids), built once per size."""

    def __init__(self, n: int, body_size: int, queues: int, seed: int = 42) -> None:
        self.n = n
        self.body_size = body_size
        self.label = f"{body_size} B" if body_size < 1024 else f"{body_size // 1024} KiB"
        pool = np.random.default_rng(seed).integers(0, 256, body_size + 4096,
                                                    dtype=np.uint8).tobytes()
        self.bodies = [pool[j:j + body_size] for j in ((i * 7919) % 4096 for i in range(n))]
        self.tags = [TAGS[i % len(TAGS)] for i in range(n)]
        self.keys = [f"key-{i:010d}" for i in range(n)]
        self.qids = [i % queues for i in range(n)]

    def build(self) -> list[Message]:
        return [Message(TOPIC, b, tags=t, keys=[k])
                for b, t, k in zip(self.bodies, self.tags, self.keys, strict=True)]


def strip_uniq_keys(msgs: list[Message]) -> None:
    """The store adds UNIQ_KEY to a message that has none; take it off again so every timed
    run generates it, as the first put of a message does."""
    for m in msgs:
        m.properties.pop("UNIQ_KEY", None)


# ---- store runs -----------------------------------------------------------------------------
def store_config(root: str, args: argparse.Namespace, **overrides: Any) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=args.file_size,
                       flush_disk_type="ASYNC_FLUSH", **overrides)


def check_store(s: MessageStore, w: Workload) -> int:
    """A timed run that lost or mangled messages would make its number meaningless."""
    max_off = s.get_max_phy_offset()
    stored = sum(s.next_queue_offset(TOPIC, q) for q in range(max(w.qids) + 1))
    if stored != w.n:
        raise RuntimeError(f"{w.label}: the store holds {stored} messages, expected {w.n}")
    return max_off


class StoreRun:
    """One timed run into a fresh store: `put` is the put loop alone; `dispatched` runs from
    the same start until the ReputMessageService has dispatched everything (ConsumeQueue and
    IndexFile entries written: what a consumer or a key query needs). The store's background
    services (reput, flush, allocate) run during both, as they do for a user."""

    put: float          # seconds per the chosen clock
    put_wall: float
    put_cpu: float
    put_thread: float
    dispatched_wall: float
    dispatched_cpu: float
    store_dir: str
    max_off: int


def timed_store_run(td: C.TempDirs, args, w: Workload, name: str,
                    loop: Callable[[MessageStore], None], *, gc_off: bool | None = None,
                    **overrides: Any) -> StoreRun:
    d = td.new(f"store-{name}-{w.body_size}")
    s = MessageStore.open(d, store_config(d, args, **overrides))
    run = StoreRun()
    try:
        with C.Timer(gc_off=args.gc_off if gc_off is None else gc_off,
                     prefault=args.prefault_bytes) as t:
            loop(s)
        if not s.wait_dispatched(300.0):
            raise RuntimeError("dispatch did not catch up within 300 s")
        run.dispatched_wall = time.perf_counter() - t.t0
        run.dispatched_cpu = time.process_time() - t.c0
        run.put, run.put_wall, run.put_cpu, run.put_thread = t.seconds, t.wall, t.cpu, t.thread
        run.max_off = check_store(s, w)
    finally:
        s.close()
    run.store_dir = d
    return run


def run_put_single(td: C.TempDirs, args, w: Workload, msgs: list[Message],
                   layer: str = "store", gc_off: bool | None = None,
                   **overrides: Any) -> StoreRun:
    """One call per message. layer: store (MessageStore.put_message) or commit_log
    (CommitLog.put_message, below the store's checks)."""
    qids = w.qids

    def loop(s: MessageStore) -> None:
        put = s.put_message if layer == "store" else s.commit_log.put_path
        for m, q in zip(msgs, qids, strict=True):
            put(m, q)
    return timed_store_run(td, args, w, "single", loop, gc_off=gc_off, **overrides)


def run_put_batches(td: C.TempDirs, args, w: Workload, msgs: list[Message]) -> StoreRun:
    b = args.batch
    batches = [(msgs[i:i + b], w.qids[i:i + b]) for i in range(0, w.n, b)]

    def loop(s: MessageStore) -> None:
        put_messages = s.put_messages
        for bm, bq in batches:
            put_messages(bm, bq)
    run = timed_store_run(td, args, w, "batch", loop)
    td.remove(run.store_dir)
    return run


# ---- the bytes the store wrote --------------------------------------------------------------
def read_commitlog(store_dir: str, max_off: int, file_size: int) -> np.ndarray:
    """The CommitLog bytes [0, max_off) as one array (segments concatenated, END_FILE tails
    included, so offsets in it are CommitLog offsets)."""
    out = np.empty(max_off, dtype=np.uint8)
    view = memoryview(out)
    cl = os.path.join(store_dir, "commitlog")
    for name in sorted(os.listdir(cl)):
        start = int(name)
        if start >= max_off:
            break
        n = min(file_size, max_off - start)
        with open(os.path.join(cl, name), "rb", buffering=0) as f:
            got = 0
            while got < n:
                k = f.readinto(view[start + got:start + n])
                if not k:
                    raise RuntimeError(f"short read in {name}")
                got += k
    return out


def walk_records(buf: memoryview, end: int, file_size: int) -> list[tuple[int, int]]:
    """(offset, size) of every record, in plain Python (skips END_FILE blanks)."""
    head = struct.Struct(">iI").unpack_from
    out = []
    pos = 0
    while pos < end:
        total, magic = head(buf, pos)
        if magic == BLANK_MAGIC:
            pos = (pos // file_size + 1) * file_size
            continue
        if magic != MAGIC or total <= 0:
            raise RuntimeError(f"bad record at {pos}: size {total}, magic {magic:#x}")
        out.append((pos, total))
        pos += total
    return out


def decode_fields(buf: memoryview, records: list[tuple[int, int]]) -> list[tuple]:
    """Per record, the fields a plain-Python encoder would be given (IPv4 hosts only)."""
    fields = []
    unpack = HEADER.unpack_from
    short = struct.Struct(">h").unpack_from
    for pos, _total in records:
        (_t, _m, _crc, qid, flag, qoff, _phy, sysflag, bts, bh, sts, sh, rec, prep,
         n) = unpack(buf, pos)
        if sysflag & 0x30:
            raise RuntimeError("the pack_into reference handles IPv4 hosts only")
        p = pos + 88
        body = bytes(buf[p:p + n])
        p += n
        tl = buf[p]
        topic = bytes(buf[p + 1:p + 1 + tl])
        p += 1 + tl
        (pl,) = short(buf, p)
        props = bytes(buf[p + 2:p + 2 + pl])
        fields.append((qid, flag, qoff, sysflag, bts, bh, sts, sh, rec, prep, body, topic, props))
    return fields


# ---- references -----------------------------------------------------------------------------
class Segments:
    """Segment files named like the CommitLog's, each created as the store creates them:
    open(O_CREAT) + posix_fallocate(file size) + mmap(MAP_SHARED)."""

    def __init__(self, d: str, file_size: int) -> None:
        self.d = d
        self.file_size = file_size
        self.open: list[tuple[int, mmap.mmap]] = []

    def new(self, start: int) -> mmap.mmap:
        fd = os.open(os.path.join(self.d, f"{start:020d}"), os.O_RDWR | os.O_CREAT, 0o644)
        os.posix_fallocate(fd, 0, self.file_size)
        mm = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.open.append((fd, mm))
        return mm

    def close(self) -> None:
        for fd, mm in self.open:
            mm.close()
            os.close(fd)
        self.open = []


def ref_physical(td: C.TempDirs, args, ref: np.ndarray, prefaulted: bool = False) -> float:
    """(a) One sequential copy of the encoded bytes into fresh fallocate'd mmapped segments.
    With prefaulted, the segments are created and every page touched before the timing: the
    copy alone, without first-touch faults (information)."""
    d = td.new("physical")
    segs = Segments(d, args.file_size)
    total = len(ref)
    fs = args.file_size
    maps = []
    if prefaulted:
        for start in range(0, total, fs):
            mm = segs.new(start)
            np.frombuffer(mm, dtype=np.uint8)[:min(fs, total - start)] = 0
            maps.append(mm)
    with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
        for i, start in enumerate(range(0, total, fs)):
            dst = np.frombuffer(maps[i] if prefaulted else segs.new(start), dtype=np.uint8)
            seg = ref[start:start + fs]
            n = len(seg)
            for off in range(0, n, CHUNK):
                k = min(CHUNK, n - off)
                dst[off:off + k] = seg[off:off + k]
            del dst
    maps.clear()
    segs.close()
    td.remove(d)
    return t.seconds


def ref_pwrite(td: C.TempDirs, args, ref: np.ndarray) -> float:
    """(a') The same bytes through write(2) instead of a mapping: create + posix_fallocate,
    then os.pwrite in 1 MiB chunks (page cache, no fsync). Not a target reference: it shows
    what the mmap path's first-touch page faults cost."""
    d = td.new("pwrite")
    total = len(ref)
    fs = args.file_size
    view = memoryview(ref)
    fds = []
    with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
        for start in range(0, total, fs):
            fd = os.open(os.path.join(d, f"{start:020d}"), os.O_RDWR | os.O_CREAT, 0o644)
            fds.append(fd)
            os.posix_fallocate(fd, 0, fs)
            n = min(fs, total - start)
            for off in range(0, n, CHUNK):
                os.pwrite(fd, view[start + off:start + min(off + CHUNK, n)], off)
    for fd in fds:
        os.close(fd)
    td.remove(d)
    return t.seconds


def ref_pack_into(td: C.TempDirs, args, fields: list[tuple], ref: np.ndarray | None) -> float:
    """(c) Plain-Python encoder: zlib.crc32 + one struct.pack_into per record (Struct cached
    per body/topic/properties length), rolling segments with END_FILE as the store does."""
    d = td.new("pack_into")
    segs = Segments(d, args.file_size)
    fs = args.file_size
    crc32 = zlib.crc32
    cache: dict[tuple[int, int, int], Any] = {}
    with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
        base = 0
        mm = segs.new(0)
        pos = 0
        for (qid, flag, qoff, sysflag, bts, bh, sts, sh, rec, prep, body, topic,
             props) in fields:
            n = len(body)
            tl = len(topic)
            pl = len(props)
            total = 91 + n + tl + pl
            if pos + total + 8 > fs:        # END_FILE blank, then the next segment
                struct.pack_into(">iI", mm, pos, fs - pos, BLANK_MAGIC)
                base += fs
                mm = segs.new(base)
                pos = 0
            st = cache.get((n, tl, pl))
            if st is None:
                st = cache[(n, tl, pl)] = struct.Struct(
                    f">iIIiiqqiq8sq8siqi{n}sB{tl}sh{pl}s")
            st.pack_into(mm, pos, total, MAGIC, crc32(body) & 0x7FFFFFFF, qid, flag, qoff,
                         base + pos, sysflag, bts, bh, sts, sh, rec, prep, n, body, tl, topic,
                         pl, props)
            pos += total
    if ref is not None:     # the same bytes as the store wrote (both tails are zeros)
        same = True
        for i, (_fd, m) in enumerate(segs.open):
            start = i * fs
            n = min(fs, len(ref) - start)
            got = np.frombuffer(m, dtype=np.uint8)[:n]
            same = same and bool(np.array_equal(got, ref[start:start + n]))
            del got
        if not same:
            segs.close()
            td.remove(d)
            raise RuntimeError("the struct.pack_into reference did not reproduce the "
                               "store's bytes")
    segs.close()
    td.remove(d)
    return t.seconds


def ref_lmdb(td: C.TempDirs, args, keys: list[bytes], vals: list[bytes], mode: str,
             writemap: bool, map_size: int) -> float:
    """(b) lmdb, one write transaction per --batch records, append=True (keys ascend)."""
    import lmdb
    d = td.new(f"lmdb-{mode}")
    env = lmdb.open(d, map_size=map_size, sync=False, metasync=False, writemap=writemap,
                    readahead=False, max_dbs=0)
    b = args.batch
    n = len(keys)
    try:
        with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
            if mode == "putmulti":
                for i in range(0, n, b):
                    with env.begin(write=True) as txn:
                        txn.cursor().putmulti(zip(keys[i:i + b], vals[i:i + b], strict=True),
                                              append=True)
            else:
                for i in range(0, n, b):
                    with env.begin(write=True) as txn:
                        put = txn.put
                        for k, v in zip(keys[i:i + b], vals[i:i + b], strict=True):
                            put(k, v, append=True)
        entries = env.stat()["entries"]
        if entries != n:
            raise RuntimeError(f"lmdb holds {entries} entries, expected {n}")
    finally:
        env.close()
        td.remove(d)
    return t.seconds


def run_scan(args, w: Workload, store_dir: str) -> float:
    s = MessageStore.open(store_dir, store_config(store_dir, args), read_only=True)
    try:
        with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
            count = 0
            body_bytes = 0
            for m in s.scan(0):
                body_bytes += len(m.body)
                count += 1
    finally:
        s.close()
    if count != w.n or body_bytes != w.n * w.body_size:
        raise RuntimeError(f"scan read {count} messages / {body_bytes} body bytes")
    return t.seconds


def run_scan_region(args, w: Workload, store_dir: str, check_crc: bool) -> float:
    """The native record walk under scan, without a MessageExt per record."""
    s = MessageStore.open(store_dir, store_config(store_dir, args), read_only=True)
    try:
        files = s.commit_log.queue.files
        with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
            count = 0
            for mf in files:
                found = record.scan_region(mf, 0, mf.read_position, check_crc=check_crc,
                                           base_offset=mf.file_from_offset)
                count += len(found)
    finally:
        s.close()
    if count != w.n:
        raise RuntimeError(f"scan_region found {count} records, expected {w.n}")
    return t.seconds


def ref_raw_read(args, store_dir: str, max_off: int) -> float:
    """Raw sequential read of the same CommitLog bytes from a read-only mmap per segment,
    copied out in 1 MiB chunks into a reused buffer. The mapping is faulted in by an untimed
    first pass, as the store's is by recovery when it opens (which scan's timing excludes)."""
    cl = os.path.join(store_dir, "commitlog")
    fs = args.file_size
    sink = np.empty(CHUNK, dtype=np.uint8)
    maps = []
    for start in range(0, max_off, fs):
        fd = os.open(os.path.join(cl, f"{start:020d}"), os.O_RDONLY)
        mm = mmap.mmap(fd, fs, mmap.MAP_SHARED, mmap.PROT_READ)
        maps.append((fd, mm, np.frombuffer(mm, dtype=np.uint8), min(fs, max_off - start)))

    def read_all() -> None:
        for _fd, _mm, src, n in maps:
            for off in range(0, n, CHUNK):
                k = min(CHUNK, n - off)
                sink[:k] = src[off:off + k]

    read_all()
    with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
        read_all()
    closing = [(fd, mm) for fd, mm, _src, _n in maps]
    maps.clear()            # drop the numpy views before closing their mmaps
    for fd, mm in closing:
        mm.close()
        os.close(fd)
    return t.seconds


# ---- breakdown ------------------------------------------------------------------------------
def breakdown(td: C.TempDirs, args, w: Workload, msgs: list[Message], record_bytes: int
              ) -> list[C.Measurement]:
    """Where a put's time goes: each layer timed on its own, per message."""
    rows: list[C.Measurement] = []
    n = w.n
    qids = w.qids
    # one MappedFile that holds the whole run: the store's segment size when that is enough
    size = args.file_size if record_bytes + 8 <= args.file_size else (record_bytes // C.MiB + 2) * C.MiB
    cfg = store_config(td.root, args)

    def add(name: str, samples: list[float], note: str = "") -> None:
        rows.append(C.Measurement(w.label, name, n, record_bytes, n * w.body_size, samples,
                                  kind="breakdown", note=note))

    def loop_only(_i: int) -> float:
        with C.Timer(gc_off=args.gc_off) as t:
            for _m, _q in zip(msgs, qids, strict=True):
                pass
        return t.seconds

    def noop(m, q):
        return None

    def py_call(_i: int) -> float:
        f = noop
        with C.Timer(gc_off=args.gc_off) as t:
            for m, q in zip(msgs, qids, strict=True):
                f(m, q)
        return t.seconds

    def native_append(keep_uniq: bool) -> Callable[[int], float]:
        def once(_i: int) -> float:
            d = td.new("append")
            mf = MappedFile(os.path.join(d, "00000000000000000000"), size)
            writer = record_writer.RecordWriter(size, cfg.max_message_size, cfg.store_host)
            append = writer.append
            if not keep_uniq:
                strip_uniq_keys(msgs)
            with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
                for m, q in zip(msgs, qids, strict=True):
                    append(mf, m, q)
            if mf.wrote_position != record_bytes:
                raise RuntimeError(f"append wrote {mf.wrote_position}, expected {record_bytes}")
            mf.destroy(0)
            td.remove(d)
            return t.seconds
        return once

    def store_layer(layer: str, gc_off: bool, **overrides: Any) -> Callable[[int], float]:
        def once(_i: int) -> float:
            strip_uniq_keys(msgs)
            run = run_put_single(td, args, w, msgs, layer=layer, gc_off=gc_off, **overrides)
            td.remove(run.store_dir)
            return run.put
        return once

    def batch_parts(prefaulted: bool) -> tuple[C.Samples, C.Samples]:
        d = td.new("batch-parts")
        mf = MappedFile(os.path.join(d, "00000000000000000000"), size)
        if prefaulted:      # touch every page the run will write (untimed)
            zeros = bytes(C.MiB)
            for off in range(0, min(size, record_bytes + C.MiB), C.MiB):
                mf.write_at(off, zeros[:min(C.MiB, size - off)])
        writer = record_writer.RecordWriter(size, cfg.max_message_size, cfg.store_host)
        b = args.batch
        batches = [(msgs[i:i + b], qids[i:i + b]) for i in range(0, n, b)]
        strip_uniq_keys(msgs)
        prep = [0.0, 0.0]   # wall, caller CPU (no background thread is involved here)
        write = [0.0, 0.0]
        clock, cpu = time.perf_counter, time.thread_time
        with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes):
            for bm, bq in batches:
                t0, c0 = clock(), cpu()
                res = writer.prepare_batch(bm, bq)
                t1, c1 = clock(), cpu()
                writer.write_batch(mf, res)
                t2, c2 = clock(), cpu()
                prep[0] += t1 - t0
                prep[1] += c1 - c0
                write[0] += t2 - t1
                write[1] += c2 - c1
        mf.destroy(0)
        td.remove(d)
        out = []
        for wall, thr in (prep, write):
            smp = C.Samples()
            C.add_times(smp, wall, thr, thr)
            out.append(smp)
        return out[0], out[1]

    R = args.repeat
    add("loop only: `for m, q in zip(msgs, qids): pass`", C.run_repeated(R, loop_only))
    add("+ a no-op Python call `f(m, q)`", C.run_repeated(R, py_call))
    add("RecordWriter.append on a MappedFile (UNIQ_KEY generated)",
        C.run_repeated(R, native_append(False)))
    add("RecordWriter.append, UNIQ_KEY already set", C.run_repeated(R, native_append(True)))
    add("CommitLog.put_message (lock + last file + append)",
        C.run_repeated(R, store_layer("commit_log", args.gc_off)))
    add("MessageStore.put_message (+ checks)", C.run_repeated(R, store_layer("store", args.gc_off)))
    add("MessageStore.put_message, cyclic GC enabled",
        C.run_repeated(R, store_layer("store", False)))
    add("MessageStore.put_message, message_index_enable=False",
        C.run_repeated(R, store_layer("store", args.gc_off, message_index_enable=False)),
        note="no IndexFile dispatch in the background")
    parts = [batch_parts(False) for _ in range(R)]
    warm = [batch_parts(True) for _ in range(R)]
    for label, runs, k, note in (
            ("RecordWriter.prepare_batch", parts, 0,
             "validate, properties, UNIQ_KEY, result arrays; GIL held"),
            ("RecordWriter.write_batch", parts, 1,
             "CRC + copy into a fresh (fallocate'd) mapping, GIL released"),
            ("RecordWriter.write_batch, mapping pre-faulted", warm, 1,
             "the same with every page touched before: no first-touch faults")):
        smp = C.Samples()
        for p in runs:
            C.add_times(smp, p[k].wall[0], p[k].cpu[0], p[k].thread[0])
        add(f"{label} (batches of {args.batch:,}) on a MappedFile", smp, note=note)
    strip_uniq_keys(msgs)
    return rows


# ---- one body size --------------------------------------------------------------------------
def bench_size(td: C.TempDirs, args, n: int, body_size: int) -> dict[str, Any]:
    R = args.repeat
    log = args.log
    w = Workload(n, body_size, args.queues)
    args.prefault_bytes = 0 if not args.prefault else 2 * n * (body_size + 200) + 64 * C.MiB
    log(f"[{w.label}] {n:,} messages, {R} runs each")
    out: dict[str, Any] = {"label": w.label, "n": n, "body_size": body_size}
    build_s, single_s, batch_s = C.Samples(), C.Samples(), C.Samples()
    single_d, batch_d = C.Samples(), C.Samples()
    ref_store = None
    record_bytes = None
    msgs: list[Message] = []
    for rep in range(R):
        msgs = []
        gc.collect()
        with C.Timer(gc_off=args.gc_off, prefault=args.prefault_bytes) as t:
            msgs = w.build()
        C.add_sample(build_s, t.seconds)
        run = run_put_single(td, args, w, msgs)
        C.add_times(single_s, run.put_wall, run.put_cpu, run.put_thread)
        C.add_times(single_d, run.dispatched_wall, run.dispatched_cpu)
        if record_bytes is None:
            record_bytes, ref_store = run.max_off, run.store_dir
        else:
            if run.max_off != record_bytes:
                raise RuntimeError(f"run {rep} wrote {run.max_off} bytes, run 0 {record_bytes}")
            td.remove(run.store_dir)
        strip_uniq_keys(msgs)
        brun = run_put_batches(td, args, w, msgs)
        if brun.max_off != record_bytes:
            raise RuntimeError(f"batch run wrote {brun.max_off} bytes, single {record_bytes}")
        C.add_times(batch_s, brun.put_wall, brun.put_cpu, brun.put_thread)
        C.add_times(batch_d, brun.dispatched_wall, brun.dispatched_cpu)
        strip_uniq_keys(msgs)
        log(f"  run {rep + 1}: build {t.seconds:.2f}s, put_message {run.put:.2f}s "
            f"(dispatched {run.dispatched_wall:.2f}s), put_messages {brun.put:.2f}s "
            f"(dispatched {brun.dispatched_wall:.2f}s)")
    assert record_bytes is not None and ref_store is not None
    body_bytes = n * body_size
    M = C.Measurement
    rows = [
        M(w.label, "Message construction (excluded from every put timing)", n, 0, body_bytes,
          build_s, kind="extra", note="Message(topic, body, tags=, keys=[k])"),
        M(w.label, "put_message (single calls)", n, record_bytes, body_bytes, single_s),
        M(w.label, f"put_messages (batches of {args.batch:,})", n, record_bytes, body_bytes,
          batch_s),
        M(w.label, "put_message, until dispatched (CQ + IndexFile)", n, record_bytes,
          body_bytes, single_d, kind="store-dispatch"),
        M(w.label, f"put_messages ({args.batch:,}), until dispatched (CQ + IndexFile)", n,
          record_bytes, body_bytes, batch_d, kind="store-dispatch"),
    ]
    if args.breakdown:
        log("  breakdown ...")
        out["breakdown"] = breakdown(td, args, w, msgs, record_bytes)
    del msgs
    gc.collect()

    # references on the exact bytes the store wrote
    ref = read_commitlog(ref_store, record_bytes, args.file_size)
    buf = memoryview(ref)
    records = walk_records(buf, record_bytes, args.file_size)
    if len(records) != n:
        raise RuntimeError(f"found {len(records)} records in the CommitLog, expected {n}")
    log("  (a) physical limit ...")
    rows.append(M(w.label, "(a) physical limit: memcpy into fallocate'd mmap", n, record_bytes,
                  body_bytes, C.run_repeated(R, lambda i, ref=ref: ref_physical(td, args, ref)),
                  kind="reference", note="open + posix_fallocate + mmap + 1 MiB copies"))
    rows.append(M(w.label, "(a'') the same copy into an already-faulted mapping", n,
                  record_bytes, body_bytes,
                  C.run_repeated(R, lambda i, ref=ref: ref_physical(td, args, ref, True)),
                  kind="reference-extra", note="every page touched before the timing"))
    rows.append(M(w.label, "(a') same bytes via os.pwrite into a fallocate'd file", n,
                  record_bytes, body_bytes,
                  C.run_repeated(R, lambda i, ref=ref: ref_pwrite(td, args, ref)),
                  kind="reference-extra", note="write(2) path: no mmap page faults"))
    log("  (c) struct.pack_into ...")
    fields = decode_fields(buf, records)
    rows.append(M(w.label, "(c) plain-Python struct.pack_into loop into mmap", n, record_bytes,
                  body_bytes,
                  C.run_repeated(R, lambda i, f=fields, ref=ref: ref_pack_into(
                      td, args, f, ref if i == 0 else None)),
                  kind="reference", note="zlib.crc32 + 1 pack_into/msg; bytes identical"))
    del fields
    gc.collect()
    log("  (b) lmdb ...")
    keys = [struct.pack(">Q", i) for i in range(n)]
    vals = [bytes(buf[p:p + s]) for p, s in records]
    map_size = (3 * record_bytes + 256 * C.MiB) // C.MiB * C.MiB
    variants = {}
    for mode in ("putmulti", "put"):
        for writemap in (True, False):
            variants[(mode, writemap)] = C.run_repeated(
                R, lambda i, m=mode, wm=writemap, k=keys, v=vals: ref_lmdb(
                    td, args, k, v, m, wm, map_size))
    del keys, vals
    gc.collect()
    best = min(variants, key=lambda k: C.median(variants[k]))

    def vname(k):
        return f"{'cursor.putmulti' if k[0] == 'putmulti' else 'txn.put'}, writemap={k[1]}"
    others = "; ".join(f"{vname(k)}: {n / C.median(v):,.0f}/s"
                       for k, v in variants.items() if k != best)
    rows.append(M(w.label, f"(b) lmdb ({vname(best)})", n, record_bytes, body_bytes,
                  variants[best], kind="reference",
                  note=f"txn/{args.batch:,}, append=True, sync=False, metasync=False"))
    # one Python call per record, as put_message: the like-for-like reference for single puts
    per_record = min((k for k in variants if k[0] == "put"), key=lambda k: C.median(variants[k]))
    if per_record != best:
        rows.append(M(w.label, f"(b') lmdb per-record ({vname(per_record)})", n, record_bytes,
                      body_bytes, variants[per_record], kind="reference-extra",
                      note=f"one txn.put per record, txn/{args.batch:,}"))
    out["lmdb_variants"] = {vname(k): {"samples": v, "msgs_per_s": n / C.median(v)}
                            for k, v in variants.items()}
    out["lmdb_best"] = vname(best)
    out["lmdb_others"] = others
    del buf, ref
    gc.collect()

    log("  scan ...")
    rows.append(M(w.label, "scan read-back (MessageExt per record, body touched)", n,
                  record_bytes, body_bytes,
                  C.run_repeated(R, lambda i: run_scan(args, w, ref_store)), kind="read"))
    rows.append(M(w.label, "scan_region only (native walk, no objects)", n, record_bytes,
                  body_bytes,
                  C.run_repeated(R, lambda i: run_scan_region(args, w, ref_store, False)),
                  kind="read-extra"))
    rows.append(M(w.label, "scan_region with check_crc=True (recovery's walk)", n,
                  record_bytes, body_bytes,
                  C.run_repeated(R, lambda i: run_scan_region(args, w, ref_store, True)),
                  kind="read-extra"))
    rows.append(M(w.label, "raw sequential read of the same bytes (warm mmap, 1 MiB copies)", n,
                  record_bytes, body_bytes,
                  C.run_repeated(R, lambda i: ref_raw_read(args, ref_store, record_bytes)),
                  kind="read-reference"))
    td.remove(ref_store)

    phys = next(r for r in rows if r.kind == "reference" and r.name.startswith("(a)"))
    lm = next(r for r in rows if r.name.startswith("(b)"))
    lm1 = next((r for r in rows if r.name.startswith("(b')")), lm)
    raw = next(r for r in rows if r.kind == "read-reference")
    for r in rows:
        if r.kind in ("store", "store-dispatch", "reference", "reference-extra"):
            r.ratios["physical"] = r.msgs_per_s / phys.msgs_per_s
        if r.kind in ("store", "store-dispatch") or r.name.startswith("(c)"):
            r.ratios["lmdb"] = r.msgs_per_s / lm.msgs_per_s
            r.ratios["lmdb_per_record"] = r.msgs_per_s / lm1.msgs_per_s
        if r.kind in ("read", "read-extra", "read-reference"):
            r.ratios["physical"] = r.msgs_per_s / raw.msgs_per_s
    out["rows"] = rows
    out["record_bytes"] = record_bytes
    out["avg_record"] = record_bytes / n
    return out


# ---- report ---------------------------------------------------------------------------------
def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def row(label, prefix):
        res = results.get(label)
        if res is None:
            return None
        return next(r for r in res["rows"] if r.name.startswith(prefix))

    out = []
    single = row("100 B", "put_message")
    b100 = row("100 B", "put_messages")
    b1k = row("1 KiB", "put_messages")

    def add(text, value, goal, ok):
        out.append({"target": text, "measured": value, "goal": goal,
                    "result": "n/a" if ok is None else ("PASS" if ok else "MISS")})

    add("100 B single put_message >= 1,000,000 msgs/s",
        single and f"{single.msgs_per_s:,.0f} msgs/s", ">= 1,000,000",
        None if single is None else single.msgs_per_s >= 1_000_000)
    # Single calls against lmdb called the same way (one txn.put per record, 1,000 per write
    # transaction); the fastest lmdb variant (cursor.putmulti: one call per 1,000 records)
    # is the batch API's peer, shown beside it.
    add("100 B single put_message ahead of lmdb (per-record txn.put, like for like)",
        single and f"{single.ratios['lmdb_per_record']:.2f}x lmdb", "> 1.00x",
        None if single is None else single.ratios["lmdb_per_record"] > 1.0)
    add("100 B single put_message vs lmdb's fastest (batched putmulti), information",
        single and f"{single.ratios['lmdb']:.2f}x lmdb", "",
        None)
    add("100 B put_messages ahead of lmdb's fastest (batched putmulti), information",
        b100 and f"{b100.ratios['lmdb']:.2f}x lmdb", "",
        None)
    add("100 B put_messages >= 0.3 of the physical limit",
        b100 and f"{b100.ratios['physical']:.2f}", ">= 0.30",
        None if b100 is None else b100.ratios["physical"] >= 0.3)
    add("1 KiB put_messages >= 0.5 of the physical limit",
        b1k and f"{b1k.ratios['physical']:.2f}", ">= 0.50",
        None if b1k is None else b1k.ratios["physical"] >= 0.5)
    return out


def main_table(results: dict[str, dict[str, Any]]) -> str:
    rows = []
    for res in results.values():
        for r in res["rows"]:
            rows.append([r.group, r.name, C.fmt_int(r.msgs_per_s),
                         C.fmt_rate(r.mb_per_s) if r.record_bytes else "",
                         C.fmt_rate(r.body_mb_per_s), f"{r.us_per_msg:.3f}",
                         C.fmt_ratio(r.ratios.get("physical")), C.fmt_ratio(r.ratios.get("lmdb")),
                         C.fmt_ratio(r.ratios.get("lmdb_per_record")),
                         fmt_us(r.us_per_msg_of("thread")), fmt_us(r.us_per_msg_of("cpu")),
                         fmt_share(r.cpu_share)])
    return C.markdown_table(["body", "case", "msgs/s", "MB/s", "body MB/s", "us/msg",
                             "ratio vs physical", "ratio vs lmdb (fastest)",
                             "ratio vs lmdb per-record", "caller CPU us/msg",
                             "process CPU us/msg", "cpu/wall"], rows, "llrrrrrrrrrr")


def fmt_us(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def fmt_share(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def breakdown_table(res: dict[str, Any]) -> str:
    rows = []

    def us(x: float | None) -> str:
        return "" if x is None else f"{x:.3f}"
    for r in res["breakdown"]:
        thread, cpu = r.us_per_msg_of("thread"), r.us_per_msg_of("cpu")
        rows.append([r.name, us(r.us_per_msg_of("wall")), us(thread), us(cpu),
                     us(None if thread is None or cpu is None else max(0.0, cpu - thread)),
                     r.note])
    return C.markdown_table(["step", "wall us/msg", "caller CPU us/msg", "process CPU us/msg",
                             "background CPU us/msg", "note"], rows, "lrrrrl")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n100", type=int, default=1_000_000, help="messages with 100 B bodies")
    p.add_argument("--n1k", type=int, default=300_000, help="messages with 1 KiB bodies")
    p.add_argument("--quick", action="store_true", help="divide both counts by 10")
    p.add_argument("--batch", type=int, default=1000, help="put_messages batch and lmdb txn size")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--file-size", type=int, default=1 << 30,
                   help="CommitLog segment size (default 1 GiB, the store's default)")
    p.add_argument("--dir", default=None,
                   help="where temp stores go (default: the repo's parent dir; not tmpfs)")
    p.add_argument("--gc", dest="gc_off", action="store_false",
                   help="keep the cyclic GC enabled in timed sections (default: off, as timeit)")
    p.add_argument("--clock", choices=("wall", "cpu", "thread"), default="wall",
                   help="wall time (default); process CPU time (user+sys, all threads: steadier "
                        "when other processes share the cores, charges the store's background "
                        "services); or the calling thread's CPU time (the put path alone)")
    p.add_argument("--no-breakdown", dest="breakdown", action="store_false")
    p.add_argument("--no-prefault", dest="prefault", action="store_false",
                   help="do not touch+free ~2x the run's bytes of memory before each timed run "
                        "(see _common.prefault: makes runs on VMs comparable)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.n100 //= 10
        args.n1k //= 10
    if args.repeat < 1 or args.batch < 1 or args.queues < 1:
        p.error("--repeat, --batch and --queues must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    C.CLOCK = args.clock
    started = time.perf_counter()
    args.log = (lambda *a: None) if args.quiet else (
        lambda msg: print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr,
                          flush=True))
    with C.TempDirs(args.dir) as td:
        info = C.machine_info(td.base)
        results: dict[str, dict[str, Any]] = {}
        for n, size in ((args.n100, 100), (args.n1k, 1024)):
            if n > 0:
                res = bench_size(td, args, n, size)
                results[res["label"]] = res
    tg = targets(results)
    elapsed = time.perf_counter() - started

    print("# rocketstore append benchmark (bench/append.py)\n")
    C.print_machine_info(info)
    print(f"\nWorkload: topic {TOPIC!r}, {args.queues} queues round-robin, one tag and one key per "
          f"message (+ the UNIQ_KEY the store generates), ASYNC_FLUSH, CommitLog segments of "
          f"{args.file_size:,} B, a fresh store per timed run; "
          + ", ".join(f"{r['label']}: {r['n']:,} msgs, {r['avg_record']:.1f} B/record"
                      for r in results.values()) + ".")
    print(f"Each number is the median of {args.repeat} runs ({args.clock} clock; cpu/wall = "
          "median process CPU time / median wall time, well below 1 means the run waited, e.g. "
          "for cores taken by other processes); cyclic GC "
          f"{'disabled' if args.gc_off else 'enabled'} in timed sections. Message objects are "
          "built BEFORE timing (construction is excluded from every put timing and shown as its "
          "own row). MB = 10^6 bytes of encoded records (CommitLog max offset delta); body MB "
          "counts bodies only. Store close (msync) is outside the timings, as is lmdb's "
          "env open/close. Read rows: 'ratio vs physical' is against the raw sequential read "
          "(warm page cache). "
          + ("Before every timed run, ~2x the bytes it writes are touched and freed "
             "(_common.prefault) so that VM memory reclaim does not land on random runs."
             if args.prefault else "No prefault (--no-prefault).") + "\n")
    print(main_table(results))
    for res in results.values():
        if res.get("lmdb_others"):
            print(f"\nlmdb {res['label']}: fastest variant {res['lmdb_best']}; others: "
                  f"{res['lmdb_others']}.")
    print("\n## Targets\n")
    print(C.markdown_table(["target", "measured", "goal", "result"],
                           [[t["target"], t["measured"] or "-", t["goal"], t["result"]]
                            for t in tg], "llll"))
    for res in results.values():
        if "breakdown" in res:
            print(f"\n## Where a put's time goes ({res['label']}, {res['n']:,} msgs)\n")
            print(breakdown_table(res))
    print(f"\n(total wall time {elapsed:.0f}s)")

    if args.json:
        payload = {
            "machine": info,
            "args": {k: v for k, v in vars(args).items() if k != "log"},
            "results": {label: {k: ([m.to_json() for m in v] if k in ("rows", "breakdown")
                                    else v) for k, v in res.items()}
                        for label, res in results.items()},
            "targets": tg,
            "wall_s": elapsed,
        }
        C.write_json(args.json, payload)
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
