"""Retention runs and topic cleanup on demand: what the admin tool's deleteExpiredCommitLog,
deleteTopic, cleanUnusedTopic and cleanExpiredCQ ask of a store. A part of MessageStore."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from rocketstore.common.topics import SCHEDULE_TOPIC, is_system_topic

if TYPE_CHECKING:
    from rocketstore.store.commit_log import CommitLog
    from rocketstore.store.consume_queue_table import ConsumeQueueTable
    from rocketstore.store.services.clean import (
        CleanCommitLogService,
        CleanConsumeQueueService,
        CleanFilesService,
        CleanReport,
    )
    from rocketstore.store.services.reput import ReputMessageService

log = logging.getLogger(__name__)


class StoreMaintenance:
    """Cleanup on demand over the store's parts (MessageStore sets them)."""

    root: str
    read_only: bool
    _running: bool
    commit_log: CommitLog
    consume_queues: ConsumeQueueTable
    reput: ReputMessageService
    clean_commit_log: CleanCommitLogService
    clean_consume_queue: CleanConsumeQueueService
    clean_service: CleanFilesService | None

    if TYPE_CHECKING:
        def topics(self) -> list[str]: ...

    def clean_files(self, *, dry_run: bool = False, manual: bool = True) -> CleanReport:
        """A cleanup run now (RocketMQ's cleanFilesPeriodically, services/clean.py): with
        manual (executeDeleteFilesManually) files older than file_reserved_time hours go
        whatever the hour; over the watermarks, as the periodic run does. Then the
        ConsumeQueue and IndexFile files below the new minimum CommitLog offset. dry_run
        (any store, read-only included) changes nothing and reports what would go."""
        if dry_run:
            report = self.clean_commit_log.plan(manual)
            report.deleted.extend(self.clean_consume_queue.plan(report.min_offset_after))
            return report
        if self.read_only or not self._running:
            raise PermissionError(f"store {self.root} is not open for writing")
        if manual:
            self.clean_commit_log.execute_delete_files_manually()
        assert self.clean_service is not None
        return self.clean_service.run_cycle()

    def execute_delete_files_manually(self) -> None:
        """The next 20 periodic runs delete expired files at any hour (RocketMQ's
        executeDeleteFilesManually, the admin tool's deleteExpiredCommitLog)."""
        self.clean_commit_log.execute_delete_files_manually()

    def delete_topic(self, topic: str) -> bool:
        """Delete a topic's ConsumeQueues (files and directories) and forget its queue
        offsets (RocketMQ's deleteTopics / cleanUnusedTopic for one topic). Its records stay
        in the CommitLog until retention deletes them; messages put to it later start a new
        queue at offset 0. Returns False when the store has no queue of it."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        if self.read_only:
            raise PermissionError(f"store {self.root} is opened read-only")
        with self.reput.paused():
            queues = self.consume_queues.remove_topic(topic)
            for cq in queues:
                cq.destroy()
            if queues:
                try:
                    os.rmdir(os.path.join(self.consume_queues.root_dir, topic))
                except OSError:     # something else in it: left alone
                    pass
            with self.commit_log.put_lock:
                self.commit_log.queue_table.remove(topic)
        if queues:
            log.info("topic %s deleted: %d ConsumeQueue(s) removed", topic, len(queues))
        return bool(queues)

    def clean_unused_topics(self, keep: set[str] | frozenset[str]) -> int:
        """RocketMQ cleanUnusedTopic: delete the queues of every topic not in keep (and not
        a system topic: SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, retry and DLQ topics stay).
        Returns the number of topics deleted."""
        doomed = [t for t in self.topics() if t not in keep and not is_system_topic(t)]
        return sum(self.delete_topic(t) for t in doomed)

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """RocketMQ's cleanExpiredConsumerQueue (the admin tool's cleanExpiredCQ): delete
        every ConsumeQueue (but SCHEDULE_TOPIC_XXXX's) whose newest unit points below the
        CommitLog's minimum offset: all its messages are gone. A queue with no unit stays.
        Its next put starts at queue offset 0 again. Returns the (topic, queue id) deleted."""
        if self.read_only:
            raise PermissionError(f"store {self.root} is opened read-only")
        removed: list[tuple[str, int]] = []
        with self.reput.paused():
            min_offset = self.commit_log.min_offset()
            for topic in self.consume_queues.topics():
                if topic == SCHEDULE_TOPIC:
                    continue
                for queue_id, cq in sorted(self.consume_queues.queues(topic).items()):
                    if cq.max_physic_offset == -1 or cq.max_physic_offset >= min_offset:
                        continue
                    self.consume_queues.remove_queue(topic, queue_id)
                    cq.destroy()
                    with self.commit_log.put_lock:
                        self.commit_log.queue_table.remove_queue(topic, queue_id)
                    removed.append((topic, queue_id))
                    log.info("ConsumeQueue %s-%d deleted: its newest record ends at %d, below the "
                             "CommitLog's minimum offset %d", topic, queue_id, cq.max_physic_offset,
                             min_offset)
                if not self.consume_queues.queues(topic):
                    try:
                        os.rmdir(os.path.join(self.consume_queues.root_dir, topic))
                    except OSError:     # gone already, or something else in it: left alone
                        pass
        return removed

