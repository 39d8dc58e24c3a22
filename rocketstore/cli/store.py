"""Commands on a store directory: ``dump``, ``stat``, ``query``, ``get``, ``view``,
``recover`` and ``offsets``.

- ``dump PATH`` decodes a CommitLog (ours or Apache RocketMQ's) to JSON lines with the field
  names of the RocketMQ 4.9.8 fixture's ``messages.jsonl`` (body as ``body_b64``).
- ``stat PATH [--json]``: topics, queues, CommitLog offsets, dispatch lag, files, checkpoint,
  abort file and running writer (``MessageStore.describe()``).
- ``query``: messages by key (IndexFiles); ``get``: a consumer pull (getMessage); ``view``: a
  message by offsetMsgId.
- ``recover PATH``: open for writing (normal or abnormal recovery), shut down cleanly, report.
- ``offsets PATH``: queue offsets and the consumer groups' committed offsets.

All but ``recover`` open the store read-only, safe beside a running writer.
"""

from __future__ import annotations

import logging
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import click

from rocketstore import CorruptRecordError, MessageStore, RecoveryReport
from rocketstore.cli.common import (
    STORE_ERRORS,
    binary_stdout,
    camel_case_keys,
    checked_topic,
    damage_lines,
    damage_summary,
    describe_error,
    disk_usage_option,
    echo_json,
    existing_store,
    fail,
    follow_with,
    index_options,
    json_line,
    open_store,
    progress_bar,
    progress_option,
    quiet_store_warnings,
    silence_stdout,
    size_text,
    write_messages,
)
from rocketstore.store import DamagedRange, EpochFile, all_group_offsets, index_files

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
_NO_BODY = click.option("--no-body", is_flag=True, help="Leave out body_b64.")


# ---- dump ----------------------------------------------------------------------------------


def _output_stream(output: str | None) -> tuple[IO[bytes], bool]:
    """(where the lines go, whether to close it)."""
    if output is None or output == "-":
        return binary_stdout(), False
    try:
        return open(output, "wb"), True  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise fail(f"cannot write {output}: {describe_error(exc)}", exc) from None


@click.command()
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
@progress_option
@index_options
def dump(path: Path, from_offset: int, limit: int | None, no_body: bool, check_crc: bool,
         output: str | None, progress: bool | None, hash_slots: int | None = None,
         index_num: int | None = None) -> None:
    """Decode the CommitLog of PATH to JSON lines, in CommitLog order.

    PATH is a store directory (containing commitlog/) or a CommitLog directory. Works on
    stores written by Apache RocketMQ 4.x too (any segment size). The store is opened
    read-only and never modified. Corrupt data stops the dump with an error naming the
    offset (exit code 1); the records before it have been written.
    """
    location, config = existing_store(path, hash_slots, index_num,
                                      check_crc_on_recover=check_crc)
    if not location.segments:
        log.info("%s has no CommitLog segments yet: nothing to dump", location.commitlog)
        return
    with quiet_store_warnings(), open_store(location.root, config, read_only=True) as store:
        # The first offset is a record start by construction: a corrupt record there is
        # reported by the dump itself.
        if from_offset > store.get_min_phy_offset():
            problem = store.record_start_problem(from_offset)
            if problem is not None:
                raise fail(f"--from-offset {from_offset} is not the start of a record: "
                           f"{problem}")
        out, close = _output_stream(output)
        try:
            written = _dump_records(store, out, from_offset, limit, no_body, check_crc,
                                    progress)
        except BrokenPipeError:
            silence_stdout()
            return
        finally:
            if close:
                out.close()
        log.info("dumped %d records from %s", written, location.commitlog)


def _dump_records(store: MessageStore, out: IO[bytes], from_offset: int, limit: int | None,
                  no_body: bool, check_crc: bool, progress: bool | None) -> int:
    """Write the records as JSON lines; returns how many. Reading errors (corrupt data) are
    reported after the lines before them are written; writing errors propagate."""
    written = 0
    pending: list[bytes] = []

    def write_pending() -> None:
        out.write(b"".join(pending))
        pending.clear()

    start = max(from_offset, store.get_min_phy_offset())
    end = store.get_max_phy_offset()
    skipped: list[DamagedRange] = []
    records = store.scan(from_offset, check_crc=check_crc, on_damage=skipped.append)
    with progress_bar(progress, total=max(0, end - start), unit="B", unit_scale=True,
                      unit_divisor=1024, desc="dumping") as bar:
        while written != limit:
            try:
                msg = next(records, None)
                if msg is None:
                    break
                d = msg.to_dict(body_b64=not no_body)
            except CorruptRecordError as exc:
                write_pending()
                out.flush()
                raise fail(f"corrupt CommitLog data: {exc} ({written} records before it were "
                           "dumped)", exc) from None
            except STORE_ERRORS as exc:
                write_pending()
                out.flush()
                raise fail(f"reading the CommitLog failed after {written} records: "
                           f"{describe_error(exc)}", exc) from None
            d.pop("body", None)
            pending.append(json_line(d))
            written += 1
            if len(pending) >= 512:
                write_pending()
                bar.update(msg.commitlog_offset + msg.store_size - start - bar.n)
    write_pending()
    out.flush()
    # Damage is skipped (every valid record after it is dumped) and reported here, once, with
    # a non-zero exit; so is a torn tail (invalid bytes after the last valid record), unless
    # --limit stopped us first.
    rec = store.recovery
    problems = [f"damaged CommitLog range at offset {r.start}..{r.end} ({r.size:,} bytes: "
                f"{r.reason}) skipped" for r in dict.fromkeys(skipped)]
    if written != limit and rec is not None:
        if rec.stop_status == "corrupt" and from_offset <= rec.end_offset:
            problems.append(f"corrupt CommitLog data after the last valid record: "
                            f"{rec.stop_reason or 'corrupt record'} at offset {rec.end_offset}")
        problems += [p for p in rec.problems if p.startswith("segment")]
    if problems:
        raise fail(f"{'; '.join(problems)} ({written} records dumped)")
    return written


# ---- stat ----------------------------------------------------------------------------------


def _when(ms: int) -> str:
    if ms <= 0:
        return "-"
    try:
        when = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _file_size(n: int) -> str:
    """A configured file size: binary units when it is a whole number of KiB."""
    return size_text(n) if n % 1024 == 0 else f"{n:,} B"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_stat(st: dict[str, Any], disk_assumed: bool = False) -> None:
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
         f"file(s), {size_text(cl['bytes'])} ({_file_size(cl['fileSize'])} each)")
    echo(f"consumequeue   {cq['queues']} queue(s), {cq['files']} file(s), "
         f"{size_text(cq['bytes'])} ({_file_size(cq['fileSize'])} each)")
    echo(f"index          {ix['files']} file(s), {size_text(ix['bytes'])} ({ix['hashSlots']:,} "
         f"hash slots, {ix['indexNum']:,} items each); last update "
         f"{_when(ix['lastUpdateTimestamp'])} at offset {ix['lastUpdatePhyOffset']:,}")
    echo(f"dispatch lag   {st['dispatchBehindBytes']:,} bytes")
    _print_retention(st["retention"], disk_assumed)
    for line in damage_lines(st["damage"]):
        echo(line)
    ck = st["checkpoint"]
    echo(f"checkpoint     physic {_when(ck['physicMsgTimestamp'])}, logics "
         f"{_when(ck['logicsMsgTimestamp'])}, index {_when(ck['indexMsgTimestamp'])}")
    echo(f"messages       {st['messages']:,} in {st['queueCount']} queue(s) of "
         f"{st['topicCount']} topic(s)")
    rows = [(_clip(t["topic"], 48), str(q["queueId"]), f"{q['minOffset']:,}",
             f"{q['maxOffset']:,}", f"{q['messages']:,}")
            for t in st["topics"] for q in t["queues"]]
    if not rows:
        return
    head = ("TOPIC", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    echo("")
    for r in (head, *rows):
        echo("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                  zip(r[1:], widths[1:], strict=True)]))


def _print_retention(rt: dict[str, Any], assumed: bool = False) -> None:
    echo = click.echo
    disk = rt.get("disk")
    used = rt["usedRatio"]
    usage = f"{used:.1%} used" if used >= 0 else "usage unknown"
    if assumed:
        usage += " (taken from --disk-usage"
        if disk:
            usage += (f"; measured: {size_text(disk['used'])} of {size_text(disk['total'])}, "
                      f"{size_text(disk['free'])} free")
        usage += ")"
    elif disk:
        usage += (f" ({size_text(disk['used'])} of {size_text(disk['total'])}, "
                  f"{size_text(disk['free'])} free)")
    state = ("FULL: puts refused" if rt["diskFull"] else
             "over the forced watermark: files deleted before they expire"
             if rt["cleanImmediately"] else "ok")
    echo(f"disk           {usage}; {state}")
    echo(f"watermarks     clean-up {rt['diskMaxUsedSpaceRatio']}%, forced "
         f"{rt['diskSpaceCleanForciblyRatio']}%, refuse puts "
         f"{rt['diskSpaceWarningLevelRatio']}%; files kept {rt['fileReservedTime']} h, "
         f"deleted at hour(s) {rt['deleteWhen']}")
    nxt = rt["nextRun"]
    if nxt["deleted"]:
        kinds: dict[str, int] = {}
        for d in nxt["deleted"]:
            kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        what = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
        echo(f"next cleanup   would delete {what} file(s), {size_text(nxt['deletedBytes'])} "
             f"({', '.join(nxt['reasons'])}); min offset -> {nxt['minOffsetAfter']:,}")
    else:
        oldest = rt.get("oldestDeletableLastModified")
        when = (f"; oldest deletable file last modified {_when(oldest)}"
                if oldest else "")
        echo(f"next cleanup   nothing to delete now{when}")


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@disk_usage_option
@index_options
@click.option("-b", "--broker-addr", help="Also the replication status of the broker serving "
              "this store (host:port): role, epoch, SyncStateSet, each slave's acknowledged "
              "offset and lag in bytes and ms.")
def stat(path: Path, as_json: bool, disk_usage: float | None, hash_slots: int | None,
         index_num: int | None, broker_addr: str | None) -> None:
    """Summarise the store at PATH: topics and queues (min/max offsets, message counts), the
    CommitLog's offsets, dispatch lag, disk usage, the retention watermarks and what a
    cleanup run now would delete, file counts and sizes per kind, the checkpoint, and
    whether the last shutdown was clean (abort file), a replica's epochs
    (epochFileCheckpoint) and, with --broker-addr, its broker's replication status.

    Opens the store read-only: safe while a writer has it open (it shows a snapshot).
    Exits with 1 when it finds damage (listed under "damage"; `rocketstore verify` checks
    every record and index entry).
    """
    location, config = existing_store(path, hash_slots, index_num)
    with quiet_store_warnings(), open_store(location.root, config, read_only=True,
                                            disk_used_percent=disk_usage) as store:
        st = store.describe()
    try:
        st["epochs"] = [{"epoch": e, "startOffset": o} for e, o in EpochFile(location.root).entries]
    except ValueError as exc:
        st["epochs"] = str(exc)
    if broker_addr:
        st["replication"] = _replication(broker_addr)
    if as_json:
        echo_json(st)
    else:
        _print_stat(st, disk_assumed=disk_usage is not None)
        _print_replication(st)
    if st["damage"]["damaged"]:
        raise fail(damage_summary(st["damage"]))


def _replication(broker_addr: str) -> dict[str, Any]:
    """The broker's GET_BROKER_RUNTIME_INFO (what ``admin brokerStatus`` prints), its
    replication part."""
    import asyncio

    from rocketstore.common.fastjson import loads_object_keys
    from rocketstore.ha import replication_status
    from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
    from rocketstore.remoting.errors import RemotingError

    async def ask() -> dict[str, str]:
        client = RemotingClient()
        try:
            response = await client.invoke(
                broker_addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), timeout=5)
        finally:
            await client.close()
        if response.code != ResponseCode.SUCCESS:
            raise RemotingError(f"GET_BROKER_RUNTIME_INFO answered {response.code}: "
                                f"{response.remark}")
        table = loads_object_keys(response.body_bytes() or b"{}").get("table") or {}
        return {str(k): str(v) for k, v in table.items()}

    try:
        table = asyncio.run(ask())
    except (RemotingError, TimeoutError, OSError, ValueError) as exc:
        raise fail(f"broker {broker_addr}: {describe_error(exc)}", exc) from None
    return {"brokerAddr": broker_addr, **replication_status(table)}


def _print_replication(st: dict[str, Any]) -> None:
    echo = click.echo
    epochs = st["epochs"]
    if isinstance(epochs, str):
        echo(f"epochs         unreadable: {epochs}")
    elif epochs:
        echo("epochs         " + ", ".join(f"{e['epoch']} from {e['startOffset']:,}"
                                           for e in epochs))
    rep = st.get("replication")
    if rep is None:
        return
    line = f"replication    broker {rep['brokerAddr']}: {rep['role'] or 'role unknown'}"
    if "masterEpoch" in rep:
        line += (f" at epoch {rep['masterEpoch']}, SyncStateSet "
                 f"{','.join(map(str, rep['syncStateSet']))} (epoch {rep['syncStateSetEpoch']})")
    if "masterAddress" in rep:
        line += (f", following {rep['masterAddress'] or '(no master yet)'}"
                 f" ({'connected' if rep['masterConnected'] else 'not connected'}), "
                 f"replica offset {rep['replicaOffset']:,}")
    echo(line)

    def known(value: int | None, unit: str) -> str:
        return "unknown" if value is None else f"{value:,} {unit}"

    for slave in rep.get("slaves", []):
        ack = slave["ackOffset"]
        echo(f"  slave {slave['address']}: acknowledged "
             f"{'nothing yet' if ack is None or ack < 0 else f'{ack:,}'}, lag "
             f"{known(slave['lagBytes'], 'bytes')}, {known(slave['lagMs'], 'ms')}")


# ---- query, get, view ----------------------------------------------------------------------


@click.command()
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
@index_options
def query(path: Path, topic: str, key: str, max_num: int, begin: int, end: int, no_body: bool,
          hash_slots: int | None, index_num: int | None) -> None:
    """Messages of TOPIC with key KEY, as JSON lines, oldest first.

    KEY matches a token of the KEYS property or the UNIQ_KEY (client message id), as
    RocketMQ's queryMessage; every index hit is checked against the stored record, so keys
    whose hashes collide never return each other's messages. The lookup needs the store's
    IndexFiles (index/, written when messageIndexEnable is on): without them nothing is
    found. No match: no output, exit code 0. Opens the store read-only.
    """
    checked_topic(topic)
    if not key:
        raise fail("--key must not be empty")
    if begin > end:
        raise fail(f"--begin {begin} is after --end {end}")
    location, config = existing_store(path, hash_slots, index_num, max_msgs_num_batch=max_num)
    if not index_files(location.root):
        log.warning("%s has no IndexFiles (index/): a query by key finds nothing without them",
                    location.root)
    with open_store(location.root, config, read_only=True) as store:
        try:
            found = store.query_message(topic, key, max_num, begin, end)
        except (TypeError, ValueError) as exc:
            raise fail(f"cannot query {topic}#{key}: {describe_error(exc)}", exc) from None
        messages = sorted(found.messages, key=lambda m: m.commitlog_offset)
        write_messages(messages, no_body)
        log.info("%d message(s) of %s with key %s", len(messages), topic, key)


def _queue_not_found(store: MessageStore, topic: str, queue_id: int) -> click.ClickException:
    queues = store.queues(topic)
    if queues:
        return fail(f"topic {topic!r} has no queue {queue_id} in this store (its queues: "
                    f"{', '.join(map(str, queues))})")
    topics = store.topics()
    shown = ", ".join(repr(t) for t in topics[:20]) + (", ..." if len(topics) > 20 else "")
    return fail(f"topic {topic!r} has no ConsumeQueue in this store (topics: "
                f"{shown or 'none'})")


@click.command("get")
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
@index_options
def get_command(path: Path, topic: str, queue_id: int, offset: int, max_msgs: int,
                subscription: str, group: str, no_body: bool, hash_slots: int | None,
                index_num: int | None) -> None:
    """Read a queue like a consumer pull (RocketMQ getMessage), as JSON lines.

    The first line is the result: {"status", "nextBeginOffset", "minOffset", "maxOffset",
    "messageCount"} (status is RocketMQ's GetMessageStatus); one line per message follows.
    Pull on from nextBeginOffset. Opens the store read-only.
    """
    checked_topic(topic)
    location, config = existing_store(path, hash_slots, index_num)
    with open_store(location.root, config, read_only=True) as store:
        if queue_id not in store.queues(topic):
            raise _queue_not_found(store, topic, queue_id)
        try:
            r = store.get_message(group, topic, queue_id, offset, max_msgs, subscription)
        except (TypeError, ValueError) as exc:
            raise fail(f"cannot read {topic}:{queue_id} at {offset}: {describe_error(exc)}",
                       exc) from None
        head = {"status": r.status.name, "nextBeginOffset": r.next_begin_offset,
                "minOffset": r.min_offset, "maxOffset": r.max_offset,
                "messageCount": len(r.messages)}
        write_messages(r.messages, no_body, head)


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("msg_id")
@_NO_BODY
@index_options
def view(path: Path, msg_id: str, no_body: bool, hash_slots: int | None,
         index_num: int | None) -> None:
    """The message with offsetMsgId MSG_ID (store host + CommitLog offset, 32 or 56 hex
    characters, as RocketMQ's viewMessage), as one JSON line. Opens the store read-only.
    A client message id (UNIQ_KEY) is found with `rocketstore query -k` instead."""
    location, config = existing_store(path, hash_slots, index_num)
    with open_store(location.root, config, read_only=True) as store:
        try:
            msg = store.view_message(msg_id)
        except (TypeError, ValueError) as exc:
            raise fail(f"bad message id {msg_id!r}: {describe_error(exc)}", exc) from None
        if msg is None:
            query_hint = f"rocketstore query {shlex.quote(str(path))} -t TOPIC -k {msg_id}"
            raise fail(f"no message with offset msgId {msg_id} in this store (its CommitLog "
                       f"holds {store.get_min_phy_offset():,} .. "
                       f"{store.get_max_phy_offset():,}); if {msg_id} is a UNIQ_KEY (client "
                       f"msgId) use `{query_hint}`")
        if msg.msg_id.upper() != msg_id.upper():
            log.warning("%s names another store host than the record's (%s, id %s)", msg_id,
                        msg.store_host, msg.msg_id)
        write_messages([msg], no_body)


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
    for r in report.damaged_ranges:
        echo(f"damaged      [{r['start']:,}, {r['end']:,}) ({r['bytes']:,} bytes: "
             f"{r['reason']}): kept, unreadable")
    for q in report.queues_repaired:
        echo(f"queue        {q}: {'would be rebuilt' if dry_run else 'rebuilt'}")
    for f in report.index_files_repaired:
        echo(f"index        {f}")
    for p in report.problems:
        echo(f"problem      {p}")
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


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option("--dry-run", is_flag=True,
              help="Open read-only: report what recovery finds, change nothing.")
@progress_option
@index_options
def recover(path: Path, as_json: bool, dry_run: bool, progress: bool | None,
            hash_slots: int | None, index_num: int | None) -> None:
    """Run the store's recovery at PATH now and shut it down cleanly.

    Opens the store for writing, which recovers it: normally after a clean shutdown (the
    last files are checked), abnormally when the abort file is there (the CommitLog is
    replayed from the checkpoint, validating every record; whatever follows the first
    invalid one is cut from the CommitLog, ConsumeQueues and IndexFiles, and the replayed
    range is dispatched again). Then it shuts down cleanly (checkpoint written, abort file
    removed) and reports what it did. The store must not be open for writing elsewhere.

    Damage in the middle of the CommitLog is never cut away: it is kept, unreadable, and
    reported; only a torn tail (invalid bytes after the last valid record) is given up.
    Exits with 1 when the CommitLog holds damage, and with --dry-run also when recovery would
    change anything (a torn tail, a ConsumeQueue or IndexFile to rebuild); `rocketstore
    salvage` copies every valid record into a new store.
    """
    location, config = existing_store(path, hash_slots, index_num)
    root = location.root
    hint = (f"store {root} is locked: another process has it open for writing; stop it first "
            "(stat, query, get, view and dump read a store while it runs)")
    with progress_bar(progress, total=0, unit="B", unit_scale=True, unit_divisor=1024,
                      desc="recovering") as bar:
        with quiet_store_warnings(), open_store(root, config, read_only=dry_run,
                                                progress=follow_with(bar),
                                                locked_hint=hint) as store:
            report = store.recovery
            damage = store.damage_report()
    if report is None:
        raise fail(f"the store at {root} reported no recovery")
    clean = dry_run or not Path(location.paths.abort).exists()
    if as_json:
        echo_json(camel_case_keys(report.as_dict()), indent=None)
    else:
        _print_recovery(report, root, dry_run, clean)
    if not clean:
        raise fail(f"the store at {root} did not shut down cleanly (abort file left)")
    # a dry run fails on anything recovery would find or change; a real one on what it could
    # not undo (damage in the CommitLog, kept unreadable)
    if damage["damaged"] if dry_run else damage["commitLog"]:
        raise fail(damage_summary(damage))


# ---- offsets -------------------------------------------------------------------------------


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@index_options
def offsets(path: Path, hash_slots: int | None, index_num: int | None) -> None:
    """Print the offsets of the store at PATH as JSON: the CommitLog's min/max, each queue's
    min/max logical offsets ("topic:queueId"), and the consumer groups' committed offsets
    (config/consumerOffset.json). Opens the store read-only."""
    location, config = existing_store(path, hash_slots, index_num)
    with open_store(location.root, config, read_only=True) as store:
        queues = {key: {"minOffset": q["min"], "maxOffset": q["max"]}
                  for key, q in store.queue_offsets().items()}
        commit_log = {"minOffset": store.get_min_phy_offset(),
                      "maxOffset": store.get_max_phy_offset()}
    try:
        groups = all_group_offsets(location.root)
    except ValueError as exc:
        raise fail(str(exc), exc) from None
    echo_json({"store": str(location.root), "commitLog": commit_log, "queues": queues,
               "groups": groups})
