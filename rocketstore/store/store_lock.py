"""The store's writer lock: an exclusive flock on <root>/lock held while a writer runs."""
from __future__ import annotations

import fcntl
import os

from rocketstore.common.text import is_ascii_int


class StoreLockedError(RuntimeError):
    """Another process (or another MessageStore here) has the store open for writing."""


class StoreLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(
                f"store {os.path.dirname(self.path)} is locked by another writer (open it "
                "with read_only=True to read it while that writer runs)") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_holder(path: str) -> tuple[bool | None, int | None]:
    """(whether a writer holds the lock file at path, its pid), read from /proc/locks without
    touching the lock (taking it, even shared and for a moment, could make a starting writer
    fail). (None, None) where that cannot be told."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False, None
    except OSError:
        return None, None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 3708 fe:00:2146418 0 EOF" ("1: -> FLOCK ..." waits)
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return True, int(fields[4]) if is_ascii_int(fields[4]) else None
    return False, None
