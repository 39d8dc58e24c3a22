"""A store's description: what it holds and how it stands, as JSON-able data
(``MessageStore.describe``, which the CLI's ``stat`` prints)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rocketstore.store.layout import (
    consume_queue_files,
    index_file_size,
    index_files,
    segment_files,
)
from rocketstore.store.services.clean import disk_space
from rocketstore.store.store_lock import lock_holder

if TYPE_CHECKING:
    from rocketstore.store.message_store import MessageStore


def describe(store: MessageStore) -> dict[str, Any]:
    """What the store holds and how it stands, as JSON-able data (camelCase keys, like
    RocketMQ's JSON): topics and queues with their offsets and message counts, the
    CommitLog's offsets and how its recovery ended, file counts and sizes per kind (as
    on disk), the IndexFiles' last update, dispatch lag, the checkpoint, and whether the
    last shutdown was clean and a writer holds the store now."""
    config = store.config
    topics: list[dict[str, Any]] = []
    for topic in store.topics():
        queues = []
        for qid in store.queues(topic):
            lo = store.get_min_offset_in_queue(topic, qid)
            hi = store.get_max_offset_in_queue(topic, qid)
            queues.append({"queueId": qid, "minOffset": lo, "maxOffset": hi,
                           "messages": max(0, hi - lo)})
        topics.append({"topic": topic, "messages": sum(q["messages"] for q in queues),
                       "queues": queues})
    rec = store.recovery
    index_ts, index_phy = store.index_service.index_last_update()
    abort = os.path.exists(store.paths.abort)
    writer, pid = (True, os.getpid()) if store.holds_lock else lock_holder(store.paths.lock)
    clean: bool | None = not abort
    if abort and writer is not False:
        clean = None    # the abort file of a running writer says nothing of the last run
    return {
        "store": store.root,
        "topicCount": len(topics),
        "queueCount": sum(len(t["queues"]) for t in topics),
        "messages": sum(t["messages"] for t in topics),
        "commitLog": {
            "minOffset": store.get_min_phy_offset(), "maxOffset": store.get_max_phy_offset(),
            **_files_summary(segment_files(store.paths.commitlog),
                             config.mapped_file_size_commit_log),
            "endStatus": rec.stop_status if rec is not None else "end",
            "endReason": rec.stop_reason if rec is not None else None},
        "consumeQueue": {**_files_summary(consume_queue_files(store.root),
                                          config.mapped_file_size_consume_queue),
                         "queues": len(store.consume_queues.all())},
        "index": {**_files_summary(index_files(store.root),
                                   index_file_size(config.max_hash_slot_num,
                                                   config.max_index_num)),
                  "hashSlots": config.max_hash_slot_num, "indexNum": config.max_index_num,
                  "lastUpdateTimestamp": index_ts, "lastUpdatePhyOffset": index_phy},
        "dispatchBehindBytes": store.dispatch_lag_bytes(),
        "retention": store.describe_retention(),
        "damage": store.damage_report(),
        "checkpoint": store.checkpoint.as_dict(),
        "abortFile": abort,
        "writerRunning": writer,
        "writerPid": pid,
        "lastShutdownClean": clean,
        "topics": topics,
    }


def describe_retention(store: MessageStore) -> dict[str, Any]:
    """Disk usage of the CommitLog's file system (measured now), the watermarks, why
    puts are refused (a running writer over the warning level: putsRefused) and what a
    cleanup run now would delete."""
    info = store.clean_commit_log.describe()
    state, _space = store.clean_commit_log.measure()
    info.update(state.as_dict())
    info["putsRefused"] = store.disk_full
    return {**info, "disk": disk_space(store.commit_log.queue.store_path),
            "nextRun": store.clean_files(dry_run=True, manual=False).as_dict()}


def _files_summary(paths: list[str], file_size: int) -> dict[str, int]:
    sizes = []
    for p in paths:
        try:
            sizes.append(os.path.getsize(p))
        except OSError:     # deleted meanwhile
            pass
    return {"files": len(sizes), "bytes": sum(sizes), "fileSize": file_size}
