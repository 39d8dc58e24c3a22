"""The damage matrix: every kind of store file x every kind of damage, opened writable and
read-only. Each case: no crash; every record outside the damaged bytes is still served by
get_message, query_message and scan (byte for byte); `verify` names the damage.

File kinds: CommitLog head / middle / tail segment, a ConsumeQueue file, an IndexFile, the
checkpoint, a config JSON file. Damage kinds: truncate, zero a range, random bytes, bit
flips. The damage is placed where a check can see it (a record's header and body, the units
and index items in use, the checkpoint's timestamps, JSON syntax): damage to bytes no check
covers (the middle of a properties text, an unused index item) is not visible to anyone and
is left to the fuzz tests.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import struct
from pathlib import Path
from typing import Any

import helpers
import pytest
import refcodec

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.verify import verify

SEG = 64 * 1024
CQ_UNITS = 25
N = 600
TOPICS = ("orders", "audit")
QUEUES = 3

FILE_KINDS = ["commitlog-head", "commitlog-middle", "commitlog-tail", "consumequeue", "index",
              "checkpoint", "config"]
DAMAGE_KINDS = ["truncate", "zero", "random", "bitflip"]


def _config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEG,
                       mapped_file_size_consume_queue=20 * CQ_UNITS, max_hash_slot_num=50,
                       max_index_num=200, store_host=helpers.STORE_HOST)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("matrix") / "store"
    rng = random.Random(2026)
    with MessageStore.open(root, _config(root)) as store:
        for i in range(N):
            msg = Message(TOPICS[i % 2], rng.randbytes(rng.randrange(100, 500)),
                          tags=f"t{i % 4}", keys=[f"key-{i}"])
            assert store.put_message(msg, i % QUEUES).ok
        assert store.wait_dispatched()
    (root / "config" / "consumerOffset.json").write_text(json.dumps(
        {"offsetTable": {f"orders@g{k}": {str(q): 10 + q for q in range(QUEUES)}
                         for k in range(3)}}, indent=1))
    records = refcodec.walk_commitlog(root, SEG).records
    assert len(records) == N
    segments = sorted((root / "commitlog").iterdir())
    assert len(segments) >= 4
    return {"root": root, "records": records, "segments": [p.name for p in segments]}


def _damage(base: dict[str, Any], root: Path, kind: str, damage: str, rng: random.Random
            ) -> dict[str, Any]:
    """Damage one file of the store at root; returns {path, lost: [a, b) CommitLog bytes
    whose records may be lost, needle: what verify must name, detectable}."""
    records = base["records"]
    if kind.startswith("commitlog"):
        names = base["segments"]
        name = {"commitlog-head": names[0], "commitlog-middle": names[len(names) // 2],
                "commitlog-tail": names[-1]}[kind]
        path = root / "commitlog" / name
        start = int(name)
        mine = [r for r in records if start <= r.commitLogOffset < start + SEG]
        victim = rng.choice(mine[1:-1] if len(mine) > 2 else mine)
        at = victim.commitLogOffset - start + rng.randrange(0, 36)
        if damage == "truncate":
            cut = victim.commitLogOffset - start + rng.randrange(1, victim.storeSize)
            os.truncate(path, cut)
            lost = (start + cut, start + SEG)
        elif damage in ("zero", "random"):
            n = rng.randrange(64, 3000)
            data = bytes(n) if damage == "zero" else rng.randbytes(n)
            _write(path, at, data)
            lost = (start + at, start + at + n)
        else:
            body = victim.commitLogOffset - start + 88
            spots = [at, body + rng.randrange(max(1, victim.bodyLen))]
            for spot in spots:
                _flip(path, spot, rng)
            lost = (start + min(spots), start + max(spots) + 1)
        return {"path": path, "lost": lost, "needle": None, "detectable": True}
    if kind == "consumequeue":
        qdir = root / "consumequeue" / rng.choice(TOPICS) / str(rng.randrange(QUEUES))
        files = sorted(qdir.iterdir())
        path = rng.choice(files[:-1] if len(files) > 1 else files)
        used = _used_units(path)
        u = rng.randrange(used)
        if damage == "truncate":
            os.truncate(path, u * 20 + rng.randrange(20))
        elif damage in ("zero", "random"):
            n = rng.randrange(1, min(6, used - u) + 1) * 20
            _write(path, u * 20, bytes(n) if damage == "zero" else rng.randbytes(n))
        else:
            _flip(path, u * 20 + rng.choice([rng.randrange(0, 8), rng.randrange(8, 12)]), rng)
        return {"path": path, "lost": None, "needle": f"{qdir.parent.name}:{qdir.name}",
                "detectable": True}
    if kind == "index":
        path = rng.choice(sorted((root / "index").iterdir()))
        with open(path, "rb") as f:
            count = struct.unpack(">i", f.read(40)[36:])[0]
        used = 40 + 50 * 4 + count * 20         # header, slots, the items in use
        if damage == "truncate":
            os.truncate(path, rng.randrange(used))
        elif damage in ("zero", "random"):
            at = rng.randrange(used - 20)
            n = rng.randrange(8, min(400, used - at) + 1)
            data = bytes(n) if damage == "zero" else rng.randbytes(n)
            if damage == "zero" and at >= 40 and all(b == 0 for b in path.read_bytes()[at:at + n]):
                at, data = 36, bytes(4)         # already zero there (empty slots): the count
            _write(path, at, data)
        else:
            spot = rng.choice([rng.randrange(0, 40), rng.randrange(240, used)])
            _flip(path, spot, rng, high=spot < 40)
        return {"path": path, "lost": None, "needle": path.name, "detectable": True}
    if kind == "checkpoint":
        path = root / "checkpoint"
        if damage == "truncate":
            os.truncate(path, rng.randrange(4096))
        elif damage == "zero":          # zero times are legal ("nothing flushed yet")
            _write(path, 0, bytes(24))
            return {"path": path, "lost": None, "needle": None, "detectable": False}
        elif damage == "random":
            _write(path, 0, rng.randbytes(24))
            _write(path, 0, bytes([0x80 | rng.randrange(256)]))   # negative: surely damage
        else:
            _flip(path, 8 * rng.randrange(3), rng, high=True)
        return {"path": path, "lost": None, "needle": "checkpoint", "detectable": True}
    path = root / "config" / rng.choice(["consumerOffset.json", "queueOffsets.json"])
    text = path.read_bytes()
    if damage == "truncate":
        os.truncate(path, rng.randrange(1, len(text) - 1))
    elif damage == "zero":
        _write(path, rng.randrange(len(text) - 4), bytes(4))
    elif damage == "random":
        _write(path, 0, b"\xff\xfe" + rng.randbytes(6))
    else:
        _flip(path, text.index(b"{"), rng)
    return {"path": path, "lost": None, "needle": path.name, "detectable": True}


def _write(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _flip(path: Path, at: int, rng: random.Random, high: bool = False) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x80 if high else 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _used_units(path: Path) -> int:
    data = path.read_bytes()
    n = 0
    while n * 20 + 20 <= len(data) and data[n * 20:n * 20 + 20] != bytes(20):
        n += 1
    return max(n, 1)


def _check_served(store: MessageStore, base: dict[str, Any], expected: list, label: str
                  ) -> None:
    by_offset = {r.commitLogOffset: r for r in base["records"]}
    want = {r.commitLogOffset for r in expected}
    # scan
    scanned = {m.commitlog_offset: m for m in store.scan(check_crc=True)}
    assert want <= set(scanned), (label, sorted(want - set(scanned))[:5])
    # get_message, every queue to its end
    pulled: dict[int, Any] = {}
    for topic in TOPICS:
        for qid in range(QUEUES):
            offset = store.get_min_offset_in_queue(topic, qid)
            for _ in range(N + 10):
                if offset >= store.get_max_offset_in_queue(topic, qid):
                    break
                r = store.get_message("g", topic, qid, offset, 16)
                assert r.next_begin_offset > offset, (label, topic, qid, offset, r.status)
                for m in r.messages:
                    assert m.topic == topic and m.queue_id == qid, label
                    pulled[m.commitlog_offset] = m
                offset = r.next_begin_offset
    assert want <= set(pulled), (label, sorted(want - set(pulled))[:5])
    for phy in want:
        rec = by_offset[phy]
        assert bytes(pulled[phy].body) == rec.body == bytes(scanned[phy].body), (label, phy)
    # query_message, by KEYS and by UNIQ_KEY
    for rec in expected:
        for key in (rec.keys, rec.uniqKey):
            found = [m.commitlog_offset for m in store.query_message(rec.topic, key).messages]
            assert rec.commitLogOffset in found, (label, key, found)


@pytest.mark.parametrize("damage", DAMAGE_KINDS)
@pytest.mark.parametrize("kind", FILE_KINDS)
def test_damage_matrix(base, tmp_path, kind, damage):
    label = f"{kind}/{damage}"
    # verify names the damage, on a copy nobody has repaired
    root = tmp_path / "verify"
    shutil.copytree(base["root"], root)
    spec = _damage(base, root, kind, damage, random.Random(f"{kind}/{damage}"))
    lost = spec["lost"]
    expected = [r for r in base["records"] if lost is None
                or r.commitLogOffset + r.storeSize <= lost[0] or r.commitLogOffset >= lost[1]]
    report = verify(root, _config(root))
    if spec["detectable"]:
        assert not report.ok, (label, report.as_dict())
        text = json.dumps(report.as_dict())
        if spec["needle"] is not None:
            assert spec["needle"] in text, (label, spec["needle"], text[:2000])
        else:           # CommitLog damage: a damaged range (or the tail) covers the bytes
            ranges = report.damaged + report.tail
            assert any(r.start < lost[1] and lost[0] < r.end for r in ranges), (
                label, lost, report.as_dict())
    for read_only in (True, False):
        root = tmp_path / ("ro" if read_only else "rw")
        shutil.copytree(base["root"], root)
        _damage(base, root, kind, damage, random.Random(f"{kind}/{damage}"))
        with MessageStore.open(root, _config(root), read_only=read_only) as store:
            _check_served(store, base, expected, f"{label} read_only={read_only}")
            if not read_only:
                assert store.put_message(Message("orders", b"after"), 0).ok
                assert store.wait_dispatched()
        if not read_only:   # and once more, after what the writer repaired
            with MessageStore.open(root, _config(root)) as store:
                _check_served(store, base, expected, f"{label} reopened")
