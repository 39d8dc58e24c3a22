"""Who is connected: producer groups and consumer groups with their connections and
subscriptions (RocketMQ's ProducerManager, ConsumerManager, ConsumerGroupInfo), filled by
HEART_BEAT and emptied by UNREGISTER_CLIENT, closed connections and silence
(``channelExpiredTimeout``, 120 s).

When the client ids of a consumer group change, ``on_group_changed(group, connections)`` is
called so the broker can send NOTIFY_CONSUMER_IDS_CHANGED to the group's members (they
rebalance at once instead of at their next 20 s round).

A member is a (connection, client id) pair: RocketMQ's own clients use one connection per
client instance, but a client may carry several instances over one connection, and each must
count as a member of its group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketstore.common.subscription import EXPRESSION_TYPE_TAG, SUB_ALL
from rocketstore.common.text import is_ascii_int, quote
from rocketstore.remoting import RemotingConnection

log = logging.getLogger(__name__)

#: Java enum names, by the ordinals the C++ client sends.
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP",
             "GO", "PHP", "OMS")



def enum_name(value: Any, names: tuple[str, ...], what: str) -> str:
    """A Java enum sent by name (Java clients) or by ordinal (the C++ client)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be one of {names}, got {quote(value)}")
    if isinstance(value, int) or (isinstance(value, str) and is_ascii_int(value)):
        index = int(value)
        if 0 <= index < len(names):
            return names[index]
    elif isinstance(value, str) and value in names:
        return value
    raise ValueError(f"{what} must be one of {names}, got {value!r:.60}")


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": self.class_filter_mode, "codeSet": self.code_set,
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": self.tags_set, "topic": self.topic}

    @classmethod
    def from_json(cls, data: Any) -> SubscriptionData:
        if not isinstance(data, dict) or not isinstance(data.get("topic"), str):
            raise ValueError("subscriptionDataSet entries must be objects with a topic")
        tags = data.get("tagsSet") or []
        codes = data.get("codeSet") or []
        version = data.get("subVersion", 0)
        if isinstance(version, str) and is_ascii_int(version, signed=True):
            version = int(version)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"subVersion must be an integer, got {version!r:.60}")
        return cls(
            topic=data["topic"],
            sub_string=str(data.get("subString") or SUB_ALL),
            tags_set=[str(t) for t in tags] if isinstance(tags, list) else [],
            code_set=[c for c in codes if isinstance(c, int)] if isinstance(codes, list) else [],
            sub_version=version,
            expression_type=str(data.get("expressionType") or EXPRESSION_TYPE_TAG),
            class_filter_mode=bool(data.get("classFilterMode", False)),
        )


@dataclass
class ClientChannelInfo:
    connection: RemotingConnection
    client_id: str
    language: str
    version: int
    last_update_ms: float

    def to_connection_json(self) -> dict[str, Any]:
        """RocketMQ's Connection (consumer/producer connection lists)."""
        return {"clientAddr": self.connection.remote_address, "clientId": self.client_id,
                "language": self.language, "version": self.version}


#: (connection, client id): one member of a group.
MemberKey = tuple[RemotingConnection, str]


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[MemberKey, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: float = 0.0

    def client_ids(self) -> list[str]:
        return sorted({info.client_id for info in self.channels.values()})

    def connections(self) -> list[RemotingConnection]:
        return list(dict.fromkeys(info.connection for info in self.channels.values()))

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        return self.subscriptions.get(topic)


GroupChanged = Callable[[str, list[RemotingConnection]], None]


def _now_ms() -> float:
    return time.time() * 1000


class ConsumerManager:
    def __init__(self, channel_expired_timeout_ms: int = 120_000,
                 on_group_changed: GroupChanged | None = None,
                 clock_ms: Callable[[], float] = _now_ms) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self.on_group_changed = on_group_changed
        self._clock_ms = clock_ms

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def register(self, group: str, channel: ClientChannelInfo, consume_type: str,
                 message_model: str, consume_from_where: str,
                 subscriptions: Iterable[SubscriptionData], notify: bool) -> bool:
        """A consumer's heartbeat; True when the group's members changed."""
        now = self._clock_ms()
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group, consume_type, message_model,
                                                          consume_from_where)
        info.consume_type, info.message_model = consume_type, message_model
        info.consume_from_where = consume_from_where
        info.last_update_ms = now
        key = (channel.connection, channel.client_id)
        changed = key not in info.channels
        if changed:
            log.info("consumer %s of group %s registered from %s", quote(channel.client_id),
                     quote(group), channel.connection.remote_address)
        channel.last_update_ms = now
        info.channels[key] = channel
        subs = {sub.topic: sub for sub in subscriptions}
        for topic, sub in subs.items():
            old_sub = info.subscriptions.get(topic)
            if old_sub is None or sub.sub_version > old_sub.sub_version:
                info.subscriptions[topic] = sub
        for topic in [t for t in info.subscriptions if t not in subs]:
            # the newest heartbeat says what the group subscribes to
            del info.subscriptions[topic]
        if changed and notify:
            self._notify(info)
        return changed

    def unregister(self, group: str, connection: RemotingConnection, client_id: str,
                   notify: bool) -> bool:
        info = self.groups.get(group)
        if info is None or info.channels.pop((connection, client_id), None) is None:
            return False
        log.info("consumer of group %s at %s unregistered", quote(group), connection.remote_address)
        if not info.channels:
            del self.groups[group]
        elif notify:
            self._notify(info)
        return True

    def connection_closed(self, connection: RemotingConnection, notify_group: Callable[[str], bool]) -> None:
        for group, info in list(self.groups.items()):
            gone = [key for key in info.channels if key[0] is connection]
            for key in gone:
                del info.channels[key]
            if gone:
                if not info.channels:
                    del self.groups[group]
                elif notify_group(group):
                    self._notify(info)

    def scan_not_active(self, notify_group: Callable[[str], bool]) -> list[RemotingConnection]:
        """Drop members silent for longer than the expiry; returns their connections."""
        now = self._clock_ms()
        dropped = []
        for group, info in list(self.groups.items()):
            expired = [key for key, ch in info.channels.items()
                       if now - ch.last_update_ms > self.channel_expired_timeout_ms]
            for key in expired:
                log.warning("consumer %s of group %s silent for %.0f s: dropped", quote(key[1]),
                            quote(group), (now - info.channels[key].last_update_ms) / 1000)
                del info.channels[key]
                dropped.append(key[0])
            if not info.channels:
                del self.groups[group]
            elif expired and notify_group(group):
                self._notify(info)
        return dropped

    def groups_of_topic(self, topic: str) -> list[str]:
        return [g for g, info in self.groups.items() if topic in info.subscriptions]

    def connection_in_use(self, connection: RemotingConnection) -> bool:
        return any(key[0] is connection for info in self.groups.values() for key in info.channels)

    def _notify(self, info: ConsumerGroupInfo) -> None:
        if self.on_group_changed is not None:
            try:
                self.on_group_changed(info.group_name, info.connections())
            except Exception:
                log.exception("notifying group %s failed", quote(info.group_name))


class ProducerManager:
    def __init__(self, channel_expired_timeout_ms: int = 120_000,
                 clock_ms: Callable[[], float] = _now_ms) -> None:
        self.groups: dict[str, dict[MemberKey, ClientChannelInfo]] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self._clock_ms = clock_ms

    def register(self, group: str, channel: ClientChannelInfo) -> None:
        channels = self.groups.setdefault(group, {})
        channel.last_update_ms = self._clock_ms()
        channels[(channel.connection, channel.client_id)] = channel

    def unregister(self, group: str, connection: RemotingConnection, client_id: str) -> None:
        channels = self.groups.get(group)
        if channels is not None:
            channels.pop((connection, client_id), None)
            if not channels:
                del self.groups[group]

    def connection_closed(self, connection: RemotingConnection) -> None:
        for group, channels in list(self.groups.items()):
            for key in [k for k in channels if k[0] is connection]:
                del channels[key]
            if not channels:
                del self.groups[group]

    def connection_in_use(self, connection: RemotingConnection) -> bool:
        return any(key[0] is connection for channels in self.groups.values() for key in channels)

    def scan_not_active(self) -> list[RemotingConnection]:
        now = self._clock_ms()
        dropped = []
        for group, channels in list(self.groups.items()):
            for key, ch in list(channels.items()):
                if now - ch.last_update_ms > self.channel_expired_timeout_ms:
                    log.warning("producer %s of group %s silent: dropped", quote(ch.client_id),
                                quote(group))
                    del channels[key]
                    dropped.append(key[0])
            if not channels:
                del self.groups[group]
        return dropped
