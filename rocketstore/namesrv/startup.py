"""``rocketstore namesrv`` (and ``python -m rocketstore.namesrv``): run a name server in the
foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence

import click

from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.namesrv.controller import NamesrvController
from rocketstore.remoting.eventloop import run
from rocketstore.remoting.server_command import (
    log_level_option,
    run_server_command,
    use_server_logging,
)


def build_config(config_file: str | None, listen_port: int | None,
                 bind_address: str | None) -> NamesrvConfig:
    overrides: dict[str, object] = {}
    if listen_port is not None:
        overrides["listen_port"] = listen_port
    if bind_address is not None:
        overrides["bind_address"] = bind_address
    if config_file:
        # as RocketMQ's NamesrvStartup: the file read is where UPDATE_NAMESRV_CONFIG writes
        overrides.setdefault("config_store_path", config_file)
        return NamesrvConfig.from_properties(config_file, **overrides)
    return NamesrvConfig(**overrides)  # type: ignore[arg-type]


async def serve(config: NamesrvConfig, config_file: str | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    controller = NamesrvController(config, config_file=config_file)
    await controller.start()
    try:
        # One line on stdout that scripts and tests wait for.
        print(f"The Name Server boot success. listening on {controller.address} serializeType=JSON", flush=True)
        await stop.wait()
    finally:
        await controller.stop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    print("The Name Server shut down.", flush=True)


@click.command("namesrv", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config-file", type=click.Path(dir_okay=False),
              help="namesrv.properties (RocketMQ's camelCase keys); UPDATE_NAMESRV_CONFIG "
                   "writes back to it.")
@click.option("--listen-port", type=click.IntRange(0, 65535), default=None,
              help="Port to listen on (default 9876; 0 picks a free one).")
@click.option("--bind-address", default=None, help="Address to bind (default 127.0.0.1).")
@log_level_option
@click.pass_context
def namesrv_command(ctx: click.Context, config_file: str | None, listen_port: int | None,
                    bind_address: str | None, log_level: str | None) -> None:
    """Run a RocketMQ-compatible name server in the foreground until SIGTERM or Ctrl-C.

    Prints "The Name Server boot success. listening on HOST:PORT" once it serves.
    """
    use_server_logging(ctx, log_level)
    try:
        config = build_config(config_file, listen_port, bind_address)
    except (OSError, ValueError) as exc:
        click.echo(f"namesrv: {exc}", err=True)
        ctx.exit(2)
    try:
        run(serve(config, config_file))
    except OSError as exc:  # the port is taken, the address cannot be bound
        click.echo(f"namesrv: cannot listen on {config.bind_address}:{config.listen_port}: {exc}",
                   err=True)
        ctx.exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rocketstore.namesrv``: the exit status."""
    return run_server_command(namesrv_command, argv, "python -m rocketstore.namesrv")
