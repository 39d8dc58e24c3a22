"""Consumer-group offsets, kept where RocketMQ's broker keeps them (ConsumerOffsetManager):
``<storePathRootDir>/config/consumerOffset.json``::

    {"offsetTable": {"orders@billing": {"0": 120, "1": 98}, ...}}

keyed ``topic@group``, then queue id -> the next logical offset to consume. RocketMQ writes the
file with fastjson, whose integer map keys are unquoted (``{0:120}``); it is read leniently here
and written as standard JSON (quoted keys), which fastjson reads back as well. Writes follow
RocketMQ's ConfigManager.persist: the new text goes to ``consumerOffset.json.tmp``, the old file
is kept as ``consumerOffset.json.bak`` (read when the main file is missing or broken), then the
temp file is renamed over the main one, so a reader never sees a half-written file. A
``consumerOffset.json.lock`` flock serialises read-modify-write among rocketstore processes
(a RocketMQ broker running on the same directory persists its own table and wins).

Writing the same offsets again changes nothing (no write at all): Spark's ``commit(end)`` is
repeated after a restart, and the offsets it commits must be idempotent.
"""
from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.message import queue_key, split_queue_key
from rocketstore.store.layout import CONFIG_DIR

if TYPE_CHECKING:
    from rocketstore.store.message_store import MessageStore

CONSUMER_OFFSET_FILE = "consumerOffset.json"


def consumer_offset_path(root: str | os.PathLike[str]) -> str:
    """``<root>/config/consumerOffset.json`` (RocketMQ's BrokerPathConfigHelper)."""
    return os.path.join(os.fspath(root), CONFIG_DIR, CONSUMER_OFFSET_FILE)


def _parse_table(text: str, path: str) -> dict[str, dict[int, int]]:
    try:
        data = loads_fastjson(text, loads=json.loads)
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with an offsetTable")
    table = data.get("offsetTable", {})
    if not isinstance(table, dict):
        raise ValueError(f"{path}: offsetTable is not an object")
    out: dict[str, dict[int, int]] = {}
    for topic_group, queues in table.items():
        if not isinstance(queues, dict):
            raise ValueError(f"{path}: offsetTable[{topic_group!r}] is not an object")
        try:
            out[str(topic_group)] = {int(q): int(o) for q, o in queues.items()}
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{path}: offsetTable[{topic_group!r}] holds a queue id or "
                             f"offset that is not an integer ({exc})") from None
    return out


def load_offset_table(root: str | os.PathLike[str]) -> dict[str, dict[int, int]]:
    """The whole ``offsetTable``: {"topic@group": {queueId: offset}}. Empty when the file does
    not exist; the ``.bak`` copy when the main file is missing or unreadable (as RocketMQ's
    ConfigManager.load does)."""
    path = consumer_offset_path(root)
    last_error: ValueError | None = None
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        if not text.strip():
            continue
        try:
            return _parse_table(text, candidate)
        except ValueError as exc:
            last_error = last_error or exc
    if last_error is not None:
        raise last_error
    return {}


def _split_topic_group(topic_group: str) -> tuple[str, str] | None:
    topic, sep, group = topic_group.partition("@")   # neither name may contain '@'
    return (topic, group) if sep and topic and group else None


def group_offsets(root: str | os.PathLike[str], group: str) -> dict[str, int]:
    """Committed offsets of one consumer group: {"topic:queueId": offset}, sorted by key."""
    out: dict[str, int] = {}
    for topic_group, queues in load_offset_table(root).items():
        parts = _split_topic_group(topic_group)
        if parts is None or parts[1] != group:
            continue
        for qid, offset in queues.items():
            out[queue_key(parts[0], qid)] = offset
    return dict(sorted(out.items()))


def all_group_offsets(root: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """{group: {"topic:queueId": offset}} for every group in the file, sorted."""
    out: dict[str, dict[str, int]] = {}
    for topic_group, queues in load_offset_table(root).items():
        parts = _split_topic_group(topic_group)
        if parts is None:
            continue
        topic, group = parts
        for qid, offset in queues.items():
            out.setdefault(group, {})[queue_key(topic, qid)] = offset
    return {g: dict(sorted(o.items())) for g, o in sorted(out.items())}


@contextmanager
def offsets_lock(root: str | os.PathLike[str]) -> Iterator[None]:
    """The flock that serialises writers of consumerOffset.json among rocketstore processes."""
    directory = os.path.join(os.fspath(root), CONFIG_DIR)
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, CONSUMER_OFFSET_FILE + ".lock"),
                 os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _render(table: Mapping[str, Mapping[int, int]]) -> str:
    body = {"offsetTable": {tg: {str(q): int(o) for q, o in sorted(queues.items())}
                            for tg, queues in sorted(table.items())}}
    return json.dumps(body, indent="\t") + "\n"


def write_offset_table(root: str | os.PathLike[str], table: Mapping[str, Mapping[int, int]]
                       ) -> None:
    """Replace the file atomically: temp file (fsynced), old file kept as .bak, rename."""
    write_atomically(consumer_offset_path(root), _render(table), backup="copy")


def commit_group_offsets(root: str | os.PathLike[str], group: str,
                         offsets: Mapping[str, int] | Mapping[tuple[str, int], int]) -> bool:
    """Set the group's offset of each queue ({"topic:queueId" or (topic, queueId): offset}),
    keeping every other entry. Idempotent: returns False (and writes nothing) when the file
    already holds exactly these offsets."""
    if not isinstance(group, str) or not group or "@" in group:
        raise ValueError(f"group must be a non-empty name without '@', got {group!r}")
    updates: dict[tuple[str, int], int] = {}
    for key, offset in offsets.items():
        topic, qid = split_queue_key(key) if isinstance(key, str) else (str(key[0]),
                                                                        int(key[1]))
        if "@" in topic:
            raise ValueError(f"topic {topic!r} contains '@'")
        if isinstance(offset, bool) or int(offset) < 0:
            raise ValueError(f"offset of {queue_key(topic, qid)} must be >= 0, got {offset!r}")
        updates[(topic, qid)] = int(offset)
    with offsets_lock(root):
        table = load_offset_table(root)
        changed = False
        for (topic, qid), offset in updates.items():
            queues = table.setdefault(f"{topic}@{group}", {})
            if queues.get(qid) != offset:
                queues[qid] = offset
                changed = True
        if changed:
            write_offset_table(root, table)
            return True
    return False


def export_offsets(store: MessageStore) -> dict[str, Any]:
    """Everything a consumer (a Spark job, a tool) needs to start from or check against, as
    a JSON-able dict::

        {"root": ..., "commitlog": {"min_offset": .., "max_offset": ..},
         "queues": {"topic:queueId": {"min": .., "max": ..}},
         "groups": {"group": {"topic:queueId": committed offset}}}

    ``queues`` comes from the store's ConsumeQueues, ``groups`` from
    ``config/consumerOffset.json``. Keys are sorted, so the text is stable."""
    return {
        "root": store.root,
        "commitlog": {"min_offset": store.get_min_phy_offset(),
                      "max_offset": store.get_max_phy_offset()},
        "queues": store.queue_offsets(),
        "groups": all_group_offsets(store.root),
    }
