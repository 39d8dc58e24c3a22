"""Type stub of rocketstore/_native/index_build.pyx: the batch build of an IndexFile."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rocketstore._native.index_file import IndexFile
from rocketstore._native.mapped_file import MappedFile

def build_index(
    f: IndexFile,
    commitlog_file: MappedFile,
    positions: npt.NDArray[np.int64] | Sequence[int],
    start: int = 0,
    key_start: int = 0,
) -> tuple[int, int]:
    """Index the records at positions into f; (len(positions), 0) when done, else where f
    stopped: full (roll), or needing blocks on disk (f.needs_room: make_room, call again)."""
