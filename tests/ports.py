"""Ports for the servers the tests start.

Every port is below 32768, where Linux's ephemeral range (the local ports the kernel gives
outgoing connections) does not reach: a server that stops and starts again on its port (a
broker changing role, a master killed and restarted) never finds it taken by some
connection's local end. RocketMQ's Java servers bind every interface, so a port counts as
free only when it is free there. No port is handed out twice in one test session.
"""

from __future__ import annotations

import random
import socket

LOW, HIGH = 12_000, 32_000
_handed_out: set[int] = set()
_rng = random.Random()


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_low_port(also: tuple[int, ...] = ()) -> int:
    """A free port P below 32768 with ``P + d`` free too for every d in ``also`` (a broker's
    listenPort - 2 for its VIP channel, + 1 for HA)."""
    for _ in range(500):
        port = _rng.randrange(LOW, HIGH)
        wanted = [port + d for d in (0, *also)]
        if _handed_out.isdisjoint(wanted) and all(_free(p) for p in wanted):
            _handed_out.update(wanted)
            return port
    raise AssertionError(f"no free port in [{LOW}, {HIGH}) found in 500 tries")


def free_port() -> int:
    """A free port below 32768 (see the module's note)."""
    return free_low_port()
