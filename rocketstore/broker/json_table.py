"""The broker's JSON tables on disk (RocketMQ's ConfigManager): ``<root>/config/<name>.json``.

Writing follows ConfigManager.persist / MixAll.string2File, made crash-safe: the new text goes
to ``<name>.json.tmp`` and is fsynced, the current file is copied to ``<name>.json.bak``, the
temp file is renamed over the main one and the directory is fsynced. A reader therefore finds
either the old or the new file whole, whenever a crash happens, and the ``.bak`` copy when the
main file is missing or unreadable (as ConfigManager.load falls back to it).

RocketMQ writes these files with fastjson, whose integer map keys are unquoted
(``{0:120}``); they are read leniently and written as standard JSON (which fastjson reads too).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson

from rocketstore.common.atomic_file import DEFAULT_FILE_SYSTEM, FileSystem, write_atomically
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.remoting.route_bodies import DataVersion

log = logging.getLogger(__name__)


class JsonTableFile:
    """One of the broker's JSON files: load (falling back to ``.bak``) and atomic writes,
    one writer at a time."""

    def __init__(self, path: str, fs: FileSystem = DEFAULT_FILE_SYSTEM) -> None:
        self.path = path
        self.fs = fs
        self._write_lock = threading.Lock()

    def load(self) -> Any | None:
        """The parsed content; None when neither the file nor its ``.bak`` exists (or both are
        empty). A broken main file falls back to ``.bak``; both broken raises ValueError."""
        first_error: Exception | None = None
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, "rb") as fh:
                    data = fh.read()
            except FileNotFoundError:
                continue
            if not data.strip():
                continue
            try:
                return loads_fastjson(data)
            except orjson.JSONDecodeError as exc:
                log.warning("%s is not valid JSON (%s)", candidate, exc)
                first_error = first_error or exc
        if first_error is not None:
            raise ValueError(f"{self.path} (and its .bak) cannot be read: {first_error}")
        return None

    def load_table(self, key: str) -> tuple[dict[str, Any], DataVersion | None]:
        """A RocketMQ table file's entries under key and its dataVersion ({} and None when
        there is no file); ValueError naming the file and the field when either is malformed."""
        data = self.load()
        if data is None:
            return {}, None
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: expected an object")
        table = data.get(key) or {}
        if not isinstance(table, dict):
            raise ValueError(f"{self.path}: {key} must be an object")
        version = data.get("dataVersion") or {}
        if not isinstance(version, dict):
            return table, None
        try:
            return table, DataVersion.from_json(version)
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None

    def write(self, data: bytes) -> None:
        with self._write_lock:
            write_atomically(self.path, data, backup="copy", fs=self.fs)


def dumps_pretty(data: Any) -> bytes:
    """Tables as RocketMQ writes them with prettyFormat: indented, keys sorted."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                        | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
