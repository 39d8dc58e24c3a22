"""The name server's KV config (RocketMQ's KVConfigManager) and its own settings over the wire:
PUT_KV_CONFIG 100, GET_KV_CONFIG 101, DELETE_KV_CONFIG 102, GET_KVLIST_BY_NAMESPACE 219
(``mqadmin updateKvConfig`` / ``deleteKvConfig`` / ``updateOrderConf``), GET_NAMESRV_CONFIG 319
and UPDATE_NAMESRV_CONFIG 318 (``getNamesrvConfig`` / ``updateNamesrvConfig``).

The table is namespace -> key -> value, kept in ``kvConfigPath`` as RocketMQ's
``{"configTable": {...}}`` (written atomically after each change; a file that cannot be read
is logged, naming it, and the table starts empty, as RocketMQ does). With
``orderMessageEnable`` a route carries ``orderTopicConf`` from namespace ORDER_TOPIC_CONFIG.

UPDATE_NAMESRV_CONFIG answers as RocketMQ 4.9.8: NO_PERMISSION "Can not update config in black
list." for configBlackList, configStorePath and kvConfigPath; keys that are no setting are
ignored. ``orderMessageEnable`` takes effect at once, the other settings at the next start;
all are written to the properties file the name server was started with (if any). A bad value
is refused (SYSTEM_ERROR naming the key), where RocketMQ keeps the old value silently.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson

from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    parse_properties,
    update_properties_text,
)
from rocketstore.common.text import quote
from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import require_str

log = logging.getLogger(__name__)

#: The namespace of ``updateOrderConf``: topic -> "brokerName:queueNums;..."
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
#: Keys RocketMQ 4.9.8 refuses to change remotely (NamesrvConfig.configBlackList).
CONFIG_BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath")
#: NamesrvConfig fields read at every use.
LIVE_FIELDS = frozenset({"order_message_enable"})


class KVConfigManager:
    def __init__(self, path: str) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = orjson.loads(f.read())
            table = data.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in items.items()} for ns, items in table.items()}
        except FileNotFoundError:
            return
        except (OSError, orjson.JSONDecodeError, AttributeError) as exc:
            log.warning("KV config file %s not loaded, starting empty: %s", self.path, quote(str(exc), 300))

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        items = self.table.get(namespace)
        if items is not None and items.pop(key, None) is not None:
            if not items:
                del self.table[namespace]
            self.persist()

    def persist(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        write_atomically(self.path, orjson.dumps({"configTable": self.table}, option=orjson.OPT_INDENT_2))


def config_properties(config: NamesrvConfig) -> dict[str, str]:
    """Every setting as RocketMQ's Configuration shows it (camelCase key -> text)."""
    values = {camel_case(f.name): getattr(config, f.name) for f in dataclasses.fields(config)}
    values["configBlackList"] = ";".join(CONFIG_BLACK_LIST)
    out = {}
    for key, value in values.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, float) and value.is_integer():
            out[key] = str(int(value))
        else:
            out[key] = str(value)
    return out


class NamesrvConfigProcessor:
    def __init__(self, kv: KVConfigManager, get_config: Callable[[], NamesrvConfig],
                 set_config: Callable[[NamesrvConfig], None], config_file: str | None) -> None:
        self.kv = kv
        self.get_config = get_config
        self.set_config = set_config
        self.config_file = config_file

    def register_with(self, server: RemotingServer) -> None:
        for code, handler in (
            (RequestCode.PUT_KV_CONFIG, self.put_kv_config),
            (RequestCode.GET_KV_CONFIG, self.get_kv_config),
            (RequestCode.DELETE_KV_CONFIG, self.delete_kv_config),
            (RequestCode.GET_KVLIST_BY_NAMESPACE, self.get_kv_list_by_namespace),
            (RequestCode.GET_NAMESRV_CONFIG, self.get_namesrv_config),
            (RequestCode.UPDATE_NAMESRV_CONFIG, self.update_namesrv_config),
        ):
            server.register_processor(code, handler)

    def put_kv_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        namespace, key, value = require_str(ext, "namespace"), require_str(ext, "key"), require_str(ext, "value")
        self.kv.put(namespace, key, value)
        log.info("KV config %s/%s set to %s by %s", quote(namespace), quote(key), quote(value), ctx.remote_address)
        return create_response(request)

    def get_kv_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        namespace, key = require_str(request.ext_fields, "namespace"), require_str(request.ext_fields, "key")
        value = self.kv.get(namespace, key)
        if value is None:
            return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                                   f"No config item, Namespace: {namespace} Key: {key}")
        return create_response(request, ext_fields={"value": value})

    def delete_kv_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        namespace, key = require_str(request.ext_fields, "namespace"), require_str(request.ext_fields, "key")
        self.kv.delete(namespace, key)
        return create_response(request)

    def get_kv_list_by_namespace(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        namespace = require_str(request.ext_fields, "namespace")
        items = self.kv.table.get(namespace)
        if not items:
            return create_response(request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return create_response(request, body=orjson.dumps({"table": items}))

    def order_topic_conf(self, topic: str) -> str | None:
        """What a route of ``topic`` carries as orderTopicConf (None: nothing)."""
        if not self.get_config().order_message_enable:
            return None
        return self.kv.get(ORDER_TOPIC_CONFIG, topic)

    def get_namesrv_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in sorted(config_properties(self.get_config()).items()))
        return create_response(request, body=text.encode())

    def update_namesrv_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = request.body_bytes()
        if not body:
            return create_response(request)
        try:
            properties = parse_properties(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return create_response(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if set(CONFIG_BLACK_LIST) & properties.keys():
            return create_response(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        config = self.get_config()
        fields = {camel_case(f.name): f for f in dataclasses.fields(config)}
        live: dict[str, Any] = {}
        persist: dict[str, str] = {}
        for key, raw in properties.items():
            f = fields.get(key)
            if f is None:
                log.warning("UPDATE_NAMESRV_CONFIG: ignoring %s: not a name server setting", quote(key))
                continue
            try:
                value = convert_value(f.type, raw.strip())
                config.replace(**{f.name: value})
            except (TypeError, ValueError) as exc:
                return create_response(request, ResponseCode.SYSTEM_ERROR, f"property {key!r} (field {f.name}): {exc}")
            persist[key] = config_properties(config.replace(**{f.name: value}))[key]
            if f.name in LIVE_FIELDS:
                live[f.name] = value
        if persist and self.config_file is not None:
            try:
                with open(self.config_file, encoding="latin-1", newline="") as fh:
                    text = fh.read()
            except FileNotFoundError:
                text = ""
            write_atomically(self.config_file, update_properties_text(text, persist).encode("latin-1"))
        if live:
            self.set_config(config.replace(**live))
        log.info("name server config updated by %s: %s", ctx.remote_address, quote(persist, 500))
        return create_response(request)
