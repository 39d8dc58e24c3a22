"""``rocketstore controller``: a standalone controller in the foreground until SIGTERM/SIGINT."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketstore.controller.config import ControllerConfig
from rocketstore.controller.processor import ControllerProcessor
from rocketstore.controller.replicas import ReplicasInfo
from rocketstore.remoting import RemotingServer
from rocketstore.remoting.config import RemotingServerConfig
from rocketstore.remoting.eventloop import run

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rocketstore controller",
                                     description="Run a controller (RocketMQ 5's controller "
                                                 "mode) in the foreground.")
    parser.add_argument("-c", "--config-file", help="controller.properties (camelCase keys)")
    parser.add_argument("--listen-port", type=int, help="port (default 9878; 0: a free one)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {} if args.listen_port is None else {"listen_port": args.listen_port}
    try:
        config = ControllerConfig.from_properties(args.config_file, **overrides) \
            if args.config_file else ControllerConfig(**overrides)
    except (OSError, ValueError) as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(config))
    except (ValueError, ImportError) as exc:    # bad peers, pysyncobj missing
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 1
    return 0
