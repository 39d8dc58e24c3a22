"""UPDATE_BROKER_CONFIG's rules (RocketMQ's ``Configuration.update`` then ``persist``): which
keys a running broker takes, which of them take effect at once, and how the properties file
the broker was started with is rewritten.

RocketMQ 4.9.8 sets every key it knows on its config objects and writes them all to the
broker's properties file; a setting read at every use (brokerPermission, autoCreateTopicEnable,
fileReservedTime, ...) so takes effect at once, the others at the next start. rocketstore does
the same with its own keys: :data:`LIVE_BROKER_FIELDS` and the store's ``LIVE_CONFIG_FIELDS``
change the running broker; every other key it knows is written to the file only and logged as
taking effect at the next start. A key neither knows is ignored (logged), as RocketMQ's
``mergeIfExist`` ignores it. Unlike RocketMQ, which writes a value it cannot parse to the file
and keeps the old one in force, a bad value is refused whole with an error naming the key.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketstore.broker.config import BROKER_PROPERTY_KEYS, BrokerConfig, broker_value
from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.java_properties import escape_value, update_properties_text
from rocketstore.common.text import quote
from rocketstore.config import LIVE_CONFIG_FIELDS, PROPERTY_KEYS, StoreConfig

log = logging.getLogger(__name__)

#: BrokerConfig fields read at every use: a running broker takes a new value at once.
LIVE_BROKER_FIELDS = frozenset({
    "broker_permission", "auto_create_topic_enable", "auto_create_subscription_group",
    "long_polling_enable", "short_polling_time_mills", "notify_consumer_ids_changed_enable",
    "wait_time_mills_in_send_queue", "broker_fast_failure_enable", "reject_transaction_message",
    "trace_on", "slave_read_enable",
})

#: Keys RocketMQ 4.9.8 refuses to change remotely (BrokerConfig.configBlackList): the file's
#: own path and the list itself.
CONFIG_BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})

#: Settings of RocketMQ's broker that rocketstore has fixed, because it lacks the feature, as
#: GET_BROKER_CONFIG shows them (tools read them: mqadmin exportConfigs fails without one).
FIXED_BROKER_PROPERTIES = {
    "filterServerNums": "0", "useTLS": "false",
    "configBlackList": ";".join(sorted(CONFIG_BLACK_LIST, key=lambda key: key != "configBlackList")),
}

_BROKER_FIELD_OF_KEY = {key: name for name, key in BROKER_PROPERTY_KEYS.items()}
_STORE_FIELD_OF_KEY = {key: name for name, key in PROPERTY_KEYS.items()}


@dataclass
class ConfigUpdate:
    """What an UPDATE_BROKER_CONFIG body asks, sorted by where each key goes."""

    #: live BrokerConfig changes (field -> value)
    broker: dict[str, Any] = field(default_factory=dict)
    #: live StoreConfig changes (field -> value)
    store: dict[str, Any] = field(default_factory=dict)
    #: BrokerConfig / StoreConfig changes written to the file only: they take effect at the
    #: next start
    at_restart_broker: dict[str, Any] = field(default_factory=dict)
    at_restart_store: dict[str, Any] = field(default_factory=dict)
    #: keys neither the broker nor the store has (ignored)
    unknown: list[str] = field(default_factory=list)
    #: what the properties file gets (key -> canonical text)
    persist: dict[str, str] = field(default_factory=dict)


def plan_update(config: BrokerConfig, store_config: StoreConfig, properties: Mapping[str, str]
                ) -> ConfigUpdate:
    """Sort and check ``properties`` (RocketMQ keys -> text); ValueError names the first bad
    key and changes nothing."""
    update = ConfigUpdate()
    for key, raw in properties.items():
        name = _BROKER_FIELD_OF_KEY.get(key)
        if name is not None:
            value = broker_value(key, raw)
            try:
                dataclasses.replace(config, **{name: value})
            except (TypeError, ValueError) as exc:
                raise ValueError(f"property {key!r} (field {name}): {exc}") from None
            (update.broker if name in LIVE_BROKER_FIELDS else update.at_restart_broker)[name] = value
        elif (name := _STORE_FIELD_OF_KEY.get(key)) is not None:
            # the store's own reading of the key: its conversion, checks and messages
            value = getattr(StoreConfig.from_properties(io.StringIO(f"{key}={escape_value(raw)}")), name)
            (update.store if name in LIVE_CONFIG_FIELDS else update.at_restart_store)[name] = value
        else:
            update.unknown.append(key)
            continue
        update.persist[key] = _text(value)
    # the keys together (one field's check may involve another)
    try:
        dataclasses.replace(config, **update.broker, **update.at_restart_broker)
        store_config.replace(**update.store, **update.at_restart_store)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    return update


def persist_update(path: str | os.PathLike[str], changes: Mapping[str, str]) -> None:
    """Set ``changes`` in the properties file at ``path`` (its other lines kept), atomically.
    The file is ISO-8859-1 as Java reads it (escape_value writes other characters as \\uXXXX)."""
    try:
        with open(path, encoding="latin-1", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    write_atomically(path, update_properties_text(text, changes).encode("latin-1"))


def describe(update: ConfigUpdate) -> str:
    parts = [f"{k}={quote(v, 100)}" for k, v in update.persist.items()]
    later = [BROKER_PROPERTY_KEYS[n] for n in update.at_restart_broker] + \
        [PROPERTY_KEYS[n] for n in update.at_restart_store]
    if later:
        parts.append(f"(at the next start: {', '.join(later)})")
    if update.unknown:
        parts.append(f"(ignored, not a setting: {quote(', '.join(update.unknown), 300)})")
    return " ".join(parts)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
