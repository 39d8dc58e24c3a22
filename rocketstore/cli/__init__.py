"""The ``rocketstore`` command line: the click group ``main`` and one module per command group.

- :mod:`rocketstore.cli.store`: ``dump``, ``stat``, ``query``, ``get``, ``view``, ``recover``,
  ``offsets`` (a store on disk, opened read-only unless the command must write).
- :mod:`rocketstore.cli.integrity`: ``verify`` and ``salvage``.
- :mod:`rocketstore.cli.export`: ``export`` (Parquet) and ``spark-ingest``.
- :mod:`rocketstore.cli.demo`: ``demo``, a realistic workload written and verified.
- :mod:`rocketstore.cli.admin`: ``admin``, mqadmin's most used commands over the wire.

Only public APIs of the store are used. Every expected failure (missing path, locked store,
bad segment files, corrupt records) ends as a one-line error on stderr and exit code 1, never
a traceback (``--verbose`` logs it). JSON output uses camelCase keys, as RocketMQ's JSON does.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from rocketstore import CorruptRecordError, StoreLockedError, __version__
from rocketstore.cli.admin import admin_group
from rocketstore.cli.clean import clean
from rocketstore.cli.common import describe_error, fail
from rocketstore.cli.demo import demo
from rocketstore.cli.export import export_command, spark_ingest_command
from rocketstore.cli.integrity import salvage, verify
from rocketstore.cli.servers import SERVER_COMMANDS, load_server_command
from rocketstore.cli.store import dump, get_command, offsets, query, recover, stat, view
from rocketstore.common.exit_status import EXIT_INTERRUPTED
from rocketstore.common.logs import SERVER_FORMAT, EchoHandler, send_package_logs
from rocketstore.store import StoreFormatError

__all__ = ["main"]


class _OneLineFormatter(logging.Formatter):
    """A record as one line: an exception logged with it shows as its message, without the
    traceback (--verbose shows that)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message = f"{message}: {describe_error(record.exc_info[1])}"
        return f"rocketstore: {record.levelname}: {message}"


def _setup_logging(ctx: click.Context, verbose: bool) -> None:
    """Send the package's log records to stderr for this command only: the handler and the
    level are undone when the command ends (so embedding programs and tests keep theirs).
    A server command replaces this handler with its own (rocketstore.common.logs)."""
    handler = EchoHandler()
    handler.setFormatter(logging.Formatter(SERVER_FORMAT) if verbose else _OneLineFormatter())
    ctx.call_on_close(send_package_logs(handler, logging.DEBUG if verbose else logging.WARNING))


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"rocketstore {__version__}")
        ctx.exit()


# Failures of the environment or of the data that a command did not turn into its own message.
_ONE_LINE_ERRORS = (OSError, CorruptRecordError, StoreFormatError, StoreLockedError)


class _Group(click.Group):
    """Turns an unexpected failure of the environment (permissions, a full disk) or of the
    store's data into a one-line error too, and Ctrl-C into exit status 130 without a word
    (click's own standalone mode says "Aborted!" and exits 1)."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                sys.exit(EXIT_INTERRUPTED)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        # an explicit ctx.exit(code) comes back as its code; a command's return value is not one
        sys.exit(result if type(result) is int else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *SERVER_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or load_server_command(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # click ends quietly on a closed pipe
        except _ONE_LINE_ERRORS as exc:
            raise fail(describe_error(exc), exc) from None
        except (click.exceptions.ClickException, click.exceptions.Exit,
                click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - never a traceback: one line (--verbose logs it)
            raise fail(f"{type(exc).__name__}: {describe_error(exc)}", exc) from None


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


for _command in (demo, dump, stat, query, get_command, view, recover, offsets, verify, salvage,
                 clean, export_command, spark_ingest_command, admin_group):
    main.add_command(_command)
