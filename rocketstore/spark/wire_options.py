"""The options of the ``rocketmq`` Spark source (brokers over the wire), parsed and checked once.

Read (``spark.read.format("rocketmq")``) and streaming (``spark.readStream``):

===========================  =================================================================
``namesrvAddr``              name servers, ``host:port;host:port``; required
``topics``                   comma-separated topics; required
``subExpression``            tags, ``*`` (default) or ``tagA || tagB``
``startingOffsets``          ``earliest`` (default), ``latest`` or JSON per queue (below)
``endingOffsets``            batch only: ``latest`` (default) or JSON per queue
``startingTimestamp``        instead of startingOffsets: the first message stored at/after this
                             time in each queue (SEARCH_OFFSET_BY_TIMESTAMP); ms or ISO-8601
``endingTimestamp``          batch only, instead of endingOffsets: the same lookup, exclusive
``failOnDataLoss``           ``true`` (default): a queue whose planned start was deleted by
                             retention fails the query naming it; ``false`` skips to what is left
``maxMessagesPerTrigger``    streaming: at most this many messages a micro-batch
``commitToGroup``            streaming: commit each finished batch's offsets to this consumer
                             group on the brokers (UPDATE_CONSUMER_OFFSET), so
                             ``rocketstore admin consumerProgress`` shows the job's lag
``includeBody``              ``true`` (default) / ``false``
``pullBatchSize``            maxMsgNums of a pull (default 1024); the broker returns at most its
                             maxTransferCountOnMessageInMemory (32 by default) and
                             maxTransferBytesOnMessageInMemory a reply, and the pull continues
``pullConcurrency``          pulls in flight per task (default 8)
``maxPartitions``            at most this many Spark partitions (tasks): queue ranges are packed
                             into them, balanced by message count, a range never split; default
                             the session's parallelism (``spark.default.parallelism``, captured
                             by ``rocketstore.spark.register``; a partition per queue range
                             when the format was registered otherwise). A Python data source
                             task costs Spark tens of ms of CPU, so a task per queue on fewer
                             cores than queues is slower for nothing
``requestTimeoutMs``         per request (default 10000)
===========================  =================================================================

JSON offsets name queues as ``"brokerName:queueId"`` under their topic, Kafka's layout with
the broker added (a RocketMQ queue is a broker's queue)::

    {"orders": {"broker-a:0": 23, "broker-a:1": -2, "broker-b:0": -1}}

``-2`` means the queue's earliest offset and ``-1`` its latest; queues not named start at the
earliest (startingOffsets) or end at the latest (endingOffsets). Streaming offsets in Spark's
checkpoint have the same layout.

Write (``df.write.format("rocketmq")``): ``namesrvAddr``, ``topic`` (when the DataFrame has no
``topic`` column), ``producerGroup`` (default ``spark-rocketmq-writer``), ``batchSize``
(messages a batch send, default 128), ``sendTimeoutMs`` (default 10000).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketstore.common.text import is_ascii_int
from rocketstore.spark.options import (
    OptionError,
    _group_name,
    _lower,
    check_known,
    parse_bool,
    parse_positive_int,
    parse_timestamp,
    parse_topics,
)

EARLIEST = -2
LATEST = -1
DEFAULT_PULL_BATCH = 1024
DEFAULT_PULL_CONCURRENCY = 8
DEFAULT_TIMEOUT_MS = 10_000

#: (topic, brokerName, queueId)
Queue = tuple[str, str, int]

_COMMON = ("namesrvAddr", "topics", "subExpression", "startingOffsets", "startingTimestamp",
           "failOnDataLoss", "includeBody", "pullBatchSize", "pullConcurrency",
           "maxPartitions", "requestTimeoutMs")
WIRE_READ_OPTIONS = (*_COMMON, "endingOffsets", "endingTimestamp")
WIRE_STREAM_OPTIONS = (*_COMMON, "maxMessagesPerTrigger", "commitToGroup")
WIRE_WRITE_OPTIONS = ("namesrvAddr", "topic", "producerGroup", "batchSize", "sendTimeoutMs")


def queue_name(queue: Queue) -> str:
    """``topic/brokerName:queueId``, for messages."""
    return f"{queue[0]}/{queue[1]}:{queue[2]}"


def offsets_to_json(offsets: Mapping[Queue, int]) -> dict[str, dict[str, int]]:
    """{queue: offset} -> {"topic": {"broker:queueId": offset}}, keys sorted (Spark compares
    offsets as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, broker, qid) in sorted(offsets):
        out.setdefault(topic, {})[f"{broker}:{qid}"] = int(offsets[(topic, broker, qid)])
    return out


def offsets_from_json(value: Any, option: str) -> dict[Queue, int]:
    """JSON (text or an already-parsed dict) -> {queue: offset}; -2/-1 kept as markers."""
    if isinstance(value, Mapping):
        data: Any = value
    else:
        try:
            data = json.loads(value)
        except (TypeError, ValueError) as exc:
            raise OptionError(f"option {option!r} must be 'earliest', 'latest' or JSON like "
                              f'{{"topic": {{"broker-a:0": 23}}}}, got {value!r} ({exc})'
                              ) from None
    if not isinstance(data, Mapping):
        raise OptionError(f"option {option!r} must be a JSON object "
                          f'{{"topic": {{"brokerName:queueId": offset}}}}, got {value!r}')
    out: dict[Queue, int] = {}
    for topic, queues in data.items():
        if not isinstance(queues, Mapping):
            raise OptionError(f"option {option!r}: topic {topic!r} must map to an object "
                              f'{{"brokerName:queueId": offset}}, got {queues!r}')
        for key, offset in queues.items():
            broker, sep, qid = str(key).rpartition(":")
            if not sep or not broker or not is_ascii_int(qid):
                raise OptionError(f"option {option!r}: queue {key!r} of topic {topic!r} is not "
                                  "'brokerName:queueId'")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OptionError(f"option {option!r}: offset of {topic}/{key} must be a "
                                  f"queue offset, -2 (earliest) or -1 (latest), got {offset!r}")
            out[(str(topic), broker, int(qid))] = offset
    return out


def _namesrv(o: dict[str, Any]) -> str:
    addr = str(o.get("namesrvaddr") or "").strip()
    if not addr:
        raise OptionError("option 'namesrvAddr' is required: the name servers, "
                          "'host:port;host:port'")
    for item in filter(None, (a.strip() for a in addr.split(";"))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not is_ascii_int(port):
            raise OptionError(f"option 'namesrvAddr': {item!r} is not host:port")
    return addr


def _offsets_option(o: dict[str, Any], key: str, name: str, default: str
                    ) -> tuple[str, dict[Queue, int]]:
    raw = str(o.get(key, default)).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower(), {}
    if raw.startswith("{"):
        return "json", offsets_from_json(raw, name)
    raise OptionError(f"option {name!r} must be 'earliest', 'latest' or JSON "
                      f'{{"topic": {{"brokerName:queueId": offset}}}}, got {raw!r}')


@dataclass(frozen=True)
class WireReadOptions:
    """Options of a batch or streaming read over the wire (see the module docstring)."""

    namesrv_addr: str
    topics: tuple[str, ...]
    sub_expression: str = "*"
    starting: str = "earliest"                  # earliest | latest | json | timestamp
    starting_offsets: dict[Queue, int] = field(default_factory=dict)
    starting_timestamp: int | None = None
    ending: str = "latest"                      # latest | json | timestamp
    ending_offsets: dict[Queue, int] = field(default_factory=dict)
    ending_timestamp: int | None = None
    fail_on_data_loss: bool = True
    include_body: bool = True
    pull_batch_size: int = DEFAULT_PULL_BATCH
    pull_concurrency: int = DEFAULT_PULL_CONCURRENCY
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_messages_per_trigger: int | None = None
    commit_to_group: str | None = None
    #: None: a partition per queue range
    max_partitions: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None, *, streaming: bool = False,
              default_max_partitions: int | None = None) -> WireReadOptions:
        """default_max_partitions: maxPartitions when the option is not given."""
        check_known(options or {}, WIRE_STREAM_OPTIONS if streaming else WIRE_READ_OPTIONS,
                    "rocketmq streaming" if streaming else "rocketmq read")
        o = _lower(options)
        namesrv = _namesrv(o)
        topics = parse_topics(o.get("topics"))
        if not topics:
            raise OptionError("option 'topics' is required: the comma-separated topics to read")
        starting, start_offsets = _offsets_option(o, "startingoffsets", "startingOffsets",
                                                  "earliest")
        start_ts = None
        if o.get("startingtimestamp") is not None:
            if "startingoffsets" in o:
                raise OptionError("give 'startingOffsets' or 'startingTimestamp', not both")
            starting, start_ts = "timestamp", parse_timestamp(o["startingtimestamp"],
                                                              "startingTimestamp")
        ending, end_offsets = _offsets_option(o, "endingoffsets", "endingOffsets", "latest")
        if ending == "earliest":
            raise OptionError("option 'endingOffsets' must be 'latest' or JSON per queue "
                              "('earliest' would read nothing)")
        end_ts = None
        if o.get("endingtimestamp") is not None:
            if "endingoffsets" in o:
                raise OptionError("give 'endingOffsets' or 'endingTimestamp', not both")
            ending, end_ts = "timestamp", parse_timestamp(o["endingtimestamp"],
                                                          "endingTimestamp")
        for what, offsets in (("startingOffsets", start_offsets),
                              ("endingOffsets", end_offsets)):
            stray = sorted(queue_name(q) for q in offsets if q[0] not in topics)
            if stray:
                raise OptionError(f"option {what!r} names queue(s) {', '.join(stray)} of "
                                  f"topics not in 'topics' ({', '.join(topics)})")
        for q, e in end_offsets.items():
            s = start_offsets.get(q)
            if e >= 0 and s is not None and s >= 0 and e < s:
                raise OptionError(f"queue {queue_name(q)}: endingOffsets {e} is before "
                                  f"startingOffsets {s}")
        expression = str(o.get("subexpression", "*")).strip() or "*"
        max_msgs = o.get("maxmessagespertrigger")
        group = o.get("committogroup")
        return cls(
            namesrv_addr=namesrv, topics=topics, sub_expression=expression,
            starting=starting, starting_offsets=start_offsets, starting_timestamp=start_ts,
            ending=ending, ending_offsets=end_offsets, ending_timestamp=end_ts,
            fail_on_data_loss=parse_bool(o.get("failondataloss", True), "failOnDataLoss"),
            include_body=parse_bool(o.get("includebody", True), "includeBody"),
            pull_batch_size=parse_positive_int(o.get("pullbatchsize", DEFAULT_PULL_BATCH),
                                               "pullBatchSize"),
            pull_concurrency=parse_positive_int(
                o.get("pullconcurrency", DEFAULT_PULL_CONCURRENCY), "pullConcurrency"),
            timeout_ms=parse_positive_int(o.get("requesttimeoutms", DEFAULT_TIMEOUT_MS),
                                          "requestTimeoutMs"),
            max_messages_per_trigger=None if max_msgs is None else
            parse_positive_int(max_msgs, "maxMessagesPerTrigger"),
            commit_to_group=None if group is None else _group_name(group, "commitToGroup"),
            max_partitions=parse_positive_int(o["maxpartitions"], "maxPartitions")
            if o.get("maxpartitions") is not None else default_max_partitions)


@dataclass(frozen=True)
class WireWriteOptions:
    namesrv_addr: str
    topic: str | None = None
    producer_group: str = "spark-rocketmq-writer"
    batch_size: int = 128
    send_timeout_ms: int = DEFAULT_TIMEOUT_MS

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> WireWriteOptions:
        check_known(options or {}, WIRE_WRITE_OPTIONS, "rocketmq write")
        o = _lower(options)
        topic = parse_topics(o.get("topic"), "topic")
        if len(topic) > 1:
            raise OptionError(f"option 'topic' is one topic, got {o['topic']!r}")
        return cls(
            namesrv_addr=_namesrv(o), topic=topic[0] if topic else None,
            producer_group=_group_name(o.get("producergroup", "spark-rocketmq-writer"),
                                       "producerGroup"),
            batch_size=parse_positive_int(o.get("batchsize", 128), "batchSize"),
            send_timeout_ms=parse_positive_int(o.get("sendtimeoutms", DEFAULT_TIMEOUT_MS),
                                               "sendTimeoutMs"))
