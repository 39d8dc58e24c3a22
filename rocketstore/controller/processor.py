"""ControllerProcessor: the controller's requests on a RemotingServer (its own, or a name
server's when enableControllerInNamesrv), RocketMQ 5's codes and header fields:

- CONTROLLER_REGISTER_BROKER (1003) and BROKER_HEARTBEAT (904): header clusterName,
  brokerName, brokerId, brokerAddr, haAddress, haClientAddress, maxOffset, epoch,
  heartbeatTimeoutMills. The answer is the group's replica info (GET_REPLICA_INFO's), so a
  broker learns its role from every heartbeat.
- CONTROLLER_GET_REPLICA_INFO (1004): header brokerName.
- CONTROLLER_ALTER_SYNC_STATE_SET (1001): header brokerName, masterBrokerId, masterEpoch;
  body ``{"syncStateSet": [ids], "syncStateSetEpoch": n}``.
- CONTROLLER_ELECT_MASTER (1002): header brokerName, brokerId (optional: the best candidate).
- CONTROLLER_GET_SYNC_STATE_DATA (1006): body a JSON list of brokerNames (empty: all).
- CONTROLLER_GET_METADATA_INFO (1005): this controller's address and role.

Answers: header masterBrokerId, masterAddress, masterEpoch, syncStateSetEpoch; body the
replica info as JSON. A refused change: RocketMQ 5's CONTROLLER_* code and a remark.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketstore.common.text import quote
from rocketstore.controller.replicas import ControllerError, Group, ReplicasInfo

if TYPE_CHECKING:
    from rocketstore.controller.raft import RaftDecisions
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)

log = logging.getLogger("rocketstore.controller")


def _int(fields: dict[str, str], name: str, default: int | None = None) -> int:
    raw = fields.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ControllerError("CONTROLLER_INVALID_REQUEST", f"header field {name} is missing")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ControllerError("CONTROLLER_INVALID_REQUEST",
                              f"header field {name} is not an integer: {quote(raw)}") from None


def _str(fields: dict[str, str], name: str, required: bool = True) -> str:
    value = fields.get(name, "")
    if required and not value:
        raise ControllerError("CONTROLLER_INVALID_REQUEST", f"header field {name} is missing")
    return value


class ControllerProcessor:
    """Answers the controller requests from ``replicas``; ``scan`` every
    scan_not_active_broker_interval ms elects masters for groups whose master went silent."""

    def __init__(self, replicas: ReplicasInfo, address: Callable[[], str], *,
                 scan_not_active_broker_interval: int = 5000,
                 raft: RaftDecisions | None = None) -> None:
        self.replicas = replicas
        #: a replicated controller's Raft (None: a single controller)
        self.raft = raft
        self.address = address
        self.scan_interval_s = scan_not_active_broker_interval / 1000
        self._timer: asyncio.TimerHandle | None = None

    def register_with(self, server: RemotingServer) -> None:
        handlers = {
            RequestCode.CONTROLLER_REGISTER_BROKER: self.heartbeat,
            RequestCode.BROKER_HEARTBEAT: self.heartbeat,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
        }
        for code, handler in handlers.items():
            guarded = self._guarded(handler)
            server.register_processor(code, guarded if self.raft is None else self._led(guarded))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.scan_interval_s, self._scan)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _scan(self) -> None:
        loop = asyncio.get_running_loop()
        raft = self.raft
        if raft is None:
            try:
                self.replicas.scan_not_active()
            except Exception:
                log.exception("scanning broker heartbeats failed")
        elif raft.is_leader():
            loop.create_task(self._scan_led(raft))
        else:
            raft.refresh()      # a follower keeps its view current (and knows it leads next)
        self._timer = loop.call_later(self.scan_interval_s, self._scan)

    async def _scan_led(self, raft: RaftDecisions) -> None:
        async with raft.lock:
            raft.refresh()
            try:
                self.replicas.scan_not_active()
                await raft.commit()
            except Exception:
                log.exception("scanning broker heartbeats failed")

    def _led(self, handler: Callable[[RemotingConnection, RemotingCommand], RemotingCommand]
             ) -> Callable[[RemotingConnection, RemotingCommand], Any]:
        """A replicated controller: only the leader answers, one request at a time, after a
        majority committed what the request changed."""
        raft = self.raft
        assert raft is not None

        async def run(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            if request.code == RequestCode.CONTROLLER_GET_METADATA_INFO:
                return handler(ctx, request)
            if not raft.is_leader():
                return create_response(request, ResponseCode.CONTROLLER_NOT_LEADER,
                                       f"not the controller leader (leader: {raft.leader() or 'none'})")
            async with raft.lock:
                raft.refresh()
                response = handler(ctx, request)
                try:
                    await raft.commit()
                except (asyncio.TimeoutError, ConnectionError) as exc:
                    log.warning("controller request %d: no majority committed it: %s",
                                request.code, exc)
                    return create_response(request, ResponseCode.CONTROLLER_NOT_LEADER,
                                           f"not committed by a majority: {exc}")
                return response
        return run

    def _guarded(self, handler: Callable[[RemotingCommand], RemotingCommand]
                 ) -> Callable[[RemotingConnection, RemotingCommand], RemotingCommand]:
        def run(ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            try:
                return handler(request)
            except ControllerError as exc:
                log.warning("controller request %d from %s refused: %s", request.code,
                            ctx.remote_address, exc)
                return create_response(request, ResponseCode[exc.code], str(exc))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("controller request %d from %s: bad input: %s", request.code,
                            ctx.remote_address, quote(str(exc)))
                return create_response(request, ResponseCode.CONTROLLER_INVALID_REQUEST,
                                       f"bad request: {exc}")
        return run

    @staticmethod
    def _answer(request: RemotingCommand, group: Group) -> RemotingCommand:
        info = group.replica_info()
        header = {k: str(info[k]) for k in ("masterBrokerId", "masterAddress", "masterEpoch",
                                            "syncStateSetEpoch")}
        return create_response(request, ResponseCode.SUCCESS, None, header,
                               json.dumps(info).encode())

    def heartbeat(self, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        group = self.replicas.heartbeat(
            _str(f, "clusterName"), _str(f, "brokerName"), _int(f, "brokerId"),
            address=_str(f, "brokerAddr"), ha_address=_str(f, "haAddress", False),
            ha_client_address=_str(f, "haClientAddress", False),
            max_offset=_int(f, "maxOffset", 0), epoch=_int(f, "epoch", 0),
            timeout_ms=_int(f, "heartbeatTimeoutMills", 10_000))
        return self._answer(request, group)

    def get_replica_info(self, request: RemotingCommand) -> RemotingCommand:
        return self._answer(request, self.replicas.group(_str(request.ext_fields, "brokerName")))

    def alter_sync_state_set(self, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        body: dict[str, Any] = json.loads(request.body_bytes() or b"{}")
        members = body.get("syncStateSet")
        if not isinstance(members, list) or not all(isinstance(i, int) for i in members):
            raise ControllerError("CONTROLLER_INVALID_REQUEST",
                                  "body syncStateSet must be a list of broker ids")
        group = self.replicas.alter_sync_state_set(
            _str(f, "brokerName"), _int(f, "masterBrokerId"), _int(f, "masterEpoch"),
            set(members), int(body.get("syncStateSetEpoch", -1)))
        return self._answer(request, group)

    def elect_master(self, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        broker_id = _int(f, "brokerId", -1)
        group = self.replicas.elect(_str(f, "brokerName"), None if broker_id < 0 else broker_id)
        return self._answer(request, group)

    def get_sync_state_data(self, request: RemotingCommand) -> RemotingCommand:
        names = json.loads(request.body_bytes() or b"[]")
        if not isinstance(names, list):
            raise ControllerError("CONTROLLER_INVALID_REQUEST", "body must be a list of brokerNames")
        groups = [self.replicas.group(str(n)) for n in names] if names \
            else list(self.replicas.groups.values())
        body = {g.broker_name: g.replica_info() for g in groups}
        return create_response(request, ResponseCode.SUCCESS, None, None, json.dumps(body).encode())

    def get_metadata_info(self, request: RemotingCommand) -> RemotingCommand:
        address = self.address()
        raft = self.raft
        if raft is None:
            header = {"group": "single", "controllerLeaderId": "0",
                      "controllerLeaderAddress": address, "isLeader": "true", "peers": address}
        else:
            header = {"group": "raft", "controllerLeaderAddress": raft.leader(),
                      "isLeader": str(raft.is_leader()).lower(),
                      "raftAddress": raft.self_address, "peers": ";".join(raft.peers())}
        return create_response(request, ResponseCode.SUCCESS, None, header)
