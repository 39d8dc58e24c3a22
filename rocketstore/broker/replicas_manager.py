"""ReplicasManager: a broker in controller mode (RocketMQ 5's ReplicasManager).

At start (before the broker serves) it opens the store as a slave's, registers with the
controller (CONTROLLER_REGISTER_BROKER: its replica id, addresses, max offset and last epoch)
until the controller names a master, and settles the store for the role it gets:

- master: a new epoch begins at its max offset (the epoch file, ``epochFileCheckpoint``), and
  the store is opened again as a master's (recovery rebuilds the put path's state);
- slave: it asks the master for its epochs (GET_BROKER_EPOCH_CACHE), cuts what it has beyond
  the last epoch both share (``truncate_commit_log``; the bytes go to a side file) and follows
  the master's HA address.

Then it heartbeats the controller every ``brokerHeartbeatInterval``; an answer naming another
master or a new master epoch sets ``role_changed``, and the broker restarts its parts in the
new role (see broker.startup). A master also keeps the SyncStateSet (rocketstore.ha's
SyncStateSet) and asks the controller to change it. A controller that does not answer changes
nothing: the broker keeps its role.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from rocketstore.broker.config import BrokerConfig
from rocketstore.ha import HAService, SyncStateSet
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_request,
    create_response,
)
from rocketstore.store import EpochFile, MessageStore, last_consistent_offset, truncate_commit_log

log = logging.getLogger("rocketstore.broker")

MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
#: how long a broker waits between registrations while the controller names no master
REGISTER_RETRY_S = 1.0
REQUEST_TIMEOUT_S = 3.0


class ControllerUnavailable(ConnectionError):
    pass


class ReplicasManager:
    def __init__(self, config: BrokerConfig, client: RemotingClient, root: str) -> None:
        self.config = config
        self.client = client
        self.root = root
        self.replica_id = config.broker_id
        self.controller_addrs = [a.strip() for a in config.controller_addr.split(";") if a.strip()]
        self._leader = ""
        self.epochs = EpochFile(root)
        #: the controller's last answer (replica info)
        self.info: dict[str, Any] = {}
        self.is_master = False
        self.master_epoch = 0
        self.role_changed = asyncio.Event()
        self.sync_state_set: SyncStateSet | None = None
        self.address = ""
        self.ha_address = ""
        self.ha_client_address: Callable[[], str] = lambda: ""

    # ---- talking to the controller ----
    async def _ask(self, request_code: int, fields: dict[str, Any],
                   body: bytes | None = None) -> RemotingCommand:
        last: Exception | str | None = None
        # the controller that answered last first: a replicated controller's leader
        for address in sorted(self.controller_addrs, key=lambda a: a != self._leader):
            try:
                response = await self.client.invoke(
                    address, create_request(request_code, fields, body), timeout=REQUEST_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the next controller, or unavailable
                last = exc
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                last = f"{address}: {response.remark}"
                continue
            self._leader = address
            return response
        raise ControllerUnavailable(f"no controller of {self.controller_addrs} answers: {last}")

    async def heartbeat(self, code: int, max_offset: int) -> dict[str, Any]:
        response = await self._ask(code, {
            "clusterName": self.config.broker_cluster_name,
            "brokerName": self.config.broker_name, "brokerId": self.replica_id,
            "brokerAddr": self.address, "haAddress": self.ha_address,
            "haClientAddress": self.ha_client_address(), "maxOffset": max_offset,
            "epoch": self.epochs.last_epoch,
            "heartbeatTimeoutMills": self.config.controller_heart_beat_timeout_mills})
        if response.code != ResponseCode.SUCCESS:
            raise ControllerUnavailable(f"controller answers {response.code}: {response.remark}")
        info: dict[str, Any] = json.loads(response.body_bytes())
        return info

    # ---- start: the role and the store ----
    async def settle(self, open_store: Callable[[str, str | None], Any], stopping: asyncio.Event
                     ) -> tuple[MessageStore, str, str | None]:
        """Register until the controller names a master; returns the store opened for this
        broker's role, the role and the master's HA address (a slave's)."""
        loop = asyncio.get_running_loop()
        store: MessageStore = await loop.run_in_executor(None, open_store, "SLAVE", None)
        try:
            while True:
                try:
                    info = await self.heartbeat(RequestCode.CONTROLLER_REGISTER_BROKER,
                                                store.get_max_phy_offset())
                    if int(info["masterBrokerId"]) > 0:
                        break
                    log.warning("controller: broker group %s has no master yet",
                                self.config.broker_name)
                except ControllerUnavailable as exc:
                    log.warning("registering with the controller: %s", exc)
                if stopping.is_set():
                    raise ControllerUnavailable("stopped before the controller named a master")
                await asyncio.sleep(REGISTER_RETRY_S)
            self.info = info
            self.master_epoch = int(info["masterEpoch"])
            self.is_master = int(info["masterBrokerId"]) == self.replica_id
            max_offset = store.get_max_phy_offset()
            if self.is_master:
                role = self.config.store.broker_role
                role = role if role in MASTER_ROLES else "ASYNC_MASTER"
                await loop.run_in_executor(None, store.shutdown)
                self.epochs.append(self.master_epoch, max_offset)
                log.warning("controller: this broker (%d) is the master of %s, epoch %d from "
                            "offset %d", self.replica_id, self.config.broker_name,
                            self.master_epoch, max_offset)
                store = await loop.run_in_executor(None, open_store, role, None)
                return store, role, None
            master_ha = str(info["masterHaAddress"])
            remote = await self._master_epochs(str(info["masterAddress"]))
            if remote is not None:
                entries, remote_max = remote
                if self.epochs.entries or max_offset == 0:
                    point = last_consistent_offset(self.epochs.entries, max_offset, entries,
                                                   remote_max)
                    if max_offset > point:
                        await loop.run_in_executor(None, store.shutdown)
                        side = await loop.run_in_executor(None, truncate_commit_log, self.root, point,
                                                          max_offset)
                        log.warning("controller: this broker's CommitLog parts from master %s's "
                                    "at %d (its end was %d): cut, the bytes kept in %s",
                                    info["masterAddress"], point, max_offset, side)
                        store = await loop.run_in_executor(None, open_store, "SLAVE", master_ha)
                else:
                    log.warning("no epoch file in %s: the CommitLog is followed as it is", self.root)
                self.epochs.replace(entries)
            log.info("controller: this broker (%d) follows master %s (HA %s), epoch %d",
                     self.replica_id, info["masterAddress"], master_ha, self.master_epoch)
            return store, "SLAVE", master_ha
        except BaseException:
            if store.is_running:
                await loop.run_in_executor(None, store.shutdown)
            raise

    async def _master_epochs(self, master: str) -> tuple[list[tuple[int, int]], int] | None:
        try:
            response = await self.client.invoke(
                master, create_request(RequestCode.GET_BROKER_EPOCH_CACHE, {}),
                timeout=REQUEST_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - followed without the check, logged
            log.warning("asking master %s for its epochs failed: %s", master, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("master %s answers GET_BROKER_EPOCH_CACHE with %d: %s", master,
                        response.code, response.remark)
            return None
        body = json.loads(response.body_bytes())
        return ([(int(e["epoch"]), int(e["startOffset"])) for e in body["epochList"]],
                int(body["maxOffset"]))

    # ---- serving ----
    def serve_epochs(self, server: RemotingServer, store: MessageStore) -> None:
        """GET_BROKER_EPOCH_CACHE: this broker's epochs, each with its end offset."""
        def answer(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            end = store.get_max_phy_offset()
            entries = self.epochs.entries
            epoch_list = [{"epoch": e, "startOffset": s,
                           "endOffset": entries[i + 1][1] if i + 1 < len(entries) else end}
                          for i, (e, s) in enumerate(entries)]
            body = {"brokerName": self.config.broker_name, "brokerId": self.replica_id,
                    "masterEpoch": self.master_epoch, "maxOffset": end, "epochList": epoch_list}
            return create_response(request, ResponseCode.SUCCESS, None, None,
                                   json.dumps(body).encode())
        server.register_processor(RequestCode.GET_BROKER_EPOCH_CACHE, answer)

    def start_sync_state_set(self, ha_service: HAService) -> None:
        info = self.info
        self.sync_state_set = SyncStateSet(
            ha_service, self.replica_id, members=set(info["syncStateSet"]),
            epoch=int(info["syncStateSetEpoch"]), master_epoch=self.master_epoch,
            epoch_start_offset=self.epochs.entries[-1][1] if self.epochs.entries else 0,
            max_time_not_catchup_ms=self.config.ha_max_time_slave_not_catchup)
        self.sync_state_set.update(info["syncStateSet"], int(info["syncStateSetEpoch"]),
                                   info["replicas"])
        ha_service.sync_state_set = self.sync_state_set

    async def tick(self, store: MessageStore) -> None:
        """One heartbeat: a role change sets role_changed; a master proposes its SyncStateSet;
        a slave copies its master's epochs."""
        try:
            info = await self.heartbeat(RequestCode.BROKER_HEARTBEAT, store.get_max_phy_offset())
        except ControllerUnavailable as exc:
            log.warning("controller heartbeat: %s (the role stays)", exc)
            return
        master_id, epoch = int(info["masterBrokerId"]), int(info["masterEpoch"])
        if epoch != self.master_epoch or (master_id == self.replica_id) != self.is_master:
            log.warning("controller: broker group %s has master %d at epoch %d now (this "
                        "broker %d was %s at epoch %d): switching", self.config.broker_name,
                        master_id, epoch, self.replica_id,
                        "master" if self.is_master else "slave", self.master_epoch)
            self.role_changed.set()
            return
        self.info = info
        sss = self.sync_state_set
        if self.is_master and sss is not None:
            sss.update(info["syncStateSet"], int(info["syncStateSetEpoch"]), info["replicas"])
            proposed = sss.propose()
            if proposed is not None:
                await self._alter(sss, proposed)
        elif not self.is_master:
            remote = await self._master_epochs(str(info["masterAddress"]))
            if remote is not None:
                self.epochs.replace(remote[0])

    async def _alter(self, sss: SyncStateSet, proposed: set[int]) -> None:
        body = json.dumps({"syncStateSet": sorted(proposed),
                           "syncStateSetEpoch": sss.epoch}).encode()
        # until the controller answers, sends wait for both sets' members (the request may
        # be applied and its answer lost)
        sss.proposed = set(proposed)
        try:
            response = await self._ask(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "brokerName": self.config.broker_name, "masterBrokerId": self.replica_id,
                "masterEpoch": self.master_epoch}, body)
        except ControllerUnavailable as exc:
            log.warning("altering the SyncStateSet: %s", exc)
            return
        if response.code != ResponseCode.SUCCESS:
            sss.proposed = set()
            log.warning("controller refuses SyncStateSet %s: %d %s", sorted(proposed),
                        response.code, response.remark)
            return
        info = json.loads(response.body_bytes())
        sss.update(info["syncStateSet"], int(info["syncStateSetEpoch"]), info["replicas"])
