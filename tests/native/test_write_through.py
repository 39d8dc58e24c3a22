"""Write-through of a MappedFile (write_through.pyx): SYNC_FLUSH CommitLog files commit by
pwrite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mapped_file_cases import SIZE

from rocketstore._native.mapped_file import MappedFile


def _file_bytes(path: Path, pos: int, size: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, pos)
    finally:
        os.close(fd)


def test_write_through_commits_with_pwrite(mf: MappedFile, path: Path) -> None:
    assert not mf.write_through
    mf.enable_write_through()
    assert mf.write_through
    assert mf.append(b"a" * 100)
    # appended to the buffer only: neither readers nor the file see it yet
    assert mf.wrote_position == 100 and mf.read_position == 0
    assert mf.read(0, 100) == bytes(100) and _file_bytes(path, 0, 100) == bytes(100)
    assert mf.commit() == (100, None)
    assert mf.read_position == 100 and mf.committed_position == 100
    assert mf.read(0, 100) == b"a" * 100 and _file_bytes(path, 0, 100) == b"a" * 100
    assert mf.flushed_position == 0 and mf.dirty_range() == (0, 100)
    assert mf.append(b"b" * 50)
    assert mf.flush() == 150            # commits, then fdatasyncs
    assert mf.read_position == 150 and _file_bytes(path, 100, 50) == b"b" * 50
    with pytest.raises(ValueError, match="already writes to a buffer"):
        mf.enable_write_through()
    with pytest.raises(ValueError, match="already writes to a buffer"):
        mf.set_write_buffer(bytearray(SIZE))


def test_write_through_to_the_end_and_after(mf: MappedFile, path: Path) -> None:
    mf.write_at(0, b"old")              # through the mapping, before write-through
    mf.append(b"head")
    mf.enable_write_through()           # committed from here on
    assert mf.committed_position == 4 and mf.read_position == 4
    tail = os.urandom(SIZE - 4)
    assert mf.append(tail)
    assert not mf.append(b"x")          # full
    assert mf.commit() == (SIZE, None)
    assert mf.read(4, SIZE - 4) == tail and _file_bytes(path, 4, SIZE - 4) == tail
    assert mf.flush() == SIZE and mf.read_position == SIZE
    # the buffer is given back once the file is committed to its end: still consistent
    assert mf.committed_position == SIZE and mf.write_through
    assert mf.commit() == (SIZE, None)


def test_write_through_zero_range_and_truncation(mf: MappedFile, path: Path) -> None:
    mf.enable_write_through()
    mf.append(b"r" * 300)
    mf.commit()
    mf.zero_range(100, SIZE - 100)      # recovery giving up a torn tail
    mf.wrote_position = mf.committed_position = 100
    mf.flushed_position = min(mf.flushed_position, 100)
    mf.append(b"s" * 20)
    mf.flush()
    assert _file_bytes(path, 0, 130) == b"r" * 100 + b"s" * 20 + bytes(10)


def test_write_through_gives_buffer_pages_back(tmp_path: Path) -> None:
    """Pages of the anonymous buffer behind the committed position go back to the OS: a
    process writing 24 MiB through it keeps a few MiB resident, not 24."""
    size = 32 << 20
    f = MappedFile(tmp_path / "00000000000000000000", size)
    try:
        f.enable_write_through()
        chunk = os.urandom(1 << 20)

        def anon_kib() -> int:
            with open("/proc/self/smaps_rollup") as r:
                for line in r:
                    if line.startswith("Anonymous:"):
                        return int(line.split()[1])
            pytest.skip("no Anonymous line in /proc/self/smaps_rollup")

        before = anon_kib()
        for _ in range(24):
            assert f.append(chunk)
            f.commit()
        grown_mib = (anon_kib() - before) / 1024
        assert grown_mib < 12, f"{grown_mib:.1f} MiB of the write buffer still resident"
        assert _file_bytes(tmp_path / "00000000000000000000", 23 << 20, 1 << 20) == chunk
    finally:
        f.close()


def test_write_through_commits_from_several_threads(tmp_path: Path) -> None:
    """commit() from several threads while one appends (a flush round beside a flush from
    Python): one committer at a time, every byte reaches the file once, the buffer is given
    back once the file is committed to its end, and nothing crashes."""
    import threading
    size = 8 << 20
    path = tmp_path / "00000000000000000000"
    f = MappedFile(path, size)
    f.enable_write_through()
    chunks = [os.urandom(4000) for _ in range(size // 4000)]
    stop = threading.Event()

    def committer() -> None:
        while not stop.is_set():
            f.commit()

    threads = [threading.Thread(target=committer) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for c in chunks:
            assert f.append(c)
        assert f.append(b"z" * (size - f.wrote_position))
        f.flush()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert f.read_position == size and f.flushed_position == size
    expected = b"".join(chunks)
    assert _file_bytes(path, 0, len(expected)) == expected
    f.close()


def test_write_through_does_not_write_the_zeros_after_an_end_blank(tmp_path: Path) -> None:
    """A file closed by an END_FILE blank: the zeros after the blank's header are not written
    (readers skip them), so a sparse file gets no blocks for them."""
    size = 4 << 20
    path = tmp_path / "00000000000000000000"
    f = MappedFile(path, size)
    f.enable_write_through()
    f.append(b"r" * 5000 + b"\x01\x02\x03\x04\xcb\xd4\x31\x94")     # records, blank header
    f.wrote_position = size                                          # the blank to the end
    assert f.commit() == (size, None)
    assert f.read_position == size
    assert _file_bytes(path, 0, 5008) == b"r" * 5000 + b"\x01\x02\x03\x04\xcb\xd4\x31\x94"
    # blocks for what the appends allocated (a chunk), not the whole 4 MiB
    assert os.stat(path).st_blocks * 512 <= f.allocated_position < size
    f.close()
