"""What GET_BROKER_RUNTIME_INFO (``rocketstore admin brokerStatus``) tells of replication.

RocketMQ 4.9.8's runtime table has no replication keys; these are rocketstore's own, added to
it: the role, and for a master its slaves (each one's acknowledged offset and lag in bytes and
in ms: how much older the first record the slave lacks is than the master's newest) and, in
controller mode, its epoch and SyncStateSet; for a slave its master and how far it got.
"""
from __future__ import annotations

from typing import Any

from rocketstore.ha.client import HAClient
from rocketstore.ha.service import HAService


def ha_runtime_info(role: str, service: HAService | None, client: HAClient | None
                    ) -> dict[str, str]:
    """The runtime-info keys of a broker whose ``brokerRole`` is ``role``."""
    info = {"brokerRole": role}
    if service is not None and role != "SLAVE":
        slaves = service.slaves()
        info["haSlaveCount"] = str(len(slaves))
        # RocketMQ's HAService.push2SlaveMaxOffset: what SYNC_MASTER's sends wait for
        info["haPush2SlaveMaxOffset"] = str(service.max_ack_offset())
        for slave in slaves:
            address = slave["address"]
            info[f"haSlaveAckOffset_{address}"] = str(slave["ackOffset"])
            lag = slave["lagBytes"]
            info[f"haSlaveLagBytes_{address}"] = "" if lag is None else str(lag)
            lag_ms = slave["lagMs"]
            info[f"haSlaveLagMs_{address}"] = "" if lag_ms is None else str(lag_ms)
        sync_state = service.sync_state_set
        if sync_state is not None:
            info["haMasterEpoch"] = str(sync_state.master_epoch)
            info["haSyncStateSet"] = ",".join(str(i) for i in sorted(sync_state.members))
            info["haSyncStateSetEpoch"] = str(sync_state.epoch)
    if client is not None:
        info["haMasterAddress"] = client.master_address or ""
        info["haMasterConnected"] = "true" if client.connected else "false"
        info["haReplicaOffset"] = str(client.store.get_replica_offset())
    return info


def replication_status(table: dict[str, str]) -> dict[str, Any]:
    """The replication keys of a runtime-info table (:func:`ha_runtime_info`'s) as one
    document: role; a master's epoch, SyncStateSet and slaves (address, ackOffset, lagBytes,
    lagMs; None where unknown); a slave's master."""
    def number(value: str | None) -> int | None:
        return None if value in (None, "") else int(value)    # type: ignore[arg-type]

    status: dict[str, Any] = {"role": table.get("brokerRole", "")}
    if "haMasterEpoch" in table:
        status["masterEpoch"] = int(table["haMasterEpoch"])
        status["syncStateSet"] = [int(i) for i in table["haSyncStateSet"].split(",") if i]
        status["syncStateSetEpoch"] = int(table["haSyncStateSetEpoch"])
    prefix = "haSlaveAckOffset_"
    slaves = []
    for key in sorted(k for k in table if k.startswith(prefix)):
        address = key[len(prefix):]
        slaves.append({"address": address, "ackOffset": number(table[key]),
                       "lagBytes": number(table.get(f"haSlaveLagBytes_{address}")),
                       "lagMs": number(table.get(f"haSlaveLagMs_{address}"))})
    if "haSlaveCount" in table:
        status["slaves"] = slaves
    if "haMasterAddress" in table:
        status["masterAddress"] = table["haMasterAddress"]
        status["masterConnected"] = table.get("haMasterConnected") == "true"
        status["replicaOffset"] = number(table.get("haReplicaOffset"))
    return status
