"""SyncStateSet: the master's view of which replicas are caught up (RocketMQ 5's
AutoSwitchHAService syncStateSet), in controller mode.

The controller decides the set; the master proposes changes (CONTROLLER_ALTER_SYNC_STATE_SET)
when :meth:`propose` finds a member fallen behind for longer than
``haMaxTimeSlaveNotCatchup`` (it leaves) or a replica caught up (it joins). A slave is caught
up at a check when its acknowledged offset reaches the master's end as it was at the previous
check, and at least the start of the master's epoch. The broker's HA connections are matched
to broker ids by the address each slave's HA socket has (the slave sends it in its controller
heartbeat).

For SYNC_MASTER's ack rule: ``HAService.sync_state_set`` is this object when the broker runs
in controller mode (None otherwise); :meth:`slave_addresses` are the HA connection addresses
of the set's slaves, ``members`` their broker ids (the master's included), and
:meth:`waited_for` the slaves that must acknowledge (``members`` and a proposed set not answered
yet, so a replica joining counts already).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketstore.ha.service import HAService

log = logging.getLogger("rocketstore.ha")


class SyncStateSet:
    def __init__(self, service: HAService, master_id: int, *, members: set[int], epoch: int,
                 master_epoch: int, epoch_start_offset: int, max_time_not_catchup_ms: int) -> None:
        self.service = service
        self.master_id = master_id
        self.members = set(members) | {master_id}
        self.epoch = epoch
        self.master_epoch = master_epoch
        self.epoch_start_offset = epoch_start_offset
        self.max_time_not_catchup_s = max_time_not_catchup_ms / 1000
        #: broker id -> HA connection address, from the controller's replica list
        self.addresses: dict[int, str] = {}
        self._last_caught_up: dict[int, float] = {}
        self._previous_end = service.store.get_max_phy_offset()
        self._proposed: set[int] = set()

    @property
    def proposed(self) -> set[int]:
        """A set asked of the controller, its answer not come yet (RocketMQ 5's
        isSynchronizingSyncStateSet): the controller may already count its members in."""
        return self._proposed

    @proposed.setter
    def proposed(self, value: set[int]) -> None:
        self._proposed = value
        self._changed()

    def _changed(self) -> None:
        """Who acknowledges changed: SYNC_MASTER's waiting sends are judged by it at once."""
        if self.service.sync_state_set is self:
            self.service.refresh_acks()

    def waited_for(self) -> set[int]:
        """The slaves SYNC_MASTER waits for: the set's, and while a change is unanswered
        the proposed set's too (a replica joining counts already), so that a replica the
        controller may elect never misses an acknowledged message."""
        return (self.members | self.proposed) - {self.master_id}

    def slave_addresses(self) -> set[str]:
        """HA connection addresses of the set's slaves now connected."""
        connected = {c.state.address for c in self.service.connections}
        return {a for i, a in self.addresses.items()
                if i in self.members and i != self.master_id and a in connected}

    def update(self, members: list[int], epoch: int, replicas: list[dict[str, Any]]) -> None:
        """The controller's answer: the current set, its epoch and the replicas."""
        if epoch != self.epoch or set(members) != self.members:
            log.info("SyncStateSet now %s (epoch %d)", sorted(members), epoch)
        self.members, self.epoch = set(members), epoch
        self._proposed = set()       # the controller's word decides
        self.addresses = {int(r["brokerId"]): str(r.get("haClientAddress") or "")
                          for r in replicas if int(r["brokerId"]) != self.master_id}
        self._changed()

    def propose(self, now: float | None = None) -> set[int] | None:
        """The set the master should ask for now (None: no change)."""
        now = time.monotonic() if now is None else now
        acks = {c.state.address: c.state.ack_offset for c in self.service.connections}
        target = max(self._previous_end, self.epoch_start_offset)
        for broker_id, address in self.addresses.items():
            ack = acks.get(address, -1) if address else -1
            if ack >= 0 and ack >= target:
                self._last_caught_up[broker_id] = now
            else:
                self._last_caught_up.setdefault(broker_id, now if broker_id in self.members else 0.0)
        self._previous_end = self.service.store.get_max_phy_offset()
        new = {self.master_id}
        for broker_id in self.addresses:
            caught = self._last_caught_up.get(broker_id, 0.0)
            if broker_id in self.members:
                if now - caught <= self.max_time_not_catchup_s:
                    new.add(broker_id)
                else:
                    log.warning("HA slave %d falls behind for more than haMaxTimeSlaveNotCatchup "
                                "(%d ms): it leaves the SyncStateSet", broker_id,
                                int(self.max_time_not_catchup_s * 1000))
            elif caught == now:
                log.info("HA slave %d caught up: it joins the SyncStateSet", broker_id)
                new.add(broker_id)
        return None if new == self.members else new
