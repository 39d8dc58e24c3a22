"""What the commands share: finding and opening a store, one-line errors, output helpers.

Every command that opens an existing store lets ``MessageStore.open`` take the file sizes
(CommitLog, ConsumeQueue, IndexFile) from its files; the config built here only says where
the CommitLog is (PATH may be the commitlog/ directory itself) and the IndexFile geometry
given with --hash-slots/--index-num, for files whose size alone does not tell it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import click
from tqdm import tqdm

from rocketstore import (
    CorruptRecordError,
    MessageExt,
    MessageStore,
    StoreConfig,
    StoreLockedError,
)
from rocketstore.common.java_properties import camel_case
from rocketstore.message import validate_topic
from rocketstore.store import (
    SEGMENT_NAME_DIGITS,
    StoreFormatError,
    StorePaths,
    index_files,
    index_geometry,
    read_index_geometry,
    segment_files,
)

log = logging.getLogger(__name__)

# Errors that opening or reading a store can raise for reasons outside the program: missing or
# unreadable files (OSError), bad segment names or sizes (StoreFormatError, a ValueError),
# another writer (StoreLockedError, a RuntimeError).
STORE_ERRORS = (OSError, ValueError, RuntimeError)


# ---- errors --------------------------------------------------------------------------------


def fail(message: str, exc: BaseException | None = None) -> click.ClickException:
    """A one-line error for the user; the traceback only goes to the debug log (--verbose)."""
    if exc is not None:
        log.debug("%s", message, exc_info=exc)
    return click.ClickException(message)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def checked_topic(topic: str, option: str = "--topic") -> str:
    """topic when it follows RocketMQ's topic rule, else a one-line error naming it."""
    try:
        validate_topic(topic)
    except (TypeError, ValueError) as exc:
        raise fail(f"{option}: {exc}", exc) from None
    return topic


# ---- locating and opening a store ------------------------------------------------------------


@dataclass(frozen=True)
class StoreLocation:
    paths: StorePaths          # root (handed to MessageStore.open) and the CommitLog directory
    segments: list[str]        # CommitLog segment files, in offset order

    @property
    def root(self) -> Path:
        return Path(self.paths.root)

    @property
    def commitlog(self) -> Path:
        return Path(self.paths.commitlog)


def locate_store(path: Path) -> StoreLocation:
    """PATH is a store root (with commitlog/) or a CommitLog directory itself."""
    if not path.exists():
        raise fail(f"{path} does not exist")
    if not path.is_dir():
        raise fail(f"{path} is not a directory (give a store directory or its commitlog/)")
    if (path / "commitlog").is_dir():
        paths = StorePaths.of(path.resolve())
    else:
        if not segment_files(path):
            raise fail(f"{path} is not a store: it has no commitlog/ directory and no CommitLog "
                       f"segment files ({SEGMENT_NAME_DIGITS}-digit names)")
        resolved = path.resolve()
        paths = StorePaths.of(resolved.parent, str(resolved))
    try:
        segments = segment_files(paths.commitlog)
    except OSError as exc:
        raise fail(f"cannot list {paths.commitlog}: {describe_error(exc)}", exc) from None
    if segments and os.path.getsize(segments[0]) == 0:
        raise fail(f"CommitLog segment {segments[0]} is empty (0 bytes)")
    return StoreLocation(paths, segments)


def index_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--hash-slots / --index-num: the geometry of new IndexFiles (existing ones are read with
    the geometry their size and data show)."""
    f = click.option("--index-num", type=click.IntRange(min=2), default=None,
                     help="Items per new IndexFile (maxIndexNum); default: the newest "
                          "IndexFile's. Existing files are read as they were written.")(f)
    f = click.option("--hash-slots", type=click.IntRange(min=1), default=None,
                     help="Hash slots per new IndexFile (maxHashSlotNum); default: the newest "
                          "IndexFile's (found from its size, 40 + 4*slots + 20*items bytes, "
                          "and its data). Existing files are read as they were written.")(f)
    return f


def _index_settings(paths: StorePaths, hash_slots: int | None, index_num: int | None
                    ) -> dict[str, int]:
    """StoreConfig settings for the IndexFile geometry of --hash-slots/--index-num: the one new
    IndexFiles get (each existing file is read with its own, found from its data). One of the
    two alone takes the other from the newest IndexFile's size, or RocketMQ's 4 items a slot
    when there is none; neither: the newest file's geometry (the store goes on as written)."""
    files = index_files(paths.root)
    if hash_slots is None and index_num is None:
        for path in reversed(files):
            try:
                slots, items = read_index_geometry(path)
            except StoreFormatError:
                continue        # opening the store reports the file
            return {"max_hash_slot_num": slots, "max_index_num": items}
        return {}
    if hash_slots is not None and index_num is not None:
        return {"max_hash_slot_num": hash_slots, "max_index_num": index_num}
    if not files:
        if hash_slots is not None:
            return {"max_hash_slot_num": hash_slots, "max_index_num": 4 * hash_slots}
        assert index_num is not None
        return {"max_hash_slot_num": max(1, index_num // 4), "max_index_num": index_num}
    size = os.path.getsize(files[-1])
    try:
        slots, items = index_geometry(size, hash_slots, index_num)
    except StoreFormatError as exc:
        given = "--hash-slots" if hash_slots is not None else "--index-num"
        other = "--index-num" if hash_slots is not None else "--hash-slots"
        raise fail(f"{given} {hash_slots if hash_slots is not None else index_num} does not fit "
                   f"index file {files[-1]} ({size:,} bytes = 40 + 4*slots + 20*items): give "
                   f"{other} too", exc) from None
    return {"max_hash_slot_num": slots, "max_index_num": items}


def store_config(location: StoreLocation, hash_slots: int | None = None,
                 index_num: int | None = None, **settings: Any) -> StoreConfig:
    """The config to open the store at location with: where its CommitLog is, the IndexFile
    geometry of --hash-slots/--index-num, and the command's own settings."""
    paths = location.paths
    changes: dict[str, Any] = {"store_path_root_dir": paths.root}
    if paths.commitlog != StorePaths.of(paths.root).commitlog:
        changes["store_path_commit_log"] = paths.commitlog
    changes.update(_index_settings(paths, hash_slots, index_num))
    changes.update(settings)
    try:
        return StoreConfig(**changes)
    except (TypeError, ValueError) as exc:
        raise fail(f"cannot configure a store for {paths.commitlog}: {exc}", exc) from None


def existing_store(path: Path, hash_slots: int | None = None, index_num: int | None = None,
                   **settings: Any) -> tuple[StoreLocation, StoreConfig]:
    location = locate_store(path)
    return location, store_config(location, hash_slots, index_num, **settings)


@contextmanager
def open_store(root: Path, config: StoreConfig, *, read_only: bool,
               progress: Callable[[int, int], None] | None = None,
               locked_hint: str | None = None,
               disk_used_percent: float | None = None) -> Iterator[MessageStore]:
    """MessageStore.open with the CLI's errors. disk_used_percent: retention takes the disk to
    be that full instead of measuring it (--disk-usage)."""
    probe = None if disk_used_percent is None else assumed_disk_usage(disk_used_percent)
    try:
        store = MessageStore.open(root, config, read_only=read_only, progress=progress,
                                  disk_probe=probe)
    except StoreLockedError as exc:
        raise fail(locked_hint or f"{exc}", exc) from None
    except CorruptRecordError as exc:
        raise fail(f"cannot open the store at {root}: {exc}", exc) from None
    except STORE_ERRORS as exc:
        raise fail(f"cannot open the store at {root}: {describe_error(exc)}", exc) from None
    with store:
        yield store


def assumed_disk_usage(percent: float) -> Callable[[str], float]:
    """A disk-usage probe that answers percent for every path."""
    ratio = percent / 100.0

    def probe(path: str) -> float:
        return ratio
    return probe


def disk_usage_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--disk-usage PERCENT: plan retention as if the disk were that full."""
    return click.option(
        "--disk-usage", "disk_usage", type=click.FloatRange(0, 100), default=None,
        metavar="PERCENT",
        help="Take the disk to be PERCENT used instead of measuring it, to see what "
             "retention does at that usage (over 75% expired files go at any hour, over "
             "85% the oldest go before they expire).")(command)


def verbose() -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and bool((ctx.find_root().obj or {}).get("verbose"))


@contextmanager
def quiet_store_warnings() -> Iterator[None]:
    """Without --verbose, leave it to the command to report damage (the store's own log
    lines about it would say the same thing twice): the store logs nothing below CRITICAL."""
    if verbose():
        yield
        return
    # the store's modules and the native code under it
    loggers = [logging.getLogger(name) for name in ("rocketstore.store", "rocketstore._native")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# ---- damage ------------------------------------------------------------------------------


def damage_lines(damage: dict[str, Any]) -> list[str]:
    """MessageStore.damage_report() as stat's table lines."""
    lines = []
    for r in damage["commitLog"]:
        lines.append(f"damage         CommitLog [{r['start']:,}, {r['end']:,}) "
                     f"({r['bytes']:,} bytes: {r['reason']}): kept, unreadable")
    tail = damage["tornTail"]
    if tail:
        lines.append(f"damage         torn tail at {tail['offset']:,} ({tail['reason']}): "
                     "invalid bytes after the last valid record")
    for q in damage["consumeQueues"]:
        lines.append(f"damage         ConsumeQueue {q}")
    for f in damage["indexFiles"]:
        lines.append(f"damage         IndexFile {f['name']}: {f['reason']}")
    for p in damage["files"]:
        lines.append(f"damage         {p}")
    return lines


def damage_summary(damage: dict[str, Any]) -> str:
    """One line: what damage_report() found."""
    parts = []
    if damage["commitLog"]:
        parts.append(f"{len(damage['commitLog'])} damaged CommitLog range(s), "
                     f"{damage['commitLogDamagedBytes']:,} bytes (first at offset "
                     f"{damage['commitLog'][0]['start']})")
    if damage["tornTail"]:
        parts.append(f"a torn tail at offset {damage['tornTail']['offset']}")
    if damage["consumeQueues"]:
        parts.append(f"{len(damage['consumeQueues'])} damaged ConsumeQueue(s)")
    if damage["indexFiles"]:
        parts.append(f"{len(damage['indexFiles'])} damaged IndexFile(s)")
    if damage["files"]:
        parts.append(f"{len(damage['files'])} damaged file(s): {damage['files'][0]}")
    return "damage found: " + "; ".join(parts)


# ---- output --------------------------------------------------------------------------------


def json_line(d: dict[str, Any]) -> bytes:
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def echo_json(data: Any, *, indent: int | None = 2) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=indent))


#: The CLI's JSON key style is RocketMQ's camelCase; a duration's "_s" suffix becomes
#: "Seconds" (duration_s -> durationSeconds).
_CLI_WORDS = {"s": "Seconds"}


def camel_case_keys(data: Any) -> Any:
    """data (dicts, lists, scalars) with every dict key in camelCase."""
    if isinstance(data, dict):
        return {camel_case(str(k), _CLI_WORDS): camel_case_keys(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [camel_case_keys(v) for v in data]
    return data


def binary_stdout() -> IO[bytes]:
    """stdout for bytes (whichever stdout is current, so it follows click's CliRunner)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        raise fail("stdout takes no bytes here (it has no binary buffer)")
    return cast(IO[bytes], buffer)


def silence_stdout() -> None:
    """After a closed pipe (dump | head): point stdout at /dev/null so the interpreter's
    final flush does not complain, and end quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def write_messages(messages: list[MessageExt], no_body: bool,
                   head: dict[str, Any] | None = None) -> None:
    """The messages as JSON lines (after a head line when given), on stdout."""
    lines = [] if head is None else [json_line(head)]
    for msg in messages:
        d = msg.to_dict(body_b64=not no_body)
        d.pop("body", None)
        lines.append(json_line(d))
    out = binary_stdout()
    try:
        out.write(b"".join(lines))
        out.flush()
    except BrokenPipeError:
        silence_stdout()


def progress_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--progress/--no-progress", "progress", default=None,
                        help="Show a progress bar on stderr (default: when stderr is a "
                             "terminal).")(f)


def progress_bar(show: bool | None, **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr; show None means: when stderr is a terminal."""
    stderr = sys.stderr
    if show is None:
        show = bool(getattr(stderr, "isatty", lambda: False)())
    return tqdm(file=stderr, disable=not show, leave=False, **kwargs)


def follow_with(bar: tqdm) -> Callable[[int, int], None]:
    """A progress(done, total) callback (the store's recovery, the Parquet export) that
    moves bar."""

    def follow(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
            bar.refresh()
        if done > bar.n:
            bar.update(done - bar.n)

    return follow


def size_text(n: int | float) -> str:
    """A byte count in binary units, as segment sizes are configured."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"
