"""Cutting a closed store's CommitLog at an offset (RocketMQ 5's truncateFiles when a former
master rejoins as a slave): the bytes from the cut on are kept in a side file in the store
directory for inspection, the segment holding the cut is zeroed from there, later segments are
deleted, and the store is marked for the recovery a crash gets, which trims its ConsumeQueues
and IndexFiles to the new end when it opens."""
from __future__ import annotations

import logging
import os

from rocketstore.store.layout import StorePaths, segment_files
from rocketstore.store.shutdown_state import (
    QUEUE_OFFSETS_FILE,
    remove_shutdown_state,
)
from rocketstore.store.store_lock import StoreLock

log = logging.getLogger("rocketstore.store")

#: the side file: ``commitlog.truncated.<cut offset>`` in the store directory
SIDE_FILE_PREFIX = "commitlog.truncated."


def truncate_commit_log(root: str | os.PathLike[str], offset: int, end: int) -> str | None:
    """Cut the CommitLog of the closed store at root at offset (a record boundary); returns
    the side file holding the cut bytes up to end (the store's max offset before the cut: a
    record may end in zero bytes, so the data cannot tell), None when nothing lay between
    offset and end. ValueError naming the offset or end when one is negative or end is below
    offset; StoreLockedError when the store is open."""
    for name, value in (("offset", offset), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if end < offset:
        raise ValueError(f"end {end} is below offset {offset}")
    paths = StorePaths.of(root)
    lock = StoreLock(paths.lock)
    lock.acquire()
    try:
        side = os.path.join(paths.root, f"{SIDE_FILE_PREFIX}{offset}")
        cut = bytearray()
        touched = False
        for path in segment_files(paths.commitlog):
            base = int(os.path.basename(path))
            size = os.path.getsize(path)
            if base + size <= offset:
                continue
            with open(path, "r+b") as f:
                at = max(0, offset - base)
                f.seek(at)
                cut += f.read()
                if at:
                    f.seek(at)
                    f.write(bytes(size - at))
                    f.flush()
                    os.fsync(f.fileno())
            if not at:
                os.remove(path)
            touched = True
        data = bytes(cut[:end - offset])
        if not touched or not data:
            return None
        with open(side, "wb") as f:
            f.write(data)
            os.fsync(f.fileno())
        # the next open recovers as after a crash: queues and indexes end at the new end
        with open(paths.abort, "w"):
            pass
        remove_shutdown_state(paths.config_file(QUEUE_OFFSETS_FILE))
        log.warning("CommitLog of %s cut at offset %d: %d bytes kept in %s", paths.root, offset,
                    len(data), side)
        return side
    finally:
        lock.release()
