"""Queue reads: RocketMQ's DefaultMessageStore.getMessage over a ConsumeQueue and the CommitLog."""
from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass, field

import numpy as np

from rocketstore._native import cq_ext, record
from rocketstore._native.queue_read import gather_queue_records, gather_records
from rocketstore.config import StoreConfig
from rocketstore.message import GetMessageStatus, MessageExt
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue
from rocketstore.store.consume_queue_ext import ConsumeQueueExt
from rocketstore.store.consume_queue_table import ConsumeQueueTable
from rocketstore.store.damage import DamagedRange
from rocketstore.store.filter_bitmap import GroupFilter
from rocketstore.store.subscription import parse_subscription

MAX_FILTER_MESSAGE_COUNT = 16000

log = logging.getLogger(__name__)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


TOTAL_PHYSICAL_MEMORY = _physical_memory()


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    #: (queue offset, CommitLog range) of the units this pull skipped because their record
    #: is damaged (README "Integrity"); the pull goes on past them. Status FOUND when other
    #: messages came back, NO_MATCHED_MESSAGE when none did (a consumer pulls on from
    #: next_begin_offset either way).
    damaged: list[tuple[int, DamagedRange]] = field(default_factory=list)
    #: the records joined, as stored (``get_message_records``): then ``messages`` is empty
    body: bytes | None = None
    body_count: int = 0
    #: units the bloom filter skipped without reading their record (ConsumeQueueExt bitmaps)
    bloom_skipped: int = 0

    @property
    def message_count(self) -> int:
        return self.body_count if self.body is not None else len(self.messages)

    @property
    def buffers(self) -> list[memoryview]:
        """The raw records: what a broker sends in a pull reply (the joined body, or each
        message's record, zero-copy and pinned)."""
        if self.body is not None:
            return [memoryview(self.body)]
        return [m.record for m in self.messages]


def check_get_args(topic: object, queue_id: object, offset: object, max_msgs: object) -> None:
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    if type(queue_id) is int and type(offset) is int and type(max_msgs) is int:
        if queue_id < 0:
            raise ValueError(f"queue_id must be >= 0, got {queue_id}")
        if max_msgs <= 0:
            raise ValueError(f"max_msgs must be positive, got {max_msgs}")
        return
    for name, value in (("queue_id", queue_id), ("offset", offset), ("max_msgs", max_msgs)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if queue_id < 0:  # type: ignore[operator]
        raise ValueError(f"queue_id must be >= 0, got {queue_id}")
    if max_msgs <= 0:  # type: ignore[operator]
        raise ValueError(f"max_msgs must be positive, got {max_msgs}")


def get_message(config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
                topic: str, queue_id: int, offset: int, max_msgs: int,
                subscription: str | None, expression_type: str | None = None,
                bloom: GroupFilter | None = None) -> GetMessageResult:
    """RocketMQ's getMessage. bloom: the pulling group's filter, whose positions in the
    units' ext bitmaps say which records cannot match (only for its own expression)."""
    check_get_args(topic, queue_id, offset, max_msgs)
    sub = parse_subscription(subscription, expression_type)
    sql = sub.sql
    correct = config.broker_role != "SLAVE" or config.offset_check_in_slave

    def correction(new_offset: int) -> int:
        return new_offset if correct else offset

    cq = queues.find(topic, queue_id)
    if cq is None:
        return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, correction(0), 0, 0)
    min_offset, max_offset = cq.min_offset, cq.max_offset
    if max_offset == 0:
        return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, correction(0),
                                min_offset, max_offset)
    if offset < min_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, correction(min_offset),
                                min_offset, max_offset)
    if offset == max_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, correction(offset),
                                min_offset, max_offset)
    if offset > max_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, correction(max_offset),
                                min_offset, max_offset)
    units = cq.read_units(offset, MAX_FILTER_MESSAGE_COUNT)
    if units is None:
        return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL,
                                correction(cq.roll_next_file(offset)), min_offset, max_offset)

    result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset,
                              max_offset)
    max_phy = commit_log.max_offset()
    memory = TOTAL_PHYSICAL_MEMORY * config.access_message_in_memory_max_ratio // 100
    next_phy_file_start = -1
    max_phy_pulling = 0
    buffer_total = 0
    messages = result.messages
    i = 0
    min_phy = commit_log.min_offset()
    # Work in chunks so a small pull does not convert 16,000 units to Python ints.
    chunk = max(32, max_msgs * 2)
    done = False
    ext = cq.ext
    for start in range(0, len(units), chunk):
        part = units[start:start + chunk]
        if ext is None:
            tags_codes = part["tags_code"].tolist()
            states: object = itertools.repeat(cq_ext.PLAIN, len(part))
        else:
            tags_codes, states = _resolve_ext(ext, part, bloom)
        for phy, size, tags_code, state in zip(part["offset"].tolist(), part["size"].tolist(),
                                               tags_codes, states, strict=True):
            qoff = offset + i
            max_phy_pulling = phy
            if size == BLANK_UNIT_SIZE:
                i += 1
                continue
            if next_phy_file_start >= 0 and phy < next_phy_file_start:
                i += 1
                continue
            in_disk = (max_phy - phy) > memory
            if _batch_full(config, size, max_msgs, buffer_total, len(messages), in_disk):
                done = True
                break
            i += 1
            if state == cq_ext.SKIP:
                result.bloom_skipped += 1
                continue
            if state != cq_ext.MISSING and not sub.matches_code(tags_code):
                if not messages:
                    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            msg = None if phy < min_phy or size <= 0 else _message_at(commit_log, phy, size)
            if msg is None and 0 <= phy < min_phy and size > 0:
                # deleted with its CommitLog file (retention): RocketMQ's answer
                if not messages:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = _roll_next_file(commit_log, phy)
                continue
            if msg is None or msg.queue_offset != qoff or msg.queue_id != queue_id or \
                    msg.topic != topic:
                # the unit does not point at its record: a damaged unit (the record is
                # found in the CommitLog) or a damaged record (skipped, reported)
                msg = _repair_unit(commit_log, cq, qoff, (phy, size, tags_code), result)
                if msg is None:
                    continue
                size = msg.store_size
                if not sub.matches_code(msg.tags_code):
                    continue
            if not sub.matches_tag(msg.tags) or (sql is not None and not sql.matches(msg.properties)):
                if not messages:
                    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            messages.append(msg)
            buffer_total += size
            result.status = GetMessageStatus.FOUND
            next_phy_file_start = -1
        if done:
            break
    result.buffer_total_size = buffer_total
    # past the units looked at, on a slave too: RocketMQ corrects only the offsets it refuses
    result.next_begin_offset = offset + i
    result.suggest_pulling_from_slave = (max_phy - max_phy_pulling) > memory
    return result


def get_message_records(config: StoreConfig, commit_log: CommitLog, queues: ConsumeQueueTable,
                        topic: str, queue_id: int, offset: int, max_msgs: int,
                        subscription: str | None, expression_type: str | None = None,
                        bloom: GroupFilter | None = None) -> GetMessageResult:
    """get_message's answer with the records joined into ``result.body`` natively
    (``queue_read.gather_records``: no MessageExt per message) when the subscription takes
    every message. get_message itself for a tag or SQL92 filter, damage in the CommitLog, or
    a pull whose first unit the native walk does not handle (deleted, blank-only or damaged
    units); a walk stopped by such a unit later answers with the records before it (the next
    pull starts at that unit)."""
    check_get_args(topic, queue_id, offset, max_msgs)
    sub = parse_subscription(subscription, expression_type)
    cq = queues.find(topic, queue_id)
    if not sub.match_all or cq is None or commit_log.damage.ranges:
        return get_message(config, commit_log, queues, topic, queue_id, offset, max_msgs,
                           subscription, expression_type, bloom)
    min_offset, max_offset = cq.min_offset, cq.max_offset
    if not min_offset <= offset < max_offset:
        return get_message(config, commit_log, queues, topic, queue_id, offset, max_msgs,
                           subscription, expression_type, bloom)
    log_queue = commit_log.queue
    max_phy = commit_log.max_offset()
    memory = TOTAL_PHYSICAL_MEMORY * config.access_message_in_memory_max_ratio // 100
    limits = (config.max_transfer_bytes_on_message_in_memory,
              config.max_transfer_count_on_message_in_memory,
              config.max_transfer_bytes_on_message_in_disk,
              config.max_transfer_count_on_message_in_disk)
    gathered = None
    if cq.overlay is None and not cq.corrections:
        # the units read in place from the queue's own segment (no view, no array)
        gathered = gather_queue_records(
            cq.queue.files, cq.queue.mapped_file_size, MAX_FILTER_MESSAGE_COUNT, log_queue.files,
            log_queue.mapped_file_size, commit_log.min_offset(), max_phy, memory, topic.encode(),
            queue_id, offset, max_msgs, *limits)
    if gathered is None:
        units = cq.read_units(offset, MAX_FILTER_MESSAGE_COUNT)
        if units is None:
            return get_message(config, commit_log, queues, topic, queue_id, offset, max_msgs,
                               subscription, expression_type, bloom)
        gathered = gather_records(units.view(np.uint8), log_queue.files,
                                  log_queue.mapped_file_size, commit_log.min_offset(), max_phy,
                                  memory, topic.encode(), queue_id, offset, max_msgs, *limits)
    body, count, consumed, last_phy, _ = gathered
    if not count:
        return get_message(config, commit_log, queues, topic, queue_id, offset, max_msgs,
                           subscription, expression_type, bloom)
    return GetMessageResult(GetMessageStatus.FOUND, offset + consumed, min_offset, max_offset,
                            buffer_total_size=len(body),
                            suggest_pulling_from_slave=(max_phy - last_phy) > memory,
                            body=body, body_count=count)
def _resolve_ext(ext: ConsumeQueueExt, part: np.ndarray, bloom: GroupFilter | None
                 ) -> tuple[list[int], list[int]]:
    """The units' tags codes through their ext units, and each unit's cq_ext state."""
    n = len(part)
    out_tags = np.empty(n, np.int64)
    out_state = np.empty(n, np.uint8)
    phys = np.ascontiguousarray(part["offset"], np.int64)
    codes = np.ascontiguousarray(part["tags_code"], np.int64)
    if bloom is None:
        cq_ext.resolve(phys, codes, ext.queue.files, ext.file_size, None, 0, 0, out_tags,
                       out_state)
    else:
        cq_ext.resolve(phys, codes, ext.queue.files, ext.file_size, bloom.positions,
                       bloom.bloom.bit_num, bloom.born_phy, out_tags, out_state)
    return out_tags.tolist(), out_state.tolist()


def _batch_full(config: StoreConfig, size: int, max_msgs: int, buffer_total: int,
                count: int, in_disk: bool) -> bool:
    """RocketMQ isTheBatchFull: message count and transfer byte/count limits."""
    if buffer_total == 0 or count == 0:
        return False
    if max_msgs <= count:
        return True
    if in_disk:
        return (buffer_total + size > config.max_transfer_bytes_on_message_in_disk
                or count > config.max_transfer_count_on_message_in_disk - 1)
    return (buffer_total + size > config.max_transfer_bytes_on_message_in_memory
            or count > config.max_transfer_count_on_message_in_memory - 1)


def _message_at(commit_log: CommitLog, phy: int, size: int) -> MessageExt | None:
    """The record a unit points at, if it is still there and is that record."""
    try:
        return commit_log.look_message_by_offset(phy, size)
    except (record.CorruptRecordError, ValueError):
        return None


def _unit_ok(commit_log: CommitLog, cq: ConsumeQueue, qoff: int) -> tuple[int, int] | None:
    """(phy, size) of the unit at qoff when it points at its record, else None."""
    unit = cq.get_unit(qoff)
    if unit is None or unit[1] == BLANK_UNIT_SIZE or unit[1] <= 0:
        return None
    msg = _message_at(commit_log, unit[0], unit[1])
    if msg is None or msg.queue_offset != qoff or msg.queue_id != cq.queue_id or \
            msg.topic != cq.topic:
        return None
    return unit[0], unit[1]


def _repair_unit(commit_log: CommitLog, cq: ConsumeQueue, qoff: int,
                 unit: tuple[int, int, int], result: GetMessageResult) -> MessageExt | None:
    """The record of unit qoff, whose unit (phy, size, tags code) points elsewhere: looked up in the
    CommitLog between the records of the nearest units that check out, and the unit fixed
    (ConsumeQueue.fix_unit). None when the record is not there: its bytes are damaged (the
    skip is added to result.damaged and logged)."""
    low = commit_log.min_offset()
    for back in range(1, 9):
        if qoff - back < cq.min_offset:
            break
        good = _unit_ok(commit_log, cq, qoff - back)
        if good is not None:
            low = good[0] + good[1]
            break
    high = commit_log.max_offset()
    for ahead in range(1, 9):
        if qoff + ahead >= cq.max_offset:
            break
        good = _unit_ok(commit_log, cq, qoff + ahead)
        if good is not None:
            high = good[0]
            break
    found = commit_log.find_queue_record(cq.topic, cq.queue_id, qoff, low, high)
    if found is not None:
        log.error("ConsumeQueue %s:%d unit %d %s: unit rebuilt from the CommitLog", cq.topic,
                  cq.queue_id, qoff, _unit_disagreement(commit_log, unit, found))
        cq.fix_unit(qoff, *found)
        return _message_at(commit_log, found[0], found[1])
    # the walk between the neighbours found (and marked) any damage there from record
    # boundaries; the unit's own offset may be garbage, so it never marks damage itself
    known = commit_log.damage.overlapping(low, high)
    damaged = known[0] if known else DamagedRange(
        low, high, f"the record of {cq.topic}:{cq.queue_id} offset {qoff} is not in the "
                   "CommitLog")
    log.error("get_message %s:%d skips offset %d: its record is damaged, CommitLog range %s",
              cq.topic, cq.queue_id, qoff, damaged)
    result.damaged.append((qoff, damaged))
    return None


def _unit_disagreement(commit_log: CommitLog, unit: tuple[int, int, int],
                       found: tuple[int, int, int]) -> str:
    """What a damaged unit (offset, size, tags code) says that its record, found at
    found = (offset, size, tags code), does not."""
    phy, size, tags_code = unit
    record_phy, record_size, record_tags = found
    tags = (f"; its tags code {tags_code} is not the record's {record_tags}"
            if tags_code != record_tags else "")
    if phy == record_phy:
        if size != record_size:
            return f"says its record at {phy} is {size} bytes; it is {record_size}{tags}"
        return (f"points at its record ({phy}, {size} bytes){tags}" if tags else
                f"points at its record ({phy}, {size} bytes), which did not read back")
    if record_phy < phy < record_phy + record_size:
        return (f"points at {phy} ({size} bytes), {phy - record_phy} bytes inside its record "
                f"at {record_phy} ({record_size} bytes){tags}")
    return (f"points at {phy} ({size} bytes), {_what_is_at(commit_log, phy)}; its record "
            f"is at {record_phy} ({record_size} bytes){tags}")


def _what_is_at(commit_log: CommitLog, phy: int) -> str:
    if phy < commit_log.min_offset():
        return f"below the CommitLog's first offset {commit_log.min_offset()}"
    if phy >= commit_log.max_offset():
        return f"past the CommitLog's end {commit_log.max_offset()}"
    status, size, reason = commit_log.record_at(phy)
    if status == "ok":
        msg = _message_at(commit_log, phy, size)
        if msg is not None:
            return (f"the record of {msg.topic}:{msg.queue_id} offset {msg.queue_offset} "
                    f"({size} bytes)")
    if status == "blank":
        return "the blank that ends a CommitLog file"
    return f"where no record starts ({reason or status})"


def _roll_next_file(commit_log: CommitLog, phy: int) -> int:
    size = commit_log.config.mapped_file_size_commit_log
    return phy + size - phy % size


def store_time_of(commit_log: CommitLog, phy: int, size: int) -> int:
    """Store timestamp of the record at phy (-1 when it is gone): pickupStoreTimestamp."""
    msg = _message_at(commit_log, phy, size)
    return -1 if msg is None else msg.store_timestamp
