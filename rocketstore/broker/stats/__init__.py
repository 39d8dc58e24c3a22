"""The broker's statistics (RocketMQ's BrokerStatsManager, StatsItem and the store's
StoreStatsService figures): see :mod:`rocketstore.broker.stats.manager`."""

from rocketstore.broker.stats.items import StatsItem, StatsItemSet, StatsSnapshot
from rocketstore.broker.stats.manager import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    QUEUE_GET_NUMS,
    QUEUE_GET_SIZE,
    QUEUE_PUT_NUMS,
    QUEUE_PUT_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
)

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "QUEUE_GET_NUMS",
    "QUEUE_GET_SIZE",
    "QUEUE_PUT_NUMS",
    "QUEUE_PUT_SIZE",
    "SNDBCK_PUT_NUMS",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStatsManager",
    "StatsItem",
    "StatsItemSet",
    "StatsSnapshot",
]
