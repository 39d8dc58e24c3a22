"""The CommitLog as replication sees it: the bytes a master streams from an offset, a slave's
append of them, where a slave's log ends, and the store times a lag in ms is computed from.
A part of MessageStore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketstore._native import record
from rocketstore.store.record_ranges import align_to_record

if TYPE_CHECKING:
    from rocketstore.config import StoreConfig
    from rocketstore.store.commit_log import CommitLog


class ReplicaLog:
    """Replication's view of the CommitLog (MessageStore sets the parts)."""

    root: str
    read_only: bool
    _running: bool
    config: StoreConfig
    commit_log: CommitLog

    def last_store_timestamp(self) -> int:
        """Store time of the newest record (before the first append since the store opened:
        the newest the checkpoint holds as flushed; 0 when unknown)."""
        for mf in reversed(self.commit_log.queue.files[-2:]):
            if mf.store_timestamp > 0:
                return int(mf.store_timestamp)
        return max(0, int(self.commit_log.checkpoint.physic_msg_timestamp))

    def store_timestamp_from(self, commitlog_offset: int) -> int:
        """Store time of the first record starting at or after commitlog_offset, which may
        fall inside a record (a slave's acknowledged offset; RocketMQ's
        pickupStoreTimestamp); -1 when no readable record starts there."""
        at = align_to_record(self, max(0, commitlog_offset))
        try:
            msg = self.commit_log.look_message_by_offset(at)
        except record.CorruptRecordError:
            return -1
        return -1 if msg is None else msg.store_timestamp

    def get_commitlog_data(self, offset: int) -> memoryview | None:
        """The readable CommitLog bytes from offset to the end of its segment, as a view that
        pins the segment (no copy: what a master streams to its slaves); None when nothing
        is readable there."""
        return self.commit_log.get_data(offset)

    def append_commit_log(self, offset: int, data: bytes | bytearray | memoryview
                          | Sequence[bytes | bytearray | memoryview]) -> int:
        """A slave's append of its master's CommitLog bytes (RocketMQ appendToCommitLog):
        data (a buffer, or a list of buffers that follow each other) goes at offset, which
        must be get_replica_offset() (in an empty CommitLog: a segment start). Records may be split across calls and segment ends: only whole
        records become readable and are dispatched. Returns the new get_replica_offset().
        ValueError naming the offset when it is not the end, when the bytes are not
        CommitLog records (the bad ones are dropped), or when the store is not a slave's
        (broker_role SLAVE) or not running; OSError when the disk has no room."""
        if self.config.broker_role != "SLAVE":
            raise ValueError(f"append_commit_log: store {self.root} is not a slave's "
                             f"(broker_role {self.config.broker_role})")
        if self.read_only or not self._running:
            raise ValueError(f"append_commit_log: store {self.root} is "
                             f"{'read-only' if self.read_only else 'not running'}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        return self.commit_log.replica.append(offset, data)

    def get_replica_offset(self) -> int:
        """Where a slave's CommitLog ends, counting the received start of a record not
        complete yet (what the slave reports to its master; RocketMQ's slave reports
        getMaxPhyOffset). Equals get_max_phy_offset() on a master."""
        return self.commit_log.replica.end()
