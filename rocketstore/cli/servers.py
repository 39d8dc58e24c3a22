"""Server commands: ``rocketstore namesrv`` and ``rocketstore broker`` run a name server or a
broker in the foreground."""
from __future__ import annotations

import click


@click.command("namesrv", context_settings={"ignore_unknown_options": True,
                                            "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def namesrv(args: tuple[str, ...]) -> None:
    """Run a RocketMQ-compatible name server in the foreground until SIGTERM or Ctrl-C:
    [--listen-port PORT] (default 9876) [--bind-address ADDR] (default 127.0.0.1)
    [-c namesrv.properties] [--log-level LEVEL]; --help for the details."""
    from rocketstore.namesrv.startup import main as namesrv_main

    raise SystemExit(namesrv_main(list(args)))


@click.command("broker", context_settings={"ignore_unknown_options": True,
                                           "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def broker(args: tuple[str, ...]) -> None:
    """Run a RocketMQ-compatible broker in the foreground until SIGTERM or Ctrl-C (store
    flushed, offsets written): -c broker.properties [-n NAMESRV] [--listen-port PORT]
    (default 10911) [--bind-address ADDR] [--store-path DIR] [--log-level LEVEL]; --help for
    the details."""
    from rocketstore.broker.startup import main as broker_main

    raise SystemExit(broker_main(list(args)))


@click.command("controller", context_settings={"ignore_unknown_options": True,
                                               "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def controller(args: tuple[str, ...]) -> None:
    """Run a standalone controller (RocketMQ 5's controller mode) in the foreground until
    SIGTERM or Ctrl-C: [-c controller.properties] [--listen-port PORT] (default 9878)
    [--log-level LEVEL]; --help for the details."""
    from rocketstore.controller.startup import main as controller_main

    raise SystemExit(controller_main(list(args)))
