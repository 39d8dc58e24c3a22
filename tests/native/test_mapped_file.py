"""MappedFile: bounds, pinning views, destroy/detach, flush and sync, read-only."""

from __future__ import annotations

import gc
import mmap
import os
from pathlib import Path

import pytest
from helpers import assert_no_signal, run_python
from mapped_file_cases import PAGE, SIZE

from rocketstore._native.mapped_file import MappedFile


def test_create_allocates_and_names(mf: MappedFile, path: Path) -> None:
    assert path.stat().st_size == SIZE
    assert mf.file_size == SIZE
    assert mf.file_from_offset == 131072
    assert mf.file_name == str(path)
    assert (mf.wrote_position, mf.committed_position, mf.flushed_position) == (0, 0, 0)
    assert mf.read(0, 16) == bytes(16)
    assert mf.is_available and not mf.is_full and mf.ref_count == 1


def test_append_bounds(mf: MappedFile) -> None:
    assert mf.append(b"abc") is True
    assert mf.wrote_position == 3
    assert mf.append(memoryview(b"defg")) is True
    assert mf.read(0, 7) == b"abcdefg"
    # a write that does not fit leaves everything as it was
    assert mf.append(b"x" * (SIZE - 7 + 1)) is False
    assert mf.wrote_position == 7
    assert mf.read(7, 8) == bytes(8)
    assert mf.append(b"y" * (SIZE - 7)) is True
    assert mf.wrote_position == SIZE and mf.is_full
    assert mf.append(b"z") is False
    assert mf.append(b"") is True


def test_write_at_bounds(mf: MappedFile) -> None:
    mf.write_at(100, b"hello")
    assert mf.read(100, 5) == b"hello"
    assert mf.wrote_position == 0  # write_at does not move the write position
    mf.write_at(SIZE - 2, b"zz")
    assert mf.read(SIZE - 2, 2) == b"zz"
    for pos, data in ((SIZE - 1, b"zz"), (-1, b"a"), (SIZE, b"a"), (2**62, b"a")):
        with pytest.raises(ValueError, match=str(mf.file_name)):
            mf.write_at(pos, data)
    assert mf.read(SIZE - 2, 2) == b"zz"


def test_read_and_view_bounds(mf: MappedFile) -> None:
    for pos, size in ((-1, 1), (0, SIZE + 1), (SIZE, 1), (1, -1)):
        with pytest.raises(ValueError):
            mf.read(pos, size)
        with pytest.raises(ValueError):
            mf.view(pos, size)
    assert mf.read(SIZE, 0) == b""
    assert len(mf.view(0, SIZE)) == SIZE


def test_positions_validated(mf: MappedFile) -> None:
    mf.wrote_position = SIZE
    assert mf.is_full
    for name in ("wrote_position", "committed_position", "flushed_position"):
        with pytest.raises(ValueError, match=name):
            setattr(mf, name, SIZE + 1)
        with pytest.raises(ValueError, match=name):
            setattr(mf, name, -1)


def test_view_is_zero_copy_read_only_and_pins(mf: MappedFile) -> None:
    mf.append(b"0123456789")
    base = mf.ref_count
    v = mf.view(2, 5)
    assert mf.ref_count == base + 1
    w = mf.view(0, 10)
    assert mf.ref_count == base + 2
    assert bytes(v) == b"23456"
    mf.write_at(2, b"X")  # a view sees later writes: no copy
    assert bytes(v) == b"X3456"
    assert v.readonly
    with pytest.raises(TypeError):
        v[0] = 1  # type: ignore[index]
    sub = v[1:3]  # a slice keeps the same pin alive
    del v
    gc.collect()
    assert mf.ref_count == base + 2
    assert bytes(sub) == b"34"
    del sub, w
    gc.collect()
    assert mf.ref_count == base


def test_destroy_waits_for_views_then_forces(mf: MappedFile, path: Path) -> None:
    mf.append(b"payload!")
    v = mf.view(0, 8)
    assert mf.destroy(60_000) is False  # a holder is alive: nothing unmapped or deleted
    assert path.exists()
    assert bytes(v) == b"payload!"
    assert not mf.is_available
    with pytest.raises(ValueError, match="destroyed"):
        mf.view(0, 1)  # no new holders once shut down
    assert mf.destroy(60_000) is False
    assert mf.destroy(0) is True  # the interval is over: forced
    assert not path.exists()
    assert bytes(v) == bytes(8)  # detached: the old view reads zeros, no fault
    assert mf.read(0, 8) == bytes(8)
    del v
    gc.collect()
    assert mf.is_cleanup_over
    with pytest.raises(ValueError):
        mf.read(0, 1)


def _fds_to(target: str) -> list[int]:
    """This process's descriptors open on target."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == target:
                found.append(int(name))
        except OSError:
            pass
    return found


def test_a_forced_detach_lets_the_file_go_and_keeps_its_descriptor_number_until_the_last_holder(
        mf: MappedFile, path: Path) -> None:
    """A holder may still be using the descriptor without the GIL (prefault_follow's
    allocation, a commit's pwrite): its number points at /dev/null until the last holder
    lets go, then it is closed once; a file opened in between never gets that number."""
    [fd] = _fds_to(str(path))
    v = mf.view(0, 8)
    assert mf.destroy(0) is False
    assert mf.destroy(0) is True            # forced: the file is let go and deleted
    assert _fds_to(str(path)) == [] and not path.exists()
    assert os.readlink(f"/proc/self/fd/{fd}") == "/dev/null"
    other = os.open(path.with_name("other"), os.O_RDWR | os.O_CREAT)
    try:
        assert other != fd
    finally:
        os.close(other)
    del v
    gc.collect()                            # the last release closes the parked number
    assert mf.is_cleanup_over
    assert not os.path.exists(f"/proc/self/fd/{fd}")
    mf.close()                              # nothing left to close twice


def test_destroy_without_views_is_immediate(mf: MappedFile, path: Path) -> None:
    mf.append(b"x")
    assert mf.destroy(60_000) is True
    assert not path.exists()
    assert mf.is_cleanup_over
    with pytest.raises(ValueError, match="closed"):
        mf.view(0, 1)
    with pytest.raises(ValueError, match="closed"):
        mf.append(b"x")


def test_close_keeps_live_views_mapped(path: Path) -> None:
    f = MappedFile(path, SIZE)
    f.append(b"keep")
    v = f.view(0, 4)
    f.close()
    assert bytes(v) == b"keep"
    assert path.exists()  # close never deletes
    with pytest.raises(ValueError):
        f.view(0, 1)
    del v
    gc.collect()
    assert f.is_cleanup_over
    assert path.read_bytes()[:4] == b"keep"


DETACH_SCRIPT = """
import os, sys
from rocketstore._native.mapped_file import MappedFile

op = sys.argv[1]
mf = MappedFile(os.path.join(sys.argv[2], "0" * 20), 65536)
mf.append(b"x")
v = mf.view(0, 1)
assert mf.destroy(0) is False      # first call: shut down, the view still holds the file
assert mf.destroy(0) is True       # interval over: detached and deleted
try:
    if op == "append":
        mf.append(b"y")
    elif op == "write_at":
        mf.write_at(0, b"y")
    elif op == "zero_range":
        mf.zero_range(0, 10)
    else:
        mf.warm()
except (ValueError, PermissionError) as e:
    print("refused:", e)
    sys.exit(0)
sys.exit(3)   # accepted a write into a detached file
"""


@pytest.mark.parametrize("op", ["append", "write_at", "zero_range", "warm"])
def test_write_after_forced_detach_raises_not_crashes(tmp_path: Path, op: str) -> None:
    proc = run_python(DETACH_SCRIPT, args=[op, str(tmp_path)], timeout=60)
    assert_no_signal(proc, f"{op} after forced destroy")
    assert proc.returncode == 0 and "refused" in proc.stdout, proc.stdout + proc.stderr


PREFAULT_DETACH_SCRIPT = """
import os, sys, threading, time
from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.stop_flag import StopFlag

size = 64 << 20
for i in range(int(sys.argv[2])):
    mf = MappedFile(os.path.join(sys.argv[1], f"{i * size:020d}"), size)
    stop = StopFlag()
    t = threading.Thread(target=mf.prefault_follow, args=(size, 0, 0.0001, stop),
                         kwargs={"chunk": 4 << 20})
    t.start()
    time.sleep(0.001 * (i % 4))
    mf.destroy(0)           # shut down: the loop still holds the file
    mf.destroy(0)           # forcibly: detached under the running loop
    t.join(30)
    stop.set()
    t.join(30)
    assert not t.is_alive()
print("survived")
"""


def test_forced_detach_under_a_running_prefault_loop_does_not_crash(tmp_path: Path) -> None:
    """A file detached while prefault_follow faults it in (a truncation or a deletion that
    forces a file its prefault thread holds): the loop stops, the process lives."""
    proc = run_python(PREFAULT_DETACH_SCRIPT, args=[str(tmp_path), "12"], timeout=120)
    assert_no_signal(proc, "forced detach under prefault_follow")
    assert proc.returncode == 0 and "survived" in proc.stdout, proc.stdout + proc.stderr


def test_flush_returns_positions(mf: MappedFile) -> None:
    assert mf.flush() == 0
    mf.append(b"a" * 100)
    assert mf.flush(4) == 0  # fewer than 4 dirty pages: not yet
    assert mf.flushed_position == 0
    assert mf.flush(0) == 100
    assert mf.flushed_position == 100
    mf.append(b"b" * (5 * PAGE))
    assert mf.flush(4) == 100 + 5 * PAGE
    mf.append(b"c" * 10)
    assert mf.flush(4) == 100 + 5 * PAGE  # still below the threshold
    mf.append(b"d" * (SIZE - mf.wrote_position))
    assert mf.flush(4) == SIZE  # a full file always flushes


def test_flushed_bytes_reach_the_file(mf: MappedFile, path: Path) -> None:
    mf.append(b"durable")
    mf.flush()
    with open(path, "rb") as f:
        assert f.read(7) == b"durable"


def _mapped_pages(addr: int, pages: int) -> list[bool]:
    """Whether each page from addr on is mapped in this process (/proc/self/pagemap bit 63)."""
    try:
        with open("/proc/self/pagemap", "rb", buffering=0) as f:
            f.seek(addr // PAGE * 8)
            raw = f.read(8 * pages)
    except OSError as e:
        pytest.skip(f"/proc/self/pagemap is not readable here: {e}")
    return [bool(int.from_bytes(raw[i:i + 8], "little") >> 63) for i in range(0, len(raw), 8)]


def test_flush_unmaps_whole_written_pages_and_keeps_their_bytes(mf: MappedFile,
                                                                path: Path) -> None:
    """Writeback of pages the writer has mapped writable costs a TLB-shootdown IPI per page,
    so a flush unmaps the pages written to their end first. Their bytes stay: in the page
    cache (a read faults them back in) and, once flushed, on disk."""
    np = pytest.importorskip("numpy")
    data = bytes(range(256)) * (3 * PAGE // 256) + b"tail"      # 3 whole pages and a bit
    mf.append(data)
    view = mf.view(0, len(data))
    addr = np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]
    assert _mapped_pages(addr, 4) == [True] * 4                  # written through the mapping
    assert mf.flush() == len(data)
    assert _mapped_pages(addr, 4) == [False, False, False, True]  # the one still filling stays
    assert bytes(view) == data
    mf.append(b"more")
    assert mf.flush() == len(data) + 4
    assert mf.read(0, len(data) + 4) == data + b"more"
    del view
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)           # the disk, not the page cache
    except OSError as e:
        pytest.skip(f"no O_DIRECT on this file system ({e}); the bytes were checked above")
    try:
        buf = mmap.mmap(-1, 4 * PAGE)                           # page-aligned, as O_DIRECT wants
        try:
            got = os.preadv(fd, [buf], 0)
        except OSError as e:
            pytest.skip(f"O_DIRECT read refused ({e}); the bytes were checked above")
        assert got == 4 * PAGE and buf[:len(data) + 4] == data + b"more"
    finally:
        os.close(fd)


def test_read_only_mapping_refuses_writes(path: Path) -> None:
    w = MappedFile(path, SIZE)
    w.append(b"written")
    w.close()
    ro = MappedFile(path, SIZE, read_only=True)
    try:
        assert ro.read_only
        assert ro.read(0, 7) == b"written"
        assert bytes(ro.view(0, 7)) == b"written"
        for call in (
            lambda: ro.append(b"x"),
            lambda: ro.write_at(0, b"x"),
            lambda: ro.zero_range(0, 1),
            lambda: ro.warm(),
        ):
            with pytest.raises(PermissionError, match="read-only") as info:
                call()
            assert str(path) in str(info.value)
        ro.wrote_position = 7
        assert ro.flush() == 0  # nothing to flush on a read-only mapping
        assert path.read_bytes()[:7] == b"written"
    finally:
        ro.close()


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000"
    with pytest.raises(FileNotFoundError, match=str(p)):
        MappedFile(p, SIZE, read_only=True)
    with pytest.raises(FileNotFoundError, match=str(p)):
        MappedFile(p, SIZE, create=False)
    assert not p.exists()


@pytest.mark.parametrize("read_only", [False, True])
def test_wrong_size_existing_file_rejected(tmp_path: Path, read_only: bool) -> None:
    p = tmp_path / "00000000000000000000"
    p.write_bytes(b"\x01" * (SIZE - 1))
    with pytest.raises(ValueError, match=str(p)) as info:
        MappedFile(p, SIZE, read_only=read_only, create=False)
    assert str(SIZE) in str(info.value) and str(SIZE - 1) in str(info.value)
    assert p.stat().st_size == SIZE - 1  # untouched
    p.write_bytes(b"\x01" * (SIZE + 1))
    with pytest.raises(ValueError, match=str(p)):
        MappedFile(p, SIZE, read_only=read_only)
    assert p.read_bytes() == b"\x01" * (SIZE + 1)


def test_bad_size_argument(tmp_path: Path) -> None:
    for size in (0, -1):
        with pytest.raises(ValueError, match="file_size"):
            MappedFile(tmp_path / "f", size)


def test_existing_file_is_mapped_not_cleared(path: Path) -> None:
    path.write_bytes(b"old" + bytes(SIZE - 3))
    f = MappedFile(path, SIZE, create=False)
    try:
        assert f.read(0, 3) == b"old"
        assert f.wrote_position == 0
    finally:
        f.close()
    assert os.path.getsize(path) == SIZE


def test_sync_checks_its_range(mf: MappedFile) -> None:
    mf.append(b"z" * 10)
    mf.sync(0, 10)                      # msync of the range (not write-through)
    assert mf.flushed_position == 0     # sync moves no position
    for start, end in ((-1, 5), (5, 4), (0, SIZE + 1)):
        with pytest.raises(ValueError, match="outside"):
            mf.sync(start, end)
