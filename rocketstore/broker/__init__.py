"""rocketstore.broker: a RocketMQ 4.x broker over the store.

`rocketstore broker -c broker.properties` (or `python -m rocketstore.broker`) runs one in the
foreground; in code, `BrokerController(BrokerConfig(...))` with `await start()` / `await stop()`.
See README.md ("Broker") for what it serves, and rocketstore/broker/controller.py for how the
parts fit. Consumer offsets on disk: ``rocketstore.store`` (``load_offset_table``, ``commit_group_offsets``, ...).
"""

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.controller import BrokerController

__all__ = ["BrokerConfig", "BrokerController"]
