"""What GET_BROKER_RUNTIME_INFO (``rocketstore admin brokerStatus``) tells of replication.

RocketMQ 4.9.8's runtime table has no replication keys; these are rocketstore's own, added to
it: the role, and for a master its slaves (each one's acknowledged offset and lag in bytes),
for a slave its master and how far it got.
"""
from __future__ import annotations

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
    if client is not None:
        info["haMasterAddress"] = client.master_address or ""
        info["haMasterConnected"] = "true" if client.connected else "false"
        info["haReplicaOffset"] = str(client.store.get_replica_offset())
    return info
