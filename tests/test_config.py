"""Tests for rocketstore.config: RocketMQ 4.9 MessageStoreConfig defaults, .properties I/O."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import pathlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_fixture import require_fixture

from rocketstore.config import PROPERTY_KEYS, BrokerRole, FlushDiskType, StoreConfig

# --------------------------------------------------------------------------------------------
# Defaults: literal values from RocketMQ 4.9.x MessageStoreConfig.java
# --------------------------------------------------------------------------------------------

ROCKETMQ_DEFAULTS: dict[str, Any] = {
    "mapped_file_size_commit_log": 1073741824,  # 1024 * 1024 * 1024
    "mapped_file_size_consume_queue": 6000000,  # 300000 * CQ_STORE_UNIT_SIZE (20)
    "enable_consume_queue_ext": False,
    "mapped_file_size_consume_queue_ext": 50331648,  # 48 * 1024 * 1024
    "bit_map_length_consume_queue_ext": 64,
    "flush_interval_commit_log": 500,
    "commit_interval_commit_log": 200,
    "use_reentrant_lock_when_put_message": True,
    "flush_commit_log_timed": True,
    "flush_interval_consume_queue": 1000,
    "clean_resource_interval": 10000,
    "delete_commit_log_files_interval": 100,
    "delete_consume_queue_files_interval": 100,
    "destroy_mapedfile_interval_forcibly": 120000,
    "redelete_hanged_file_interval": 120000,
    "delete_when": "04",
    "disk_max_used_space_ratio": 75,
    "file_reserved_time": 72,
    "put_msg_index_hight_water": 600000,
    "max_message_size": 4194304,  # 1024 * 1024 * 4
    "check_crc_on_recover": True,
    "flush_commit_log_least_pages": 4,
    "commit_commit_log_least_pages": 4,
    "flush_least_pages_when_warm_mapped_file": 4096,  # 1024 / 4 * 16
    "flush_consume_queue_least_pages": 2,
    "flush_commit_log_thorough_interval": 10000,
    "commit_commit_log_thorough_interval": 200,
    "flush_consume_queue_thorough_interval": 60000,
    "max_transfer_bytes_on_message_in_memory": 262144,
    "max_transfer_count_on_message_in_memory": 32,
    "max_transfer_bytes_on_message_in_disk": 65536,
    "max_transfer_count_on_message_in_disk": 8,
    "access_message_in_memory_max_ratio": 40,
    "message_index_enable": True,
    "max_hash_slot_num": 5000000,
    "max_index_num": 20000000,  # 5000000 * 4
    "max_msgs_num_batch": 64,
    "message_index_safe": False,
    "ha_listen_port": 10912,
    "ha_send_heartbeat_interval": 5000,
    "ha_housekeeping_interval": 20000,
    "ha_transfer_batch_size": 32768,
    "ha_master_address": None,
    "ha_slave_fallbehind_max": 268435456,  # 1024 * 1024 * 256
    "broker_role": "ASYNC_MASTER",
    "flush_disk_type": "ASYNC_FLUSH",
    "sync_flush_timeout": 5000,
    "slave_timeout": 3000,
    "message_delay_level": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    "flush_delay_offset_interval": 10000,
    "clean_file_forcibly_enable": True,
    "warm_mapped_file_enable": False,
    "offset_check_in_slave": False,
    "debug_lock_enable": False,
    "duplication_enable": False,
    "disk_fall_recorded": True,
    "os_page_cache_busy_timeout_mills": 1000,
    "default_query_max_num": 32,
    "transient_store_pool_enable": False,
    "transient_store_pool_size": 5,
    "fast_fail_if_no_buffer_in_store_pool": False,
    "enable_dledger_commit_log": False,
    "dledger_group": None,
    "dledger_peers": None,
    "dledger_self_id": None,
    "preferred_leader_id": None,
    "enable_batch_push": False,
    "enable_schedule_message_stats": True,
    "enable_lmq": False,
    "enable_multi_dispatch": False,
    "max_lmq_consume_queue_num": 20000,
    "enable_schedule_async_deliver": False,
    "schedule_async_deliver_max_pending_limit": 2000,
    "schedule_async_deliver_max_resend_num2_blocked": 3,
    "read_only_commit_log_store_paths": None,
    # rocketstore's own
    "store_host": "127.0.0.1:10911",
    "read_only": False,
    "commit_log_prefault_ahead": 32 * 1024 * 1024,
    # RocketMQ 4.9's system properties rocketmq.broker.diskSpace*Ratio, as percent
    "disk_space_clean_forcibly_ratio": 85,
    "disk_space_warning_level_ratio": 90,
    "commit_log_write_through": True,
}

# Every property key RocketMQ 4.9's broker reads into MessageStoreConfig (its setters), plus ours.
ROCKETMQ_KEYS = {
    "storePathRootDir", "storePathCommitLog", "readOnlyCommitLogStorePaths",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "enableConsumeQueueExt",
    "mappedFileSizeConsumeQueueExt", "bitMapLengthConsumeQueueExt", "flushIntervalCommitLog",
    "commitIntervalCommitLog", "useReentrantLockWhenPutMessage", "flushCommitLogTimed",
    "flushIntervalConsumeQueue", "cleanResourceInterval", "deleteCommitLogFilesInterval",
    "deleteConsumeQueueFilesInterval", "destroyMapedFileIntervalForcibly",
    "redeleteHangedFileInterval", "deleteWhen", "diskMaxUsedSpaceRatio", "fileReservedTime",
    "putMsgIndexHightWater", "maxMessageSize", "checkCRCOnRecover", "flushCommitLogLeastPages",
    "commitCommitLogLeastPages", "flushLeastPagesWhenWarmMapedFile",
    "flushConsumeQueueLeastPages", "flushCommitLogThoroughInterval",
    "commitCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk",
    "accessMessageInMemoryMaxRatio", "messageIndexEnable", "maxHashSlotNum", "maxIndexNum",
    "maxMsgsNumBatch", "messageIndexSafe", "haListenPort", "haSendHeartbeatInterval",
    "haHousekeepingInterval", "haTransferBatchSize", "haMasterAddress", "haSlaveFallbehindMax",
    "brokerRole", "flushDiskType", "syncFlushTimeout", "slaveTimeout", "messageDelayLevel",
    "flushDelayOffsetInterval", "cleanFileForciblyEnable", "warmMapedFileEnable",
    "offsetCheckInSlave", "debugLockEnable", "duplicationEnable", "diskFallRecorded",
    "osPageCacheBusyTimeOutMills", "defaultQueryMaxNum", "transientStorePoolEnable",
    "transientStorePoolSize", "fastFailIfNoBufferInStorePool", "enableDLegerCommitLog",
    "dLegerGroup", "dLegerPeers", "dLegerSelfId", "preferredLeaderId", "enableBatchPush",
    "enableScheduleMessageStats", "enableLmq", "enableMultiDispatch", "maxLmqConsumeQueueNum",
    "enableScheduleAsyncDeliver", "scheduleAsyncDeliverMaxPendingLimit",
    "scheduleAsyncDeliverMaxResendNum2Blocked",
}  # fmt: skip
ROCKETSTORE_KEYS = {"storeHost", "readOnly", "commitLogPrefaultAhead", "commitLogWriteThrough",
                    "diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio"}


@pytest.mark.parametrize("name, expected", sorted(ROCKETMQ_DEFAULTS.items()))
def test_default_matches_rocketmq(name: str, expected: Any) -> None:
    value = getattr(StoreConfig(), name)
    assert value == expected
    assert type(value) is type(expected)


def test_every_field_has_a_default_checked() -> None:
    names = {f.name for f in dataclasses.fields(StoreConfig)}
    assert names - {"store_path_root_dir", "store_path_commit_log"} == set(ROCKETMQ_DEFAULTS)


def test_keys_are_exactly_rocketmq_49_plus_ours() -> None:
    assert len(ROCKETMQ_KEYS) == 77
    assert set(PROPERTY_KEYS.values()) == ROCKETMQ_KEYS | ROCKETSTORE_KEYS
    assert set(PROPERTY_KEYS) == {f.name for f in dataclasses.fields(StoreConfig)}
    assert len(set(PROPERTY_KEYS.values())) == len(PROPERTY_KEYS)


@pytest.mark.parametrize(
    "name, key",
    [
        ("check_crc_on_recover", "checkCRCOnRecover"),
        ("destroy_mapedfile_interval_forcibly", "destroyMapedFileIntervalForcibly"),
        ("flush_least_pages_when_warm_mapped_file", "flushLeastPagesWhenWarmMapedFile"),
        ("warm_mapped_file_enable", "warmMapedFileEnable"),
        ("put_msg_index_hight_water", "putMsgIndexHightWater"),
        ("access_message_in_memory_max_ratio", "accessMessageInMemoryMaxRatio"),
        ("os_page_cache_busy_timeout_mills", "osPageCacheBusyTimeOutMills"),
        ("enable_dledger_commit_log", "enableDLegerCommitLog"),
        ("dledger_group", "dLegerGroup"),
        ("dledger_peers", "dLegerPeers"),
        ("dledger_self_id", "dLegerSelfId"),
        ("enable_batch_push", "enableBatchPush"),
        ("ha_listen_port", "haListenPort"),
        ("ha_slave_fallbehind_max", "haSlaveFallbehindMax"),
        ("schedule_async_deliver_max_resend_num2_blocked", "scheduleAsyncDeliverMaxResendNum2Blocked"),
        ("mapped_file_size_commit_log", "mappedFileSizeCommitLog"),
        ("store_path_root_dir", "storePathRootDir"),
        ("store_host", "storeHost"),
        ("commit_log_prefault_ahead", "commitLogPrefaultAhead"),
        ("commit_log_write_through", "commitLogWriteThrough"),
    ],
)
def test_property_key_names(name: str, key: str) -> None:
    assert PROPERTY_KEYS[name] == key


def test_root_dir_defaults_to_home_store(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = StoreConfig()
    assert cfg.store_path_root_dir == os.path.join(str(tmp_path), "store")
    assert cfg.store_path_commit_log is None
    assert cfg.commit_log_path == os.path.join(str(tmp_path), "store", "commitlog")


def test_commit_log_path(tmp_path: pathlib.Path) -> None:
    cfg = StoreConfig(store_path_root_dir=str(tmp_path))
    assert cfg.commit_log_path == os.path.join(str(tmp_path), "commitlog")
    assert cfg.replace(store_path_commit_log="/data/cl").commit_log_path == "/data/cl"
    # The default follows the root when the root changes.
    assert cfg.replace(store_path_root_dir="/r").commit_log_path == os.path.join("/r", "commitlog")


def test_path_like_is_normalised_to_str(tmp_path: pathlib.Path) -> None:
    cfg = StoreConfig(store_path_root_dir=tmp_path, store_path_commit_log=tmp_path / "cl")
    assert cfg.store_path_root_dir == str(tmp_path)
    assert cfg.store_path_commit_log == str(tmp_path / "cl")
    assert type(cfg.store_path_root_dir) is str


# --------------------------------------------------------------------------------------------
# Enums
# --------------------------------------------------------------------------------------------


def test_enum_values_are_rocketmq_names() -> None:
    assert [m.value for m in FlushDiskType] == ["ASYNC_FLUSH", "SYNC_FLUSH"]
    assert [m.value for m in BrokerRole] == ["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, "SYNC_FLUSH"])
@pytest.mark.parametrize("role", [BrokerRole.SLAVE, "SLAVE"])
def test_enum_or_string_accepted_and_normalised(flush: Any, role: Any) -> None:
    cfg = StoreConfig(flush_disk_type=flush, broker_role=role)
    assert cfg.flush_disk_type == "SYNC_FLUSH" == FlushDiskType.SYNC_FLUSH
    assert cfg.broker_role == "SLAVE" == BrokerRole.SLAVE
    assert type(cfg.flush_disk_type) is str
    assert type(cfg.broker_role) is str
    assert "flushDiskType=SYNC_FLUSH\n" in cfg.to_properties()
    assert "brokerRole=SLAVE\n" in cfg.to_properties()


@pytest.mark.parametrize(
    "name, value, exc",
    [
        ("flush_disk_type", "sync_flush", ValueError),
        ("flush_disk_type", "SYNC", ValueError),
        ("flush_disk_type", BrokerRole.SLAVE, ValueError),
        ("flush_disk_type", 1, TypeError),
        ("broker_role", "MASTER", ValueError),
        ("broker_role", FlushDiskType.SYNC_FLUSH, ValueError),
        ("broker_role", None, TypeError),
    ],
)
def test_enum_rejects(name: str, value: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc, match=f"^{name} "):
        StoreConfig(**{name: value})


# --------------------------------------------------------------------------------------------
# store_host
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, expected",
    [
        ("127.0.0.1:10911", "127.0.0.1:10911"),
        ("10.0.0.7:0", "10.0.0.7:0"),
        ("192.168.1.2:65535", "192.168.1.2:65535"),
        ("[::1]:10911", "[::1]:10911"),
        ("[0:0:0:0:0:0:0:1]:80", "[::1]:80"),
        ("[FE80::1]:9876", "[fe80::1]:9876"),
    ],
)
def test_store_host_valid(given: str, expected: str) -> None:
    assert StoreConfig(store_host=given).store_host == expected


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:65536",
        "127.0.0.1:-1",
        "127.0.0.1:+80",
        "localhost:10911",
        "256.0.0.1:1",
        "::1:10911",
        "[::1]",
        "[127.0.0.1]:1",
        "[fe80::1%eth0]:1",
        "",
    ],
)
def test_store_host_invalid(value: str) -> None:
    with pytest.raises(ValueError, match="^store_host "):
        StoreConfig(store_host=value)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, exc, fragment",
    [
        ("mapped_file_size_commit_log", -1, ValueError, "must be a positive int, got -1"),
        ("mapped_file_size_commit_log", 0, ValueError, "positive int"),
        ("mapped_file_size_commit_log", 2**31, ValueError, "Java int"),
        ("mapped_file_size_commit_log", 1.5, TypeError, "must be an int"),
        ("mapped_file_size_commit_log", "1024", TypeError, "must be an int"),
        ("mapped_file_size_consume_queue", 30, ValueError, "positive multiple of 20"),
        ("mapped_file_size_consume_queue", 0, ValueError, "positive multiple of 20"),
        ("mapped_file_size_consume_queue", -20, ValueError, "positive multiple of 20"),
        ("max_hash_slot_num", 0, ValueError, "positive int"),
        ("max_index_num", 0, ValueError, "positive int"),
        ("max_index_num", True, TypeError, "must be an int"),
        ("max_message_size", 0, ValueError, "positive int"),
        ("flush_interval_commit_log", -1, ValueError, "non-negative int"),
        ("flush_commit_log_least_pages", -4, ValueError, "non-negative int"),
        ("disk_max_used_space_ratio", 101, ValueError, "0..100"),
        ("access_message_in_memory_max_ratio", -1, ValueError, "0..100"),
        ("ha_listen_port", 65536, ValueError, "0..65535"),
        ("flush_delay_offset_interval", 2**63, ValueError, "Java long"),
        ("os_page_cache_busy_timeout_mills", -1, ValueError, "non-negative int"),
        ("check_crc_on_recover", 1, TypeError, "must be a bool"),
        ("read_only", "false", TypeError, "must be a bool"),
        ("message_index_enable", None, TypeError, "must be a bool"),
        ("delete_when", "4am", ValueError, "hours"),
        ("delete_when", "24", ValueError, "hours"),
        ("delete_when", "", ValueError, "hours"),
        ("delete_when", 4, TypeError, "must be a str"),
        ("message_delay_level", "1s  5s", ValueError, "single spaces"),
        ("message_delay_level", "1s 5x", ValueError, "single spaces"),
        ("message_delay_level", "", ValueError, "single spaces"),
        ("store_path_root_dir", "", ValueError, "must not be empty"),
        ("store_path_root_dir", None, TypeError, "os.PathLike"),
        ("store_path_root_dir", b"/x", TypeError, "os.PathLike"),
        ("store_path_commit_log", "", ValueError, "must not be empty"),
        ("store_path_commit_log", 5, TypeError, "or None"),
        ("ha_master_address", 10912, TypeError, "or None"),
        ("dledger_peers", ["n0"], TypeError, "or None"),
        ("store_host", None, TypeError, "must be a str"),
    ],
)
def test_validation_error_names_field(name: str, value: Any, exc: type[Exception], fragment: str) -> None:
    with pytest.raises(exc) as info:
        StoreConfig(**{name: value})
    assert str(info.value).startswith(f"{name} ")
    assert fragment in str(info.value)


@pytest.mark.parametrize("name", sorted(PROPERTY_KEYS))
def test_every_field_type_checked(name: str) -> None:
    with pytest.raises(TypeError, match=f"^{name} must be"):
        StoreConfig(**{name: object()})


def test_valid_edge_values() -> None:
    cfg = StoreConfig(
        mapped_file_size_commit_log=2**31 - 1,
        mapped_file_size_consume_queue=20,
        flush_interval_commit_log=0,
        disk_max_used_space_ratio=0,
        ha_listen_port=65535,
        flush_delay_offset_interval=2**63 - 1,
        delete_when="00;04;23",
        message_delay_level="1d",
    )
    assert cfg.mapped_file_size_consume_queue == 20
    assert cfg.flush_delay_offset_interval == 2**63 - 1


def test_replace_validates_and_copies() -> None:
    cfg = StoreConfig()
    other = cfg.replace(max_index_num=400, read_only=True)
    assert (other.max_index_num, other.read_only) == (400, True)
    assert (cfg.max_index_num, cfg.read_only) == (20000000, False)
    with pytest.raises(ValueError, match="^max_index_num "):
        cfg.replace(max_index_num=0)
    with pytest.raises(TypeError):
        cfg.replace(no_such_field=1)


# --------------------------------------------------------------------------------------------
# .properties parsing
# --------------------------------------------------------------------------------------------


def _load(text: str, **overrides: Any) -> StoreConfig:
    return StoreConfig.from_properties(io.StringIO(text), **overrides)


def test_rocketmq_sample_broker_conf() -> None:
    # conf/broker.conf as shipped with RocketMQ 4.9
    text = (
        "brokerClusterName = DefaultCluster\n"
        "brokerName = broker-a\n"
        "brokerId = 0\n"
        "deleteWhen = 04\n"
        "fileReservedTime = 48\n"
        "brokerRole = ASYNC_MASTER\n"
        "flushDiskType = ASYNC_FLUSH\n"
    )
    cfg = _load(text)
    assert cfg.file_reserved_time == 48
    assert cfg.delete_when == "04"
    assert cfg.broker_role == "ASYNC_MASTER"
    assert cfg.flush_disk_type == "ASYNC_FLUSH"
    assert cfg.replace(file_reserved_time=72) == StoreConfig()


def test_separators_comments_and_whitespace() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   # indented comment\n"
        "\n"
        "   \t\n"
        "maxHashSlotNum=11\n"
        "maxIndexNum:22\n"
        "maxMsgsNumBatch 33\n"
        "  defaultQueryMaxNum   =   44\n"
        "\tmaxMessageSize\t:\t55\n"
        "fileReservedTime\f66\n"
        "haListenPort = = 77\n"  # the second '=' starts the value: "= 77" is not an int
    )
    with pytest.raises(ValueError, match="haListenPort"):
        _load(text)
    cfg = _load(text.replace("haListenPort = = 77\n", "haListenPort =77  \n"))
    assert cfg.max_hash_slot_num == 11
    assert cfg.max_index_num == 22
    assert cfg.max_msgs_num_batch == 33
    assert cfg.default_query_max_num == 44
    assert cfg.max_message_size == 55
    assert cfg.file_reserved_time == 66
    assert cfg.ha_listen_port == 77


def test_line_continuations() -> None:
    text = (
        "messageDelayLevel = 1s 5s \\\n"
        "        10s 30s\\\n"
        "   \\ 1m\n"  # an escaped space after a continuation is kept
        "maxIndexNum = 1\\\n"
        "    2\n"
        "# comment ending in a backslash does not continue \\\n"
        "maxHashSlotNum = 3\n"
        "haMasterAddress = last\\\n"  # a continuation at end of input ends the line
    )
    cfg = _load(text)
    assert cfg.message_delay_level == "1s 5s 10s 30s 1m"
    assert cfg.max_index_num == 12
    assert cfg.max_hash_slot_num == 3
    assert cfg.ha_master_address == "last"


def test_even_backslashes_do_not_continue() -> None:
    cfg = _load("haMasterAddress = a\\\\\nmaxIndexNum = 5\n")
    assert cfg.ha_master_address == "a\\"
    assert cfg.max_index_num == 5


def test_escapes() -> None:
    text = (
        "storePathRootDir = /tmp/caf\\u00e9\\u00E9 dir\\ x\n"
        "haMasterAddress = \\u0031\\u0030.0.0.1\\:10912\n"
        "dLegerPeers = n0-127.0.0.1\\:40911;n1-127.0.0.1\\=40912\\t\\#\\!\\q\n"
        "dLeger\\u0047roup = g\\uD83D\\uDE00\n"  # escapes in keys; surrogate pair
        "preferredLeaderId=\\\\\n"
    )
    cfg = _load(text)
    assert cfg.store_path_root_dir == "/tmp/caf\u00e9\u00e9 dir x"
    assert cfg.ha_master_address == "10.0.0.1:10912"
    assert cfg.dledger_peers == "n0-127.0.0.1:40911;n1-127.0.0.1=40912\t#!q"
    assert cfg.dledger_group == "g\U0001f600"
    assert cfg.preferred_leader_id == "\\"


def test_escaped_separator_in_key() -> None:
    with_escaped = "max\\=IndexNum = 5\n"  # key "max=IndexNum": unknown, ignored
    assert _load(with_escaped).max_index_num == 20000000


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ValueError, match="uxxxx"):
        _load("haMasterAddress = \\u12G4\n")
    with pytest.raises(ValueError, match="uxxxx"):
        _load("haMasterAddress = \\u12\n")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    text = newline.join(["# c", "maxIndexNum=1\\", "  0", "maxHashSlotNum=9", ""])
    cfg = _load(text)
    assert (cfg.max_index_num, cfg.max_hash_slot_num) == (10, 9)


def test_later_key_wins() -> None:
    assert _load("maxIndexNum=1\nmaxIndexNum=2\n").max_index_num == 2


def test_values_are_trimmed() -> None:
    cfg = _load("flushDiskType = SYNC_FLUSH \t\nmaxIndexNum = 8  \ndeleteWhen=05 \n")
    assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert cfg.max_index_num == 8
    assert cfg.delete_when == "05"


@pytest.mark.parametrize(
    "raw, expected", [("true", True), ("TRUE", True), ("True", True), ("false", False), ("FaLsE", False)]
)
def test_bool_conversion(raw: str, expected: bool) -> None:
    cfg = _load(f"messageIndexSafe={raw}\ncheckCRCOnRecover={raw}\nreadOnly={raw}\n")
    assert cfg.message_index_safe is expected
    assert cfg.check_crc_on_recover is expected
    assert cfg.read_only is expected


@pytest.mark.parametrize("raw", ["yes", "1", "0", "on", "", "tru"])
def test_bad_bool(raw: str) -> None:
    with pytest.raises(ValueError) as info:
        _load(f"checkCRCOnRecover={raw}\n")
    assert "checkCRCOnRecover" in str(info.value)
    assert "check_crc_on_recover" in str(info.value)


@pytest.mark.parametrize("raw, expected", [("42", 42), ("+42", 42), ("0042", 42)])
def test_int_conversion(raw: str, expected: int) -> None:
    assert _load(f"maxIndexNum={raw}\n").max_index_num == expected


@pytest.mark.parametrize(
    "key, field_name, raw",
    [
        ("maxIndexNum", "max_index_num", "1_000"),
        ("maxIndexNum", "max_index_num", "0x10"),
        ("maxIndexNum", "max_index_num", "ten"),
        ("maxIndexNum", "max_index_num", "1.0"),
        ("maxIndexNum", "max_index_num", ""),
        ("maxIndexNum", "max_index_num", "0"),
        ("mappedFileSizeCommitLog", "mapped_file_size_commit_log", "2147483648"),
        ("mappedFileSizeConsumeQueue", "mapped_file_size_consume_queue", "6000001"),
        ("flushDiskType", "flush_disk_type", "async_flush"),
        ("brokerRole", "broker_role", "MASTER"),
        ("storeHost", "store_host", "example.com:10911"),
        ("storePathRootDir", "store_path_root_dir", "  "),
        ("storePathCommitLog", "store_path_commit_log", ""),
        ("deleteWhen", "delete_when", "4am"),
    ],
)
def test_bad_value_names_key_and_field(key: str, field_name: str, raw: str) -> None:
    with pytest.raises(ValueError) as info:
        _load(f"{key}={raw}\n")
    assert key in str(info.value)
    assert field_name in str(info.value)


def test_unknown_keys_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        "brokerClusterName=DefaultCluster\n"
        "namesrvAddr=127.0.0.1:9876\n"
        "listenPort=10911\n"
        "mapedFileSizeCommitLog=1024\n"  # RocketMQ <= 4.3 spelling: 4.9 ignores it too
        "maxIndexNum=7\n"
    )
    with caplog.at_level(logging.DEBUG, logger="rocketstore.config"):
        cfg = _load(text)
    assert cfg.max_index_num == 7
    assert cfg.mapped_file_size_commit_log == 1024 * 1024 * 1024
    logged = " ".join(r.getMessage() for r in caplog.records if r.name == "rocketstore.config")
    for key in ("brokerClusterName", "namesrvAddr", "listenPort", "mapedFileSizeCommitLog"):
        assert key in logged
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "rocketstore.config")


def test_keys_are_case_sensitive() -> None:
    assert _load("MaxIndexNum=7\nmaxindexnum=8\n").max_index_num == 20000000


def test_overrides_win() -> None:
    cfg = _load("maxIndexNum=7\nmaxHashSlotNum=3\n", max_index_num=9, read_only=True)
    assert (cfg.max_index_num, cfg.max_hash_slot_num, cfg.read_only) == (9, 3, True)
    with pytest.raises(ValueError, match="^max_index_num "):
        _load("", max_index_num=0)
    with pytest.raises(TypeError):
        _load("", maxIndexNum=5)


def test_from_path_and_binary_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broker.properties"
    # ISO-8859-1 as Java's Properties.load(InputStream) reads it.
    path.write_bytes("storePathRootDir=/data/caf\xe9\nmaxIndexNum=5\n".encode("latin-1"))
    for source in (path, str(path)):
        cfg = StoreConfig.from_properties(source)
        assert cfg.store_path_root_dir == "/data/caf\xe9"
        assert cfg.max_index_num == 5
    with open(path, "rb") as fh:
        assert StoreConfig.from_properties(fh).store_path_root_dir == "/data/caf\xe9"
    with pytest.raises(FileNotFoundError):
        StoreConfig.from_properties(tmp_path / "missing.properties")


# --------------------------------------------------------------------------------------------
# to_properties round trip
# --------------------------------------------------------------------------------------------


def test_to_properties_format() -> None:
    text = StoreConfig(store_path_root_dir="/r").to_properties()
    lines = text.splitlines()
    assert lines[0].startswith("#")
    assert "storePathRootDir=/r" in lines
    assert "checkCRCOnRecover=true" in lines
    assert "destroyMapedFileIntervalForcibly=120000" in lines
    assert "mappedFileSizeCommitLog=1073741824" in lines
    assert "messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h" in lines
    assert "storeHost=127.0.0.1\\:10911" in lines
    # None fields are left out (Java null).
    assert not any(line.startswith(("storePathCommitLog", "haMasterAddress", "dLeger")) for line in lines)
    assert text.endswith("\n")
    assert text.isascii()


def test_round_trip_defaults_and_specials() -> None:
    cfg = StoreConfig(
        store_path_root_dir="C:\\store root\\caf\u00e9 \U0001f600",
        store_path_commit_log="/a b/=:#!/x",
        ha_master_address="[::1]:10912",
        dledger_peers="n0-127.0.0.1:40911;n1-127.0.0.1:40912",
        read_only_commit_log_store_paths="/ro1,/ro2",
        store_host="[::1]:10911",
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        broker_role=BrokerRole.SYNC_MASTER,
        read_only=True,
    )
    assert _load(cfg.to_properties()) == cfg
    assert _load(StoreConfig().to_properties()) == StoreConfig()


def _trimmed_text(min_size: int = 1) -> st.SearchStrategy[str]:
    return st.text(min_size=min_size, max_size=30).filter(
        lambda s: s == "" or (s[0] > " " and s[-1] > " ")
    )


_INT_OVERRIDES: dict[str, st.SearchStrategy[int]] = {
    "mapped_file_size_consume_queue": st.integers(1, (2**31 - 1) // 20).map(lambda n: n * 20),
    "disk_max_used_space_ratio": st.integers(0, 100),
    "disk_space_clean_forcibly_ratio": st.integers(0, 100),
    "disk_space_warning_level_ratio": st.integers(0, 100),
    "access_message_in_memory_max_ratio": st.integers(0, 100),
    "ha_listen_port": st.integers(0, 65535),
    "flush_delay_offset_interval": st.integers(0, 2**63 - 1),
    "os_page_cache_busy_timeout_mills": st.integers(0, 2**63 - 1),
}
_STR_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "store_path_root_dir": _trimmed_text(),
    "store_path_commit_log": st.none() | _trimmed_text(),
    "read_only_commit_log_store_paths": st.none() | _trimmed_text(0),
    "ha_master_address": st.none() | _trimmed_text(0),
    "dledger_group": st.none() | _trimmed_text(0),
    "dledger_peers": st.none() | _trimmed_text(0),
    "dledger_self_id": st.none() | _trimmed_text(0),
    "preferred_leader_id": st.none() | _trimmed_text(0),
    "delete_when": st.lists(st.integers(0, 23).map(lambda h: f"{h:02d}"), min_size=1, max_size=4).map(
        ";".join
    ),
    "message_delay_level": st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from("smhd")).map(lambda t: f"{t[0]}{t[1]}"),
        min_size=1,
        max_size=20,
    ).map(" ".join),
    "broker_role": st.sampled_from(list(BrokerRole) + [m.value for m in BrokerRole]),
    "flush_disk_type": st.sampled_from(list(FlushDiskType) + [m.value for m in FlushDiskType]),
    "store_host": st.one_of(
        st.builds(lambda a, p: f"{a}:{p}", st.ip_addresses(v=4), st.integers(0, 65535)),
        st.builds(lambda a, p: f"[{a}]:{p}", st.ip_addresses(v=6), st.integers(0, 65535)),
    ),
}


def _field_strategy(f: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    if f.name in _STR_STRATEGIES:
        return _STR_STRATEGIES[f.name]
    if f.name in _INT_OVERRIDES:
        return _INT_OVERRIDES[f.name]
    default = f.default
    if isinstance(default, bool):
        return st.booleans()
    if isinstance(default, int):
        return st.integers(1, 2**31 - 1)
    raise AssertionError(f"no strategy for field {f.name}")


_CONFIGS = st.fixed_dictionaries(
    {f.name: _field_strategy(f) for f in dataclasses.fields(StoreConfig)}
).map(lambda kwargs: StoreConfig(**kwargs))


@settings(max_examples=200, deadline=None)
@given(_CONFIGS)
def test_round_trip_property(cfg: StoreConfig) -> None:
    text = cfg.to_properties()
    assert text.isascii()
    assert _load(text) == cfg
    assert StoreConfig.from_properties(io.BytesIO(text.encode("latin-1"))) == cfg


def test_fixture_manifest_config_keys() -> None:
    """The settings recorded for the RocketMQ 4.9.8 fixture store are ours too."""
    manifest = require_fixture() / "manifest.json"
    settings_ = json.loads(manifest.read_text(encoding="utf-8"))["config"]
    not_store = {"indexFileSize", "userTimezone"}  # derived value, JVM property
    lines = []
    for key, value in settings_.items():
        if key in not_store:
            continue
        assert key in PROPERTY_KEYS.values(), key
        lines.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    cfg = _load("\n".join(lines))
    assert cfg.mapped_file_size_commit_log == settings_["mappedFileSizeCommitLog"]
    assert cfg.mapped_file_size_consume_queue == settings_["mappedFileSizeConsumeQueue"]
    assert cfg.max_hash_slot_num == settings_["maxHashSlotNum"]
    assert cfg.max_index_num == settings_["maxIndexNum"]
    assert 40 + cfg.max_hash_slot_num * 4 + cfg.max_index_num * 20 == settings_["indexFileSize"]


def test_to_properties_writes_the_file_given(tmp_path: pathlib.Path) -> None:
    cfg = StoreConfig(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=1 << 20)
    path = tmp_path / "broker.properties"
    text = cfg.to_properties(path)
    assert path.read_text(encoding="utf-8") == text
    assert StoreConfig.from_properties(str(path)) == cfg
    assert not (tmp_path / "broker.properties.tmp").exists()
