"""``python -m rocketstore`` and the ``rocketstore`` command (see :mod:`rocketstore.cli`).

The command's entry point lives here, outside the cli package, so that Ctrl-C while the
command line's modules are still being imported ends as quietly as Ctrl-C later does: exit
status 130, no traceback.
"""

from __future__ import annotations

import sys

from rocketstore.common.exit_status import EXIT_INTERRUPTED

__all__ = ["EXIT_INTERRUPTED", "run"]


def run() -> None:
    """The ``rocketstore`` console script."""
    try:
        from rocketstore.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        sys.exit(EXIT_INTERRUPTED)
    main(prog_name="rocketstore")


if __name__ == "__main__":
    run()
