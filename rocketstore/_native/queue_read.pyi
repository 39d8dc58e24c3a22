from rocketstore._native.mapped_file import MappedFile

GATHER_UNITS_END: int
GATHER_FULL: int
GATHER_OTHER: int

def gather_records(
    units: bytes | bytearray | memoryview,
    files: list[MappedFile],
    file_size: int,
    min_phy: int,
    max_phy: int,
    memory: int,
    topic: bytes,
    queue_id: int,
    first_offset: int,
    max_msgs: int,
    memory_bytes: int,
    memory_count: int,
    disk_bytes: int,
    disk_count: int,
) -> tuple[bytes, int, int, int, int]:
    """(body, count, units consumed, last unit's CommitLog offset, stop reason)."""

def gather_queue_records(
    queue_files: list[MappedFile],
    queue_file_size: int,
    max_units: int,
    files: list[MappedFile],
    file_size: int,
    min_phy: int,
    max_phy: int,
    memory: int,
    topic: bytes,
    queue_id: int,
    first_offset: int,
    max_msgs: int,
    memory_bytes: int,
    memory_count: int,
    disk_bytes: int,
    disk_count: int,
) -> tuple[bytes, int, int, int, int] | None:
    """gather_records over the ConsumeQueue's units read in place; None: not readable there."""
