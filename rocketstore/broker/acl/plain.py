"""``plain_acl.yml``: RocketMQ 4.x plain ACL's accounts and white lists (PlainPermissionManager,
PlainAccessConfig, Permission, RemoteAddressStrategyFactory), read, checked and written.

::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY]

Permissions: DENY 1, ANY 2, PUB 4, SUB 8 (``PUB|SUB`` both); an unknown text is DENY, as
RocketMQ parses it. Groups are kept under their retry topic (``%RETRY%groupA``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from rocketstore.common.text import quote
from rocketstore.common.topics import RETRY_GROUP_TOPIC_PREFIX, retry_topic

log = logging.getLogger("rocketstore.broker.acl")

DENY = 1
ANY = 2
PUB = 4
SUB = 8
_PERM_TEXT = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
#: RocketMQ's AclUtils: both keys longer than this
MIN_KEY_LENGTH = 6


def parse_perm(text: str | None) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB, DENY; anything else DENY."""
    return _PERM_TEXT.get((text or "").strip().upper(), DENY)


def perm_text(perm: int) -> str:
    if perm & PUB and perm & SUB:
        return "PUB|SUB"
    return "PUB" if perm & PUB else "SUB" if perm & SUB else "DENY"


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def resource_text(resource: str) -> str:
    """PlainAccessResource.printStr: ``group:G`` or ``topic:T``."""
    if is_group_resource(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


class RemoteAddressPattern:
    """A white-list entry (RemoteAddressStrategyFactory): ``*`` (or ``*.*.*.*``), an address,
    ``a.b.c.{1,2,3}``, or dotted parts each ``*``, ``n`` or ``n-m`` (``192.168.*.*``,
    ``10.0.0.1-20``). ValueError names a bad one."""

    def __init__(self, text: str) -> None:
        self.text = text = text.strip()
        self._all = text in ("*", "*.*.*.*")
        self._exact: str | None = None
        self._parts: list[tuple[int, int]] = []
        self._choices: tuple[str, frozenset[str]] | None = None
        if self._all:
            return
        if "{" in text:
            prefix, _, rest = text.partition("{")
            if not rest.endswith("}") or not prefix.endswith("."):
                raise ValueError(f"bad white remote address {text!r}")
            choices = frozenset(c.strip() for c in rest[:-1].split(","))
            for choice in choices:
                _number_part(choice, text)
            self._choices = (prefix, choices)
            return
        if ":" in text:     # IPv6: exact only
            try:
                self._exact = str(ipaddress.ip_address(text))
            except ValueError:
                raise ValueError(f"bad white remote address {text!r}") from None
            return
        parts = text.split(".")
        if len(parts) != 4:
            raise ValueError(f"bad white remote address {text!r}: an IPv4 address or pattern has 4 parts")
        for part in parts:
            if part == "*":
                self._parts.append((0, 255))
            elif "-" in part:
                low, _, high = part.partition("-")
                bounds = (_number_part(low, text), _number_part(high, text))
                if bounds[0] > bounds[1]:
                    raise ValueError(f"bad white remote address {text!r}: range {part}")
                self._parts.append(bounds)
            else:
                n = _number_part(part, text)
                self._parts.append((n, n))

    def match(self, host: str) -> bool:
        if self._all:
            return True
        if self._exact is not None:
            try:
                return str(ipaddress.ip_address(host)) == self._exact
            except ValueError:
                return False
        if self._choices is not None:
            prefix, choices = self._choices
            return host.startswith(prefix) and host[len(prefix):] in choices
        parts = host.split(".")
        if len(parts) != 4:
            return False
        for part, (low, high) in zip(parts, self._parts, strict=True):
            if not part.isdigit() or not low <= int(part) <= high:
                return False
        return True


def _number_part(part: str, text: str) -> int:
    part = part.strip()
    if not part.isdigit() or int(part) > 255:
        raise ValueError(f"bad white remote address {text!r}: {part!r} is not 0-255")
    return int(part)


def address_patterns(value: Any, what: str) -> list[RemoteAddressPattern]:
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    try:
        return [RemoteAddressPattern(str(item)) for item in items if str(item).strip()]
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


@dataclass
class Account:
    """One of ``accounts`` (PlainAccessConfig / PlainAccessResource)."""

    access_key: str
    secret_key: str
    white_remote_address: str = ""
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    #: resource (a topic, or a group's retry topic) -> permission
    perms: dict[str, int] = field(default_factory=dict)
    #: the texts as written (topicPerms / groupPerms), to write back unchanged
    topic_perms: list[str] = field(default_factory=list)
    group_perms: list[str] = field(default_factory=list)
    white: list[RemoteAddressPattern] = field(default_factory=list)

    @classmethod
    def from_yaml(cls, data: Any) -> Account:
        if not isinstance(data, dict):
            raise ValueError(f"an account must be a mapping, got {quote(data)}")
        access_key, secret_key = data.get("accessKey"), data.get("secretKey")
        if not access_key or not secret_key:
            raise ValueError(f"an account needs accessKey and secretKey: {quote(data)}")
        access_key, secret_key = str(access_key), str(secret_key)
        white = "" if data.get("whiteRemoteAddress") is None else str(data["whiteRemoteAddress"])
        account = cls(access_key, secret_key, white, _bool(data.get("admin")),
                      parse_perm(data.get("defaultTopicPerm")), parse_perm(data.get("defaultGroupPerm")),
                      white=address_patterns(white, f"whiteRemoteAddress of {access_key}"))
        account.set_perms([str(p) for p in data.get("topicPerms") or ()],
                          [str(p) for p in data.get("groupPerms") or ()])
        return account

    def set_perms(self, topic_perms: list[str], group_perms: list[str]) -> None:
        perms: dict[str, int] = {}
        for entries, is_group in ((topic_perms, False), (group_perms, True)):
            for entry in entries:
                name, sep, perm = entry.partition("=")
                if not sep or not name.strip():
                    raise ValueError(f"{'groupPerms' if is_group else 'topicPerms'} of {self.access_key}: "
                                     f"{quote(entry)} is not NAME=PERM")
                name = name.strip()
                perms[retry_topic(name) if is_group else name] = parse_perm(perm)
        self.topic_perms, self.group_perms, self.perms = list(topic_perms), list(group_perms), perms

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"accessKey": self.access_key, "secretKey": self.secret_key,
                                "whiteRemoteAddress": self.white_remote_address or None,
                                "admin": self.admin,
                                "defaultTopicPerm": perm_text(self.default_topic_perm),
                                "defaultGroupPerm": perm_text(self.default_group_perm)}
        if self.topic_perms:
            data["topicPerms"] = list(self.topic_perms)
        if self.group_perms:
            data["groupPerms"] = list(self.group_perms)
        return data

    def white_listed(self, host: str) -> bool:
        return any(p.match(host) for p in self.white)


def _bool(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


@dataclass
class AclConfig:
    """The whole file: the global white list, the accounts, and its data version."""

    global_white: list[str] = field(default_factory=list)
    accounts: dict[str, Account] = field(default_factory=dict)
    #: dataVersion: counter, timestamp (ms); bumped on every change made through the broker
    counter: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    global_patterns: list[RemoteAddressPattern] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str, source: str = "plain_acl.yml") -> AclConfig:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{source}: not YAML: {str(exc)[:300]}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError(f"{source}: the top level must be a mapping, got {quote(data)}")
        config = cls()
        white = data.get("globalWhiteRemoteAddresses") or []
        config.global_white = [str(w) for w in (white if isinstance(white, list) else [white])]
        config.global_patterns = address_patterns(config.global_white, f"{source}: globalWhiteRemoteAddresses")
        for item in data.get("accounts") or []:
            try:
                account = Account.from_yaml(item)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
            config.accounts[account.access_key] = account
        versions = data.get("dataVersion")
        if isinstance(versions, list) and versions and isinstance(versions[0], dict):
            config.counter = int(versions[0].get("counter", 0) or 0)
            config.timestamp = int(versions[0].get("timestamp", config.timestamp) or config.timestamp)
        return config

    def dump(self) -> str:
        data: dict[str, Any] = {"globalWhiteRemoteAddresses": list(self.global_white),
                                "accounts": [a.to_yaml() for a in self.accounts.values()],
                                "dataVersion": [{"counter": self.counter, "timestamp": self.timestamp}]}
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)

    def next_version(self) -> None:
        self.counter += 1
        self.timestamp = int(time.time() * 1000)

    def version_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


class AclFile:
    """The ACL file of a broker: loaded at start, reloaded when its mtime or size changes
    (looked at no more often than ``check_interval_s``), written on changes made through
    the broker (atomically, then reloaded from what was written)."""

    def __init__(self, path: str, check_interval_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = os.path.abspath(path)
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._stamp: tuple[float, int] | None = None
        self._next_check = 0.0
        self.config = AclConfig()

    def _file_stamp(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def load(self) -> None:
        """Read the file (ValueError names what is wrong; a missing file: no accounts)."""
        stamp = self._file_stamp()
        if stamp is None:
            log.warning("ACL file %s does not exist: no account can sign requests", self.path)
            self.config = AclConfig()
        else:
            with open(self.path, encoding="utf-8") as f:
                self.config = AclConfig.parse(f.read(), self.path)
        self._stamp = stamp
        self._next_check = self._clock() + self.check_interval_s

    def current(self) -> AclConfig:
        """The config in force, reloaded first when the file changed (a broken file keeps the
        config in force and is logged)."""
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self.check_interval_s
            stamp = self._file_stamp()
            if stamp != self._stamp:
                try:
                    self.load()
                    log.info("ACL file %s reloaded: %d accounts", self.path, len(self.config.accounts))
                except (OSError, ValueError) as exc:
                    self._stamp = stamp
                    log.error("ACL file %s not reloaded, the previous accounts stay: %s", self.path, exc)
        return self.config

    def write(self, config: AclConfig) -> None:
        config.next_version()
        text = config.dump()
        tmp = f"{self.path}.tmp"
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.config = AclConfig.parse(text, self.path)
        self._stamp = self._file_stamp()
