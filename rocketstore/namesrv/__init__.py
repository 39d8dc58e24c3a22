"""The name server: route table, broker liveness and its processors.

A network peer of brokers and clients: never imports the store or the broker.

`python -m rocketstore.namesrv [--listen-port 9876] [--bind-address 127.0.0.1] [-c namesrv.properties]`
prints `The Name Server boot success. listening on HOST:PORT serializeType=JSON` and runs until
SIGTERM/SIGINT. In code: `rocketstore.namesrv.main(argv)`, or `NamesrvController(NamesrvConfig(...),
clock=...)` with `start()`/`stop()`.

Served: REGISTER_BROKER 103, UNREGISTER_BROKER 104, GET_ROUTEINFO_BY_TOPIC 105 (17 for an
unknown topic), GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206,
GET_TOPICS_BY_CLUSTER 224, DELETE_TOPIC_IN_NAMESRV 216, WIPE/ADD_WRITE_PERM_OF_BROKER 205/327,
QUERY_DATA_VERSION 322, the KV config PUT/GET/DELETE_KV_CONFIG 100-102 and
GET_KVLIST_BY_NAMESPACE 219, GET/UPDATE_NAMESRV_CONFIG 319/318 (kv_config.py). Not yet:
compressed registration bodies, the unit/system topic lists.

Brokers register with REGISTER_BROKER (the broker's client for it is
`rocketstore.broker.registration.BrokerRegistrar`). Topic configs are topics.json's dicts
(`topic_config(name, ...)` builds one). Clients decode a route with
`decode_topic_route_data(body)`, which also reads the unquoted integer keys of name servers
before RocketMQ 4.9.4.
"""

from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.namesrv.controller import NamesrvController
from rocketstore.namesrv.route_info import RouteInfoManager
from rocketstore.namesrv.startup import main
from rocketstore.remoting.route_bodies import (
    BrokerData,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    TopicRouteData,
    decode_topic_route_data,
    topic_config,
)

__all__ = [
    "BrokerData", "DataVersion", "NamesrvConfig", "NamesrvController", "QueueData",
    "RegisterBrokerResult", "RouteInfoManager", "TopicRouteData", "decode_topic_route_data",
    "main", "topic_config",
]
