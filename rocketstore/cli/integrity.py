"""Commands on a store's integrity: ``verify`` (check everything that can be checked) and
``salvage`` (copy every valid record of a damaged store into a new one)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from rocketstore.cli.common import (
    STORE_ERRORS,
    camel_case_keys,
    describe_error,
    echo_json,
    existing_store,
    fail,
    follow_with,
    index_options,
    progress_bar,
    progress_option,
    quiet_store_warnings,
)
from rocketstore.store import VerifyReport, salvage_store, verify_store

log = logging.getLogger(__name__)


def _print_verify(report: VerifyReport) -> None:
    echo = click.echo
    echo(f"store          {report.store}")
    echo(f"records        {report.records:,} valid ({report.record_bytes:,} bytes)")
    for r in report.damaged:
        echo(f"damaged        CommitLog [{r.start:,}, {r.end:,}) ({r.size:,} bytes: "
             f"{r.reason})")
    for r in report.tail:
        echo(f"torn tail      CommitLog [{r.start:,}, {r.end:,}) ({r.reason}): after the "
             "last valid record")
    echo(f"consumequeue   {report.units_checked:,} unit(s) checked, "
         f"{report.consume_queues.count:,} problem(s), {report.units_in_damage:,} of "
         "records in damaged ranges")
    echo(f"index          {report.index_files} file(s), {report.items_checked:,} item(s) "
         f"checked, {report.index.count:,} problem(s), {report.items_in_damage:,} of "
         "records in damaged ranges")
    for title, findings in (("segment", report.commit_log_files),
                            ("consumequeue", report.consume_queues), ("index", report.index),
                            ("file", report.other_files)):
        for text in findings.listed:
            echo(f"  {title}: {text}")
        if findings.count > len(findings.listed):
            echo(f"  {title}: ... and {findings.count - len(findings.listed):,} more")
    for note in report.notes:
        echo(f"note           {note}")
    echo(f"result         {'OK' if report.ok else 'DAMAGED'}")


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The findings as one JSON document.")
@click.option("--check-crc/--no-check-crc", default=True, show_default=True,
              help="Verify every body CRC.")
@progress_option
@index_options
def verify(path: Path, as_json: bool, check_crc: bool, progress: bool | None,
           hash_slots: int | None, index_num: int | None) -> None:
    """Check every record of the store at PATH (magic, sizes, the header fields the CRC does
    not cover, offsets, body CRC), every ConsumeQueue unit and IndexFile item against the
    CommitLog, the checkpoint and the JSON files under config/.

    Opens the store read-only and changes nothing. Exits with 1 and a one-line summary when
    anything is damaged (the details are printed first); `rocketstore salvage` copies every
    valid record into a new store.
    """
    location, config = existing_store(path, hash_slots, index_num)
    try:
        with quiet_store_warnings(), progress_bar(progress, total=0, unit="B",
                                                  unit_scale=True, unit_divisor=1024,
                                                  desc="verifying") as bar:
            report = verify_store(location.root, config, check_crc=check_crc,
                                  progress=follow_with(bar))
    except STORE_ERRORS as exc:
        raise fail(f"cannot verify the store at {location.root}: {describe_error(exc)}",
                   exc) from None
    if as_json:
        echo_json(camel_case_keys(report.as_dict()))
    else:
        _print_verify(report)
    if not report.ok:
        raise fail(report.summary())


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option("--check-crc/--no-check-crc", default=True, show_default=True,
              help="Copy only records whose body CRC matches.")
@progress_option
@index_options
def salvage(path: Path, out: Path, as_json: bool, check_crc: bool, progress: bool | None,
            hash_slots: int | None, index_num: int | None) -> None:
    """Copy every valid record of the store at PATH into a new store at OUT (a new or empty
    directory), skipping damaged ranges.

    Records are copied byte for byte; their CommitLog offsets change, and each queue's
    offsets are renumbered without gaps (consumer groups' committed offsets are moved with
    them). The new store's ConsumeQueues and IndexFiles are built from its CommitLog. PATH is
    opened read-only and never changed.
    """
    location, config = existing_store(path, hash_slots, index_num)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"{out} must be a new or empty directory")
    try:
        with quiet_store_warnings(), progress_bar(progress, total=0, unit="B",
                                                  unit_scale=True, unit_divisor=1024,
                                                  desc="salvaging") as bar:
            report = salvage_store(location.root, out, config, check_crc=check_crc,
                                   progress=follow_with(bar))
    except STORE_ERRORS as exc:
        raise fail(f"cannot salvage {location.root} into {out}: {describe_error(exc)}",
                   exc) from None
    if as_json:
        echo_json(camel_case_keys(report.as_dict()))
        return
    echo = click.echo
    echo(f"source         {report.source}")
    echo(f"target         {report.target}")
    echo(f"copied         {report.records:,} record(s), {report.bytes:,} bytes")
    for r in report.skipped:
        echo(f"skipped        [{r.start:,}, {r.end:,}) ({r.size:,} bytes: {r.reason})")
    if report.queues_renumbered:
        echo(f"renumbered     {', '.join(report.queues_renumbered)} (records lost in damage "
             "left gaps)")
    if report.offsets_moved:
        echo(f"offsets        {report.offsets_moved:,} committed offset(s) moved with them")
    if report.files_copied:
        echo(f"config         {', '.join(report.files_copied)}")
