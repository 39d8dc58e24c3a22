"""The options of the ``rocketstore`` Spark data source, parsed and checked once, with errors
that name the option and say what was expected. Spark hands options over case-insensitively
(lower-cased keys); the names below are the documented spellings.

Batch (``spark.read.format("rocketstore")``):

==========================  ==================================================================
``path``                    store root (the directory holding ``commitlog/``); required
``topics``                  comma-separated topics: read through their ConsumeQueues
``startOffsets``            JSON ``{"topic:queueId": offset}``: first ConsumeQueue offset read
``endOffsets``              JSON ``{"topic:queueId": offset}``: first offset NOT read
``startTimestamp``          store time lower bound (inclusive): ms since the epoch or ISO-8601
``endTimestamp``            store time upper bound (exclusive), same forms
``includeBody``             ``true`` (default) / ``false``: drop the ``body`` column
``partitionBytes``          bytes of CommitLog per partition (default 256 MiB; ``64m``...)
``minPartitions``           at least this many partitions when the data is smaller than
                            ``partitionBytes`` times it (default: the session's
                            ``spark.default.parallelism``, captured by ``register``);
                            partitions never go below 256 KiB
``batchBytes``              bytes of CommitLog per Arrow batch (default 8 MiB)
``mappedFileSizeCommitLog`` / ``mappedFileSizeConsumeQueue``: file sizes, when they cannot
                            be read from the files
==========================  ==================================================================

Streaming (``spark.readStream.format("rocketstore")``): ``path``, ``topics`` (default: every
topic, including ones created later), ``startingOffsets`` (``earliest`` (default), ``latest``,
a JSON map, or ``group:<consumerGroup>``), ``maxMessagesPerTrigger``, ``commitToGroup``,
``includeBody``, ``batchRows`` and the file sizes.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketstore.common.text import is_ascii_int
from rocketstore.common.topics import TOPIC_NAME_RE
from rocketstore.message import queue_key

DEFAULT_PARTITION_BYTES = 256 << 20
DEFAULT_BATCH_BYTES = 8 << 20
DEFAULT_BATCH_ROWS = 32768
MIN_SPLIT_BYTES = 256 << 10      # minPartitions never cuts partitions smaller than this


BATCH_OPTIONS = ("path", "topics", "startOffsets", "endOffsets", "startTimestamp",
                 "endTimestamp", "includeBody", "partitionBytes", "minPartitions", "batchBytes",
                 "batchRows", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue")
STREAM_OPTIONS = ("path", "topics", "startingOffsets", "maxMessagesPerTrigger",
                  "commitToGroup", "includeBody", "batchRows", "mappedFileSizeCommitLog",
                  "mappedFileSizeConsumeQueue")
WRITE_OPTIONS = ("path", "writeQueueNums", "batchSize", "mappedFileSizeCommitLog",
                 "mappedFileSizeConsumeQueue", "flushDiskType")


class OptionError(ValueError):
    """A malformed or unknown option of the rocketstore data source."""


def _lower(options: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in (options or {}).items()}


def check_known(options: Mapping[str, Any], known: tuple[str, ...], what: str) -> None:
    """Unknown options are errors (a typo such as ``topic`` for ``topics`` must not be
    silently ignored)."""
    names = {k.lower(): k for k in known}
    unknown = sorted(k for k in _lower(options) if k not in names)
    if unknown:
        raise OptionError(f"unknown rocketstore {what} option(s) {', '.join(unknown)}; "
                          f"the options are: {', '.join(known)}")


def parse_queue_key(key: str, option: str = "offsets") -> tuple[str, int]:
    if not isinstance(key, str) or ":" not in key:
        raise OptionError(f"option {option!r}: key {key!r} is not 'topic:queueId'")
    topic, _, qid = key.rpartition(":")
    if not topic or not is_ascii_int(qid):
        raise OptionError(f"option {option!r}: key {key!r} is not 'topic:queueId' "
                          "(queueId a non-negative integer)")
    return topic, int(qid)


def parse_offsets(value: Any, option: str) -> dict[tuple[str, int], int]:
    """JSON ``{"topic:queueId": offset}`` -> {(topic, queueId): offset}."""
    if isinstance(value, Mapping):
        data: Any = dict(value)
    else:
        try:
            data = json.loads(value)
        except (TypeError, ValueError) as exc:
            raise OptionError(f"option {option!r} must be JSON like "
                              f'{{"topic:0": 42}}, got {value!r} ({exc})') from None
    if not isinstance(data, dict):
        raise OptionError(f"option {option!r} must be a JSON object "
                          f'{{"topic:queueId": offset}}, got {type(data).__name__}')
    out: dict[tuple[str, int], int] = {}
    for key, offset in data.items():
        topic, qid = parse_queue_key(key, option)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise OptionError(f"option {option!r}: offset of {key!r} must be a non-negative "
                              f"integer (a ConsumeQueue logical offset), got {offset!r}")
        out[(topic, qid)] = offset
    return out


def parse_topics(value: Any, option: str = "topics") -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    topics = []
    for item in items:
        topic = str(item).strip()
        if not topic:
            raise OptionError(f"option {option!r} is a comma-separated list of topics; it has "
                              f"an empty entry: {value!r}")
        if len(topic) > 255 or not TOPIC_NAME_RE.fullmatch(topic):
            raise OptionError(f"option {option!r}: {topic!r} is not a valid topic name "
                              "(letters, digits, %, |, _ and -; at most 255 characters)")
        if topic not in topics:
            topics.append(topic)
    return tuple(topics)


def parse_bool(value: Any, option: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {option!r} must be true or false, got {value!r}")


_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)


def parse_size(value: Any, option: str) -> int:
    """A positive byte count: 1048576, 64m, 64MiB, 1g ..."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = _SIZE_RE.match(str(value))
        if m is None:
            raise OptionError(f"option {option!r} must be a byte count such as 268435456 or "
                              f"256m, got {value!r}")
        unit = (m.group(2) or "b")[0].lower()
        n = int(m.group(1)) << {"b": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]
    if n <= 0:
        raise OptionError(f"option {option!r} must be positive, got {value!r}")
    return n


def parse_positive_int(value: Any, option: str) -> int:
    try:
        n = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise OptionError(f"option {option!r} must be a positive integer, got {value!r}") \
            from None
    if isinstance(n, bool) or n <= 0:
        raise OptionError(f"option {option!r} must be a positive integer, got {value!r}")
    return n


def parse_timestamp(value: Any, option: str) -> int:
    """ms since the epoch, or an ISO-8601 date/time (UTC when it has no offset)."""
    if isinstance(value, _dt.datetime):
        when = value
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    else:
        text = str(value).strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise OptionError(f"option {option!r} must be ms since the epoch or an ISO-8601 "
                              f"time such as 2024-05-01T12:00:00Z, got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return int(when.timestamp() * 1000)


def _file_sizes(opts: dict[str, Any]) -> tuple[int | None, int | None]:
    cl = opts.get("mappedfilesizecommitlog")
    cq = opts.get("mappedfilesizeconsumequeue")
    cl_n = parse_size(cl, "mappedFileSizeCommitLog") if cl is not None else None
    cq_n = parse_size(cq, "mappedFileSizeConsumeQueue") if cq is not None else None
    if cq_n is not None and cq_n % 20:
        raise OptionError(f"option 'mappedFileSizeConsumeQueue' must be a multiple of 20 "
                          f"(the unit size), got {cq_n}")
    return cl_n, cq_n


@dataclass(frozen=True)
class ReadOptions:
    """Batch read options."""

    path: str
    topics: tuple[str, ...] = ()
    start_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    start_timestamp: int | None = None
    end_timestamp: int | None = None
    include_body: bool = True
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    batch_bytes: int = DEFAULT_BATCH_BYTES
    batch_rows: int = DEFAULT_BATCH_ROWS
    commit_log_file_size: int | None = None
    consume_queue_file_size: int | None = None
    min_partitions: int | None = None

    def split_bytes(self, total: int) -> int:
        """Bytes per partition for total bytes of data: partitionBytes, smaller when that
        would make fewer than minPartitions partitions (never below MIN_SPLIT_BYTES)."""
        n = self.min_partitions
        if not n or total <= 0 or total >= self.partition_bytes * n:
            return self.partition_bytes
        return min(self.partition_bytes, max(MIN_SPLIT_BYTES, -(-total // n)))

    @property
    def by_queue(self) -> bool:
        """Read through ConsumeQueues (a topic/queue filter) rather than CommitLog ranges."""
        return bool(self.topics or self.start_offsets or self.end_offsets)

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None,
              default_min_partitions: int | None = None) -> ReadOptions:
        """default_min_partitions: minPartitions when the option is not given."""
        check_known(options or {}, BATCH_OPTIONS, "read")
        o = _lower(options)
        if "path" not in o:
            raise OptionError("option 'path' is required: the rocketstore directory "
                              '(spark.read.format("rocketstore").load("/path/to/store"))')
        start_ts = parse_timestamp(o["starttimestamp"], "startTimestamp") \
            if o.get("starttimestamp") is not None else None
        end_ts = parse_timestamp(o["endtimestamp"], "endTimestamp") \
            if o.get("endtimestamp") is not None else None
        if start_ts is not None and end_ts is not None and end_ts < start_ts:
            raise OptionError(f"option 'endTimestamp' ({end_ts}) is before 'startTimestamp' "
                              f"({start_ts})")
        start = parse_offsets(o["startoffsets"], "startOffsets") \
            if o.get("startoffsets") is not None else {}
        end = parse_offsets(o["endoffsets"], "endOffsets") \
            if o.get("endoffsets") is not None else {}
        for key, e in end.items():
            s = start.get(key)
            if s is not None and e < s:
                raise OptionError(f"queue {queue_key(*key)}: endOffsets {e} is before "
                                  f"startOffsets {s}")
        topics = parse_topics(o.get("topics"))
        if topics:
            stray = sorted(queue_key(*k) for k in (*start, *end) if k[0] not in topics)
            if stray:
                raise OptionError(f"options 'startOffsets'/'endOffsets' name queue(s) "
                                  f"{', '.join(stray)} of topics not in 'topics' "
                                  f"({', '.join(topics)})")
        cl, cq = _file_sizes(o)
        return cls(
            path=str(o["path"]), topics=topics, start_offsets=start, end_offsets=end,
            start_timestamp=start_ts, end_timestamp=end_ts,
            include_body=parse_bool(o.get("includebody", True), "includeBody"),
            partition_bytes=parse_size(o.get("partitionbytes", DEFAULT_PARTITION_BYTES),
                                       "partitionBytes"),
            batch_bytes=parse_size(o.get("batchbytes", DEFAULT_BATCH_BYTES), "batchBytes"),
            batch_rows=parse_positive_int(o.get("batchrows", DEFAULT_BATCH_ROWS), "batchRows"),
            commit_log_file_size=cl, consume_queue_file_size=cq,
            min_partitions=parse_positive_int(o["minpartitions"], "minPartitions")
            if o.get("minpartitions") is not None else default_min_partitions)


@dataclass(frozen=True)
class StreamOptions:
    """Streaming read options."""

    path: str
    topics: tuple[str, ...] = ()
    starting: str = "earliest"                 # earliest | latest | json | group
    starting_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    starting_group: str | None = None
    max_messages_per_trigger: int | None = None
    commit_to_group: str | None = None
    include_body: bool = True
    batch_rows: int = DEFAULT_BATCH_ROWS
    commit_log_file_size: int | None = None
    consume_queue_file_size: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> StreamOptions:
        check_known(options or {}, STREAM_OPTIONS, "streaming")
        o = _lower(options)
        if "path" not in o:
            raise OptionError("option 'path' is required: the rocketstore directory "
                              '(spark.readStream.format("rocketstore").load("/path/to/store"))')
        raw = str(o.get("startingoffsets", "earliest")).strip()
        starting, offsets, group = raw.lower(), {}, None
        if starting in ("earliest", "latest"):
            pass
        elif raw.startswith("{"):
            starting, offsets = "json", parse_offsets(raw, "startingOffsets")
        elif starting.startswith("group:"):
            starting, group = "group", _group_name(raw[len("group:"):], "startingOffsets")
        else:
            raise OptionError("option 'startingOffsets' must be 'earliest', 'latest', a JSON "
                              'map {"topic:queueId": offset} or \'group:<consumerGroup>\', '
                              f"got {raw!r}")
        topics = parse_topics(o.get("topics"))
        if topics and offsets:
            stray = sorted(queue_key(*k) for k in offsets if k[0] not in topics)
            if stray:
                raise OptionError(f"option 'startingOffsets' names queue(s) {', '.join(stray)} "
                                  f"of topics not in 'topics' ({', '.join(topics)})")
        max_msgs = o.get("maxmessagespertrigger")
        commit_group = o.get("committogroup")
        cl, cq = _file_sizes(o)
        return cls(
            path=str(o["path"]), topics=topics, starting=starting, starting_offsets=offsets,
            starting_group=group,
            max_messages_per_trigger=None if max_msgs is None else
            parse_positive_int(max_msgs, "maxMessagesPerTrigger"),
            commit_to_group=None if commit_group is None else
            _group_name(commit_group, "commitToGroup"),
            include_body=parse_bool(o.get("includebody", True), "includeBody"),
            batch_rows=parse_positive_int(o.get("batchrows", DEFAULT_BATCH_ROWS), "batchRows"),
            commit_log_file_size=cl, consume_queue_file_size=cq)


def _group_name(value: Any, option: str) -> str:
    name = str(value).strip()
    if not name or len(name) > 255 or not TOPIC_NAME_RE.fullmatch(name):
        raise OptionError(f"option {option!r}: {value!r} is not a valid consumer group name "
                          "(letters, digits, %, |, _ and -)")
    return name


@dataclass(frozen=True)
class WriteOptions:
    path: str
    write_queue_nums: int = 4
    batch_size: int = 1000
    flush_disk_type: str = "ASYNC_FLUSH"
    commit_log_file_size: int | None = None
    consume_queue_file_size: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> WriteOptions:
        check_known(options or {}, WRITE_OPTIONS, "write")
        o = _lower(options)
        if "path" not in o:
            raise OptionError("option 'path' is required: the rocketstore directory to append "
                              'to (df.write.format("rocketstore").mode("append").save(path))')
        flush = str(o.get("flushdisktype", "ASYNC_FLUSH")).upper()
        if flush not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise OptionError(f"option 'flushDiskType' must be ASYNC_FLUSH or SYNC_FLUSH, "
                              f"got {o['flushdisktype']!r}")
        cl, cq = _file_sizes(o)
        return cls(path=str(o["path"]),
                   write_queue_nums=parse_positive_int(o.get("writequeuenums", 4),
                                                       "writeQueueNums"),
                   batch_size=parse_positive_int(o.get("batchsize", 1000), "batchSize"),
                   flush_disk_type=flush, commit_log_file_size=cl, consume_queue_file_size=cq)
