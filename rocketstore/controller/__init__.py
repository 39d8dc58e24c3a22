"""The controller (RocketMQ 5's controller mode): per broker group it keeps the master, its
epoch and the SyncStateSet, elects a new master from the set when the master's heartbeats
stop, and persists what it decided. A network peer like the name server: it imports only the
remoting layer and the shared vocabulary. It runs inside a name server
(``enableControllerInNamesrv``) or standalone (``rocketstore controller``)."""

from rocketstore.controller.config import ControllerConfig
from rocketstore.controller.processor import ControllerProcessor
from rocketstore.controller.replicas import ControllerError, Group, Replica, ReplicasInfo

__all__ = ["ControllerConfig", "ControllerError", "ControllerProcessor", "Group", "Replica",
           "ReplicasInfo"]
