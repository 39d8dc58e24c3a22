"""The one place that sends the package's log records somewhere.

Every module logs to ``logging.getLogger(__name__)``, a child of the ``rocketstore`` logger;
the package itself only adds a ``NullHandler`` (a library stays silent in a program that
configures no logging). The ``rocketstore`` command and the servers' ``python -m`` entry
points call :func:`send_package_logs`, which keeps exactly one handler of theirs on the
``rocketstore`` logger: a second call (the CLI group's, then the broker's ``--log-level``)
replaces the first, so no record prints twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["PACKAGE_LOGGER", "SERVER_FORMAT", "log_level", "send_package_logs"]

#: the logger every module's logger descends from
PACKAGE_LOGGER = "rocketstore"

#: a server's lines: when, how bad, which module, what
SERVER_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# marks the handler send_package_logs installed, so a later call can find and replace it
_OURS = "_rocketstore_output"

LEVEL_NAMES = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def log_level(name: str | int) -> int:
    """A level name (any case) or number as logging's number; ValueError names the choices."""
    if isinstance(name, int):
        return name
    level = logging.getLevelName(name.strip().upper())
    if not isinstance(level, int):
        raise ValueError(f"log level {name!r} is not one of {', '.join(LEVEL_NAMES)}")
    return level


def send_package_logs(handler: logging.Handler, level: str | int) -> Callable[[], None]:
    """Make ``handler`` the one output of the package's records at ``level`` and above (a
    handler installed by an earlier call is removed); returns a function that puts back the
    previous handler and level."""
    package = logging.getLogger(PACKAGE_LOGGER)
    previous = [h for h in package.handlers if getattr(h, _OURS, False)]
    old_level = package.level
    for h in previous:
        package.removeHandler(h)
    setattr(handler, _OURS, True)
    package.addHandler(handler)
    package.setLevel(log_level(level))

    def restore() -> None:
        package.removeHandler(handler)
        for h in previous:
            package.addHandler(h)
        package.setLevel(old_level)

    return restore


class EchoHandler(logging.Handler):
    """Writes records to the current ``sys.stderr``, looked up per record (so it follows a
    redirection made after it was created, such as click's CliRunner's)."""

    def emit(self, record: logging.LogRecord) -> None:
        import sys

        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)
