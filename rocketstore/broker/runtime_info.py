"""GET_BROKER_RUNTIME_INFO's table, key for key as RocketMQ 4.9.8 gives it (its
AdminBrokerProcessor.prepareRuntimeInfo over DefaultMessageStore.getRuntimeInfo and
StoreStatsService.getRuntimeInfo), all values text.

Where rocketstore differs in make, the figure is its own of the same thing:
- rocketstore has no send, pull, query or end-transaction thread pools: requests run on the
  event loop in the order they were read. The queues' sizes are 0, their capacities
  RocketMQ's defaults (what a RocketMQ broker would queue), and every
  ``*ThreadPoolQueueHeadWaitTimeMills`` is how long the request asking waited on the loop
  before it ran: how long the head of the loop's one queue waits now.
- putMessageEntireTimeMax, putMessageDistributeTime and putLatency99/999 measure the time a
  put holds the CommitLog's put lock (to the coarse clock's few ms), RocketMQ's the whole
  putMessage call; the distribution is the last whole minute's (before the first minute,
  the puts so far, where RocketMQ says ``null``).
- dispatchMaxBuffer is the most the dispatch was behind at a once-a-second look.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from typing import TYPE_CHECKING

from rocketstore.broker.stats.manager import java_double
from rocketstore.common.topics import SCHEDULE_TOPIC
from rocketstore.store import HOLD_BUCKET_CEILINGS

if TYPE_CHECKING:
    from rocketstore.broker.config import BrokerConfig
    from rocketstore.broker.schedule import ScheduleMessageService
    from rocketstore.broker.stats import BrokerStatsManager
    from rocketstore.store import MessageStore

#: What GET_BROKER_RUNTIME_INFO says this broker is (MQVersion V4_9_8).
BROKER_VERSION = 409
BROKER_VERSION_DESC = "V4_9_8"

#: RocketMQ 4.9.8's default queue capacities of the thread pools it has and rocketstore not
SEND_QUEUE_CAPACITY = 10_000
PULL_QUEUE_CAPACITY = 100_000
QUERY_QUEUE_CAPACITY = 20_000
END_TRANSACTION_QUEUE_CAPACITY = 100_000
#: remainTransientStoreBufferNumbs without a transient store pool (Java's Integer.MAX_VALUE)
NO_POOL_BUFFERS = 2**31 - 1

#: putMessageDistributeTime's ranges, as RocketMQ names them
_RANGE_NAMES = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
                "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
#: the last percentile bucket's bound (Java's Long.MAX_VALUE)
_LAST_BUCKET = 2**63 - 1


def human_readable_bytes(count: int) -> str:
    """RocketMQ's MixAll.humanReadableByteCount(bytes, false): ``0 B``, ``1.5 KiB``, ``252.0 GiB``."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def disk_used_ratio(path: str) -> float:
    """RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up
    to a hundredth; -1.0 when the path is missing or cannot be measured."""
    try:
        if not os.path.exists(path):
            return -1.0
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    used = total - st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    if used + usable <= 0:
        return -1.0
    percent, rest = divmod(used * 100, used + usable)
    return (percent + (1 if rest else 0)) / 100.0


def put_time_percentile(buckets: list[int], fraction: float) -> float:
    """RocketMQ's findPutMessageEntireTimePX over the percentile buckets' counts."""
    bounds = [_LAST_BUCKET if b is None else b for b in HOLD_BUCKET_CEILINGS]
    target = int(sum(buckets) * fraction)
    passed = 0
    for i, count in enumerate(buckets):
        if target <= passed + count:
            relative = target - passed
            if i == 0:
                return 0.0 if count == 0 else bounds[0] * relative / count
            low = bounds[i - 1]
            return low + (0.0 if count == 0 else (bounds[i] - low) * relative / count)
        passed += count
    return 0.0


def runtime_text(ms: int) -> str:
    seconds = ms // 1000
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"


def runtime_info(config: BrokerConfig, store: MessageStore, stats: BrokerStatsManager,
                 schedule: ScheduleMessageService | None, *, head_wait_ms: int) -> dict[str, str]:
    """The table; ``head_wait_ms``: how long the request asking for it waited to run."""
    info = _store_stats(stats)
    commit_log_dirs = [p for p in store.config.commit_log_path.split(",") if p.strip()]
    lowest = math.inf
    for path in commit_log_dirs:
        ratio = disk_used_ratio(path.strip())
        info[f"commitLogDiskRatio_{path.strip()}"] = java_double(ratio)
        lowest = min(lowest, ratio)
    info["commitLogDiskRatio"] = java_double(lowest if commit_log_dirs else -1.0)
    info["consumeQueueDiskRatio"] = java_double(disk_used_ratio(store.paths.consume_queue_root))
    if schedule is not None:
        for level, offset in sorted(schedule.offsets.items()):
            high = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            if offset > 0 or high > 0:      # RocketMQ's table holds the levels in use
                info[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
    info["commitLogMinOffset"] = str(store.get_min_phy_offset())
    info["commitLogMaxOffset"] = str(store.get_max_phy_offset())

    info["brokerVersionDesc"] = BROKER_VERSION_DESC
    info["brokerVersion"] = str(BROKER_VERSION)
    info["msgPutTotalYesterdayMorning"] = str(stats.put_total_yesterday_morning)
    info["msgPutTotalTodayMorning"] = str(stats.put_total_today_morning)
    info["msgPutTotalTodayNow"] = str(stats.put_messages)
    info["msgGetTotalYesterdayMorning"] = str(stats.get_total_yesterday_morning)
    info["msgGetTotalTodayMorning"] = str(stats.get_total_today_morning)
    info["msgGetTotalTodayNow"] = str(stats.got_messages)
    wait = str(max(0, head_wait_ms))
    for pool, capacity in (("send", SEND_QUEUE_CAPACITY), ("pull", PULL_QUEUE_CAPACITY),
                           ("query", QUERY_QUEUE_CAPACITY)):
        info[f"{pool}ThreadPoolQueueSize"] = "0"
        info[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
        info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = wait
    info["EndTransactionQueueSize"] = "0"
    info["EndTransactionThreadPoolQueueCapacity"] = str(END_TRANSACTION_QUEUE_CAPACITY)
    info["dispatchBehindBytes"] = str(store.dispatch_behind_bytes())
    info["pageCacheLockTimeMills"] = str(int(store.put_lock_held_ms()))
    info["earliestMessageTimeStamp"] = str(store.get_earliest_message_time())
    info["startAcceptSendRequestTimeStamp"] = "0"    # BrokerConfig's default: accept at once
    buffers = store.remain_transient_store_buffers()
    info["remainTransientStoreBufferNumbs"] = str(NO_POOL_BUFFERS if buffers is None else buffers)
    to_commit = store.remain_how_many_data_to_commit()
    if to_commit is not None:
        info["remainHowManyDataToCommit"] = human_readable_bytes(to_commit)
    info["remainHowManyDataToFlush"] = human_readable_bytes(store.remain_how_many_data_to_flush())
    root = store.config.store_path_root_dir
    try:
        usage = shutil.disk_usage(root)
    except OSError:
        pass
    else:
        info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(usage.total)}, "
                                        f"Free : {human_readable_bytes(_free_bytes(root))}.")
    # rocketstore's own
    info["busyRejections"] = str(stats.busy_rejections)
    return info


def _free_bytes(path: str) -> int:
    """Java's File.getFreeSpace: free blocks, the root-reserved ones included."""
    st = os.statvfs(path)
    return st.f_bfree * st.f_frsize


def _store_stats(stats: BrokerStatsManager) -> dict[str, str]:
    """StoreStatsService.getRuntimeInfo's keys."""
    now_ms = int(time.time() * 1000)
    puts = stats.put_messages
    put_bytes = stats.put_bytes
    divisor = puts or 1     # RocketMQ reports at least 1 put, so the average divides
    ranges, buckets, longest = stats.put_time_counts()
    return {
        "bootTimestamp": str(stats.started_ms),
        "runtime": runtime_text(now_ms - stats.started_ms),
        "putMessageEntireTimeMax": str(longest),
        "putMessageTimesTotal": str(divisor),
        "putMessageFailedTimes": str(stats.put_failures),
        "putMessageSizeTotal": str(put_bytes),
        "putMessageDistributeTime": "".join(f"{name}:{count} " for name, count in zip(
            _RANGE_NAMES, ranges, strict=True)),
        "putMessageAverageSize": java_double(put_bytes / divisor),
        "dispatchMaxBuffer": str(stats.dispatch_max_buffer),
        "getMessageEntireTimeMax": str(stats.get_time_max_ms),
        "putTps": stats.put_tps_text(),
        "getFoundTps": stats.found_tps_text(),
        "getMissTps": stats.miss_tps_text(),
        "getTotalTps": stats.total_get_tps_text(),
        "getTransferedTps": stats.transferred_tps_text(),
        "putLatency99": f"{put_time_percentile(buckets, 0.99):.2f}",
        "putLatency999": f"{put_time_percentile(buckets, 0.999):.2f}",
    }
