import numpy as np
import numpy.typing as npt

from rocketstore._native.mapped_file import MappedFile

def write_units(
    mf: MappedFile,
    phys: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int32],
    tags: npt.NDArray[np.int64],
    queue_offsets: npt.NDArray[np.int64],
    start: int,
    max_physic_offset: int,
    allow_gap: bool = False,
) -> tuple[int, int, int, int]:
    """Write units from start; (next index, max physic offset, skipped, blank units). A unit
    past the queue's end stops the call unless allow_gap."""

def group_records(
    topic_ids: npt.NDArray[np.int32],
    queue_ids: npt.NDArray[np.int32],
    sys_flags: npt.NDArray[np.int32],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """(group id per record, keys topic_id << 32 | queue_id) in first-seen order, no sort;
    -1 for prepared / rolled-back transaction records (no unit)."""

def write_grouped_units(
    files: list[MappedFile | None],
    max_phys: npt.NDArray[np.int64],
    group_ids: npt.NDArray[np.int32],
    phys: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int32],
    tags: npt.NDArray[np.int64],
    queue_offsets: npt.NDArray[np.int64],
    slow: npt.NDArray[np.uint8],
) -> int:
    """Units of many queues in one pass into each queue's last file (files[group]); records
    that need another file are flagged in slow (with every later record of their queue)."""
