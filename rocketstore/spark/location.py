"""Where a store is and how to open it from a Spark job: the store root, the file sizes read
from its files (so a store written with any settings opens as it is), a read-only open for
planning and a lightweight snapshot for the tasks.

Nothing here imports pyspark: the planning and reading code is usable (and tested) without it.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from rocketstore.config import StoreConfig
from rocketstore.store import MessageStore, StoreReader, detect_geometry


class MissingDataError(RuntimeError):
    """A task found less of the store than the driver planned (a segment or ConsumeQueue
    file missing or shorter on this host): the read fails rather than return fewer rows."""


def missing_data(root: str, what: str, path: str, planned: str) -> MissingDataError:
    """The error of a task that cannot read what was planned: names this host, the file and
    the planned range, and says how the store must be shared."""
    return MissingDataError(
        f"on host {socket.gethostname()}: {what} ({path}); the partition planned {planned}. "
        f"Every executor must see the store at {root} with the driver's contents (shared "
        "storage mounted at the same absolute path), or read it over the wire with "
        'format("rocketmq")')


def local_path(path: str, option: str = "path") -> str:
    """A store path as given to the source: a local path or a ``file:`` URI (the store is
    memory-mapped, so it must be a local or mounted file system; other schemes are refused)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"option {option!r} is required: the rocketstore directory (the one "
                         "holding commitlog/)")
    if "://" in path or path.startswith("file:"):
        parts = urlsplit(path)
        scheme = parts.scheme.lower()
        if scheme != "file":
            raise ValueError(
                f"option {option!r}: {path!r} has the scheme {parts.scheme + ':'!r}; a "
                "rocketstore is memory-mapped, so the store must be a local or mounted path "
                "(e.g. /data/store or file:///data/store, the same absolute path on the driver "
                "and every executor); to read a store behind brokers use format(\"rocketmq\")")
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"option {option!r}: {path!r} names host {parts.netloc!r}; a "
                             "file: URI of a rocketstore must be local (file:///path)")
        path = unquote(parts.path)
    return path


@dataclass(frozen=True)
class StoreLocation:
    """A store directory and the file sizes to open it with. Small and picklable: it travels
    in every InputPartition, and each task opens the files itself."""

    root: str
    commit_log_file_size: int
    consume_queue_file_size: int
    extra: tuple[tuple[str, Any], ...] = field(default=())   # other StoreConfig fields

    @classmethod
    def detect(cls, path: str, *, commit_log_file_size: int | None = None,
               consume_queue_file_size: int | None = None, must_exist: bool = True
               ) -> StoreLocation:
        """The store at path (its root, the directory holding ``commitlog/``), with the file
        sizes found in it; explicit sizes win. must_exist=False allows a new, empty store
        (for writing): missing sizes take StoreConfig's defaults."""
        root = os.path.abspath(os.path.expanduser(local_path(path)))
        if must_exist:
            if not os.path.isdir(root):
                raise FileNotFoundError(f"option 'path': store directory {root} does not exist")
            if not os.path.isdir(os.path.join(root, "commitlog")):
                hint = ""
                if os.path.basename(root) == "commitlog":
                    hint = f" (give the store root {os.path.dirname(root)}, not its commitlog/)"
                raise ValueError(f"option 'path': {root} is not a rocketstore directory: it has "
                                 f"no commitlog/ subdirectory{hint}")
        sizes = detect_geometry(root) if os.path.isdir(root) else {}
        defaults = StoreConfig(store_path_root_dir=root)
        cl = commit_log_file_size or sizes.pop("mapped_file_size_commit_log", None) or \
            defaults.mapped_file_size_commit_log
        sizes.pop("mapped_file_size_commit_log", None)
        cq = consume_queue_file_size or sizes.pop("mapped_file_size_consume_queue", None) or \
            defaults.mapped_file_size_consume_queue
        sizes.pop("mapped_file_size_consume_queue", None)
        return cls(root, int(cl), int(cq), tuple(sorted(sizes.items())))

    def config(self, **changes: Any) -> StoreConfig:
        values: dict[str, Any] = {
            "store_path_root_dir": self.root,
            "mapped_file_size_commit_log": self.commit_log_file_size,
            "mapped_file_size_consume_queue": self.consume_queue_file_size,
            **dict(self.extra),
        }
        values.update(changes)
        return StoreConfig(**values)

    @contextmanager
    def open_read_only(self) -> Iterator[MessageStore]:
        """MessageStore.open(read_only=True): no lock, no writing recovery, no file modified;
        it sees the valid prefix of what is there while another process writes."""
        store = MessageStore.open(self.root, self.config(), read_only=True)
        try:
            yield store
        finally:
            store.shutdown()

    def snapshot(self, end_offset: int | None = None) -> StoreReader:
        """The store's files read-only, fixed at end_offset (no recovery scan: see
        ``StoreReader``)."""
        return StoreReader(self.root, self.config(), end_offset)
