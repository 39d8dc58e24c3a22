"""The name server's Prometheus metrics (``metricsExporterType=PROM``): its route table's
brokers, topics and clusters, and its connections, read on the event loop at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily

from rocketstore.remoting.metrics import connection_family, request_family

if TYPE_CHECKING:
    from rocketstore.namesrv.controller import NamesrvController


def namesrv_families(controller: NamesrvController) -> Iterator[Any]:
    routes = controller.route_info
    address = {"namesrv": controller.address}
    brokers = GaugeMetricFamily("rocketstore_namesrv_brokers", "brokers registered (by id), by cluster",
                                labels=["namesrv", "cluster"])
    for cluster, names in sorted(routes.cluster_addr_table.items()):
        count = sum(len(routes.broker_addr_table[name].broker_addrs)
                    for name in names if name in routes.broker_addr_table)
        brokers.add_metric([controller.address, cluster], count)
    live = GaugeMetricFamily("rocketstore_namesrv_live_brokers", "brokers whose registration is alive",
                             labels=["namesrv"])
    live.add_metric([controller.address], len(routes.broker_live_table))
    topics = GaugeMetricFamily("rocketstore_namesrv_topics", "topics with a route", labels=["namesrv"])
    topics.add_metric([controller.address], len(routes.topic_queue_table))
    return iter([brokers, live, topics, connection_family(address, len(controller.server.connections)),
                 request_family(address)])
