"""EpochFile: a broker's replication epochs in its store directory (RocketMQ 5's
EpochFileCache, the file ``epochFileCheckpoint``).

Each entry says "epoch E began at CommitLog offset S": a master elected by the controller adds
(its new epoch, its max offset) before it takes sends; a slave copies its master's entries.
The file is text, as RocketMQ 5's CheckpointFile writes it: the number of entries, the CRC32 of
the entry lines, then one ``epoch-startOffset`` line per entry; it is replaced atomically.
Where two brokers' histories part (:func:`last_consistent_offset`): the end of the last epoch
both have with the same start (RocketMQ 5's findLastConsistentPoint).
"""
from __future__ import annotations

import os
import zlib
from collections.abc import Iterable

from rocketstore.common.atomic_file import write_atomically

EPOCH_FILE = "epochFileCheckpoint"

Entry = tuple[int, int]     # (epoch, startOffset)


class EpochFile:
    """The entries of ``<store root>/epochFileCheckpoint``, oldest first (epochs and start
    offsets both non-decreasing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.fspath(root), EPOCH_FILE)
        self.entries: list[Entry] = []
        self.load()

    def load(self) -> None:
        """Read the file (none: no entries). ValueError naming the file and the line when it
        is not an epoch file."""
        if not os.path.exists(self.path):
            self.entries = []
            return
        with open(self.path, encoding="ascii") as f:
            lines = [line.strip() for line in f if line.strip()]
        if len(lines) < 2:
            raise ValueError(f"{self.path}: an epoch file has a count and a checksum line")
        try:
            count, crc = int(lines[0]), int(lines[1])
            entries = [tuple(int(x) for x in line.split("-", 1)) for line in lines[2:]]
        except ValueError:
            raise ValueError(f"{self.path}: not an epoch file (lines {lines[:4]!r})") from None
        if count != len(entries) or crc != _crc(lines[2:]):
            raise ValueError(f"{self.path}: {len(entries)} entries where the file says {count}, "
                             "or the checksum differs")
        self.entries = [(e, s) for e, s in entries]     # type: ignore[misc]
        check_entries(self.entries, self.path)

    def save(self) -> None:
        lines = [f"{e}-{s}" for e, s in self.entries]
        write_atomically(self.path, "\n".join([str(len(lines)), str(_crc(lines)), *lines]) + "\n")

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def append(self, epoch: int, start_offset: int) -> None:
        """A new epoch beginning at start_offset (an entry for an epoch already there is
        left as it is). ValueError when it goes back."""
        if self.entries and epoch <= self.entries[-1][0]:
            if any(e == epoch for e, _ in self.entries):
                return
            raise ValueError(f"epoch {epoch} is older than the last one {self.entries[-1][0]}")
        if self.entries and start_offset < self.entries[-1][1]:
            raise ValueError(f"epoch {epoch} starts at {start_offset}, before the last epoch's "
                             f"start {self.entries[-1][1]}")
        self.entries.append((epoch, start_offset))
        self.save()

    def replace(self, entries: Iterable[Entry]) -> None:
        """Take another broker's entries (a slave copies its master's)."""
        new = [(int(e), int(s)) for e, s in entries]
        check_entries(new, "the master's epochs")
        if new != self.entries:
            self.entries = new
            self.save()

    def truncate_to(self, offset: int) -> None:
        """Forget epochs that begin after offset (their bytes were cut)."""
        kept = [(e, s) for e, s in self.entries if s <= offset]
        if kept != self.entries:
            self.entries = kept
            self.save()


def check_entries(entries: list[Entry], where: str) -> None:
    for (e0, s0), (e1, s1) in zip(entries, entries[1:], strict=False):
        if e1 <= e0 or s1 < s0:
            raise ValueError(f"{where}: epoch entries out of order: {e0}-{s0} then {e1}-{s1}")
    for e, s in entries:
        if e < 0 or s < 0:
            raise ValueError(f"{where}: negative epoch or offset in {e}-{s}")


def _crc(lines: list[str]) -> int:
    return zlib.crc32("".join(lines).encode("ascii"))


def epoch_ranges(entries: list[Entry], max_offset: int) -> dict[int, tuple[int, int]]:
    """epoch -> (startOffset, endOffset) for a log ending at max_offset."""
    out: dict[int, tuple[int, int]] = {}
    for i, (epoch, start) in enumerate(entries):
        end = entries[i + 1][1] if i + 1 < len(entries) else max_offset
        if start <= max_offset:
            out[epoch] = (start, min(end, max_offset))
    return out


def last_consistent_offset(local: list[Entry], local_max: int, remote: list[Entry],
                           remote_max: int) -> int:
    """Where the local log stops agreeing with the remote one: the end of the newest epoch
    both hold with the same start offset (the smaller of the two ends); 0 when they share
    none."""
    mine = epoch_ranges(local, local_max)
    theirs = epoch_ranges(remote, remote_max)
    for epoch in sorted(set(mine) & set(theirs), reverse=True):
        (s0, e0), (s1, e1) = mine[epoch], theirs[epoch]
        if s0 == s1:
            return min(e0, e1)
    return 0
