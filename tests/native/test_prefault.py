"""MappedFile's prefault, prefault_follow, warm and page-cache hints (prefault.pyx)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import assert_no_signal, run_python
from mapped_file_cases import SIZE

from rocketstore._native import prefault
from rocketstore._native.mapped_file import MappedFile


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

    from rocketstore._native.stop_flag import StopFlag

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
    before = dict(prefault.failure_counts)
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
    counts = prefault.failure_counts
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

from rocketstore._native import prefault
from rocketstore._native.mapped_file import MappedFile

mf = MappedFile(os.path.join(sys.argv[1], "0" * 20), 65536)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert mf.mlock() is False, "mlock succeeded despite RLIMIT_MEMLOCK=0"
    assert prefault.failure_counts["mlock"] == 1, prefault.failure_counts
    mf.warm("ASYNC_FLUSH", 4)          # soft: a counter, not an exception
    mf.warm("SYNC_FLUSH", 4)
    assert prefault.failure_counts["mlock"] == 3, prefault.failure_counts
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
