"""The one way rocketstore replaces a small file (configs, offsets, manifests) so that a crash
at any moment leaves the old or the new content whole: write a temp file, fsync it, rename it
over the target, fsync the directory (the rename itself is durable only then).
"""
from __future__ import annotations

import os
import shutil
from typing import Literal


class FileSystem:
    """The calls the writer makes that a test may want to fail or watch (a seam: pass a
    subclass as ``fs``)."""

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def copy(self, src: str, dst: str) -> None:
        shutil.copyfile(src, dst)


DEFAULT_FILE_SYSTEM = FileSystem()


def write_atomically(path: str | os.PathLike[str], data: bytes | str, *,
                     tmp_path: str | os.PathLike[str] | None = None,
                     backup: Literal["copy", "move"] | None = None,
                     fs: FileSystem = DEFAULT_FILE_SYSTEM) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8).

    The temp file is ``<path>.tmp`` unless ``tmp_path`` names another; it is removed when the
    write fails. With ``backup``, the current file (if any) is kept as ``<path>.bak`` first:
    copied (``"copy"``: RocketMQ's ConfigManager, the main file is never missing) or renamed
    (``"move"``). The directory is made when missing.
    """
    path = os.fspath(path)
    tmp = path + ".tmp" if tmp_path is None else os.fspath(tmp_path)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while view:
                view = view[os.write(fd, view):]
            fs.fsync(fd)
        finally:
            os.close(fd)
        if backup is not None and os.path.exists(path):
            if backup == "copy":
                fs.copy(path, path + ".bak")
            else:
                fs.replace(path, path + ".bak")
        fs.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_directory(directory, fs)


def install_file(tmp_path: str | os.PathLike[str], path: str | os.PathLike[str],
                 fs: FileSystem = DEFAULT_FILE_SYSTEM) -> None:
    """Rename a finished file (written by someone else, e.g. a Parquet writer) into place the
    same way: fsync it, rename it over ``path``, fsync the directory."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fs.fsync(fd)
    finally:
        os.close(fd)
    fs.replace(os.fspath(tmp_path), os.fspath(path))
    fsync_directory(os.path.dirname(os.fspath(path)) or ".", fs)


def fsync_directory(directory: str | os.PathLike[str], fs: FileSystem = DEFAULT_FILE_SYSTEM) -> None:
    """Make the entries of ``directory`` (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fs.fsync(fd)
    finally:
        os.close(fd)
