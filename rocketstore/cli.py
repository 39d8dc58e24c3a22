"""The ``rocketstore`` command line.

- ``rocketstore demo [PATH]`` writes a realistic workload into a local store directory (single
  and batch puts, with a progress bar), reopens it, reads everything back with ``scan`` and
  verifies the count and a checksum of the bodies, then prints throughput and what it wrote.
- ``rocketstore dump PATH`` decodes a CommitLog (ours or Apache RocketMQ's) to JSON lines with
  the field names of the RocketMQ 4.9.8 fixture's ``messages.jsonl`` (body as ``body_b64``).
- ``rocketstore stat PATH [--json]``: topics, queues (min/max offsets, counts), CommitLog
  offsets, dispatch lag, file counts and sizes, checkpoint, abort file / running writer.
- ``rocketstore query PATH --topic T --key K``: messages by key (IndexFiles), JSON lines.
- ``rocketstore get PATH --topic T --queue Q --offset N``: a consumer pull (getMessage): a
  result line, then the messages as JSON lines.
- ``rocketstore view PATH MSG_ID``: a message by offsetMsgId.
- ``rocketstore recover PATH``: open for writing (normal or abnormal recovery, with a progress
  bar), shut down cleanly, report what recovery did.

Every command that opens an existing store reads its file sizes (CommitLog, ConsumeQueue,
IndexFile) from its files, so stores written with other settings open as they are;
``--hash-slots``/``--index-num`` give the IndexFile geometry when the size does not tell it.
All but ``recover`` (and ``demo``) open the store read-only, safe beside a running writer.

Only the store's public API is used here (layer 5 over layer 4, see DESIGN.md). Every expected
failure (missing path, locked store, bad segment files, corrupt records) ends as a one-line
error on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import shutil
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import click
from tqdm import tqdm

from rocketstore import (
    CorruptRecordError,
    Message,
    MessageExt,
    MessageStore,
    RecoveryReport,
    StoreConfig,
    StoreLockedError,
    __version__,
)
from rocketstore.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, validate_topic

log = logging.getLogger("rocketstore.cli")

SEGMENT_NAME_DIGITS = 20
DEFAULT_DEMO_DIR = "rocketstore-demo"
DEFAULT_DEMO_TOPICS = "orders,audit,clicks"
DEFAULT_DEMO_SEGMENT = 32 * 1024 * 1024
MAX_BODY_SIZE = 4 * 1024 * 1024  # StoreConfig.max_message_size default
LONG_MAX = 2**63 - 1
# Errors that opening or reading a store can raise for reasons outside the program: missing or
# unreadable files (OSError), bad segment names or sizes (StoreFormatError, a ValueError),
# another writer (StoreLockedError, a RuntimeError).
STORE_ERRORS = (OSError, ValueError, RuntimeError)


# ---- logging -------------------------------------------------------------------------------


class _ClickHandler(logging.Handler):
    """Log records to the current stderr (resolved per record, so it follows CliRunner)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def _setup_logging(ctx: click.Context, verbose: bool) -> None:
    """Send the package's log records to stderr for this command only: the handler and the
    level are undone when the command ends (so embedding programs and tests keep theirs)."""
    pkg = logging.getLogger("rocketstore")
    handler = _ClickHandler()
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s" if verbose
        else "rocketstore: %(levelname)s: %(message)s"))
    old_level = pkg.level
    pkg.addHandler(handler)
    pkg.setLevel(logging.DEBUG if verbose else logging.WARNING)

    def restore() -> None:
        pkg.removeHandler(handler)
        pkg.setLevel(old_level)

    ctx.call_on_close(restore)


def _fail(message: str, exc: BaseException | None = None) -> click.ClickException:
    """A clean error for the user; the traceback only goes to the debug log (--verbose)."""
    if exc is not None:
        log.debug("%s", message, exc_info=exc)
    return click.ClickException(message)


# ---- the group -----------------------------------------------------------------------------


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"rocketstore {__version__}")
        ctx.exit()


class _Group(click.Group):
    """Turns an unexpected OSError (permissions, a full disk) into a clean error too."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # click ends quietly on a closed pipe
        except OSError as exc:
            raise _fail(_describe(exc), exc) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log what the store does (DEBUG level).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """rocketstore: a RocketMQ-compatible embedded message store.

    \b
    Try it:
      rocketstore demo                  # write, reopen, verify ./rocketstore-demo
      rocketstore dump ./rocketstore-demo --limit 3
      rocketstore stat ./rocketstore-demo
      rocketstore get ./rocketstore-demo --topic orders --queue 0 --offset 0 --max 2
      rocketstore query ./rocketstore-demo --topic orders --key ord-1000
    """
    ctx.obj = {"verbose": verbose}
    _setup_logging(ctx, verbose)


# ---- locating stores -----------------------------------------------------------------------


def _segments(directory: Path) -> list[Path]:
    """CommitLog segment files of a directory (20-digit names), in offset order."""
    try:
        entries = list(directory.iterdir())
    except OSError as exc:
        raise _fail(f"cannot list {directory}: {exc.strerror or exc}", exc) from None
    found = [p for p in entries if _is_segment_name(p.name) and p.is_file()]
    return sorted(found, key=lambda p: p.name)


@dataclass
class _Located:
    root: Path                 # the store root handed to MessageStore.open
    commitlog: Path            # the CommitLog directory
    segments: list[Path]
    segment_size: int          # 0 when there is no segment yet

    def config(self, **extra: Any) -> StoreConfig:
        """A StoreConfig whose file sizes match the files found, so a store written with
        other settings (RocketMQ's own, the fixture's 64 KiB segments) opens as it is."""
        changes: dict[str, Any] = {"store_path_root_dir": str(self.root)}
        if self.segment_size:
            changes["mapped_file_size_commit_log"] = self.segment_size
        if self.commitlog != self.root / "commitlog":
            changes["store_path_commit_log"] = str(self.commitlog)
        changes.update(_detected_index_sizes(self.root))
        changes.update(extra)
        try:
            return StoreConfig(**changes)
        except (TypeError, ValueError) as exc:
            raise _fail(f"cannot configure a store for {self.commitlog}: {exc}", exc) from None


def _first_file(directory: Path, name_ok: Callable[[str], bool]) -> Path | None:
    try:
        names = sorted(p.name for p in directory.iterdir() if name_ok(p.name) and p.is_file())
    except OSError:
        return None
    return directory / names[0] if names else None


def _detected_index_sizes(root: Path) -> dict[str, int]:
    """ConsumeQueue and IndexFile sizes of an existing store, read from its files.

    A ConsumeQueue file holds whole 20-byte units. An IndexFile is 40 + 4 * slots + 20 * items
    bytes; with RocketMQ's default ratio (maxIndexNum = 4 * maxHashSlotNum) that gives both."""
    found: dict[str, int] = {}
    cq_root = root / "consumequeue"
    if cq_root.is_dir():
        for topic_dir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
            for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                first = _first_file(queue_dir, _is_segment_name)
                if first is not None:
                    size = first.stat().st_size
                    if size > 0 and size % 20 == 0:
                        found["mapped_file_size_consume_queue"] = size
                    break
            if found:
                break
    first_index = _first_file(root / "index", str.isdigit)
    if first_index is not None:
        size = first_index.stat().st_size
        if size > 40 and (size - 40) % 84 == 0:
            found["max_hash_slot_num"] = (size - 40) // 84
            found["max_index_num"] = 4 * found["max_hash_slot_num"]
    return found


def _is_segment_name(name: str) -> bool:
    return len(name) == SEGMENT_NAME_DIGITS and name.isdigit()


def _locate(path: Path) -> _Located:
    """PATH is a store root (with commitlog/) or a CommitLog directory itself. The segment
    size is read from the first segment, so foreign stores (e.g. 64 KiB segments) open."""
    if not path.exists():
        raise _fail(f"{path} does not exist")
    if not path.is_dir():
        raise _fail(f"{path} is not a directory (give a store directory or its commitlog/)")
    if (path / "commitlog").is_dir():
        root, commitlog = path, path / "commitlog"
        segments = _segments(commitlog)
    else:
        segments = _segments(path)
        if not segments:
            raise _fail(f"{path} is not a store: it has no commitlog/ directory and no CommitLog "
                        f"segment files ({SEGMENT_NAME_DIGITS}-digit names)")
        root, commitlog = path.parent, path
    size = 0
    if segments:
        size = segments[0].stat().st_size
        if size <= 0:
            raise _fail(f"CommitLog segment {segments[0]} is empty (0 bytes)")
    return _Located(root.resolve(), commitlog.resolve(), segments, size)


@contextmanager
def _open_store(root: Path, config: StoreConfig, *, read_only: bool,
                progress: Callable[[int, int], None] | None = None,
                locked_hint: str | None = None) -> Iterator[MessageStore]:
    try:
        store = MessageStore.open(root, config, read_only=read_only, progress=progress)
    except StoreLockedError as exc:
        raise _fail(locked_hint or f"{exc}", exc) from None
    except CorruptRecordError as exc:
        raise _fail(f"cannot open the store at {root}: {exc}", exc) from None
    except STORE_ERRORS as exc:
        raise _fail(f"cannot open the store at {root}: {_describe(exc)}", exc) from None
    with store:
        yield store


@contextmanager
def _quiet_store_warnings() -> Iterator[None]:
    """Without --verbose, leave it to dump to report a corrupt record (the store's own
    recovery warning about it would say the same thing twice)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and (ctx.find_root().obj or {}).get("verbose"):
        yield
        return
    store_log = logging.getLogger("rocketstore.store")
    level = store_log.level
    store_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        store_log.setLevel(level)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


# ---- opening existing stores ---------------------------------------------------------------

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20


def _index_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--hash-slots / --index-num: the IndexFile geometry, when the file size alone does not
    tell it (the sizes are read from the files assuming RocketMQ's 4 items per slot)."""
    f = click.option("--index-num", type=click.IntRange(min=2), default=None,
                     help="Items per IndexFile (maxIndexNum) of the store; default: read from "
                          "the files.")(f)
    f = click.option("--hash-slots", type=click.IntRange(min=1), default=None,
                     help="Hash slots per IndexFile (maxHashSlotNum) of the store; default: "
                          "read from the files (40 + 4*slots + 20*items bytes, items = "
                          "4*slots).")(f)
    return f


def _index_files(root: Path) -> list[Path]:
    directory = root / "index"
    try:
        return sorted(p for p in directory.iterdir() if p.name.isdigit() and p.is_file())
    except OSError:
        return []


def _index_file_size(slots: int, items: int) -> int:
    return INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slots + INDEX_ITEM_SIZE * items


def _index_overrides(root: Path, hash_slots: int | None, index_num: int | None
                     ) -> dict[str, int]:
    """StoreConfig changes for --hash-slots/--index-num. Given one of them, the other comes
    from the size of the store's first IndexFile (or the 4 items per slot ratio without one)."""
    if hash_slots is None and index_num is None:
        return {}
    files = _index_files(root)
    if hash_slots is not None and index_num is not None:
        return {"max_hash_slot_num": hash_slots, "max_index_num": index_num}
    if not files:
        if hash_slots is not None:
            return {"max_hash_slot_num": hash_slots, "max_index_num": 4 * hash_slots}
        assert index_num is not None
        return {"max_hash_slot_num": max(1, index_num // 4), "max_index_num": index_num}
    size = files[0].stat().st_size
    if hash_slots is not None:
        rest = size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * hash_slots
        if rest < 2 * INDEX_ITEM_SIZE or rest % INDEX_ITEM_SIZE:
            raise _fail(f"--hash-slots {hash_slots} does not fit index file {files[0]} "
                        f"({size:,} bytes = 40 + 4*slots + 20*items); give --index-num too")
        return {"max_hash_slot_num": hash_slots, "max_index_num": rest // INDEX_ITEM_SIZE}
    assert index_num is not None
    rest = size - INDEX_HEADER_SIZE - INDEX_ITEM_SIZE * index_num
    if rest < INDEX_SLOT_SIZE or rest % INDEX_SLOT_SIZE:
        raise _fail(f"--index-num {index_num} does not fit index file {files[0]} "
                    f"({size:,} bytes = 40 + 4*slots + 20*items); give --hash-slots too")
    return {"max_hash_slot_num": rest // INDEX_SLOT_SIZE, "max_index_num": index_num}


def _check_index_files(root: Path, config: StoreConfig) -> None:
    """Every IndexFile must have the size the config gives it: the store would refuse (or,
    opened for writing, drop and rebuild) a file of another size."""
    slots, items = config.max_hash_slot_num, config.max_index_num
    expected = _index_file_size(slots, items)
    for p in _index_files(root):
        size = p.stat().st_size
        if size != expected:
            raise _fail(
                f"index file {p} is {size:,} bytes, not the {expected:,} bytes of {slots:,} hash "
                f"slots and {items:,} items (40 + 4*slots + 20*items): give the store's "
                "--hash-slots and --index-num")


def _existing_store(path: Path, hash_slots: int | None = None, index_num: int | None = None,
                    **extra: Any) -> tuple[_Located, StoreConfig]:
    """Locate the store at PATH and make a config whose file sizes (CommitLog, ConsumeQueue,
    IndexFile) are those of its files, so stores written with other settings open as they
    are (e.g. the RocketMQ fixture: 64 KiB CommitLog, 2000-byte ConsumeQueue and 200-slot,
    800-item IndexFiles)."""
    located = _locate(path)
    config = located.config(**_index_overrides(located.root, hash_slots, index_num), **extra)
    _check_index_files(located.root, config)
    return located, config


# ---- dump ----------------------------------------------------------------------------------


def _json_line(d: dict[str, Any]) -> bytes:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _check_record_start(store: MessageStore, offset: int) -> str | None:
    """Why no record (nor END_FILE blank) starts at offset, or None when one does or when
    offset is outside the data (then there is simply nothing to dump)."""
    if offset <= store.get_min_phy_offset() or offset >= store.get_max_phy_offset():
        return None
    data = store.get_commitlog_data(offset)
    if data is None:
        return None
    try:
        if len(data) < 8:
            return "fewer than 8 bytes are left in its segment"
        _size, magic = struct.unpack_from(">iI", data, 0)
        if magic == BLANK_MAGIC_CODE:
            return None
        if magic != MESSAGE_MAGIC_CODE:
            return f"the bytes there carry no record magic code (found {magic:#010x})"
        if len(data) >= 36:
            (phy,) = struct.unpack_from(">q", data, 28)
            if phy != offset:
                return f"the record found there says it starts at {phy}"
        return None
    finally:
        data.release()


def _output_stream(output: str | None) -> tuple[IO[bytes], bool]:
    if output is None or output == "-":
        return click.get_binary_stream("stdout"), False
    try:
        return open(output, "wb"), True  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise _fail(f"cannot write {output}: {_describe(exc)}", exc) from None


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--from-offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="CommitLog offset to start at (a record boundary).")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Stop after this many records.")
@click.option("--no-body", is_flag=True, help="Leave out body_b64 (bodyLen and bodyCRC stay).")
@click.option("--check-crc/--no-check-crc", default=True, show_default=True,
              help="Verify every body CRC; a mismatch is reported as corrupt data.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the JSON lines to this file instead of stdout.")
@_index_options
def dump(path: Path, from_offset: int, limit: int | None, no_body: bool, check_crc: bool,
         output: str | None, hash_slots: int | None = None, index_num: int | None = None
         ) -> None:
    """Decode the CommitLog of PATH to JSON lines, in CommitLog order.

    PATH is a store directory (containing commitlog/) or a CommitLog directory. Works on
    stores written by Apache RocketMQ 4.x too (any segment size). The store is opened
    read-only and never modified. Corrupt data stops the dump with an error naming the
    offset (exit code 1); the records before it have been written.
    """
    located, config = _existing_store(path, hash_slots, index_num,
                                      check_crc_on_recover=check_crc)
    if not located.segments:
        log.info("%s has no CommitLog segments yet: nothing to dump", located.commitlog)
        return
    with _quiet_store_warnings(), _open_store(located.root, config, read_only=True) as store:
        problem = _check_record_start(store, from_offset)
        if problem is not None:
            raise _fail(f"--from-offset {from_offset} is not the start of a record: {problem}")
        out, close = _output_stream(output)
        try:
            written = _dump_records(store, out, from_offset, limit, no_body, check_crc)
        except BrokenPipeError:
            _silence_stdout()
            return
        finally:
            if close:
                out.close()
        log.info("dumped %d records from %s", written, located.commitlog)


def _dump_records(store: MessageStore, out: IO[bytes], from_offset: int, limit: int | None,
                  no_body: bool, check_crc: bool) -> int:
    """Write the records as JSON lines; returns how many. Reading errors (corrupt data) are
    reported after the lines before them are written; writing errors propagate."""
    written = 0
    pending: list[bytes] = []

    def write_pending() -> None:
        out.write(b"".join(pending))
        pending.clear()

    records = store.scan(from_offset, check_crc=check_crc)
    while written != limit:
        try:
            msg = next(records, None)
            if msg is None:
                break
            d = msg.to_dict(body_b64=not no_body)
        except CorruptRecordError as exc:
            write_pending()
            out.flush()
            raise _fail(f"corrupt CommitLog data: {exc} ({written} records before it were "
                        "dumped)", exc) from None
        except STORE_ERRORS as exc:
            write_pending()
            out.flush()
            raise _fail(f"reading the CommitLog failed after {written} records: "
                        f"{_describe(exc)}", exc) from None
        d.pop("body", None)
        pending.append(_json_line(d))
        written += 1
        if len(pending) >= 512:
            write_pending()
    write_pending()
    out.flush()
    # A read-only store stops at the first corrupt record it finds when opening (it never
    # repairs): the scan ends there quietly, so say it here unless --limit stopped us first.
    rec = store.recovery
    if (written != limit and rec is not None and rec.stop_status == "corrupt"
            and from_offset <= rec.end_offset):
        raise _fail(f"corrupt CommitLog data: {rec.stop_reason or 'corrupt record'} at offset "
                    f"{rec.end_offset} ({written} records before it were dumped)")
    return written


def _silence_stdout() -> None:
    """After a closed pipe (dump | head): point stdout at /dev/null so the interpreter's
    final flush does not complain, and end quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, click.get_binary_stream("stdout").fileno())
    except (OSError, ValueError, AttributeError):
        pass


# ---- stat ----------------------------------------------------------------------------------


def _lock_holder(root: Path) -> tuple[bool | None, int | None]:
    """(whether a writer holds the store's lock, its pid), read from /proc/locks without
    touching the lock (taking it, even shared and for a moment, could make a starting writer
    fail). (None, None) where that cannot be told."""
    try:
        st = (root / "lock").stat()
    except FileNotFoundError:
        return False, None
    except OSError:
        return None, None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 3708 fe:00:2146418 0 EOF" ("1: -> FLOCK ..." waits)
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return True, int(fields[4]) if fields[4].isdigit() else None
    return False, None


def _files_summary(paths: list[Path], file_size: int) -> dict[str, int]:
    return {"files": len(paths), "bytes": sum(p.stat().st_size for p in paths),
            "fileSize": file_size}


def _dispatch_lag(store: MessageStore) -> int:
    """CommitLog bytes not yet in a ConsumeQueue. Read-only (no dispatch service): the
    CommitLog end minus the end of the newest record a ConsumeQueue points at."""
    if not store.read_only:
        return store.dispatch_behind_bytes()
    max_phy = store.get_max_phy_offset()
    dispatched = max(store.consume_queues.max_physic_offset(), store.get_min_phy_offset())
    return max(0, max_phy - dispatched)


def _store_stat(store: MessageStore, root: Path, commitlog_dir: Path) -> dict[str, Any]:
    config = store.config
    topics: list[dict[str, Any]] = []
    total = 0
    for topic in store.topics():
        queues = []
        for qid in store.queues(topic):
            lo = store.get_min_offset_in_queue(topic, qid)
            hi = store.get_max_offset_in_queue(topic, qid)
            queues.append({"queueId": qid, "minOffset": lo, "maxOffset": hi,
                           "messages": max(0, hi - lo)})
        count = sum(q["messages"] for q in queues)
        total += count
        topics.append({"topic": topic, "messages": count, "queues": queues})
    rec = store.recovery
    # File counts and sizes are those on disk (a read-only open may leave some files aside,
    # e.g. IndexFiles newer than the checkpoint while the abort file is there).
    commitlog = {"minOffset": store.get_min_phy_offset(), "maxOffset": store.get_max_phy_offset(),
                 **_files_summary(_segments(commitlog_dir), config.mapped_file_size_commit_log),
                 "endStatus": rec.stop_status if rec is not None else "end",
                 "endReason": rec.stop_reason if rec is not None else None}
    cq_files = [p for p in (root / "consumequeue").glob("*/*/*")
                if _is_segment_name(p.name) and p.is_file()]
    index_ts, index_phy = store.index_service.index_last_update()
    index = {**_files_summary(_index_files(root),
                              _index_file_size(config.max_hash_slot_num, config.max_index_num)),
             "hashSlots": config.max_hash_slot_num, "indexNum": config.max_index_num,
             "lastUpdateTimestamp": index_ts, "lastUpdatePhyOffset": index_phy}
    abort = (root / "abort").exists()
    writer, pid = _lock_holder(root)
    clean: bool | None = not abort
    if abort and writer is not False:
        clean = None  # the abort file of a running writer says nothing about the last run
    return {
        "store": str(root),
        "topicCount": len(topics),
        "queueCount": sum(len(t["queues"]) for t in topics),
        "messages": total,
        "commitLog": commitlog,
        "consumeQueue": {**_files_summary(cq_files, config.mapped_file_size_consume_queue),
                         "queues": len(store.consume_queues.all())},
        "index": index,
        "dispatchBehindBytes": _dispatch_lag(store),
        "checkpoint": store.checkpoint.as_dict(),
        "abortFile": abort,
        "writerRunning": writer,
        "writerPid": pid,
        "lastShutdownClean": clean,
        "topics": topics,
    }


def _when(ms: int) -> str:
    if ms <= 0:
        return "-"
    try:
        when = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _print_stat(st: dict[str, Any]) -> None:
    echo = click.echo
    cl, cq, ix = st["commitLog"], st["consumeQueue"], st["index"]
    echo(f"store          {st['store']}")
    if st["writerRunning"]:
        pid = f" (pid {st['writerPid']})" if st["writerPid"] else ""
        echo(f"writer         running{pid}: this is a snapshot")
    if st["lastShutdownClean"] is None and st["abortFile"]:
        echo("last shutdown  unknown (the abort file is the running writer's)")
    elif st["abortFile"]:
        echo("last shutdown  UNCLEAN: abort file present (the next writable open runs abnormal "
             "recovery; `rocketstore recover` does it now)")
    else:
        echo("last shutdown  clean (no abort file)")
    echo(f"commitlog      offsets {cl['minOffset']:,} .. {cl['maxOffset']:,}; {cl['files']} "
         f"file(s), {_size(cl['bytes'])} ({_file_size(cl['fileSize'])} each)")
    if cl["endStatus"] != "end":
        echo(f"               ends at an invalid record ({cl['endReason'] or cl['endStatus']})")
    echo(f"consumequeue   {cq['queues']} queue(s), {cq['files']} file(s), {_size(cq['bytes'])} "
         f"({_file_size(cq['fileSize'])} each)")
    echo(f"index          {ix['files']} file(s), {_size(ix['bytes'])} ({ix['hashSlots']:,} hash "
         f"slots, {ix['indexNum']:,} items each); last update {_when(ix['lastUpdateTimestamp'])}"
         f" at offset {ix['lastUpdatePhyOffset']:,}")
    echo(f"dispatch lag   {st['dispatchBehindBytes']:,} bytes")
    ck = st["checkpoint"]
    echo(f"checkpoint     physic {_when(ck['physicMsgTimestamp'])}, logics "
         f"{_when(ck['logicsMsgTimestamp'])}, index {_when(ck['indexMsgTimestamp'])}")
    echo(f"messages       {st['messages']:,} in {st['queueCount']} queue(s) of "
         f"{st['topicCount']} topic(s)")
    rows = [(_clip(t["topic"], 48), str(q["queueId"]), f"{q['minOffset']:,}", f"{q['maxOffset']:,}",
             f"{q['messages']:,}") for t in st["topics"] for q in t["queues"]]
    if not rows:
        return
    head = ("TOPIC", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    echo("")
    for r in (head, *rows):
        echo("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                  zip(r[1:], widths[1:], strict=True)]))


def _file_size(n: int) -> str:
    """A configured file size: binary units when it is a whole number of KiB."""
    return _size(n) if n % 1024 == 0 else f"{n:,} B"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@_index_options
def stat(path: Path, as_json: bool, hash_slots: int | None, index_num: int | None) -> None:
    """Summarise the store at PATH: topics and queues (min/max offsets, message counts), the
    CommitLog's offsets, dispatch lag, file counts and sizes per kind, the checkpoint, and
    whether the last shutdown was clean (abort file).

    Opens the store read-only: safe while a writer has it open (it shows a snapshot).
    """
    located, config = _existing_store(path, hash_slots, index_num)
    with _open_store(located.root, config, read_only=True) as store:
        st = _store_stat(store, located.root, located.commitlog)
    if as_json:
        click.echo(json.dumps(st, ensure_ascii=False, indent=2))
    else:
        _print_stat(st)


# ---- query, get, view ----------------------------------------------------------------------


def _write_messages(messages: list[MessageExt], no_body: bool,
                    head: dict[str, Any] | None = None) -> None:
    out = click.get_binary_stream("stdout")
    lines = [] if head is None else [_json_line(head)]
    for msg in messages:
        d = msg.to_dict(body_b64=not no_body)
        d.pop("body", None)
        lines.append(_json_line(d))
    try:
        out.write(b"".join(lines))
        out.flush()
    except BrokenPipeError:
        _silence_stdout()


_NO_BODY = click.option("--no-body", is_flag=True, help="Leave out body_b64.")


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-t", "--topic", required=True, help="The topic.")
@click.option("-k", "--key", required=True, help="A KEYS token or a UNIQ_KEY.")
@click.option("--max", "max_num", type=click.IntRange(min=1), default=64, show_default=True,
              help="At most this many messages (the newest ones).")
@click.option("--begin", type=click.IntRange(min=0), default=0,
              help="Only messages stored at or after this time (ms since the epoch).")
@click.option("--end", type=click.IntRange(min=0), default=LONG_MAX,
              help="Only messages stored at or before this time (ms since the epoch).")
@_NO_BODY
@_index_options
def query(path: Path, topic: str, key: str, max_num: int, begin: int, end: int, no_body: bool,
          hash_slots: int | None, index_num: int | None) -> None:
    """Messages of TOPIC with key KEY, as JSON lines, oldest first.

    KEY matches a token of the KEYS property or the UNIQ_KEY (client message id), as
    RocketMQ's queryMessage; every index hit is checked against the stored record, so keys
    whose hashes collide never return each other's messages. The lookup needs the store's
    IndexFiles (index/, written when messageIndexEnable is on): without them nothing is
    found. No match: no output, exit code 0. Opens the store read-only.
    """
    if not key:
        raise _fail("--key must not be empty")
    if begin > end:
        raise _fail(f"--begin {begin} is after --end {end}")
    located, config = _existing_store(path, hash_slots, index_num,
                                      max_msgs_num_batch=max_num)
    if not _index_files(located.root):
        log.warning("%s has no IndexFiles (index/): a query by key finds nothing without them",
                    located.root)
    with _open_store(located.root, config, read_only=True) as store:
        try:
            found = store.query_message(topic, key, max_num, begin, end)
        except (TypeError, ValueError) as exc:
            raise _fail(f"cannot query {topic}#{key}: {_describe(exc)}", exc) from None
        messages = sorted(found.messages, key=lambda m: m.commitlog_offset)
        _write_messages(messages, no_body)
        log.info("%d message(s) of %s with key %s", len(messages), topic, key)


def _queue_not_found(store: MessageStore, topic: str, queue_id: int) -> click.ClickException:
    queues = store.queues(topic)
    if queues:
        return _fail(f"topic {topic!r} has no queue {queue_id} in this store (its queues: "
                     f"{', '.join(map(str, queues))})")
    topics = store.topics()
    shown = ", ".join(repr(t) for t in topics[:20]) + (", ..." if len(topics) > 20 else "")
    return _fail(f"topic {topic!r} has no ConsumeQueue in this store (topics: "
                 f"{shown or 'none'})")


@main.command("get")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-t", "--topic", required=True, help="The topic.")
@click.option("-q", "--queue", "queue_id", type=click.IntRange(min=0), required=True,
              help="The queue id.")
@click.option("--offset", type=click.IntRange(min=0), required=True,
              help="Logical offset in the queue to read from.")
@click.option("-n", "--max", "max_msgs", type=click.IntRange(min=1), default=32,
              show_default=True, help="At most this many messages (the store's transfer "
                                      "limits apply too, as in a RocketMQ pull).")
@click.option("-s", "--subscription", default="*", show_default=True,
              help="Tag expression: '*' or 'TagA || TagB'.")
@click.option("-g", "--group", default="rocketstore-cli", show_default=True,
              help="Consumer group (informational).")
@_NO_BODY
@_index_options
def get_command(path: Path, topic: str, queue_id: int, offset: int, max_msgs: int,
                subscription: str, group: str, no_body: bool, hash_slots: int | None,
                index_num: int | None) -> None:
    """Read a queue like a consumer pull (RocketMQ getMessage), as JSON lines.

    The first line is the result: {"status", "nextBeginOffset", "minOffset", "maxOffset",
    "messageCount"} (status is RocketMQ's GetMessageStatus); one line per message follows.
    Pull on from nextBeginOffset. Opens the store read-only.
    """
    located, config = _existing_store(path, hash_slots, index_num)
    with _open_store(located.root, config, read_only=True) as store:
        if queue_id not in store.queues(topic):
            raise _queue_not_found(store, topic, queue_id)
        try:
            r = store.get_message(group, topic, queue_id, offset, max_msgs, subscription)
        except (TypeError, ValueError) as exc:
            raise _fail(f"cannot read {topic}:{queue_id} at {offset}: {_describe(exc)}",
                        exc) from None
        head = {"status": r.status.name, "nextBeginOffset": r.next_begin_offset,
                "minOffset": r.min_offset, "maxOffset": r.max_offset,
                "messageCount": len(r.messages)}
        _write_messages(r.messages, no_body, head)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("msg_id")
@_NO_BODY
@_index_options
def view(path: Path, msg_id: str, no_body: bool, hash_slots: int | None,
         index_num: int | None) -> None:
    """The message with offsetMsgId MSG_ID (store host + CommitLog offset, 32 or 56 hex
    characters, as RocketMQ's viewMessage), as one JSON line. Opens the store read-only."""
    located, config = _existing_store(path, hash_slots, index_num)
    with _open_store(located.root, config, read_only=True) as store:
        try:
            msg = store.view_message(msg_id)
        except (TypeError, ValueError) as exc:
            raise _fail(f"bad message id {msg_id!r}: {_describe(exc)}", exc) from None
        if msg is None:
            raise _fail(f"no message {msg_id} in the store: no record starts at the CommitLog "
                        f"offset it names (the CommitLog holds {store.get_min_phy_offset():,}"
                        f" .. {store.get_max_phy_offset():,})")
        if msg.msg_id.upper() != msg_id.upper():
            log.warning("%s names another store host than the record's (%s, id %s)", msg_id,
                        msg.store_host, msg.msg_id)
        _write_messages([msg], no_body)


# ---- recover -------------------------------------------------------------------------------


def _print_recovery(report: RecoveryReport, root: Path, dry_run: bool, clean: bool) -> None:
    echo = click.echo
    if report.abnormal:
        echo("recovery     abnormal: the abort file was there (the last run did not shut down "
             "cleanly)")
    else:
        echo("recovery     normal: the last run shut down cleanly")
    echo(f"store        {root}")
    echo(f"scanned      {report.records:,} record(s) in {report.files_scanned} file(s), "
         f"CommitLog offsets {report.start_offset:,} .. {report.end_offset:,}")
    if report.stop_status == "end":
        echo("stopped      at the end of the data")
    else:
        echo(f"stopped      at an invalid record at {report.end_offset:,}: "
             f"{report.stop_reason or report.stop_status}")
    verb = "would give up" if dry_run else "gave up"
    echo(f"truncated    {verb} {report.truncated_bytes:,} CommitLog byte(s) after the end")
    if not dry_run:
        echo(f"dispatched   {report.dispatched_records:,} record(s) to ConsumeQueue/IndexFile "
             f"in {report.dispatch_s * 1000:,.1f} ms")
    echo(f"took         {report.duration_s * 1000:,.1f} ms")
    if dry_run:
        echo("dry run      nothing was changed")
    elif clean:
        echo("shutdown     clean: checkpoint written, abort file removed")
    else:
        echo("shutdown     the abort file is still there", err=True)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option("--dry-run", is_flag=True,
              help="Open read-only: report what recovery finds, change nothing.")
@_index_options
def recover(path: Path, as_json: bool, dry_run: bool, hash_slots: int | None,
            index_num: int | None) -> None:
    """Run the store's recovery at PATH now and shut it down cleanly.

    Opens the store for writing, which recovers it: normally after a clean shutdown (the
    last files are checked), abnormally when the abort file is there (the CommitLog is
    replayed from the checkpoint, validating every record; whatever follows the first
    invalid one is cut from the CommitLog, ConsumeQueues and IndexFiles, and the replayed
    range is dispatched again). Then it shuts down cleanly (checkpoint written, abort file
    removed) and reports what it did. The store must not be open for writing elsewhere.
    """
    located, config = _existing_store(path, hash_slots, index_num)
    root = located.root
    hint = (f"store {root} is locked: another process has it open for writing; stop it first "
            "(stat, query, get, view and dump read a store while it runs)")
    bar = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024, desc="recovering",
               disable=None, leave=False)

    def progress(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        if done > bar.n:
            bar.update(done - bar.n)

    try:
        with _open_store(root, config, read_only=dry_run, progress=progress,
                         locked_hint=hint) as store:
            report = store.recovery
    finally:
        bar.close()
    if report is None:
        raise _fail(f"the store at {root} reported no recovery")
    clean = dry_run or not (root / "abort").exists()
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False))
    else:
        _print_recovery(report, root, dry_run, clean)
    if not clean:
        raise _fail(f"the store at {root} did not shut down cleanly (abort file left)")


# ---- demo workload -------------------------------------------------------------------------

_FILLER = (b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
           b"incididunt ut labore et dolore magna aliqua. ") * 8
_IPV4_BORN = [f"10.0.{i // 8}.{10 + i}:{40000 + 97 * i}" for i in range(24)]
_IPV6_BORN = ["[2001:db8:0:1::17]:41000", "[fd00::2:3]:41001",
              "[2001:db8:85a3::8a2e:370:7334]:41002", "[::1]:41003"]
_REGIONS = ["eu-west", "us-east", "ap-south", "华东", "Zürich"]
_PAGES = ["/", "/search", "/products/{}", "/cart", "/checkout", "/account"]
# topic -> (share of the traffic, queue count)
_PROFILES: dict[str, tuple[float, int]] = {"orders": (5.0, 8), "clicks": (3.0, 6),
                                          "audit": (2.0, 4)}
_DEFAULT_PROFILE = (2.0, 4)


@dataclass
class _Digest:
    """Order-sensitive summary of bodies: count, bytes, chained CRC-32, per-topic counts."""

    count: int = 0
    body_bytes: int = 0
    crc: int = 0
    topics: dict[str, int] = field(default_factory=dict)

    def add(self, topic: str, body: bytes | memoryview) -> None:
        self.count += 1
        self.body_bytes += len(body)
        self.crc = zlib.crc32(body, self.crc)
        self.topics[topic] = self.topics.get(topic, 0) + 1

    def differences(self, other: _Digest) -> list[str]:
        out = []
        if self.count != other.count:
            out.append(f"count {other.count} != {self.count} written")
        if self.body_bytes != other.body_bytes:
            out.append(f"body bytes {other.body_bytes} != {self.body_bytes} written")
        if self.crc != other.crc:
            out.append(f"body crc32 {other.crc:#010x} != {self.crc:#010x} written")
        if self.topics != other.topics:
            out.append(f"per-topic counts {other.topics} != {self.topics} written")
        return out


class _Workload:
    """Deterministic realistic messages: orders (paid/shipped/refunded, keyed and routed by
    order id), audit events (keyed by user), clicks (no keys), others generic."""

    def __init__(self, topics: list[str], body_size: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.topics = topics
        self.weights = [_PROFILES.get(t, _DEFAULT_PROFILE)[0] for t in topics]
        self.queues = {t: _PROFILES.get(t, _DEFAULT_PROFILE)[1] for t in topics}
        self.body_size = body_size
        self.next_order = 1000
        self.open_orders: list[int] = []
        self.counter = 0
        self.expected = _Digest()

    def _body(self, text: str) -> bytes:
        raw = text.encode("utf-8")
        size = self.body_size
        room = size - len(raw)
        if room >= 9:  # room for ,"pad":"" inside the object
            return raw[:-1] + b',"pad":"' + _filler(room - 9) + b'"}'
        if room >= 0:
            return raw + b" " * room
        return raw[:size]  # bodies are opaque bytes: a cut JSON document is fine

    def _born_host(self) -> str:
        rng = self.rng
        if rng.random() < 0.125:
            return rng.choice(_IPV6_BORN)
        return rng.choice(_IPV4_BORN)

    def _order(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        if not self.open_orders or rng.random() < 0.55:
            tag, oid = "paid", self.next_order
            self.next_order += 1
            self.open_orders.append(oid)
            if len(self.open_orders) > 256:
                self.open_orders.pop(0)
        else:
            tag = "refunded" if rng.random() < 0.2 else "shipped"
            oid = rng.choice(self.open_orders)
        customer = oid * 7919 % 5003
        amount = f"{(oid * 37 % 50000) / 100:.2f}"
        region = rng.choice(_REGIONS)
        body = self._body(
            f'{{"orderId":"ord-{oid}","customer":"cust-{customer}","status":"{tag}",'
            f'"amount":{amount},"currency":"EUR","region":"{region}",'
            f'"items":[{{"sku":"sku-{oid % 97}","qty":{1 + oid % 3}}}],"ts":{ts}}}')
        msg = Message("orders", body, tags=tag, keys=[f"ord-{oid}", f"cust-{customer}"],
                      properties={"region": region, "amount": amount, "currency": "EUR"},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, oid % self.queues["orders"]

    def _audit(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        uid = rng.randrange(1, 2000)
        event = rng.choice(("login", "login", "logout", "grant", "revoke"))
        severity = "warn" if event in ("grant", "revoke") else "info"
        body = self._body(
            f'{{"event":"{event}","user":"user-{uid}","ok":{"true" if uid % 11 else "false"},'
            f'"ip":"10.1.{uid % 256}.{uid // 256}","ts":{ts}}}')
        msg = Message("audit", body, tags=event, keys=f"user-{uid}",
                      properties={"actor": f"user-{uid}", "severity": severity},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, uid % self.queues["audit"]

    def _click(self, ts: int) -> tuple[Message, int]:
        rng = self.rng
        page = rng.choice(_PAGES).format(rng.randrange(1, 500))
        session = f"s-{rng.randrange(100000):05d}"
        body = self._body(f'{{"page":"{page}","session":"{session}","x":{rng.randrange(1920)},'
                          f'"y":{rng.randrange(1080)},"ts":{ts}}}')
        tag = rng.choice((None, "view", "view", "click"))
        msg = Message("clicks", body, tags=tag, properties={"page": page, "session": session},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        self.counter += 1
        return msg, self.counter % self.queues["clicks"]

    def _generic(self, topic: str, ts: int) -> tuple[Message, int]:
        rng = self.rng
        self.counter += 1
        n = self.counter
        body = self._body(f'{{"topic":"{topic}","n":{n},"value":{rng.random():.6f},'
                          f'"ts":{ts}}}')
        msg = Message(topic, body, tags=rng.choice(("TagA", "TagB")), keys=f"{topic}-{n}",
                      properties={"source": "rocketstore-demo"},
                      born_timestamp=ts - rng.randrange(50), born_host=self._born_host())
        return msg, n % self.queues[topic]

    def make(self, n: int) -> tuple[list[Message], list[int]]:
        """n messages and their queue ids; their bodies are added to self.expected."""
        ts = int(time.time() * 1000)
        msgs: list[Message] = []
        qids: list[int] = []
        expected = self.expected
        for topic in self.rng.choices(self.topics, self.weights, k=n):
            if topic == "orders":
                msg, qid = self._order(ts)
            elif topic == "audit":
                msg, qid = self._audit(ts)
            elif topic == "clicks":
                msg, qid = self._click(ts)
            else:
                msg, qid = self._generic(topic, ts)
            msgs.append(msg)
            qids.append(qid)
            expected.add(topic, msg.body)
        return msgs, qids


def _filler(n: int) -> bytes:
    if n <= len(_FILLER):
        return _FILLER[:n]
    return (_FILLER * (n // len(_FILLER) + 1))[:n]


@dataclass
class _Phase:
    name: str
    messages: int = 0
    log_bytes: int = 0
    seconds: float = 0.0
    failed: int = 0
    failure: str | None = None

    def rate(self) -> str:
        dt = max(self.seconds, 1e-9)
        return (f"{self.messages:>9,} msgs in {self.seconds:6.3f} s  "
                f"{self.messages / dt:>11,.0f} msgs/s  {self.log_bytes / dt / 1e6:>8,.1f} MB/s")


def _parse_topics(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
                  ) -> list[str]:
    names: list[str] = []
    for item in value or (DEFAULT_DEMO_TOPICS,):
        for name in item.split(","):
            name = name.strip()
            if not name or name in names:
                continue
            try:
                validate_topic(name)
            except (TypeError, ValueError) as exc:
                raise click.BadParameter(str(exc)) from None
            names.append(name)
    if not names:
        raise click.BadParameter("give at least one topic")
    return names


@main.command()
@click.argument("path", type=click.Path(path_type=Path), default=DEFAULT_DEMO_DIR)
@click.option("-n", "--messages", type=click.IntRange(min=1), default=200_000,
              show_default=True, help="How many messages to write.")
@click.option("--topics", multiple=True, callback=_parse_topics, metavar="T1,T2,...",
              help=f"Comma-separated topics (default: {DEFAULT_DEMO_TOPICS}).")
@click.option("--batch", type=click.IntRange(1, 100_000), default=500, show_default=True,
              help="Messages per put_messages call in the batch half.")
@click.option("--body-size", type=click.IntRange(0, MAX_BODY_SIZE), default=256,
              show_default=True, help="Body bytes per message.")
@click.option("--segment-size", type=click.IntRange(min=4096), default=DEFAULT_DEMO_SEGMENT,
              show_default=True, help="CommitLog file size for a new store (bytes).")
@click.option("--seed", type=int, default=42, show_default=True, help="Workload random seed.")
@click.option("--keep/--no-keep", default=True, show_default=True,
              help="Keep the store directory afterwards (--no-keep removes what the demo "
                   "created).")
def demo(path: Path, messages: int, topics: list[str], batch: int, body_size: int,
         segment_size: int, seed: int, keep: bool) -> None:
    """Write a realistic workload into PATH, reopen it, read it all back and verify.

    Half the messages go in one put_message call each, half in put_messages batches; the
    store is then closed, reopened (recovery) and read back with scan, checking the count and
    a CRC-32 over all bodies. PATH (default ./rocketstore-demo) may be new, empty or an
    earlier demo store (the demo appends and verifies what it added).
    """
    root = path.resolve()
    created, emptied_ok, segment_size = _prepare_demo_dir(root, segment_size)
    if body_size + 4096 > segment_size:
        raise _fail(f"--segment-size {segment_size} is too small for {body_size}-byte bodies")
    config = StoreConfig(**_demo_sizes(root, messages, segment_size))
    workload = _Workload(topics, body_size, seed)
    try:
        report = _run_demo(root, config, workload, messages, batch)
        _print_demo(report, root, topics, workload, batch)
    finally:
        if not keep:
            _remove_demo_dir(root, created, emptied_ok)
    if report.problems:
        click.echo("verification FAILED: " + "; ".join(report.problems), err=True)
        click.get_current_context().exit(1)


def _prepare_demo_dir(root: Path, segment_size: int) -> tuple[bool, bool, int]:
    """(created, was empty, segment size). An existing store keeps its own segment size."""
    if not root.exists():
        return True, False, segment_size
    if not root.is_dir():
        raise _fail(f"{root} exists and is not a directory")
    if not any(root.iterdir()):
        return False, True, segment_size
    if not (root / "commitlog").is_dir():
        raise _fail(f"{root} is not empty and is not a store (no commitlog/); give a new or "
                    "empty directory, or an earlier demo store")
    segments = _segments(root / "commitlog")
    if segments:
        segment_size = segments[0].stat().st_size
    return False, False, segment_size


def _demo_sizes(root: Path, messages: int, segment_size: int) -> dict[str, Any]:
    """File sizes for the demo store, scaled to the workload: RocketMQ's defaults would
    allocate a 420 MB IndexFile and 6 MB per ConsumeQueue for a few thousand messages. An
    existing store keeps the sizes its files have."""
    slots = min(max(messages, 10_000), 5_000_000)
    sizes: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": segment_size,
        "mapped_file_size_consume_queue": 20 * min(max(messages // 4, 1000), 300_000),
        "max_hash_slot_num": slots,
        "max_index_num": 4 * slots,
    }
    sizes.update(_detected_index_sizes(root))
    return sizes


def _remove_demo_dir(root: Path, created: bool, was_empty: bool) -> None:
    if created:
        shutil.rmtree(root, ignore_errors=True)
    elif was_empty:
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    else:
        click.echo(f"kept {root}: it held a store before the demo", err=True)


@dataclass
class _DemoReport:
    single: _Phase
    batched: _Phase
    read: _Phase
    start_offset: int = 0
    end_offset: int = 0
    recovery_s: float = 0.0
    recovered_records: int = 0
    found: _Digest = field(default_factory=_Digest)
    first: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _run_demo(root: Path, config: StoreConfig, workload: _Workload, messages: int,
              batch: int) -> _DemoReport:
    report = _DemoReport(_Phase("put_message"), _Phase("put_messages"), _Phase("scan"))
    n_single = messages // 2
    n_batch = messages - n_single
    with _open_store(root, config, read_only=False) as store, \
            tqdm(total=messages, unit="msg", unit_scale=True, desc="writing", disable=None,
                 leave=False) as bar:
        report.start_offset = store.get_max_phy_offset()
        _write_single(store, workload, n_single, report.single, bar)
        _write_batches(store, workload, n_batch, batch, report.batched, bar)
        report.end_offset = store.get_max_phy_offset()
    with _open_store(root, config, read_only=False) as store:
        if store.recovery is not None:
            report.recovery_s = store.recovery.duration_s
            report.recovered_records = store.recovery.records
        _read_back(store, report, messages)
    for phase in (report.single, report.batched):
        if phase.failed:
            report.problems.append(f"{phase.failed} {phase.name} puts failed ({phase.failure})")
    report.problems.extend(workload.expected.differences(report.found))
    return report


def _write_single(store: MessageStore, workload: _Workload, total: int, phase: _Phase,
                  bar: tqdm) -> None:
    done = 0
    put = store.put_message
    while done < total:
        msgs, qids = workload.make(min(2048, total - done))
        wrote = failed = 0
        started = time.perf_counter()
        for msg, qid in zip(msgs, qids, strict=True):
            r = put(msg, qid)
            if r.ok:
                wrote += r.wrote_bytes
            else:
                failed += 1
                phase.failure = phase.failure or r.status.name
        phase.seconds += time.perf_counter() - started
        phase.log_bytes += wrote
        phase.failed += failed
        phase.messages += len(msgs) - failed
        done += len(msgs)
        bar.update(len(msgs))


def _write_batches(store: MessageStore, workload: _Workload, total: int, batch: int,
                   phase: _Phase, bar: tqdm) -> None:
    done = 0
    while done < total:
        msgs, qids = workload.make(min(batch, total - done))
        started = time.perf_counter()
        res = store.put_messages(msgs, qids)
        phase.seconds += time.perf_counter() - started
        phase.log_bytes += res.wrote_bytes
        phase.messages += res.stored
        if not res.ok:
            phase.failed += res.count - res.stored
            phase.failure = phase.failure or res.status.name
        done += len(msgs)
        bar.update(len(msgs))


def _read_back(store: MessageStore, report: _DemoReport, expected: int) -> None:
    found = report.found
    read_bytes = 0
    started = time.perf_counter()
    try:
        with tqdm(total=expected, unit="msg", unit_scale=True, desc="reading", disable=None,
                  leave=False) as bar:
            pending = 0
            for msg in store.scan(report.start_offset):
                found.add(msg.topic, msg.body)
                read_bytes += msg.store_size
                if len(report.first) < 3:
                    report.first.append(msg.to_dict())
                pending += 1
                if pending == 4096:
                    bar.update(pending)
                    pending = 0
            bar.update(pending)
    except CorruptRecordError as exc:
        report.problems.append(f"reading back failed: {exc}")
    report.read.seconds = time.perf_counter() - started
    report.read.messages = found.count
    report.read.log_bytes = read_bytes


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _size(n: int) -> str:
    """Binary units, as segment sizes are configured."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def _print_demo(report: _DemoReport, root: Path, topics: list[str], workload: _Workload,
                batch: int) -> None:
    echo = click.echo
    exp = workload.expected
    log_bytes = report.end_offset - report.start_offset
    echo(f"rocketstore demo: {root}")
    echo(f"  wrote        {exp.count:,} messages: {_mb(exp.body_bytes)} of bodies, "
         f"{_mb(log_bytes)} of CommitLog (offsets {report.start_offset:,}.."
         f"{report.end_offset:,})")
    echo("  topics       " + ", ".join(
        f"{t} ({workload.queues[t]} queues) {exp.topics.get(t, 0):,}" for t in topics))
    echo(f"  put_message  {report.single.rate()}  (one call per message)")
    echo(f"  put_messages {report.batched.rate()}  (batches of {batch})")
    echo(f"  reopen       recovery checked {report.recovered_records:,} records in "
         f"{report.recovery_s * 1000:,.1f} ms")
    echo(f"  scan         {report.read.rate()}")
    if report.problems:
        echo("  verify       FAILED")
    else:
        echo(f"  verify       OK: {report.found.count:,} messages, body crc32 "
             f"{report.found.crc:#010x}, {report.found.body_bytes:,} body bytes")
    _print_files(root)
    echo("  first records")
    for d in report.first:
        keys = d["keys"] or "-"
        body = _preview(d["body_b64"])
        echo(f"    @{d['commitLogOffset']:<10} {d['topic']}[{d['queueId']}]#{d['queueOffset']}"
             f"  tags={d['tags'] or '-'}  keys={keys}  born={d['bornHost']}"
             f"  msgId={d['msgId']}")
        echo(f"      {body}")


def _print_files(root: Path) -> None:
    segments = _segments(root / "commitlog") if (root / "commitlog").is_dir() else []
    total = sum(p.stat().st_size for p in segments)
    click.echo(f"  files        {len(segments)} CommitLog segment(s), {_size(total)}, in "
               f"{root / 'commitlog'}")
    shown = segments if len(segments) <= 6 else [*segments[:3], None, *segments[-2:]]
    for p in shown:
        if p is None:
            click.echo(f"               ... {len(segments) - 5} more")
        else:
            click.echo(f"               {p.name}  {_size(p.stat().st_size)}")
    for name in ("consumequeue", "index"):
        files = [p for p in (root / name).rglob("*") if p.is_file()]
        if files:
            size = sum(p.stat().st_size for p in files)
            click.echo(f"               {name}/: {len(files)} file(s), {_size(size)}")


def _preview(body_b64: str, width: int = 100) -> str:
    text = base64.b64decode(body_b64).decode("utf-8", "replace")
    return text if len(text) <= width else text[: width - 3] + "..."


# ---- offsets, export, spark-ingest (issue 5) -------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@_index_options
def offsets(path: Path, hash_slots: int | None, index_num: int | None) -> None:
    """Print the offsets of the store at PATH as JSON: the CommitLog's min/max, each queue's
    min/max logical offsets ("topic:queueId"), and the consumer groups' committed offsets
    (config/consumerOffset.json). Opens the store read-only."""
    from rocketstore.broker.consumer_offsets import export_offsets

    located, config = _existing_store(path, hash_slots, index_num)
    with _open_store(located.root, config, read_only=True) as store:
        exported = export_offsets(store)
    click.echo(json.dumps(exported, ensure_ascii=False, indent=2))


@main.command("export")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet",
              show_default=True, help="Output format.")
@click.option("--no-body", is_flag=True, help="Leave out the body column.")
@click.option("--compression", default="snappy", show_default=True,
              help="Parquet codec (snappy, zstd, gzip, none...).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Segments exported at a time (default: min(4, CPUs)).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_index_options
def export_command(path: Path, out: Path, fmt: str, no_body: bool, compression: str,
                   workers: int | None, as_json: bool, hash_slots: int | None,
                   index_num: int | None) -> None:
    """Write the sealed CommitLog segments of PATH to OUT as Parquet, one file per segment,
    with the schema of the rocketstore Spark source (pyarrow; no Spark needed).

    Idempotent and resumable: segments already in OUT are skipped, so running it again
    exports only newly sealed segments. The segment still being written is left out.
    Opens the store read-only."""
    from rocketstore.export.parquet import export_parquet

    located, config = _existing_store(path, hash_slots, index_num)
    with _open_store(located.root, config, read_only=True) as store:
        try:
            report = export_parquet(store, out, include_body=not no_body,
                                    compression=compression, workers=workers, progress=True)
        except ValueError as exc:
            raise _fail(str(exc), exc) from None
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        click.echo(f"exported {len(report.exported)} segment(s), {report.rows:,} rows, "
                   f"{_size(report.parquet_bytes)} of Parquet to {out} in "
                   f"{report.seconds:.1f}s; {len(report.skipped)} already there, "
                   f"{len(report.pending)} not sealed yet")


@main.command("spark-ingest")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--to", "to", type=click.Choice(["parquet", "orc", "json"]), default="parquet",
              show_default=True, help="Output format.")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--mode", type=click.Choice(["errorifexists", "overwrite", "append"]),
              default="errorifexists", show_default=True)
@click.option("--topics", default=None, help="Comma-separated topics (read by queue).")
@click.option("--no-body", is_flag=True, help="Leave out the body column.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE",
              help="Any other rocketstore source option (repeatable).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master.")
def spark_ingest_command(path: Path, to: str, out: Path, mode: str, topics: str | None,
                         no_body: bool, extra: tuple[str, ...], master: str) -> None:
    """Read the store at PATH with spark.read.format("rocketstore") on a local Spark and
    write it to OUT (Parquet by default). Needs the spark extra (pyspark, Java 17)."""
    try:
        from rocketstore.spark.ingest import error_summary, spark_ingest
    except ImportError as exc:
        raise _fail(f"{exc} (pip install 'rocketstore[spark]')", exc) from None
    located = _locate(path)
    options: dict[str, str] = {}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _fail(f"--option {item!r} is not KEY=VALUE")
        options[key] = value
    if topics:
        options["topics"] = topics
    if no_body:
        options["includeBody"] = "false"
    try:
        report = spark_ingest(str(located.root), str(out), to=to, mode=mode, options=options,
                              master=master)
    except Exception as exc:  # noqa: BLE001 - Spark wraps errors in its own classes
        raise _fail(f"spark-ingest failed: {error_summary(exc)}", exc) from None
    rows = "" if report["rows"] is None else f"{report['rows']:,} rows "
    click.echo(f"wrote {rows}to {report['out']} ({to}) in {report['seconds']:.1f}s")
