"""``config/queueOffsets.json``: each queue's next offset and the CommitLog's end as a clean
shutdown left them (a rocketstore file; RocketMQ ignores it). The store writes it last at
shutdown and deletes it when it starts, so it exists only after a clean shutdown: recovery
then checks the queues against it instead of searching the last CommitLog file."""
from __future__ import annotations

import json
import logging
import os

from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.text import QUOTE_LIMIT, is_ascii_int, quote

log = logging.getLogger(__name__)

QUEUE_OFFSETS_FILE = "queueOffsets.json"

#: {topic: {queueId (a decimal string): next queue offset}}
QueueOffsets = dict[str, dict[str, int]]


class _Malformed(ValueError):
    pass


def _offset(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Malformed(f"{what} is {quote(value)}, not an offset (an int >= 0)")
    return value


def _parse(data: object) -> tuple[QueueOffsets, int | None]:
    if not isinstance(data, dict) or not isinstance(data.get("queueOffsets"), dict):
        raise _Malformed(f"not an object with a \"queueOffsets\" object: {quote(data)}")
    offsets: QueueOffsets = {}
    for topic, by_queue in data["queueOffsets"].items():
        if not isinstance(by_queue, dict):
            raise _Malformed(f"topic {quote(topic)} maps to {quote(by_queue)}, not an object")
        queues: dict[str, int] = {}
        for qid, next_offset in by_queue.items():
            if not is_ascii_int(qid):      # recovery takes it for a queue id
                raise _Malformed(f"topic {quote(topic)} has queue id {quote(qid)}, not an int "
                                 ">= 0")
            queues[qid] = _offset(next_offset, f"{topic}:{qid}'s next offset")
        offsets[topic] = queues
    end = data.get("commitLogEnd")
    return offsets, None if end is None else _offset(end, "commitLogEnd")


def read_shutdown_state(path: str) -> tuple[QueueOffsets, int | None] | None:
    """Each queue's next offset and the CommitLog's end as recorded at the last clean
    shutdown in config/queueOffsets.json (a rocketstore file; RocketMQ ignores it).
    Missing: None. Malformed in any way: None and one warning naming the file and what is
    wrong; it is a hint, so recovery then trusts the queues (and searches the rest of the
    last CommitLog file) as after a shutdown that left no file."""
    state, problem = check_shutdown_state(path)
    if problem is not None:
        log.warning("ignoring %s (a hint written at a clean shutdown): %s", path, problem)
    return state


def check_shutdown_state(path: str) -> tuple[tuple[QueueOffsets, int | None] | None, str | None]:
    """(the file's state, None), (None, None) when there is no file, or (None, what is wrong
    with it, quoting at most common.text's QUOTE_LIMIT of it)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read it ({exc})"
    try:
        return _parse(json.loads(raw.decode("utf-8"))), None
    except _Malformed as exc:
        return None, str(exc)
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 at byte {exc.start}: {quote(raw[:QUOTE_LIMIT])}"
    except (ValueError, RecursionError) as exc:     # json's errors name the position only
        return None, f"not JSON ({exc}): {quote(raw[:QUOTE_LIMIT])}"


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
