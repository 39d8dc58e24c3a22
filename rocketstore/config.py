"""Store configuration: RocketMQ 4.9's ``MessageStoreConfig``, in Python.

:class:`StoreConfig` has one field for every field of Apache RocketMQ 4.9.x's
``org.apache.rocketmq.store.config.MessageStoreConfig``, named in snake_case and with the same
default value, plus rocketstore-only fields (``store_host``, ``read_only``,
``commit_log_prefault_ahead``, ``commit_log_write_through`` and the disk watermarks
``disk_space_clean_forcibly_ratio`` and ``disk_space_warning_level_ratio``, system properties
in RocketMQ 4.9).

Broker ``.properties`` files are read with :meth:`StoreConfig.from_properties` and written with
:meth:`StoreConfig.to_properties`. Keys are the ones RocketMQ's broker reads (``MixAll.
properties2Object``: the setter name less ``set``, first letter lower-cased), for example
``mappedFileSizeCommitLog``, ``checkCRCOnRecover``, ``destroyMapedFileIntervalForcibly`` or
``dLegerGroup``. :data:`PROPERTY_KEYS` maps every field to its key.

Every value is checked when a config is made (``__post_init__``): a wrong type raises
``TypeError`` and a bad value ``ValueError``, and the message starts with the field's name.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import IO, Any, Literal

from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    escape_value,
    java_trim,
    parse_properties,
    read_properties_text,
)

__all__ = [
    "PROPERTY_KEYS",
    "BrokerRole",
    "FlushDiskType",
    "StoreConfig",
]

_log = logging.getLogger(__name__)

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1

#: The unit of a ConsumeQueue entry (ConsumeQueue.CQ_STORE_UNIT_SIZE).
_CQ_STORE_UNIT_SIZE = 20


class FlushDiskType(str, enum.Enum):
    """``org.apache.rocketmq.store.config.FlushDiskType``."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(str, enum.Enum):
    """``org.apache.rocketmq.store.config.BrokerRole``."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


#: FlushDiskType's and BrokerRole's values, as a type checker sees a string given for one
FlushDiskTypeName = Literal["ASYNC_FLUSH", "SYNC_FLUSH"]
BrokerRoleName = Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]


# --------------------------------------------------------------------------------------------
# Field specifications: how each field is typed, bounded and spelled in a .properties file.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    kind: str  # "bool", "int", "str", "enum", "host"
    key: str | None = None  # camelCase property key when not derivable from the field name
    low: int | None = None
    high: int | None = None
    multiple_of: int | None = None
    optional: bool = False  # None allowed (Java null)
    path: bool = False  # str or os.PathLike, normalised to str; must not be empty
    enum_type: type[enum.Enum] | None = None
    check: Callable[[str], str] | None = None  # validates (and may normalise) a str value


def _bool(default: bool, *, key: str | None = None) -> Any:
    return field(default=default, metadata={"spec": _Spec("bool", key=key)})


def _int(
    default: int,
    *,
    low: int = 0,
    high: int = JAVA_INT_MAX,
    multiple_of: int | None = None,
    key: str | None = None,
) -> Any:
    """An int field; ``high`` defaults to the Java ``int`` range (pass JAVA_LONG_MAX for long)."""
    spec = _Spec("int", key=key, low=low, high=high, multiple_of=multiple_of)
    return field(default=default, metadata={"spec": spec})


def _str(
    default: str | None,
    *,
    optional: bool = False,
    path: bool = False,
    check: Callable[[str], str] | None = None,
    key: str | None = None,
) -> Any:
    spec = _Spec("str", key=key, optional=optional, path=path, check=check)
    return field(default=default, metadata={"spec": spec})


def _enum(default: enum.Enum) -> Any:
    spec = _Spec("enum", enum_type=type(default))
    return field(default=default.value, metadata={"spec": spec})


def _default_root_dir() -> str:
    # RocketMQ: System.getProperty("user.home") + File.separator + "store"
    return os.path.join(os.path.expanduser("~"), "store")


_DELETE_WHEN_RE = re.compile(r"[0-9]+")
_DELAY_LEVEL_RE = re.compile(r"[0-9]+[smhd]")
_PORT_RE = re.compile(r"[0-9]{1,5}")


def _check_delete_when(value: str) -> str:
    # UtilAll.isItTimeToDo: hours of the day separated by ';', each parsed with parseInt.
    for part in value.split(";"):
        if not _DELETE_WHEN_RE.fullmatch(part) or int(part) > 23:
            raise ValueError(f"must be hours 0..23 separated by ';' (e.g. '04' or '04;16'), got {value!r}")
    return value


def _check_delay_levels(value: str) -> str:
    # ScheduleMessageService.parseDelayLevel: levels separated by one space, each <n><s|m|h|d>.
    if not all(_DELAY_LEVEL_RE.fullmatch(level) for level in value.split(" ")):
        raise ValueError(
            f"must be delays like '1s 5m 2h 1d' separated by single spaces, got {value!r}"
        )
    return value


def _check_store_host(value: str) -> str:
    """Validate ``a.b.c.d:port`` or ``[v6]:port``; returns it with the address in canonical form."""
    host, sep, port = value.rpartition(":")
    if not sep or not _PORT_RE.fullmatch(port) or int(port) > 65535:
        raise ValueError(f"must be 'a.b.c.d:port' or '[v6]:port' with port 0..65535, got {value!r}")
    try:
        if host.startswith("[") and host.endswith("]"):
            addr: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(host[1:-1])
            if addr.scope_id is not None:
                raise ValueError("scope id")
            return f"[{addr.compressed}]:{int(port)}"
        addr = ipaddress.IPv4Address(host)
        return f"{addr.compressed}:{int(port)}"
    except ValueError:
        raise ValueError(
            f"must be 'a.b.c.d:port' or '[v6]:port' with an IP address (no host name, no "
            f"scope id), got {value!r}"
        ) from None


# --------------------------------------------------------------------------------------------
# The config
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class StoreConfig:
    """Configuration of a message store: RocketMQ 4.9.x ``MessageStoreConfig``, same defaults.

    Fields follow the Java class in order. Differences from RocketMQ, all deliberate:

    - ``store_path_root_dir`` defaults to ``~/store`` expanded when the config is made (Java:
      ``user.home + "/store"``).
    - ``store_path_commit_log`` defaults to ``None``, meaning ``<store_path_root_dir>/commitlog``
      (see :attr:`commit_log_path`). RocketMQ 4.9 defaults it to ``~/store/commitlog`` whatever
      the root dir is; 5.x made it ``null`` with the same meaning as here. As in RocketMQ, it
      may hold several directories separated by ``,``.
    - ``flush_disk_type`` and ``broker_role`` hold the enum's plain string value; a
      :class:`FlushDiskType` / :class:`BrokerRole` member is accepted and normalised, and
      compares equal to the string either way.
    - Values RocketMQ would accept and misbehave on (negative sizes, a ConsumeQueue file size
      that is not a multiple of 20 bytes, ratios outside 0..100, unparsable ``delete_when`` or
      ``message_delay_level``, ints outside the Java ``int``/``long`` range) are rejected.
      ``disk_max_used_space_ratio`` keeps the configured value; RocketMQ's getter clamps it to
      10..95 when used, and ``transient_store_pool_enable`` only takes effect with
      ``ASYNC_FLUSH`` on a non-``SLAVE`` broker (as RocketMQ's getter says).
    - ``store_host``, ``read_only``, ``commit_log_prefault_ahead`` and
      ``commit_log_write_through`` are rocketstore's own;
      ``disk_space_clean_forcibly_ratio`` (85) and ``disk_space_warning_level_ratio`` (90)
      are RocketMQ 4.9's system properties ``rocketmq.broker.diskSpace*Ratio`` (0.85, 0.90)
      as percent fields, which is what RocketMQ 5 made of them.
    """

    # The root directory in which the log data is kept.
    store_path_root_dir: str = field(
        default_factory=_default_root_dir, metadata={"spec": _Spec("str", path=True)}
    )
    # The CommitLog directory; None means <store_path_root_dir>/commitlog (see class docstring).
    store_path_commit_log: str | None = _str(None, optional=True, path=True)
    # Extra read-only CommitLog directories, separated by ','.
    read_only_commit_log_store_paths: str | None = _str(None, optional=True)
    # CommitLog file size, default 1 GiB.
    mapped_file_size_commit_log: int = _int(1024 * 1024 * 1024, low=1)
    # ConsumeQueue file size: 300,000 entries of 20 bytes.
    mapped_file_size_consume_queue: int = _int(
        300000 * _CQ_STORE_UNIT_SIZE, low=1, multiple_of=_CQ_STORE_UNIT_SIZE
    )
    enable_consume_queue_ext: bool = _bool(False)
    # ConsumeQueue extension file size, 48 MiB.
    mapped_file_size_consume_queue_ext: int = _int(48 * 1024 * 1024, low=1)
    # Bit count of the filter bit map.
    bit_map_length_consume_queue_ext: int = _int(64, low=1)
    # CommitLog flush interval (ms).
    flush_interval_commit_log: int = _int(500)
    # CommitLog commit interval (ms), only used with the transient store pool.
    commit_interval_commit_log: int = _int(200)
    use_reentrant_lock_when_put_message: bool = _bool(True)
    # Whether the flush service sleeps a fixed interval (True) or waits to be woken.
    flush_commit_log_timed: bool = _bool(True)
    flush_interval_consume_queue: int = _int(1000)
    clean_resource_interval: int = _int(10000)
    delete_commit_log_files_interval: int = _int(100)
    delete_consume_queue_files_interval: int = _int(100)
    destroy_mapedfile_interval_forcibly: int = _int(
        1000 * 120, key="destroyMapedFileIntervalForcibly"
    )
    redelete_hanged_file_interval: int = _int(1000 * 120)
    # Hours of the day at which expired files are deleted, ';'-separated.
    delete_when: str = _str("04", check=_check_delete_when)
    disk_max_used_space_ratio: int = _int(75, high=100)
    # Hours a CommitLog file is kept.
    file_reserved_time: int = _int(72)
    put_msg_index_hight_water: int = _int(600000, low=1)
    # Maximum message size, 4 MiB.
    max_message_size: int = _int(1024 * 1024 * 4, low=1)
    check_crc_on_recover: bool = _bool(True, key="checkCRCOnRecover")
    flush_commit_log_least_pages: int = _int(4)
    commit_commit_log_least_pages: int = _int(4)
    # RocketMQ: 1024 / 4 * 16 == 4096.
    flush_least_pages_when_warm_mapped_file: int = _int(
        1024 // 4 * 16, key="flushLeastPagesWhenWarmMapedFile"
    )
    flush_consume_queue_least_pages: int = _int(2)
    flush_commit_log_thorough_interval: int = _int(1000 * 10)
    commit_commit_log_thorough_interval: int = _int(200)
    flush_consume_queue_thorough_interval: int = _int(1000 * 60)
    max_transfer_bytes_on_message_in_memory: int = _int(1024 * 256, low=1)
    max_transfer_count_on_message_in_memory: int = _int(32, low=1)
    max_transfer_bytes_on_message_in_disk: int = _int(1024 * 64, low=1)
    max_transfer_count_on_message_in_disk: int = _int(8, low=1)
    access_message_in_memory_max_ratio: int = _int(40, high=100)
    message_index_enable: bool = _bool(True)
    max_hash_slot_num: int = _int(5000000, low=1)
    max_index_num: int = _int(5000000 * 4, low=1)
    max_msgs_num_batch: int = _int(64, low=1)
    message_index_safe: bool = _bool(False)
    ha_listen_port: int = _int(10912, high=65535)
    ha_send_heartbeat_interval: int = _int(1000 * 5)
    ha_housekeeping_interval: int = _int(1000 * 20)
    ha_transfer_batch_size: int = _int(1024 * 32, low=1)
    ha_master_address: str | None = _str(None, optional=True)
    ha_slave_fallbehind_max: int = _int(1024 * 1024 * 256)
    broker_role: BrokerRole | BrokerRoleName = _enum(BrokerRole.ASYNC_MASTER)
    flush_disk_type: FlushDiskType | FlushDiskTypeName = _enum(FlushDiskType.ASYNC_FLUSH)
    sync_flush_timeout: int = _int(1000 * 5)
    #: how long SYNC_MASTER waits for a slave's acknowledgement (RocketMQ 4.9.8's
    #: GroupTransferService deadline; FLUSH_SLAVE_TIMEOUT after it)
    slave_timeout: int = _int(1000 * 3)
    message_delay_level: str = _str(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", check=_check_delay_levels
    )
    flush_delay_offset_interval: int = _int(1000 * 10, high=JAVA_LONG_MAX)  # Java long
    clean_file_forcibly_enable: bool = _bool(True)
    warm_mapped_file_enable: bool = _bool(False, key="warmMapedFileEnable")
    offset_check_in_slave: bool = _bool(False)
    debug_lock_enable: bool = _bool(False)
    duplication_enable: bool = _bool(False)
    disk_fall_recorded: bool = _bool(True)
    os_page_cache_busy_timeout_mills: int = _int(
        1000, high=JAVA_LONG_MAX, key="osPageCacheBusyTimeOutMills"
    )  # Java long
    default_query_max_num: int = _int(32, low=1)
    transient_store_pool_enable: bool = _bool(False)
    transient_store_pool_size: int = _int(5, low=1)
    fast_fail_if_no_buffer_in_store_pool: bool = _bool(False)
    # DLedger (Raft) CommitLog.
    enable_dledger_commit_log: bool = _bool(False, key="enableDLegerCommitLog")
    dledger_group: str | None = _str(None, optional=True, key="dLegerGroup")
    dledger_peers: str | None = _str(None, optional=True, key="dLegerPeers")
    dledger_self_id: str | None = _str(None, optional=True, key="dLegerSelfId")
    preferred_leader_id: str | None = _str(None, optional=True)
    enable_batch_push: bool = _bool(False)  # Java field isEnableBatchPush, setter setEnableBatchPush
    enable_schedule_message_stats: bool = _bool(True)
    # Light message queue (LMQ) and multi-dispatch.
    enable_lmq: bool = _bool(False)
    enable_multi_dispatch: bool = _bool(False)
    max_lmq_consume_queue_num: int = _int(20000, low=1)
    # Asynchronous delivery of scheduled (delayed) messages.
    enable_schedule_async_deliver: bool = _bool(False)
    schedule_async_deliver_max_pending_limit: int = _int(2000, low=1)
    schedule_async_deliver_max_resend_num2_blocked: int = _int(3)

    # ---- rocketstore's own fields: NOT in RocketMQ's MessageStoreConfig ----
    # host:port written as STOREHOSTADDRESS and used in message ids; IPv6 as "[::1]:10911".
    # (RocketMQ takes it from the broker: brokerIP1 and the remoting listenPort.)
    store_host: str = field(
        default="127.0.0.1:10911", metadata={"spec": _Spec("host", check=_check_store_host)}
    )
    # Open the store without writing to it.
    read_only: bool = _bool(False)
    # Bytes of the CommitLog faulted in for writing ahead of the write position by a
    # background thread (CommitLogPrefaultService), so puts do not pay first-touch page
    # faults; 0 turns it off. Not used with the transient store pool (writes go to buffers).
    commit_log_prefault_ahead: int = _int(32 * 1024 * 1024, high=JAVA_LONG_MAX)
    # Disk usage (percent) over which expired or not, CommitLog files are deleted oldest first
    # (when clean_file_forcibly_enable), and over which puts are refused until usage is back
    # under it. RocketMQ 4.9 reads them from the system properties
    # rocketmq.broker.diskSpaceCleanForciblyRatio (0.85) and ...WarningLevelRatio (0.90);
    # RocketMQ 5 made them these MessageStoreConfig fields.
    disk_space_clean_forcibly_ratio: int = _int(85, high=100)
    disk_space_warning_level_ratio: int = _int(90, high=100)
    # SYNC_FLUSH only: producers append CommitLog records into a buffer, and each group
    # commit hands them to the file with one pwrite and makes them durable with one
    # fdatasync (only the blocks written are dirty). False: records go through the mapping
    # and each group commit msyncs the range (the kernel writes back whole page-cache
    # folios, and write-protects pages the producers are still filling).
    commit_log_write_through: bool = _bool(True)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, _validate(f.name, f.metadata["spec"], getattr(self, f.name)))

    # ---- derived values ----

    @property
    def commit_log_path(self) -> str:
        """The effective CommitLog directory: ``store_path_commit_log`` or ``<root>/commitlog``."""
        if self.store_path_commit_log is not None:
            return self.store_path_commit_log
        return os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def delay_levels_ms(self) -> list[int]:
        """``message_delay_level`` in milliseconds, level 1 first."""
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        return [int(level[:-1]) * units[level[-1]] for level in self.message_delay_level.split(" ")]

    # ---- copies ----

    def replace(self, **changes: Any) -> StoreConfig:
        """A copy with ``changes`` applied (``dataclasses.replace``), validated like a new one."""
        return dataclasses.replace(self, **changes)

    # ---- .properties ----

    @classmethod
    def from_properties(
        cls, source: str | os.PathLike[str] | IO[str] | IO[bytes], **overrides: Any
    ) -> StoreConfig:
        """Read a broker ``.properties`` file: a path, or a file object open for reading.

        Java ``Properties.load`` syntax: ``#``/``!`` comments, ``key=value``, ``key:value`` and
        ``key value``, lines continued by a trailing backslash, ``\\uXXXX`` and other backslash
        escapes. A path or a binary file is decoded as ISO-8859-1, as ``Properties.load
        (InputStream)`` does (write other characters as ``\\uXXXX``); a text file is used as is.

        Values are trimmed (as RocketMQ does for strings) and converted by the field's type:
        booleans ``true``/``false`` (any case), decimal ints. Keys that are not store settings
        (``brokerName``, ``namesrvAddr``, ``listenPort``, ...) are ignored and logged at debug
        level on the ``rocketstore.config`` logger. ``overrides`` (snake_case field names) win
        over the file. A bad value raises ``ValueError`` naming the key and the field.
        """
        data = read_properties_text(source)
        text = data.decode("latin-1") if isinstance(data, (bytes, bytearray)) else data
        values: dict[str, Any] = {}
        for key, raw in parse_properties(text).items():
            name = _KEY_TO_FIELD.get(key)
            if name is None:
                _log.debug("ignoring property %r: not a store setting", key)
                continue
            spec = _SPECS[name]
            try:
                values[name] = _validate(name, spec, _convert(name, spec, java_trim(raw)))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"property {key!r} (field {name}): {exc}") from exc
        values.update(overrides)
        return cls(**values)

    def to_properties(self, path: str | os.PathLike[str] | None = None) -> str:
        """This config as ``.properties`` text with RocketMQ's camelCase keys; given a path,
        the text is also written there (through a temp file renamed into place).

        Fields that are ``None`` are left out (RocketMQ's ``null``). Note that RocketMQ 4.9 reads
        a missing ``storePathCommitLog`` as ``~/store/commitlog``: set ``store_path_commit_log``
        when the file is meant for a Java broker. ``from_properties`` reads the text back to an
        equal config (string values are trimmed on reading, as RocketMQ does).
        """
        lines = ["# rocketstore StoreConfig (RocketMQ 4.9 MessageStoreConfig keys)"]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            lines.append(f"{PROPERTY_KEYS[f.name]}={escape_value(text)}")
        text = "\n".join(lines) + "\n"
        if path is not None:
            write_atomically(path, text)
        return text


# --------------------------------------------------------------------------------------------
# Validation and conversion
# --------------------------------------------------------------------------------------------


def _describe_int(spec: _Spec) -> str:
    low, high = spec.low, spec.high
    assert low is not None and high is not None
    if spec.multiple_of is not None:
        return f"a positive multiple of {spec.multiple_of}"
    if high in (JAVA_INT_MAX, JAVA_LONG_MAX):
        return "a positive int" if low == 1 else "a non-negative int"
    return f"an int in {low}..{high}"


def _validate(name: str, spec: _Spec, value: Any) -> Any:
    """Check ``value`` for field ``name``; returns it normalised. Messages start with ``name``."""
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
        return value
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
        value = int(value)
        assert spec.low is not None and spec.high is not None
        if value < spec.low or (spec.multiple_of and value % spec.multiple_of):
            raise ValueError(f"{name} must be {_describe_int(spec)}, got {value!r}")
        if value > spec.high:
            if spec.high == JAVA_INT_MAX:
                limit = f"fit a Java int (at most {JAVA_INT_MAX})"
            elif spec.high == JAVA_LONG_MAX:
                limit = f"fit a Java long (at most {JAVA_LONG_MAX})"
            else:
                limit = f"be {_describe_int(spec)}"
            raise ValueError(f"{name} must {limit}, got {value!r}")
        return value
    if spec.kind == "enum":
        assert spec.enum_type is not None
        names = [m.value for m in spec.enum_type]
        if isinstance(value, spec.enum_type):
            return value.value
        if not isinstance(value, str):
            raise TypeError(
                f"{name} must be a {spec.enum_type.__name__} or one of {names}, got {value!r}"
            )
        if value not in names:
            raise ValueError(f"{name} must be one of {names}, got {value!r}")
        return str.__str__(value)
    # "str" and "host"
    if value is None and spec.optional:
        return None
    if spec.path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        expected = "a str or os.PathLike" if spec.path else "a str"
        if spec.optional:
            expected += " or None"
        raise TypeError(f"{name} must be {expected}, got {value!r} ({type(value).__name__})")
    value = str.__str__(value)  # a plain str, also for str subclasses such as str enums
    if spec.path and not value:
        raise ValueError(f"{name} must not be empty")
    if spec.check is not None:
        try:
            value = spec.check(value)
        except ValueError as exc:
            raise ValueError(f"{name} {exc}") from None
    return value


def _convert(name: str, spec: _Spec, text: str) -> Any:
    """Convert a trimmed property value to the field's Python type."""
    if spec.kind not in ("bool", "int"):
        return text
    try:
        return convert_value(spec.kind, text)
    except ValueError as exc:
        raise ValueError(f"{name} {exc}") from None


# --------------------------------------------------------------------------------------------
# Field <-> property key tables
# --------------------------------------------------------------------------------------------


_SPECS: dict[str, _Spec] = {f.name: f.metadata["spec"] for f in dataclasses.fields(StoreConfig)}

#: Every StoreConfig field (snake_case) -> its RocketMQ ``.properties`` key (camelCase).
PROPERTY_KEYS: Mapping[str, str] = MappingProxyType(
    {name: spec.key or camel_case(name) for name, spec in _SPECS.items()}
)

_KEY_TO_FIELD: dict[str, str] = {key: name for name, key in PROPERTY_KEYS.items()}

#: StoreConfig fields the store reads at every use: MessageStore.update_config changes them on
#: an open store (UPDATE_BROKER_CONFIG); the others need a restart.
LIVE_CONFIG_FIELDS = frozenset({
    "file_reserved_time", "delete_when", "disk_max_used_space_ratio", "clean_file_forcibly_enable",
    "disk_space_warning_level_ratio", "disk_space_clean_forcibly_ratio",
    "delete_commit_log_files_interval", "destroy_mapedfile_interval_forcibly",
    "redelete_hanged_file_interval", "access_message_in_memory_max_ratio",
    "max_transfer_bytes_on_message_in_memory", "max_transfer_count_on_message_in_memory",
    "max_transfer_bytes_on_message_in_disk", "max_transfer_count_on_message_in_disk",
    "default_query_max_num", "max_msgs_num_batch", "os_page_cache_busy_timeout_mills",
    "offset_check_in_slave", "flush_commit_log_least_pages", "flush_commit_log_thorough_interval",
    "commit_commit_log_least_pages", "commit_commit_log_thorough_interval",
    "flush_consume_queue_least_pages", "flush_consume_queue_thorough_interval",
})
