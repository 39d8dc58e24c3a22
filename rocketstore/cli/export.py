"""Bulk exports of a store: ``export`` (Parquet, pyarrow only) and ``spark-ingest`` (a local
Spark reading the store with the rocketstore data source)."""

from __future__ import annotations

from pathlib import Path

import click

from rocketstore.cli.common import (
    camel_case_keys,
    checked_topic,
    echo_json,
    existing_store,
    fail,
    follow_with,
    index_options,
    locate_store,
    open_store,
    progress_bar,
    progress_option,
    size_text,
)


@click.command("export")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet",
              show_default=True, help="Output format.")
@click.option("--no-body", is_flag=True, help="Leave out the body column.")
@click.option("--compression", default="snappy", show_default=True,
              help="Parquet codec (snappy, zstd, gzip, none...).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Segments exported at a time (default: min(4, CPUs)).")
@click.option("--include-active", is_flag=True,
              help="Also export the segment being written, up to the store's current end (a "
                   "later run exports it again once it has grown).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@progress_option
@index_options
def export_command(path: Path, out: Path, fmt: str, no_body: bool, compression: str,
                   workers: int | None, include_active: bool, as_json: bool, progress: bool | None,
                   hash_slots: int | None, index_num: int | None) -> None:
    """Write the sealed CommitLog segments of PATH to OUT as Parquet, one file per segment,
    with the schema of the rocketstore Spark source (pyarrow; no Spark needed).

    Idempotent and resumable: segments already in OUT are skipped, so running it again
    exports only newly sealed segments. The segment still being written is left out unless
    --include-active is given. Opens the store read-only."""
    location, config = existing_store(path, hash_slots, index_num)
    with open_store(location.root, config, read_only=True) as store, \
            progress_bar(progress, total=0, unit="B", unit_scale=True, unit_divisor=1024,
                         desc="exporting") as bar:
        try:
            from rocketstore.export.parquet import export_parquet
        except ImportError as exc:
            raise fail(str(exc), exc) from None
        try:
            report = export_parquet(store, out, include_body=not no_body,
                                    compression=compression, workers=workers,
                                    progress=follow_with(bar), include_active=include_active)
        except ValueError as exc:
            raise fail(str(exc), exc) from None
    if as_json:
        echo_json(camel_case_keys(report.as_dict()))
    else:
        click.echo(f"exported {len(report.exported)} segment(s), {report.rows:,} rows, "
                   f"{size_text(report.parquet_bytes)} of Parquet to {out} in "
                   f"{report.seconds:.1f}s; {len(report.skipped)} already there")
        if report.pending_bytes:
            click.echo(f"left out: the segment being written ({size_text(report.pending_bytes)} of "
                       f"CommitLog); --include-active exports it too")


@click.command("spark-ingest")
@click.argument("path")
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
def spark_ingest_command(path: str, to: str, out: Path, mode: str, topics: str | None,
                         no_body: bool, extra: tuple[str, ...], master: str) -> None:
    """Read the store at PATH (a local or mounted path, or a file: URI) with
    spark.read.format("rocketstore") and write it to OUT (Parquet by default). Exits non-zero
    when a task cannot read what was planned (e.g. an executor without the store). Needs the
    spark extra (pyspark, Java 17)."""
    if topics:
        for topic in topics.split(","):
            checked_topic(topic.strip(), "--topics")
    try:
        from rocketstore.spark.ingest import error_summary, spark_ingest
        from rocketstore.spark.location import local_path
    except ImportError as exc:
        raise fail(f"{exc} (pip install 'rocketstore[spark]')", exc) from None
    try:
        location = locate_store(Path(local_path(path, "PATH")))
    except ValueError as exc:
        raise fail(str(exc), exc) from None
    options: dict[str, str] = {}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"--option {item!r} is not KEY=VALUE")
        options[key] = value
    if topics:
        options["topics"] = topics
    if no_body:
        options["includeBody"] = "false"
    try:
        report = spark_ingest(str(location.root), str(out), to=to, mode=mode, options=options,
                              master=master)
    except Exception as exc:  # noqa: BLE001 - Spark wraps errors in its own classes
        raise fail(f"spark-ingest failed: {error_summary(exc)}", exc) from None
    rows = "" if report["rows"] is None else f"{report['rows']:,} rows "
    click.echo(f"wrote {rows}to {report['out']} ({to}) in {report['seconds']:.1f}s")
