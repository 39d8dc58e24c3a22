"""A replicated controller: three (or five) controllers agree on the groups' decided state
through pysyncobj's Raft (the ``controller`` extra), never a Raft of our own.

Each controller lists every controller's Raft address (``controllerDLegerPeers``,
``"n0-host:port;n1-host:port;n2-host:port"``, RocketMQ 5's key) and names itself
(``controllerDLegerSelfId``). The decided part of each group (master, epochs, SyncStateSet,
replica addresses) is a value in a replicated dict (pysyncobj's ReplDict; its journal and dump
files live in ``controllerStorePath``), so it survives restarts and a minority's loss. Only the
Raft leader answers brokers and admin requests that read or change state; the others answer
CONTROLLER_NOT_LEADER and brokers try the next address. The leader handles one request at a
time: it takes the committed state, applies the request (ReplicasInfo), proposes each group it
changed and answers once a majority committed it. Heartbeats (liveness) stay in the leader's
memory: a new leader gives every replica one timeout of grace.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import os
import socket
from types import ModuleType
from typing import Any

from rocketstore.common.optional import import_optional
from rocketstore.controller.replicas import ReplicasInfo

log = logging.getLogger("rocketstore.controller")

#: how long a leader waits for a majority to commit a change (s)
COMMIT_TIMEOUT_S = 5.0


def import_pysyncobj() -> tuple[ModuleType, ModuleType]:
    """pysyncobj and its batteries. Importing pysyncobj (0.3.x: its win_inet_pton module)
    replaces socket.inet_ntop with a Windows-only function on every system: the real one is
    put back."""
    inet_ntop = socket.inet_ntop
    try:
        purpose = "a replicated controller (controllerDLegerPeers)"
        return (import_optional("pysyncobj", extra="controller", purpose=purpose),
                import_optional("pysyncobj.batteries", extra="controller", purpose=purpose))
    finally:
        socket.inet_ntop = inet_ntop


def parse_peers(peers: str) -> dict[str, str]:
    """``"n0-host:port;n1-host:port"`` -> {"n0": "host:port", ...}; ValueError naming the
    entry otherwise."""
    out: dict[str, str] = {}
    for entry in (p.strip() for p in peers.split(";")):
        if not entry:
            continue
        node, sep, address = entry.partition("-")
        if not sep or not node or ":" not in address:
            raise ValueError(f"controllerDLegerPeers entry {entry!r} is not id-host:port")
        out[node] = address
    if len(out) < 3:
        raise ValueError(f"controllerDLegerPeers names {len(out)} controllers: a replicated "
                         "controller needs at least 3")
    return out


class RaftDecisions:
    """The replicated state behind a ReplicasInfo (see the module docstring)."""

    def __init__(self, replicas: ReplicasInfo, self_id: str, peers: str, store_path: str) -> None:
        pysyncobj, batteries = import_pysyncobj()
        nodes = parse_peers(peers)
        if self_id not in nodes:
            raise ValueError(f"controllerDLegerSelfId {self_id!r} is not in controllerDLegerPeers "
                             f"({', '.join(nodes)})")
        os.makedirs(store_path, exist_ok=True)
        self.replicas = replicas
        self.self_address = nodes[self_id]
        self.groups = batteries.ReplDict()
        conf = pysyncobj.SyncObjConf(
            fullDumpFile=os.path.join(store_path, "raft.dump"),
            journalFile=os.path.join(store_path, "raft.journal"),
            dynamicMembershipChange=False)
        self.sync = pysyncobj.SyncObj(self.self_address,
                                      [a for n, a in nodes.items() if n != self_id],
                                      conf, consumers=[self.groups])
        self.lock = asyncio.Lock()
        self._was_leader = False

    def is_leader(self) -> bool:
        return bool(self.sync._isLeader())

    def leader(self) -> str:
        leader = self.sync._getLeader()
        return "" if leader is None else str(getattr(leader, "address", leader))

    def peers(self) -> list[str]:
        return [self.self_address] + [str(getattr(n, "address", n)) for n in self.sync.otherNodes]

    def refresh(self) -> None:
        """Take the committed state (a new leader also gives every replica a grace)."""
        leader = self.is_leader()
        self.replicas.load_data({"groups": [copy.deepcopy(v) for v in self.groups.values()]},
                                fresh=leader and not self._was_leader)
        self._was_leader = leader

    async def commit(self) -> None:
        """Propose every group whose decided state differs from the committed one; wait
        for a majority. TimeoutError when it does not come."""
        loop = asyncio.get_running_loop()
        waits = []
        for name, state in self.replicas.snapshot().items():
            if self.groups.get(name) == state:
                continue
            future: asyncio.Future[None] = loop.create_future()

            def done(result: Any, error: Any, future: asyncio.Future[None] = future) -> None:
                def settle() -> None:
                    if future.done():
                        return
                    if error:   # pysyncobj's FAIL_REASON: not leader, queue full, lost
                        future.set_exception(ConnectionError(f"raft commit failed ({error})"))
                    else:
                        future.set_result(None)
                loop.call_soon_threadsafe(settle)
            self.groups.set(name, copy.deepcopy(state), callback=done)
            waits.append(future)
        if waits:
            await asyncio.wait_for(asyncio.gather(*waits), COMMIT_TIMEOUT_S)

    def destroy(self) -> None:
        self.sync.destroy()
