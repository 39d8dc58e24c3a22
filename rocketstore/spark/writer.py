"""``df.write.format("rocketstore").mode("append").save(path)``: append a DataFrame to a store.

Columns: ``topic`` (string, required), ``body`` (binary or string, required), and optionally
``tags`` (string), ``keys`` (array<string>, or a space-separated string), ``properties``
(map<string,string>), ``queue_id`` (int; default: round-robin over ``writeQueueNums`` queues per
topic, 4 by default) and ``flag`` (int). Any other column is an error (select the ones to
write).

A store has one writer process (its ``lock`` file). Spark runs the write tasks in parallel, so
the tasks do not open the store: each stages its rows as an Arrow IPC file under
``<store>/.spark-staging/<job>/`` and returns the file's name; the job commit (one process, on
the driver) takes the store's writer lock and appends the staged rows in partition order, then
removes the staging files. An aborted job only removes its staging files, so a failed job
appends nothing (a crash in the middle of the commit leaves the messages appended so far).
When another process holds the store open for writing, the job fails with
``rocketstore.StoreLockedError`` -- checked when the write is planned and again at commit.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from rocketstore.message import Message
from rocketstore.spark.location import StoreLocation
from rocketstore.spark.options import OptionError, WriteOptions
from rocketstore.store import MessageStore, StoreLockedError

STAGING_DIR = ".spark-staging"
DRIVER_MARK = "DRIVER"      # in the job's staging directory: tasks check they see it

_INTS = (ByteType, ShortType, IntegerType, LongType)
_COLUMNS: dict[str, tuple[tuple[type, ...], str]] = {
    "topic": ((StringType,), "string"),
    "body": ((BinaryType, StringType), "binary or string"),
    "tags": ((StringType,), "string"),
    "keys": ((ArrayType, StringType), "array<string> or string"),
    "properties": ((MapType,), "map<string,string>"),
    "queue_id": (_INTS, "int"),
    "flag": (_INTS, "int"),
}


def check_write_schema(schema: StructType) -> None:
    names = schema.fieldNames()
    unknown = [n for n in names if n not in _COLUMNS]
    if unknown:
        raise OptionError(f"cannot write column(s) {', '.join(unknown)} to a rocketstore: the "
                          f"writable columns are {', '.join(_COLUMNS)} (select them first)")
    for required in ("topic", "body"):
        if required not in names:
            raise OptionError(f"writing to a rocketstore needs a {required!r} column "
                              f"(has: {', '.join(names)})")
    for field in schema.fields:
        types, text = _COLUMNS[field.name]
        dt = field.dataType
        ok = isinstance(dt, types)
        if isinstance(dt, ArrayType):
            ok = isinstance(dt.elementType, StringType)
        if isinstance(dt, MapType):
            ok = isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)
        if not ok:
            raise OptionError(f"column {field.name!r} must be {text}, got {dt.simpleString()}")


def ensure_unlocked(root: str) -> None:
    """Raise StoreLockedError when another process has the store open for writing."""
    path = os.path.join(root, "lock")
    if not os.path.exists(path):
        return
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreLockedError(
                f"cannot write to the rocketstore at {root}: it is locked by another writer "
                "process (a store has one writer; stop it, or write to another store)") from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class StagedPart(WriterCommitMessage):
    partition_id: int
    path: str
    rows: int
    host: str = ""


class RocketstoreWriter(DataSourceArrowWriter):
    def __init__(self, options: Any, schema: StructType, overwrite: bool) -> None:
        self.options = WriteOptions.parse(options)
        if overwrite:
            raise OptionError("a rocketstore is append-only: write with mode('append')")
        check_write_schema(schema)
        self.location = StoreLocation.detect(
            self.options.path, commit_log_file_size=self.options.commit_log_file_size,
            consume_queue_file_size=self.options.consume_queue_file_size, must_exist=False)
        ensure_unlocked(self.location.root)
        self.job = uuid.uuid4().hex
        self.staging = os.path.join(self.location.root, STAGING_DIR, self.job)
        # the tasks must see this file: else they would stage where the commit cannot read
        os.makedirs(self.staging, exist_ok=True)
        with open(os.path.join(self.staging, DRIVER_MARK), "w", encoding="utf-8") as f:
            f.write(socket.gethostname())

    # ---- tasks -----------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedPart:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        if not os.path.isfile(os.path.join(self.staging, DRIVER_MARK)):
            # nothing is created here: a task on a host without the driver's store leaves no
            # staging behind
            raise FileNotFoundError(
                f"rocketstore writer task on host {socket.gethostname()}: the store at "
                f"{self.location.root} is not the driver's (its staging directory "
                f"{self.staging} is not here). The writer stages rows beside the store and the "
                "driver appends them: the store must be on storage shared by the driver and "
                'every executor at the same absolute path; or send with format("rocketmq")')
        path = os.path.join(self.staging, f"part-{pid:05d}-{uuid.uuid4().hex}.arrow")
        rows = 0
        writer = None
        try:
            for batch in iterator:
                if writer is None:
                    writer = ipc.new_file(path, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        except BaseException:
            if writer is not None:
                writer.close()
                writer = None
            _remove(path)       # a failed task leaves no staged file
            raise
        finally:
            if writer is not None:
                writer.close()
        return StagedPart(pid, path if rows else "", rows, socket.gethostname())

    # ---- driver ----------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        parts = sorted((m for m in messages if isinstance(m, StagedPart) and m.rows),
                       key=lambda m: m.partition_id)
        try:
            unseen = [p for p in parts if not os.path.isfile(p.path)]
            if unseen:
                raise FileNotFoundError(
                    f"the rocketstore write cannot be committed on host "
                    f"{socket.gethostname()}: {len(unseen)} of {len(parts)} staged part(s) are "
                    f"not visible here (e.g. {unseen[0].path}, written on host "
                    f"{unseen[0].host}). The store at {self.location.root} must be on storage "
                    "shared by the driver and every executor at the same absolute path. "
                    "Nothing was appended")
            if parts:
                self._append(parts)
        finally:
            self._cleanup()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.staging))
        except OSError:
            pass

    def _append(self, parts: list[StagedPart]) -> None:
        config = self.location.config(flush_disk_type=self.options.flush_disk_type)
        try:
            store = MessageStore.open(self.location.root, config)
        except StoreLockedError as exc:
            raise StoreLockedError(f"cannot commit the Spark write: {exc}") from None
        counters: dict[str, int] = {}
        with store:
            for part in parts:
                with pa.memory_map(part.path) as source:
                    reader = ipc.open_file(source)
                    for i in range(reader.num_record_batches):
                        batch = reader.get_batch(i)
                        for a in range(0, batch.num_rows, self.options.batch_size):
                            self._put(store, batch.slice(a, self.options.batch_size),
                                      counters)

    def _put(self, store: MessageStore, batch: pa.RecordBatch, counters: dict[str, int]
             ) -> None:
        cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
        n = batch.num_rows
        msgs: list[Message] = []
        qids: list[int] = []
        for i in range(n):
            topic = cols["topic"][i]
            body = cols["body"][i]
            if topic is None or body is None:
                raise ValueError(f"row {i} of a batch has a null {'topic' if topic is None else 'body'}"
                                 " (both are required)")
            if isinstance(body, str):
                body = body.encode("utf-8")
            props = cols["properties"][i] if "properties" in cols else None
            msgs.append(Message(
                topic, body,
                tags=cols["tags"][i] if "tags" in cols else None,
                keys=cols["keys"][i] if "keys" in cols else None,
                properties=dict(props) if props else None,
                flag=int(cols["flag"][i] or 0) if "flag" in cols else 0))
            qid = cols["queue_id"][i] if "queue_id" in cols else None
            if qid is None:
                c = counters.get(topic, 0)
                counters[topic] = c + 1
                qid = c % self.options.write_queue_nums
            qids.append(int(qid))
        result = store.put_messages(msgs, qids)
        _check_put(result)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _check_put(result: Any) -> None:
    """Every message must be stored (a flush timeout still stores them)."""
    if result.stored != result.count:
        raise RuntimeError(f"appending to the rocketstore failed: {result.status.name} "
                           f"({result.stored} of {result.count} messages of a batch stored)")
