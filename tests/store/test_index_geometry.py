"""IndexFiles are read with the geometry they were written with (hash slots, items), found from
their size and data: a store opens and verifies as written, with or without a config, and new
files get the config's geometry, as RocketMQ's."""

from __future__ import annotations

import json
import logging
import shutil
import struct
from pathlib import Path

import pytest
from helpers import cli_run
from rocketmq_fixture import fixture_file

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store import IndexGeometryError, read_index_geometry
from rocketstore.store.layout import index_file_size, index_files

KEYS = 300


def _write(root: Path, slots: int, items: int, n: int = KEYS) -> None:
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                         mapped_file_size_consume_queue=20 * 1000, max_hash_slot_num=slots,
                         max_index_num=items)
    with MessageStore.open(root, config) as store:
        for i in range(n):
            assert store.put_message(Message("t", b"x" * 40, keys=[f"k{i}"]), i % 2).ok
        assert store.wait_dispatched()


def _keys_found(store: MessageStore, n: int = KEYS) -> list[int]:
    return [len(store.query_message("t", f"k{i}", 8, 0, 2**62).messages) for i in range(n)]


def test_a_store_of_100_slots_and_400_items_opens_as_written(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    _write(root, 100, 400, n=1000)          # about 1000 items: three files
    files = index_files(root)
    assert len(files) >= 3
    before = {p: Path(p).read_bytes() for p in files}
    # 8,440 bytes is also 500 slots / 320 items, 5 slots / 419 items...: the data tell
    assert all(read_index_geometry(p) == (100, 400) for p in files)
    assert all(read_index_geometry(p, [(500, 320)]) == (100, 400) for p in files)
    with caplog.at_level(logging.INFO, logger="rocketstore"):
        with MessageStore.open(root) as store:
            assert [(f.hash_slot_num, f.index_num) for f in store.index_service.files] == \
                [(100, 400)] * len(files)
            assert store.index_service.damaged_files == {}
            assert _keys_found(store, 1000) == [1] * 1000
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "is damaged" not in caplog.text and "index_files_repaired=[]" in caplog.text
    assert {p: Path(p).read_bytes() for p in index_files(root)} == before      # not re-indexed
    report = json.loads(cli_run("verify", str(root), "--json").stdout)
    assert report["ok"] is True and report["index"]["files"] == len(files)


def test_new_files_get_the_configs_geometry_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write(root, 100, 400, n=150)          # a key and a UNIQ_KEY each: one file, not full
    old = index_files(root)
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                         mapped_file_size_consume_queue=20 * 1000, max_hash_slot_num=64,
                         max_index_num=128)
    with MessageStore.open(root, config) as store:
        for i in range(150, 450):
            assert store.put_message(Message("t", b"x" * 40, keys=[f"k{i}"]), 0).ok
        assert store.wait_dispatched()
        geometries = [(f.hash_slot_num, f.index_num) for f in store.index_service.files]
        assert geometries[0] == (100, 400) and geometries[-1] == (64, 128)
        assert _keys_found(store, 450) == [1] * 450
    assert [read_index_geometry(p) for p in old] == [(100, 400)]
    assert Path(index_files(root)[-1]).stat().st_size == index_file_size(64, 128)
    with MessageStore.open(root, read_only=True) as store:       # mixed files, no config
        assert _keys_found(store, 450) == [1] * 450
    assert json.loads(cli_run("verify", str(root), "--json").stdout)["ok"] is True


def test_a_file_whose_data_fit_no_geometry_is_named(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write(root, 64, 400, n=50)
    (path,) = index_files(root)
    data = bytearray(Path(path).read_bytes())
    struct.pack_into(">q", data, 24, 123456789)         # endPhyOffset no item has
    Path(path).write_bytes(bytes(data))
    with pytest.raises(IndexGeometryError, match="no geometry .* fits its data"):
        read_index_geometry(path)
    # read as the config says when its size fits (IndexFile.check finds the damage)
    assert read_index_geometry(path, [(64, 400)]) == (64, 400)
    report = json.loads(cli_run("verify", str(root), "--json").stdout)
    assert report["ok"] is False
    assert any("no geometry" in line for line in report["index"]["listed"])


def test_an_empty_file_takes_a_preferred_geometry(tmp_path: Path) -> None:
    path = tmp_path / "20260101000000000"
    path.write_bytes(bytes(index_file_size(100, 400)))
    assert read_index_geometry(path, [(500, 320)]) == (500, 320)
    assert read_index_geometry(path) == (100, 400)          # RocketMQ's 4 items a slot
    path.write_bytes(bytes(index_file_size(64, 400)))
    assert read_index_geometry(path) == (4, 412)            # any will do: nothing to read
    path.write_bytes(bytes(41))
    with pytest.raises(IndexGeometryError, match="41 bytes"):
        read_index_geometry(path)


def test_rocketmqs_own_store_still_opens_and_verifies(tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(fixture_file("store"), root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert {read_index_geometry(p) for p in index_files(root)} == {(200, 800)}
    with MessageStore.open(root, read_only=True) as store:
        assert store.index_service.damaged_files == {}
        assert [(f.hash_slot_num, f.index_num) for f in store.index_service.files] == [(200, 800)] * 3
    assert json.loads(cli_run("verify", str(root), "--json").stdout)["ok"] is True
