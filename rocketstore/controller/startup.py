"""``rocketstore controller``: a standalone controller in the foreground until SIGTERM/SIGINT."""
from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from rocketstore.controller.config import ControllerConfig
from rocketstore.controller.processor import ControllerProcessor
from rocketstore.controller.replicas import ReplicasInfo
from rocketstore.remoting import RemotingServer
from rocketstore.remoting.config import RemotingServerConfig
from rocketstore.remoting.eventloop import run
from rocketstore.remoting.server_command import (
    log_level_option,
    run_server_command,
    use_server_logging,
)

if TYPE_CHECKING:
    from rocketstore.controller.raft import RaftDecisions


class ControllerServer:
    """A controller on its own RemotingServer."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.server = RemotingServer(RemotingServerConfig(listen_port=config.listen_port,
                                                          bind_address=config.bind_address))
        replicated = bool(config.controller_d_leger_peers.strip())
        # a replicated controller keeps its state in pysyncobj's journal, not in a file
        self.replicas = ReplicasInfo(None if replicated else config.controller_store_path,
                                     enable_elect_unclean_master=config.enable_elect_unclean_master)
        self.raft: RaftDecisions | None = None
        if replicated:
            from rocketstore.controller.raft import RaftDecisions

            self.raft = RaftDecisions(self.replicas, config.controller_d_leger_self_id,
                                      config.controller_d_leger_peers, config.controller_store_path)
        self.processor = ControllerProcessor(
            self.replicas, lambda: self.address,
            scan_not_active_broker_interval=config.scan_not_active_broker_interval,
            raft=self.raft)
        self.processor.register_with(self.server)

    @property
    def address(self) -> str:
        host, port = self.server.address
        return f"{host}:{port}"

    async def start(self) -> None:
        await self.server.start()
        self.processor.start()

    async def stop(self) -> None:
        self.processor.stop()
        await self.server.stop()
        if self.raft is not None:
            self.raft.destroy()


async def serve(config: ControllerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    controller = ControllerServer(config)
    await controller.start()
    try:
        print(f"The Controller boot success. listening on {controller.address}", flush=True)
        await stop.wait()
    finally:
        await controller.stop()
    print("The Controller shut down.", flush=True)


@click.command("controller", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config-file", type=click.Path(dir_okay=False),
              help="controller.properties (RocketMQ's camelCase keys).")
@click.option("--listen-port", type=click.IntRange(0, 65535), default=None,
              help="Port to listen on (default 9878; 0 picks a free one).")
@log_level_option
@click.pass_context
def controller_command(ctx: click.Context, config_file: str | None, listen_port: int | None,
                       log_level: str | None) -> None:
    """Run a standalone controller (RocketMQ 5's controller mode) in the foreground until
    SIGTERM or Ctrl-C.

    Prints "The Controller boot success. listening on HOST:PORT" once it serves.
    """
    use_server_logging(ctx, log_level)
    overrides = {} if listen_port is None else {"listen_port": listen_port}
    try:
        config = ControllerConfig.from_properties(config_file, **overrides) \
            if config_file else ControllerConfig(**overrides)
    except (OSError, ValueError) as exc:
        click.echo(f"controller: {exc}", err=True)
        ctx.exit(2)
    try:
        run(serve(config))
    except (ValueError, ImportError) as exc:    # bad peers, pysyncobj missing
        click.echo(f"controller: {exc}", err=True)
        ctx.exit(2)
    except OSError as exc:
        click.echo(f"controller: {exc}", err=True)
        ctx.exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rocketstore.controller``: the exit status."""
    return run_server_command(controller_command, argv, "python -m rocketstore.controller")
