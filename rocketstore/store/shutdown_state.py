"""``config/queueOffsets.json``: each queue's next offset and the CommitLog's end as a clean
shutdown left them (a rocketstore file; RocketMQ ignores it). The store writes it last at
shutdown and deletes it when it starts, so it exists only after a clean shutdown: recovery
then checks the queues against it instead of searching the last CommitLog file."""
from __future__ import annotations

import json
import logging
import os

from rocketstore.common.atomic_file import write_atomically

log = logging.getLogger("rocketstore.store")

QUEUE_OFFSETS_FILE = "queueOffsets.json"

#: {topic: {queueId (a decimal string): next queue offset}}
QueueOffsets = dict[str, dict[str, int]]


def read_shutdown_state(path: str) -> tuple[QueueOffsets, int | None] | None:
    """Each queue's next offset and the CommitLog's end as recorded at the last clean
    shutdown in config/queueOffsets.json (a rocketstore file; RocketMQ ignores it).
    Missing or unreadable: None (logged), and recovery trusts the queues (and searches the
    rest of the last CommitLog file)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        table = data["queueOffsets"]
        offsets = {str(t): {str(q): int(o) for q, o in qs.items()}
                   for t, qs in table.items()}
        if any(o < 0 for qs in offsets.values() for o in qs.values()):
            raise ValueError("negative queue offset")
        end = data.get("commitLogEnd")
        return offsets, int(end) if end is not None else None
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        log.error("ignoring unreadable %s: %s", path, exc)
        return None


def write_shutdown_state(path: str, table: QueueOffsets, commit_log_end: int) -> None:
    """Write the file at a clean shutdown; a failure (a full disk) is logged: the next open
    checks the queues itself."""
    text = json.dumps({"queueOffsets": table, "commitLogEnd": commit_log_end}, sort_keys=True)
    try:
        write_atomically(path, text)
    except OSError as exc:      # a full disk: the next open checks the queues itself
        log.warning("could not write %s: %s", path, exc)


def remove_shutdown_state(path: str) -> None:
    """At start: the file is valid only after a clean shutdown, and a crash must not leave a
    stale one."""
    if os.path.exists(path):
        os.remove(path)
