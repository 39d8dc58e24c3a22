"""What the server commands (``rocketstore namesrv``, ``rocketstore broker`` and their
``python -m`` forms) share: the ``--log-level`` option, its logging setup and the way a
``python -m`` entry point runs the click command."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import click

from rocketstore.common.exit_status import EXIT_INTERRUPTED
from rocketstore.common.logs import (
    LEVEL_NAMES,
    SERVER_FORMAT,
    EchoHandler,
    send_package_logs,
)

__all__ = ["log_level_option", "run_server_command", "use_server_logging"]


def log_level_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--log-level", type=click.Choice(LEVEL_NAMES, case_sensitive=False), default=None,
        help="Lowest level logged to stderr (default INFO; DEBUG with rocketstore -v).")(f)


def use_server_logging(ctx: click.Context, log_level: str | None) -> None:
    """Send the package's records to stderr, one line each with time, level and module, at
    ``log_level`` (INFO unless the ``rocketstore`` group's --verbose asked for DEBUG). This
    replaces the group's own handler for the command's lifetime, so nothing prints twice."""
    if log_level is None:
        verbose = bool((ctx.find_root().obj or {}).get("verbose"))
        log_level = "DEBUG" if verbose else "INFO"
    handler = EchoHandler()
    handler.setFormatter(logging.Formatter(SERVER_FORMAT))
    ctx.call_on_close(send_package_logs(handler, log_level))


def run_server_command(command: click.Command, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run ``command`` as a program's whole command line; returns its exit status."""
    try:
        result = command.main(args=list(argv) if argv is not None else None,
                              prog_name=prog_name, standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        return EXIT_INTERRUPTED
    return result if type(result) is int else 0
