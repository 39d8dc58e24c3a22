"""The one atomic file writer and its file-system seam (rocketstore.common.atomic_file)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore.common.atomic_file import FileSystem, install_file, write_atomically


class Recorder(FileSystem):
    """Watches the calls; fails the one named in fail_on."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail_on = fail_on

    def _fd_path(self, fd: int) -> str:
        return os.readlink(f"/proc/self/fd/{fd}")

    def fsync(self, fd: int) -> None:
        self.calls.append(("fsync", self._fd_path(fd)))
        super().fsync(fd)

    def replace(self, src: str, dst: str) -> None:
        self.calls.append(("replace", os.path.basename(dst)))
        if self.fail_on == "replace":
            raise OSError("power cut")
        super().replace(src, dst)


def test_writes_fsync_the_file_then_the_directory(tmp_path: Path) -> None:
    fs = Recorder()
    path = tmp_path / "sub" / "table.json"
    write_atomically(path, "{}", fs=fs)
    assert path.read_text() == "{}" and not (tmp_path / "sub" / "table.json.tmp").exists()
    assert fs.calls == [("fsync", str(path) + ".tmp"), ("replace", "table.json"),
                        ("fsync", str(tmp_path / "sub"))]


def test_backups_by_copy_and_by_move(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    write_atomically(path, b"1")
    write_atomically(path, b"2", backup="copy")
    assert path.read_bytes() == b"2" and (tmp_path / "t.json.bak").read_bytes() == b"1"
    fs = Recorder()
    write_atomically(path, b"3", backup="move", fs=fs)
    assert path.read_bytes() == b"3" and (tmp_path / "t.json.bak").read_bytes() == b"2"
    assert [c for c in fs.calls if c[0] == "replace"] == [("replace", "t.json.bak"),
                                                          ("replace", "t.json")]


def test_a_failed_rename_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    write_atomically(path, b"old")
    with pytest.raises(OSError, match="power cut"):
        write_atomically(path, b"new", fs=Recorder(fail_on="replace"))
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["t.json"]


def test_a_named_temp_file_and_installing_a_finished_file(tmp_path: Path) -> None:
    write_atomically(tmp_path / "m.json", "x", tmp_path=tmp_path / ".m.json.tmp")
    assert os.listdir(tmp_path) == ["m.json"]
    (tmp_path / "part.tmp").write_bytes(b"rows")
    fs = Recorder()
    install_file(tmp_path / "part.tmp", tmp_path / "part.parquet", fs)
    assert (tmp_path / "part.parquet").read_bytes() == b"rows"
    assert [c[0] for c in fs.calls] == ["fsync", "replace", "fsync"]
