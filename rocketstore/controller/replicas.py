"""ReplicasInfo: what the controller decides, per broker group (brokerName): the master, its
epoch, the SyncStateSet (the replicas caught up with the master) and its epoch (RocketMQ 5's
ReplicasInfoManager and SyncStateInfo), plus each replica's liveness from its heartbeats
(DefaultBrokerHeartbeatManager), kept in memory only.

The decided part is written to ``<controllerStorePath>/replicasInfo.json`` (atomic replace)
after every change and read at start, so a restarted controller keeps its masters and sets.
Every method runs on the controller's event loop.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketstore.common.atomic_file import write_atomically

log = logging.getLogger("rocketstore.controller")

STATE_FILE = "replicasInfo.json"


class ControllerError(ValueError):
    """A request the controller refuses; ``code`` is RocketMQ 5's answer code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Replica:
    broker_id: int
    address: str = ""
    ha_address: str = ""
    #: the replica's HA connection as the master sees it (host:port of its socket)
    ha_client_address: str = ""
    max_offset: int = 0
    epoch: int = 0
    last_heartbeat: float = 0.0     # monotonic; 0: not seen since the controller started
    timeout_ms: int = 10_000

    def alive(self, now: float) -> bool:
        return self.last_heartbeat > 0 and (now - self.last_heartbeat) * 1000 <= self.timeout_ms

    def persisted(self) -> dict[str, Any]:
        return {"brokerId": self.broker_id, "brokerAddress": self.address,
                "haAddress": self.ha_address}


@dataclass
class Group:
    cluster_name: str
    broker_name: str
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0
    replicas: dict[int, Replica] = field(default_factory=dict)

    def master(self) -> Replica | None:
        return None if self.master_id is None else self.replicas.get(self.master_id)

    def replica_info(self) -> dict[str, Any]:
        """What a broker of the group is told (RocketMQ 5's GetReplicaInfoResponseHeader and
        the SyncStateSet body), with the HA addresses a slave follows and the replicas the
        master maps its HA connections to."""
        master = self.master()
        now = time.monotonic()
        return {
            "brokerName": self.broker_name,
            "masterBrokerId": -1 if self.master_id is None else self.master_id,
            "masterAddress": "" if master is None else master.address,
            "masterHaAddress": "" if master is None else master.ha_address,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "replicas": [{"brokerId": r.broker_id, "brokerAddress": r.address,
                          "haAddress": r.ha_address, "haClientAddress": r.ha_client_address,
                          "maxOffset": r.max_offset, "epoch": r.epoch, "alive": r.alive(now)}
                         for r in sorted(self.replicas.values(), key=lambda r: r.broker_id)],
        }


class ReplicasInfo:
    """The groups, persisted under store_path (None: in memory only)."""

    def __init__(self, store_path: str | None, *, enable_elect_unclean_master: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store_path = store_path
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.clock = clock
        self.groups: dict[str, Group] = {}
        if store_path:
            self.load()

    # ---- persistence ----
    @property
    def path(self) -> str | None:
        return None if not self.store_path else os.path.join(self.store_path, STATE_FILE)

    def load(self) -> None:
        path = self.path
        if path is None or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            self.load_data(json.load(f), fresh=True)
        log.info("controller state read from %s: %d broker groups", path, len(self.groups))

    def load_data(self, data: dict[str, Any], *, fresh: bool) -> None:
        """Take decided state (the file's, or the replicated one): liveness stays for
        replicas already known unless fresh, where each gets one timeout of grace (a
        restarted or newly leading controller deposes nobody before the next heartbeat)."""
        now = self.clock()
        groups = {}
        for g in data.get("groups", []):
            group = Group(str(g["clusterName"]), str(g["brokerName"]),
                          None if g.get("masterBrokerId", -1) < 0 else int(g["masterBrokerId"]),
                          int(g["masterEpoch"]), {int(i) for i in g["syncStateSet"]},
                          int(g["syncStateSetEpoch"]))
            old = self.groups.get(group.broker_name)
            for r in g.get("replicas", []):
                known = None if old is None else old.replicas.get(int(r["brokerId"]))
                replica = Replica(int(r["brokerId"]), str(r.get("brokerAddress", "")),
                                  str(r.get("haAddress", "")), last_heartbeat=now)
                if known is not None and not fresh:
                    replica.ha_client_address = known.ha_client_address
                    replica.max_offset, replica.epoch = known.max_offset, known.epoch
                    replica.last_heartbeat, replica.timeout_ms = known.last_heartbeat, known.timeout_ms
                group.replicas[replica.broker_id] = replica
            groups[group.broker_name] = group
        self.groups = groups

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """brokerName -> the group's decided state (what is persisted or replicated)."""
        return {g.broker_name: {
            "clusterName": g.cluster_name, "brokerName": g.broker_name,
            "masterBrokerId": -1 if g.master_id is None else g.master_id,
            "masterEpoch": g.master_epoch, "syncStateSet": sorted(g.sync_state_set),
            "syncStateSetEpoch": g.sync_state_set_epoch,
            "replicas": sorted((r.persisted() for r in g.replicas.values()),
                               key=lambda r: r["brokerId"])}
            for g in self.groups.values()}

    def save(self) -> None:
        path = self.path
        if path is None:
            return
        data = {"groups": list(self.snapshot().values())}
        write_atomically(path, json.dumps(data, indent=1, sort_keys=True))

    # ---- brokers ----
    def group(self, broker_name: str) -> Group:
        group = self.groups.get(broker_name)
        if group is None:
            raise ControllerError("CONTROLLER_INVALID_REQUEST",
                                  f"broker group {broker_name!r} is not known to the controller")
        return group

    def heartbeat(self, cluster_name: str, broker_name: str, broker_id: int, *, address: str,
                  ha_address: str = "", ha_client_address: str = "", max_offset: int = 0,
                  epoch: int = 0, timeout_ms: int = 10_000) -> Group:
        """CONTROLLER_REGISTER_BROKER and BROKER_HEARTBEAT: the replica is alive; a group
        without a master gets one when this replica may be elected (see elect)."""
        if broker_id <= 0:
            raise ControllerError("CONTROLLER_INVALID_REQUEST",
                                  f"brokerId must be > 0 in controller mode, got {broker_id}")
        group = self.groups.get(broker_name)
        changed = False
        if group is None:
            group = self.groups[broker_name] = Group(cluster_name, broker_name)
            changed = True
        replica = group.replicas.get(broker_id)
        if replica is None:
            replica = group.replicas[broker_id] = Replica(broker_id)
            changed = True
        if (replica.address, replica.ha_address) != (address, ha_address):
            replica.address, replica.ha_address = address, ha_address
            changed = True
        replica.ha_client_address = ha_client_address
        replica.max_offset, replica.epoch = max_offset, epoch
        replica.timeout_ms = timeout_ms
        replica.last_heartbeat = self.clock()
        if group.master_id is None:
            changed = self._elect(group, None) or changed
        if changed:
            self.save()
        return group

    def scan_not_active(self) -> list[str]:
        """Elect a new master in every group whose master stopped heartbeating; the groups
        that changed."""
        now = self.clock()
        changed = []
        for group in self.groups.values():
            master = group.master()
            if group.master_id is not None and (master is None or not master.alive(now)):
                log.warning("broker group %s: master %s is not active (no heartbeat for %d ms)",
                            group.broker_name, group.master_id,
                            -1 if master is None or not master.last_heartbeat
                            else int((now - master.last_heartbeat) * 1000))
                self._elect(group, None)
                changed.append(group.broker_name)
        if changed:
            self.save()
        return changed

    def elect(self, broker_name: str, broker_id: int | None) -> Group:
        """CONTROLLER_ELECT_MASTER: elect broker_id (or the best candidate)."""
        group = self.group(broker_name)
        if not self._elect(group, broker_id):
            raise ControllerError("CONTROLLER_MASTER_NOT_AVAILABLE",
                                  f"broker group {broker_name}: no replica can be elected master"
                                  + ("" if broker_id is None else f" (asked for {broker_id})"))
        self.save()
        return group

    def _elect(self, group: Group, wanted: int | None) -> bool:
        """Pick the new master: an alive member of the SyncStateSet (any alive replica with
        enableElectUncleanMaster, or while the group never had a set), the one with the
        largest offset (then the smallest id). Bumps the master epoch; the new set is the
        new master alone (RocketMQ 5). No candidate: the group has no master (epoch bumped
        when it had one). Whether a master was elected."""
        now = self.clock()
        alive = {i: r for i, r in group.replicas.items() if r.alive(now)}
        never_had_set = not group.sync_state_set
        if never_had_set or self.enable_elect_unclean_master:
            candidates = dict(alive)
        else:
            candidates = {i: r for i, r in alive.items() if i in group.sync_state_set}
        if group.master_id is not None and wanted is None:
            candidates.pop(group.master_id, None)   # the master that stopped
        if wanted is not None:
            if wanted not in candidates:
                log.warning("broker group %s: %s cannot be elected (alive: %s, SyncStateSet: %s)",
                            group.broker_name, wanted, sorted(alive), sorted(group.sync_state_set))
                return False
            candidates = {wanted: candidates[wanted]}
        old = group.master_id
        if not candidates:
            if old is not None:
                group.master_id = None
                group.master_epoch += 1
                log.warning("broker group %s: no replica of the SyncStateSet %s is alive: no "
                            "master (epoch %d)", group.broker_name, sorted(group.sync_state_set),
                            group.master_epoch)
            return False
        new = max(candidates.values(), key=lambda r: (r.max_offset, -r.broker_id)).broker_id
        group.master_id = new
        group.master_epoch += 1
        group.sync_state_set = {new}
        group.sync_state_set_epoch += 1
        log.warning("broker group %s: elected master %d (was %s), master epoch %d, "
                    "SyncStateSet %s epoch %d", group.broker_name, new, old, group.master_epoch,
                    sorted(group.sync_state_set), group.sync_state_set_epoch)
        return True

    def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int,
                             new_set: set[int], sync_state_set_epoch: int) -> Group:
        """CONTROLLER_ALTER_SYNC_STATE_SET: only from the current master, with the current
        master and set epochs; the new set holds the master and known replicas only."""
        group = self.group(broker_name)
        if group.master_id != master_id:
            raise ControllerError("CONTROLLER_INVALID_MASTER",
                                  f"broker {master_id} is not the master of {broker_name} "
                                  f"({group.master_id} is)")
        if master_epoch != group.master_epoch:
            raise ControllerError("CONTROLLER_FENCED_MASTER_EPOCH",
                                  f"master epoch {master_epoch} is not the current "
                                  f"{group.master_epoch}")
        if sync_state_set_epoch != group.sync_state_set_epoch:
            raise ControllerError("CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
                                  f"syncStateSetEpoch {sync_state_set_epoch} is not the current "
                                  f"{group.sync_state_set_epoch}")
        if master_id not in new_set or not new_set <= set(group.replicas):
            raise ControllerError("CONTROLLER_INVALID_REPLICAS",
                                  f"SyncStateSet {sorted(new_set)} must hold the master "
                                  f"{master_id} and known replicas {sorted(group.replicas)}")
        if new_set != group.sync_state_set:
            log.info("broker group %s: SyncStateSet %s -> %s (epoch %d)", broker_name,
                     sorted(group.sync_state_set), sorted(new_set), group.sync_state_set_epoch + 1)
            group.sync_state_set = set(new_set)
            group.sync_state_set_epoch += 1
            self.save()
        return group
