"""``python -m rocketstore``: the command line (see :mod:`rocketstore.cli`)."""

from rocketstore.cli import main

if __name__ == "__main__":
    main(prog_name="rocketstore")
