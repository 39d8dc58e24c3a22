"""``python -m rocketstore.namesrv``: run a name server in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.namesrv.controller import NamesrvController
from rocketstore.remoting.eventloop import run


def build_config(args: argparse.Namespace) -> NamesrvConfig:
    overrides = {}
    if args.listen_port is not None:
        overrides["listen_port"] = args.listen_port
    if args.bind_address is not None:
        overrides["bind_address"] = args.bind_address
    if args.config_file:
        # as RocketMQ's NamesrvStartup: the file read is where UPDATE_NAMESRV_CONFIG writes
        overrides.setdefault("config_store_path", args.config_file)
        return NamesrvConfig.from_properties(args.config_file, **overrides)
    return NamesrvConfig(**overrides)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rocketstore.namesrv",
        description="Run a RocketMQ-compatible name server in the foreground (SIGTERM or Ctrl-C stops it).",
    )
    parser.add_argument("-c", "--config-file", help="namesrv.properties (RocketMQ's camelCase keys)")
    parser.add_argument("--listen-port", type=int, help="port to listen on (default 9876; 0 picks a free one)")
    parser.add_argument("--bind-address", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser.parse_args(argv)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rocketstore.namesrv`` (and the CLI's ``namesrv`` command)."""
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = build_config(args)
    except (OSError, ValueError) as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return 2
    try:
        run(serve(config, args.config_file))
    except OSError as exc:  # the port is taken, the address cannot be bound
        print(f"namesrv: cannot listen on {config.bind_address}:{config.listen_port}: {exc}", file=sys.stderr)
        return 1
    return 0
