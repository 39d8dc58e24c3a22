#!/usr/bin/env python
"""Coverage-guided fuzzing (atheris, libFuzzer) of every parser of the store's files.

Targets (one per run; each input is one file's bytes, or a region of them):

  commitlog     record decode: scan_region, record_status, decode_message (and every field
                of the MessageExt: properties, hosts, msg id, to_dict), find_record (the
                resync search), the columnar decoder
  consumequeue  a ConsumeQueue file over a small valid CommitLog: load, recover, the newest
                unit's check, units read back, get_message (with its unit repair)
  index         an IndexFile (header, slots, items): load, check, queries, walks, truncate,
                a put
  checkpoint    the checkpoint file: StoreCheckpoint.load
  config        config JSON: queueOffsets.json, damagedRanges.json, consumerOffset.json
  properties    a broker .properties file: StoreConfig.from_properties (and the message
                properties parser, through records, in `commitlog`)

A target may raise the exceptions its API documents for bad input (ValueError and its
subclasses: CorruptRecordError, StoreFormatError, IndexFileCorruptError; OSError); anything
else, a crash, a sanitizer report or a hang (-timeout) is a finding.

Run one target (libFuzzer flags after it; -runs bounds the inputs):

    python tests/fuzz/fuzz_parsers.py commitlog -runs=100000 -timeout=10 -max_len=8192

For native coverage and memory-error detection, build the extensions with clang's
sanitizers into a separate copy of the package and preload atheris's runtime; that is what
``python tests/fuzz/run_fuzz.py`` does (it also runs every target with its budget and prints
the figures). tests/fuzz/test_fuzz_parsers.py runs a bounded number of inputs per target in
the test suite.
"""
from __future__ import annotations

import atexit
import io
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from rocketstore import MessageStore, StoreConfig
    from rocketstore._native import columnar, record
    from rocketstore._native.index_file import IndexFile
    from rocketstore.store import get_message as queue_reads
    from rocketstore.store.checkpoint import StoreCheckpoint
    from rocketstore.store.consume_queue_table import ConsumeQueueTable
    from rocketstore.store.consumer_offset_file import load_offset_table
    from rocketstore.store.damage import DamageFile
    from rocketstore.store.shutdown_state import read_shutdown_state

# a RAM-backed scratch directory when there is one: every input is written to a file
SCRATCH = Path(tempfile.mkdtemp(prefix="rs-fuzz-", dir="/dev/shm" if os.path.isdir(
    "/dev/shm") else None))
atexit.register(shutil.rmtree, SCRATCH, True)      # libFuzzer ends the process with exit()
SEG = 64 * 1024
CQ_UNITS = 40
SLOTS, ITEMS = 16, 64
INDEX_SIZE = 40 + SLOTS * 4 + ITEMS * 20


def _store_config(root: Path, **changes) -> StoreConfig:
    values = {"store_path_root_dir": str(root), "mapped_file_size_commit_log": SEG,
              "mapped_file_size_consume_queue": 20 * CQ_UNITS, "max_hash_slot_num": SLOTS,
              "max_index_num": ITEMS, "store_host": "10.0.0.1:10911"}
    values.update(changes)
    return StoreConfig(**values)


def build_sample_store(root: Path, n: int = 60) -> None:
    """A small valid store (two topics, IPv4 and IPv6 hosts, every transaction type)."""
    from rocketstore import Message
    rng = random.Random(7)
    with MessageStore.open(root, _store_config(root)) as store:
        for i in range(n):
            msg = Message(("T", "audit")[i % 2], rng.randbytes(rng.choice((0, 5, 40, 300))),
                          tags=rng.choice((None, "paid", "订单")), keys=[f"k{i}", "x", "y"],
                          properties={"p": "v" * rng.randrange(1, 4)},
                          born_host=rng.choice(("1.2.3.4:5", "[fd00::1]:7")),
                          sys_flag=rng.choice((0, 0, 0x4, 0x8, 0xC)))
            assert store.put_message(msg, i % 2).ok
        assert store.wait_dispatched()


# ---- targets --------------------------------------------------------------------------------

def fuzz_commitlog(data: bytes) -> None:
    if not data:
        return
    flags, buf = data[0], data[1:]
    check_crc = bool(flags & 1)
    base = -1 if flags & 2 else 0
    try:
        res = record.scan_region(buf, 0, check_crc=check_crc, base_offset=base)
    except ValueError:
        return
    for off in res.offsets.tolist()[:8]:
        msg = record.decode_message(buf, off, check_crc=check_crc)
        msg.to_dict()
        _ = (msg.msg_id, msg.born_host, msg.store_host, msg.tags, msg.keys, msg.tags_code,
             msg.properties_string, bytes(msg.body))
    for pos in (0, res.stop_position, len(buf) // 2):
        try:
            record.record_status(buf, pos, check_crc=check_crc, expected_phy=pos)
            record.decode_message(buf, pos, check_crc=check_crc)
        except ValueError:
            pass
    found = record.find_record(buf, 1, check_crc=check_crc, base_offset=0,
                               segment_end=len(buf) + (flags >> 4))
    if found >= 0:
        record.scan_region(buf, found, check_crc=check_crc, base_offset=0, max_records=4)
    try:
        columnar.decode_region(buf, 0, len(buf), base_offset=0,
                               include_body=bool(flags & 4), check_crc=check_crc,
                               spark=bool(flags & 8))
    except ValueError:
        pass


_CQ: dict[str, object] = {}


def _cq_setup() -> None:
    root = SCRATCH / "cq"
    build_sample_store(root)
    qdir = root / "consumequeue" / "T" / "0"
    for p in qdir.iterdir():
        p.unlink()
    shutil.rmtree(root / "index")
    store = MessageStore.open(root, _store_config(root), read_only=True)
    _CQ.update(root=root, qdir=qdir, store=store)


def fuzz_consumequeue(data: bytes) -> None:
    if not _CQ:
        _cq_setup()
    root, qdir, store = _CQ["root"], _CQ["qdir"], _CQ["store"]
    assert isinstance(qdir, Path) and isinstance(store, MessageStore)
    size = 20 * CQ_UNITS
    cut = min(len(data), 2 * size)
    (qdir / f"{0:020d}").write_bytes(data[:min(cut, size)])
    second = qdir / f"{size:020d}"
    if cut > size:
        second.write_bytes(data[size:cut])
    elif second.exists():
        second.unlink()
    table = ConsumeQueueTable(str(root), size, read_only=True)
    try:
        table.load()
    except ValueError:
        return
    try:
        table.recover()
        commit_log = store.commit_log
        for cq in table.all():
            from rocketstore.store.recovery import unit_points_at_its_record
            cq.check_end(lambda q, phy, sz, _t, cq=cq:
                         unit_points_at_its_record(commit_log, cq, q, phy, sz))
            cq.correct_min_offset(commit_log.min_offset())
            cq.units_between(cq.min_offset, cq.max_offset)
            offset = cq.min_offset
            for _ in range(8):
                r = queue_reads.get_message(store.config, commit_log, table, cq.topic,
                                            cq.queue_id, offset, 16, "*")
                if r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
    finally:
        table.close()


def fuzz_index(data: bytes) -> None:
    path = SCRATCH / "index" / "20260101000000000"
    path.parent.mkdir(exist_ok=True)
    body = data[:INDEX_SIZE]
    if len(data) > 0 and data[0] & 1:      # usually a whole file, sometimes a short one
        body = body.ljust(INDEX_SIZE, b"\0")
    path.write_bytes(body)
    try:
        f = IndexFile.load(path, SLOTS, ITEMS)
    except ValueError:
        return
    try:
        f.check()
        for key in ("T#k1", "T#x", "audit#k2", "T#" + data[:4].hex()):
            f.select_phy_offsets(key, 8, 0, 2**62)
            f.walk(zlib.crc32(key.encode()) & 0x7FFFFFFF, -1, 8, -(2**62), 2**62)
        for n in (0, 1, ITEMS - 1):
            f.read_item(n)
        f.trailing_items(0)
        f.truncate(int.from_bytes(data[4:8] or b"\0", "big"))
        f.put_key("T#new", 10**6, 1)
        f.put_hash(12345, 10**6 + 1, 2)
        f.check()
    finally:
        f.close()


def fuzz_checkpoint(data: bytes) -> None:
    path = SCRATCH / "checkpoint"
    path.write_bytes(data)
    for read_only in (True, False):
        cp = StoreCheckpoint(str(path), read_only=read_only)
        cp.load()
        cp.min_timestamp()
        cp.min_timestamp_index()
        cp.as_dict()
        cp.close()


def fuzz_config(data: bytes) -> None:
    root = SCRATCH / "config-store"
    (root / "config").mkdir(parents=True, exist_ok=True)
    text = data.decode("utf-8", "surrogateescape")
    for name in ("queueOffsets.json", "damagedRanges.json", "consumerOffset.json"):
        path = root / "config" / name
        path.write_bytes(data)
        if name == "queueOffsets.json":
            read_shutdown_state(str(path))
        elif name == "damagedRanges.json":
            DamageFile(str(path)).load()
        else:
            try:
                load_offset_table(root)
            except ValueError:
                pass
    try:
        json.loads(text)
    except ValueError:
        pass


def fuzz_properties(data: bytes) -> None:
    try:
        StoreConfig.from_properties(io.BytesIO(data))
    except ValueError:
        pass


TARGETS = {"commitlog": fuzz_commitlog, "consumequeue": fuzz_consumequeue,
           "index": fuzz_index, "checkpoint": fuzz_checkpoint, "config": fuzz_config,
           "properties": fuzz_properties}


# ---- seeds ------------------------------------------------------------------------------------

def write_seeds(target: str, directory: Path) -> None:
    """Valid inputs to start from (libFuzzer mutates them)."""
    directory.mkdir(parents=True, exist_ok=True)
    root = SCRATCH / f"seed-{target}"
    if not root.exists():
        build_sample_store(root)
    seeds: list[bytes] = []
    if target == "commitlog":
        seg = (root / "commitlog" / f"{0:020d}").read_bytes()
        res = record.scan_region(seg, 0, check_crc=True, base_offset=0)
        offs, sizes = res.offsets.tolist(), res.sizes.tolist()
        for i in range(0, len(offs), 3):
            chunk = bytearray(seg[offs[i]:offs[i] + sum(sizes[i:i + 3])])
            at = 0
            for s in sizes[i:i + 3]:        # as if the chunk were a segment's start
                struct.pack_into(">q", chunk, at + 28, at)
                at += s
            seeds.append(bytes([i % 16]) + bytes(chunk))
    elif target == "consumequeue":
        seeds += [p.read_bytes() for p in sorted((root / "consumequeue").glob("*/*/*"))]
    elif target == "index":
        seeds += [p.read_bytes() for p in sorted((root / "index").iterdir())]
    elif target == "checkpoint":
        seeds.append((root / "checkpoint").read_bytes()[:64])
    elif target == "config":
        seeds += [json.dumps({"queueOffsets": {"T": {"0": 5}}, "commitLogEnd": 99}).encode(),
                  json.dumps({"commitLog": [{"start": 1, "end": 9, "reason": "x"}],
                              "indexFiles": [{"name": "1", "reason": "y"}]}).encode(),
                  b'{"offsetTable":{"T@g":{0:12,1:7}}}']
    else:
        seeds.append(_store_config(root).to_properties().encode("latin-1"))
    for i, seed in enumerate(seeds):
        (directory / f"seed-{i}").write_bytes(seed)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer flags] "
                         "[corpus dirs]")
    target = sys.argv.pop(1)
    if not any(not a.startswith("-") for a in sys.argv[1:]):
        corpus = SCRATCH / f"corpus-{target}"
        write_seeds(target, corpus)
        sys.argv.append(str(corpus))
    if target == "consumequeue":
        _cq_setup()
    one = TARGETS[target]

    def test_one_input(data: bytes) -> None:
        try:
            one(data)
        except ValueError:      # the documented answer to bad input (its subclasses too)
            pass
        except OSError:
            pass

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
