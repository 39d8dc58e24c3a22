"""Blocks on disk of a MappedFile (file_blocks.pyx): small stores stay small, a full disk is
a status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore._native.mapped_file import MappedFile


def _blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_a_new_file_is_sparse_and_allocates_in_chunks(tmp_path: Path) -> None:
    size = 4 << 20
    p = tmp_path / "00000000000000000000"
    f = MappedFile(p, size, allocation_chunk=256 << 10)
    assert f.allocated_position == 0 and _blocks(p) == 0 and os.path.getsize(p) == size
    assert f.allocate_to(1) == 256 << 10                 # a whole chunk
    assert f.allocate_to(100 << 10) == 256 << 10          # already there
    assert f.allocate_to((256 << 10) + 1) == 512 << 10    # the next chunk
    assert _blocks(p) >= 512 << 10
    assert f.allocate_to(size) == size                    # never past the file
    with pytest.raises(ValueError):
        f.allocate_to(size + 1)
    f.close()
    g = MappedFile(tmp_path / "00000000000004194304", size, preallocate=True,
                   allocation_chunk=1 << 20)
    assert g.allocated_position == 1 << 20 and _blocks(g.file_name) >= 1 << 20
    g.close()
    with pytest.raises(ValueError, match="allocation_chunk"):
        MappedFile(tmp_path / "x", size, allocation_chunk=0)


def test_writes_allocate_what_they_need_first(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000"
    f = MappedFile(p, 1 << 20, allocation_chunk=64 << 10)
    assert f.append(b"a" * 10)
    assert f.allocated_position == 64 << 10
    f.write_at((200 << 10), b"b" * 10)      # write_at: blocks up to where it writes
    assert f.allocated_position >= (200 << 10) + 10
    f.close()


def test_reopened_file_knows_its_blocks_up_to_the_first_hole(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000"
    f = MappedFile(p, 1 << 20, allocation_chunk=64 << 10)
    f.append(b"x" * 70_000)
    f.close()
    g = MappedFile(p, 1 << 20, create=False)
    # what was written (and allocated ahead) has blocks; past the first hole, unknown
    assert 70_000 <= g.allocated_position < 1 << 20
    g.close()


def test_zero_range_to_the_end_gives_the_blocks_back(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000"
    f = MappedFile(p, 1 << 20, allocation_chunk=1 << 20)
    f.append(b"y" * (600 << 10))
    assert _blocks(p) >= 600 << 10
    f.zero_range(10_000, (1 << 20) - 10_000)
    assert f.read(0, 10_000) == b"y" * 10_000 and f.read(10_000, 4000) == bytes(4000)
    assert f.allocated_position == 3 * 4096              # the page holding 10,000 stays
    assert _blocks(p) <= 16 << 10
    f.wrote_position = 10_000
    assert f.append(b"z" * 50_000) and f.read(10_000, 50_000) == b"z" * 50_000
    f.zero_range(100, 200)                                # mid-file: zeroed in place
    assert f.read(100, 200) == bytes(200) and f.read(0, 100) == b"y" * 100
    f.close()


def test_a_full_file_needs_no_more_blocks(tmp_path: Path) -> None:
    from rocketstore import Message
    from rocketstore._native.record_writer import RecordWriter

    f = MappedFile(tmp_path / "00000000000000000000", 4096, allocation_chunk=4096)
    w = RecordWriter(4096, 4 << 20, "127.0.0.1:10911")
    while True:
        r = w.append(f, Message(topic="t", body=b"b" * 100), 0)
        if r is None:
            break
        assert r.ok, (r, r.reason)
    assert f.is_full and f.allocated_position == 4096
    # a file that is full (the END_FILE blank written) asks for no blocks past its end
    assert w.append(f, Message(topic="t", body=b"b" * 100), 0) is None
    f.close()
