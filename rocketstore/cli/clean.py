"""``rocketstore clean PATH [--dry-run]``: a retention run now (RocketMQ's
deleteExpiredCommitLog admin command), or with ``--dry-run`` what it would delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rocketstore.cli.common import (
    disk_usage_option,
    echo_json,
    existing_store,
    index_options,
    open_store,
    quiet_store_warnings,
    size_text,
)


def print_report(report: dict[str, Any], *, dry_run: bool) -> None:
    echo = click.echo
    deleted = report["deleted"]
    verb = "would delete" if dry_run else "deleted"
    reasons = ", ".join(report["reasons"]) or "none (not the hour, disk under the watermarks)"
    echo(f"run because   {reasons}")
    if not deleted:
        echo(f"{verb:<13} nothing")
    else:
        echo(f"{verb:<13} {len(deleted)} file(s), {size_text(report['deletedBytes'])}")
        for d in deleted:
            echo(f"  {d['kind']:<13} {d['path']}")
    echo(f"min offset    {report['minOffsetBefore']:,} -> {report['minOffsetAfter']:,}")
    if report.get("waiting"):
        echo(f"waiting       {report['waiting']} is being read: deleted once its readers "
             f"let go")


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True,
              help="List what would be deleted and change nothing (opens the store "
                   "read-only: safe beside a running writer).")
@click.option("--file-reserved-time", type=click.IntRange(min=0), default=None,
              help="Hours a CommitLog file is kept after its last change (RocketMQ's "
                   "fileReservedTime; default 72).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
@disk_usage_option
@index_options
def clean(path: Path, dry_run: bool, file_reserved_time: int | None, as_json: bool,
          disk_usage: float | None, hash_slots: int | None, index_num: int | None) -> None:
    """Run a cleanup pass on the store at PATH now, as RocketMQ's periodic one does when asked
    by hand: CommitLog files last modified more than --file-reserved-time hours ago are
    deleted, oldest first, never the newest, at most 10 a run; over the forced disk watermark
    (85% used) the oldest go even before they expire. Then the ConsumeQueue and IndexFile
    files that only point below the new first CommitLog offset. Consumers behind it get
    OFFSET_TOO_SMALL and move on.

    Without --dry-run it opens the store for writing (recovery first): stop the process that
    has it open, or let that process's own cleanup do it. --disk-usage only plans: it needs
    --dry-run.
    """
    if disk_usage is not None and not dry_run:
        raise click.UsageError("--disk-usage only plans what would go: use it with --dry-run "
                               "(a real run measures the disk)")
    settings: dict[str, Any] = {}
    if file_reserved_time is not None:
        settings["file_reserved_time"] = file_reserved_time
    location, config = existing_store(path, hash_slots, index_num, **settings)
    hint = (f"the store at {location.root} is open in another process: stop it first "
            f"(`rocketstore clean --dry-run` works beside it)")
    with quiet_store_warnings(), open_store(location.root, config, read_only=dry_run,
                                            locked_hint=hint,
                                            disk_used_percent=disk_usage) as store:
        report = store.clean_files(dry_run=dry_run).as_dict()
    if as_json:
        echo_json(report)
    else:
        print_report(report, dry_run=dry_run)
