"""``rocketstore console``: serve the web console in the foreground until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from rocketstore.client.config import ACCESS_KEY_ENV, SECRET_KEY_ENV
from rocketstore.remoting.eventloop import run
from rocketstore.remoting.server_command import (
    log_level_option,
    run_server_command,
    use_server_logging,
)

if TYPE_CHECKING:
    from rocketstore.console.app import ConsoleSettings

DEFAULT_LISTEN = "127.0.0.1:8080"
log = logging.getLogger("rocketstore.console")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``); ValueError names --listen."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--listen must be host:port, got {text[:80]!r}")
    return host, int(port_text)


async def serve(app: object, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn on host:port until a signal; one line on stdout once it
    serves (scripts and tests wait for it)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))  # type: ignore[arg-type]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(6000):   # a minute at most for the lifespan (the admin client) to start
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        if server.started:
            shown = f"[{host}]" if ":" in host else host
            print(f"The console boot success. listening on http://{shown}:{bound}", flush=True)
        await task
    finally:
        sock.close()


@click.command("console", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-n", "--namesrv", "--namesrv-addr", "namesrv_addr",
              default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
              show_default="NAMESRV_ADDR or 127.0.0.1:9876", help="Name server address(es), ';'-separated.")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True,
              help="host:port to serve on (port 0 picks a free one).")
@click.option("--access-key", envvar=ACCESS_KEY_ENV, default=None,
              help=f"ACL account the console signs its requests with (or ${ACCESS_KEY_ENV}).")
@click.option("--secret-key", envvar=SECRET_KEY_ENV, default=None,
              help=f"Its secret key (or ${SECRET_KEY_ENV}).")
@click.option("--acl-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A plain_acl.yml: people sign in with its accounts, and the console signs "
                   "their requests with them (the brokers' ACL decides what they may do).")
@click.option("--store", "store_path", type=click.Path(file_okay=False), default=None,
              help="Show this store directory read-only instead of a cluster: a name server and "
                   "a read-only broker over it start on loopback and stop with the console.")
@click.option("--sample-interval", type=click.FloatRange(0.5, 3600), default=10.0, show_default=True,
              help="Seconds between the samples the TPS and lag charts draw.")
@log_level_option
@click.pass_context
def console_command(ctx: click.Context, namesrv_addr: str, listen: str, access_key: str | None,
                    secret_key: str | None, acl_file: str | None, store_path: str | None,
                    sample_interval: float, log_level: str | None) -> None:
    """Serve the web console of the cluster behind a name server: clusters and brokers,
    topics, consumer groups, message search, dead letters. Needs the ``console`` extra
    (pip install 'rocketstore[console]').

    With --store PATH it shows that store directory read-only: no page changes it, and its
    files stay byte for byte as they were.

    Prints "The console boot success. listening on http://HOST:PORT" once it serves.
    """
    use_server_logging(ctx, log_level)
    try:
        from rocketstore.console.app import ConsoleSettings
    except ImportError as exc:
        click.echo(f"console: {exc.name or exc} is missing: pip install 'rocketstore[console]'", err=True)
        ctx.exit(2)
    try:
        host, port = parse_listen(listen)
        if (access_key is None) != (secret_key is None):
            raise ValueError("--access-key and --secret-key go together: give both or neither")
        if store_path is not None and \
                ctx.get_parameter_source("namesrv_addr") is click.core.ParameterSource.COMMANDLINE:
            raise ValueError("give --store or --namesrv, not both (--store starts its own name server)")
    except ValueError as exc:
        click.echo(f"console: {exc}", err=True)
        ctx.exit(2)
    servers = None
    if store_path is not None:
        from rocketstore.console.embedded import StoreServeError, StoreServers

        servers = StoreServers(store_path)
        try:
            servers.start()
        except StoreServeError as exc:
            click.echo(f"console: --store {store_path}: {exc}", err=True)
            ctx.exit(1)
        namesrv_addr = servers.namesrv_addr
        # uvicorn re-raises the SIGTERM it stopped on once it is done: end through the
        # finally below (which stops the store's servers) rather than by the signal
        signal.signal(signal.SIGTERM, _exit_quietly)
        print(f"Serving store {servers.store_path} read-only: name server {servers.namesrv_addr}, "
              f"broker {servers.broker_addr}", flush=True)
    try:
        _serve(ctx, ConsoleSettings(
            namesrv_addr=namesrv_addr, access_key=access_key, secret_key=secret_key,
            sample_interval_s=sample_interval, acl_file=acl_file,
            store_path=None if servers is None else servers.store_path,
            store_broker_addr=None if servers is None else servers.broker_addr), host, port, listen)
    finally:
        if servers is not None:
            servers.stop()


def _exit_quietly(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _serve(ctx: click.Context, settings: ConsoleSettings, host: str, port: int, listen: str) -> None:
    from rocketstore.console.app import create_app

    try:
        app = create_app(settings)
    except ValueError as exc:
        click.echo(f"console: {exc}", err=True)
        ctx.exit(2)
    if settings.acl_file is None and settings.store_path is None and not _is_loopback(host):
        log.warning("console: listening on %s without --acl-file: anyone who reaches it may "
                    "change topics and offsets", host)
    try:
        run(serve(app, host, port))
    except OSError as exc:
        click.echo(f"console: cannot listen on {listen}: {exc}", err=True)
        ctx.exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rocketstore.console``: the exit status."""
    return run_server_command(console_command, argv, "python -m rocketstore.console")
