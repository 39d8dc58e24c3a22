"""The ConsumeQueue extension (RocketMQ 4.9's ConsumeQueueExt, ``enableConsumeQueueExt``):
per queue, files under ``consumequeue_ext/<topic>/<queueId>/`` (segments of
mappedFileSizeConsumeQueueExt bytes, 48 MiB by default) holding one unit per ConsumeQueue unit:

    size int16 | tagsCode int64 | msgStoreTime int64 | bitMapSize int16 | filterBitMap

big-endian, size = 20 + bitMapSize. The ConsumeQueue unit's tagsCode is then the unit's
*ext address*: its byte offset in the extension plus Long.MIN_VALUE, so every address is at
most MAX_ADDR (Integer.MIN_VALUE - 1) and never a tags code (an int32 hash widened to int64;
delivery times of the delay topic are positive). A unit that does not fit in the rest of a
segment ends it with int16 -1 (4 bytes are always kept free for it) and goes to the next.

The extension is "weakly reliable" in RocketMQ's words: a unit that cannot be read gives no
tags code and no bitmap, and the reader then decides from the record itself."""
from __future__ import annotations

import logging
import os
import struct
import threading
from dataclasses import dataclass

from rocketstore.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

LONG_MIN = -(1 << 63)
#: the largest ext address (Integer.MIN_VALUE - 1): tags codes are all above it
MAX_ADDR = -(1 << 31) - 1
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN
#: size, tagsCode, msgStoreTime, bitMapSize
MIN_EXT_UNIT_SIZE = 2 + 8 * 2 + 2
MAX_EXT_UNIT_SIZE = 0x7FFF
END_BLANK_DATA_LENGTH = 4
_HEAD = struct.Struct(">hqqh")


def is_ext_addr(tags_code: int) -> bool:
    """ConsumeQueueExt.isExtAddr: the unit's tagsCode is an address in the extension."""
    return tags_code <= MAX_ADDR


def decorate(offset: int) -> int:
    """A byte offset in the extension as the address kept in the ConsumeQueue unit."""
    return offset if is_ext_addr(offset) else offset + LONG_MIN


def undecorate(address: int) -> int:
    return address - LONG_MIN if is_ext_addr(address) else address


@dataclass(frozen=True)
class CqExtUnit:
    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None = None

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + len(self.filter_bit_map or b"")

    def encode(self) -> bytes:
        bitmap = self.filter_bit_map or b""
        return _HEAD.pack(self.size, self.tags_code, self.msg_store_time, len(bitmap)) + bitmap

    @classmethod
    def decode(cls, data: bytes | memoryview) -> CqExtUnit | None:
        """The unit at the start of data (None: no unit there, or cut short)."""
        if len(data) < MIN_EXT_UNIT_SIZE:
            return None
        size, tags_code, store_time, bitmap_size = _HEAD.unpack_from(data)
        if size < MIN_EXT_UNIT_SIZE or size > len(data):
            return None
        if bitmap_size < 1:
            return cls(tags_code, store_time, None)
        if MIN_EXT_UNIT_SIZE + bitmap_size > size:
            return None
        return cls(tags_code, store_time,
                   bytes(data[MIN_EXT_UNIT_SIZE:MIN_EXT_UNIT_SIZE + bitmap_size]))


class ConsumeQueueExt:
    """One queue's extension files."""

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int, *,
                 read_only: bool = False) -> None:
        if file_size < MIN_EXT_UNIT_SIZE + END_BLANK_DATA_LENGTH:
            raise ValueError(f"mapped_file_size_consume_queue_ext must be at least "
                             f"{MIN_EXT_UNIT_SIZE + END_BLANK_DATA_LENGTH}, got {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.read_only = read_only
        self.queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size,
                                     read_only=read_only)
        self._lock = threading.Lock()

    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """Find the end: units are walked by their sizes through every file (a file ends at
        a size <= 0); positions are set there and what follows is dropped."""
        files = self.queue.files
        if not files:
            return
        end = files[0].file_from_offset
        for mf in files:
            pos = 0
            limit = mf.file_size - END_BLANK_DATA_LENGTH
            while pos + 2 <= limit:
                size = int.from_bytes(mf.read(pos, 2), "big", signed=True)
                if size < MIN_EXT_UNIT_SIZE or pos + size > limit:
                    break
                pos += size
            end = mf.file_from_offset + pos
            if mf is not files[-1]:
                mf.wrote_position = mf.committed_position = mf.flushed_position = mf.file_size
        self.queue.truncate_dirty(end, zero_tail=not self.read_only)
        self.queue.flushed_where = end

    # ---- writes (the dispatch thread) -----------------------------------------------------
    def put(self, unit: CqExtUnit) -> int:
        """Append unit; its address (< 0), or 1 when it could not be written (RocketMQ's
        answer: the ConsumeQueue unit then keeps the plain tags code)."""
        data = unit.encode()
        size = len(data)
        if size > MAX_EXT_UNIT_SIZE:
            log.error("ConsumeQueue ext unit of %d bytes (at most %d) for %s:%d", size,
                      MAX_EXT_UNIT_SIZE, self.topic, self.queue_id)
            return 1
        with self._lock:
            if self.queue.max_offset() + size > MAX_REAL_OFFSET:
                log.warning("ConsumeQueue ext of %s:%d is full", self.topic, self.queue_id)
                return 1
            for _ in range(3):
                mf = self.queue.last_file_for_append()
                wrote = mf.wrote_position
                if size > self.file_size - wrote - END_BLANK_DATA_LENGTH:
                    # the rest of this file: an end mark, then the next file
                    mf.write_at(wrote, b"\xff\xff")
                    mf.wrote_position = self.file_size
                    continue
                if mf.append(data):
                    return decorate(mf.file_from_offset + wrote)
        log.error("ConsumeQueue ext unit of %s:%d not written", self.topic, self.queue_id)
        return 1

    # ---- reads -----------------------------------------------------------------------------
    def get(self, address: int) -> CqExtUnit | None:
        """The unit at address (None: not an address, or nothing readable there)."""
        if not is_ext_addr(address):
            return None
        offset = undecorate(address)
        mf = self.queue.find_by_offset(offset)
        if mf is None or not mf.hold():
            return None
        try:
            pos = offset - mf.file_from_offset
            limit = mf.read_position
            if pos + MIN_EXT_UNIT_SIZE > limit:
                return None
            return CqExtUnit.decode(mf.view(pos, min(limit - pos, MAX_EXT_UNIT_SIZE)))
        finally:
            mf.release()

    @property
    def max_address(self) -> int:
        return decorate(self.queue.max_offset())

    @property
    def min_address(self) -> int:
        return decorate(self.queue.min_offset())

    # ---- trimming --------------------------------------------------------------------------
    def truncate_by_max_address(self, address: int) -> None:
        """Drop the units after the one at address (the ConsumeQueue's newest unit)."""
        unit = self.get(address)
        if unit is None:
            return
        self.queue.truncate_dirty(undecorate(address) + unit.size,
                                  zero_tail=not self.read_only)

    def truncate_all(self) -> None:
        """No ConsumeQueue unit points here any more: drop every file."""
        self.queue.truncate_dirty(self.queue.min_offset(), zero_tail=not self.read_only)

    def truncate_by_min_address(self, address: int) -> int:
        """Delete the files that end before address (the oldest ConsumeQueue unit's)."""
        if not is_ext_addr(address):
            return 0
        offset = undecorate(address)
        end = offset - offset % self.file_size
        return self.queue.delete_before(end) if end > self.queue.min_offset() else 0

    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        for mf in self.queue.files:
            mf.destroy(0)
        self.queue.close()
        try:
            os.rmdir(self.queue.store_path)
        except OSError:
            pass
