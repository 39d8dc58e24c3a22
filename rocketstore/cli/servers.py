"""Server commands: ``rocketstore namesrv``, ``rocketstore broker``, ``rocketstore controller``
and ``rocketstore console`` run a name server, a broker, a standalone controller or the web
console in the foreground. Their click commands live beside the servers (``python -m
rocketstore.namesrv`` / ``python -m rocketstore.broker`` run the same ones) and are imported
only when asked for, so the store's commands start without loading a broker."""

from __future__ import annotations

import importlib

import click

#: command name -> (module, click command in it)
SERVER_COMMANDS = {
    "namesrv": ("rocketstore.namesrv.startup", "namesrv_command"),
    "broker": ("rocketstore.broker.startup", "broker_command"),
    "controller": ("rocketstore.controller.startup", "controller_command"),
    "console": ("rocketstore.console.startup", "console_command"),
}


def load_server_command(name: str) -> click.Command | None:
    where = SERVER_COMMANDS.get(name)
    if where is None:
        return None
    command: click.Command = getattr(importlib.import_module(where[0]), where[1])
    return command
