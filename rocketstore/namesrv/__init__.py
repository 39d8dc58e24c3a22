"""The name server: route table, broker liveness, its processors, and the broker's registrar.

A network peer of brokers and clients: never imports the store or the broker.
"""

from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.namesrv.controller import NamesrvController
from rocketstore.namesrv.protocol import (
    BrokerData,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    TopicRouteData,
    decode_topic_route_data,
    topic_config,
)
from rocketstore.namesrv.registrar import BrokerIdentity, BrokerRegistrar, RegistrationOutcome
from rocketstore.namesrv.route_info import RouteInfoManager
from rocketstore.namesrv.startup import main

__all__ = [
    "BrokerData", "BrokerIdentity", "BrokerRegistrar", "DataVersion", "NamesrvConfig",
    "NamesrvController", "QueueData", "RegisterBrokerResult", "RegistrationOutcome",
    "RouteInfoManager", "TopicRouteData", "decode_topic_route_data", "main", "topic_config",
]
