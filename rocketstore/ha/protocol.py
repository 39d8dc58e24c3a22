"""The HA wire format (RocketMQ 4.x; docs/format.md "HA").

Slave -> master: a bare int64 (big-endian), the slave's CommitLog end, on connect (where to
start; 0: the master's last segment), after each append and as a heartbeat. Master -> slave:
frames of a 12-byte header, phyOffset int64 and bodySize int32 (big-endian), then bodySize
CommitLog bytes (records may be split anywhere); bodySize 0 is a heartbeat.
"""
from __future__ import annotations

import struct

HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size          # 12
REPORT = struct.Struct(">q")
REPORT_SIZE = REPORT.size          # 8

#: The largest frame body a slave takes: RocketMQ's slave reads into a 4 MiB buffer
#: (HAClient READ_MAX_BUFFER_SIZE), so a master never sends more in one frame.
MAX_FRAME_BODY = 4 * 1024 * 1024


class HAFrameError(ValueError):
    """Bytes on an HA connection that break the protocol (the connection is closed)."""


def parse_header(data: bytes | memoryview) -> tuple[int, int]:
    """(phyOffset, bodySize) of a master's frame header, checked: HAFrameError naming the
    field when the offset is negative or the size outside [0, MAX_FRAME_BODY]."""
    phy_offset, body_size = HEADER.unpack(data)
    if phy_offset < 0:
        raise HAFrameError(f"frame phyOffset {phy_offset} is negative")
    if not 0 <= body_size <= MAX_FRAME_BODY:
        raise HAFrameError(f"frame bodySize {body_size} outside [0, {MAX_FRAME_BODY}]")
    return phy_offset, body_size


def parse_report(data: bytes | memoryview) -> int:
    """A slave's reported offset, checked: HAFrameError when negative."""
    (offset,) = REPORT.unpack(data)
    if offset < 0:
        raise HAFrameError(f"slave reported a negative offset {offset}")
    return offset
