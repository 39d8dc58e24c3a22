"""MappedFile: bounds, pinning views, destroy/detach, flush, page-cache hints, read-only."""

from __future__ import annotations

import gc
import mmap
import os
import time
from pathlib import Path

import pytest
from helpers import assert_no_signal, run_python

from rocketstore._native import mapped_file
from rocketstore._native.mapped_file import MappedFile

SIZE = 64 * 1024
PAGE = 4096


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000131072"


@pytest.fixture
def mf(path: Path):
    f = MappedFile(path, SIZE)
    yield f
    f.close()


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
from rocketstore._native.mapped_file import MappedFile, StopFlag

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


def test_prefault_keeps_bytes_and_checks_bounds(mf: MappedFile) -> None:
    mf.append(b"x" * 5000)
    assert mf.prefault(100, 10_000) == 10_100          # page-aligned inside, end as asked
    assert mf.prefault(60_000, 10_000) == SIZE          # clipped to the file
    assert mf.prefault(SIZE, 4096) == SIZE              # nothing left
    assert mf.read(0, 5000) == b"x" * 5000 and mf.read(5000, SIZE - 5000) == bytes(SIZE - 5000)
    assert mf.wrote_position == 5000
    with pytest.raises(ValueError):
        mf.prefault(-1, 10)
    with pytest.raises(ValueError):
        mf.prefault(0, -10)


def test_prefault_beside_a_writer_changes_nothing(tmp_path: Path) -> None:
    """Prefault runs on another thread while appends land in the same pages: every byte
    appended must survive (the touch is an atomic add of zero, or the kernel's populate)."""
    import threading

    size = 8 * 1024 * 1024
    f = MappedFile(tmp_path / "00000000000000000000", size, preallocate=True)
    stop = threading.Event()

    def prefault_loop() -> None:
        while not stop.is_set():
            pos = f.wrote_position
            f.prefault(pos, 256 * 1024)

    t = threading.Thread(target=prefault_loop)
    t.start()
    try:
        chunk = bytes(range(251)) * 4     # 1004 bytes: writes straddle pages at every offset
        n = 0
        while f.wrote_position + len(chunk) <= size:
            assert f.append(chunk)
            n += 1
    finally:
        stop.set()
        t.join()
    assert f.read(0, n * len(chunk)) == chunk * n
    f.close()


def test_prefault_follow_tracks_the_writer_and_stops(tmp_path: Path) -> None:
    """prefault_follow runs without the GIL beside appends: it returns when stopped, and by
    itself once the file is full; the appended bytes are intact."""
    import threading

    from rocketstore._native.mapped_file import StopFlag

    size = 4 * 1024 * 1024
    f = MappedFile(tmp_path / "00000000000000000000", size, preallocate=True)
    stop = StopFlag()
    reached: list[int] = []
    t = threading.Thread(target=lambda: reached.append(
        f.prefault_follow(256 * 1024, 0, 0.0002, stop, chunk=64 * 1024)))
    t.start()
    # The thread holds the file once it is inside prefault_follow; the writer pauses now and
    # then so a busy 2-core machine still gives the follower turns before the stop.
    deadline = time.monotonic() + 10
    while f.ref_count < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert f.ref_count == 2
    chunk = bytes(range(256)) * 3
    written = 0
    while written + len(chunk) <= size // 2:
        f.append(chunk)
        written += len(chunk)
        if written % (256 * 1024) < len(chunk):
            time.sleep(0.001)
    time.sleep(0.05)
    stop.set()
    t.join(10)
    assert not t.is_alive() and stop.is_set()
    assert 0 < reached[0] <= size          # it followed the writer (how far it got varies)
    # a full file ends the loop without a stop
    stop.clear()
    f.append(bytes(size - written))
    assert f.prefault_follow(4096, reached[0], 0.0002, stop) == reached[0]
    assert f.read(0, written) == chunk * (written // len(chunk))
    with pytest.raises(ValueError):
        f.prefault_follow(0, 0, 0.001, stop)
    f.close()


def test_prefault_on_read_only_or_closed_file(path: Path) -> None:
    MappedFile(path, SIZE).close()
    ro = MappedFile(path, SIZE, read_only=True)
    with pytest.raises((ValueError, PermissionError)):
        ro.prefault(0, 4096)
    ro.close()
    rw = MappedFile(path, SIZE)
    rw.close()
    with pytest.raises(ValueError):
        rw.prefault(0, 4096)


def test_warm_madvise_and_mlock_report_soft(mf: MappedFile) -> None:
    before = dict(mapped_file.failure_counts)
    assert set(before) >= {"madvise", "mlock", "munlock"}
    mf.warm("ASYNC_FLUSH", 4)  # a new file, as RocketMQ's warmMappedFile (it writes zeros)
    assert mf.read(0, SIZE) == bytes(SIZE)
    ok = mf.madvise_willneed()
    assert ok is True
    locked = mf.mlock()
    assert isinstance(locked, bool)
    if locked:
        assert mf.munlock() is True
    assert mf.munlock() is False  # not locked (any more)
    counts = mapped_file.failure_counts
    # every failure is counted, successes are not
    assert counts["madvise"] == before["madvise"]
    assert counts["mlock"] - before["mlock"] in (0, 2)


def test_warm_sync_flush(mf: MappedFile) -> None:
    mf.warm("SYNC_FLUSH", 2)
    assert mf.read(0, SIZE) == bytes(SIZE)


MLOCK_SCRIPT = """
import ctypes, os, resource, sys, warnings

# Drop CAP_IPC_LOCK (root ignores RLIMIT_MEMLOCK otherwise) and forbid locking any memory.
class Hdr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]
libc = ctypes.CDLL(None, use_errno=True)
hdr, data = Hdr(0x20080522, 0), (Data * 2)()
if libc.capget(ctypes.byref(hdr), data) == 0:
    data[0].effective &= ~(1 << 14)
    libc.capset(ctypes.byref(hdr), data)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))

from rocketstore._native import mapped_file
from rocketstore._native.mapped_file import MappedFile

mf = MappedFile(os.path.join(sys.argv[1], "0" * 20), 65536)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert mf.mlock() is False, "mlock succeeded despite RLIMIT_MEMLOCK=0"
    assert mapped_file.failure_counts["mlock"] == 1, mapped_file.failure_counts
    mf.warm("ASYNC_FLUSH", 4)          # soft: a counter, not an exception
    mf.warm("SYNC_FLUSH", 4)
    assert mapped_file.failure_counts["mlock"] == 3, mapped_file.failure_counts
    assert mf.munlock() is False
msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
assert len(msgs) == 1, msgs                 # warned once per kind
assert "mlock" in msgs[0] and mf.file_name in msgs[0], msgs
assert mf.append(b"data") and mf.read(0, 4) == b"data"   # still a working file
print("OK")
"""


def test_mlock_soft_fails_under_small_memlock_limit(tmp_path: Path) -> None:
    proc = run_python(MLOCK_SCRIPT, args=[str(tmp_path)], timeout=60)
    assert_no_signal(proc, "mlock soft failure")
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


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


# ---- blocks on disk (issue 17: small stores stay small; issue 14: a full disk is a status) ----

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


# ---- write-through (SYNC_FLUSH CommitLog files) -----------------------------------------------
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


def test_sync_checks_its_range(mf: MappedFile) -> None:
    mf.append(b"z" * 10)
    mf.sync(0, 10)                      # msync of the range (not write-through)
    assert mf.flushed_position == 0     # sync moves no position
    for start, end in ((-1, 5), (5, 4), (0, SIZE + 1)):
        with pytest.raises(ValueError, match="outside"):
            mf.sync(start, end)


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
