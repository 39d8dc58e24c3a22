"""Filter bitmaps at dispatch (RocketMQ's ConsumerFilterManager and
CommitLogDispatcherCalcBitMap, ``enableCalcFilterBitMap``): the SQL92 subscriptions of the
consumer groups of each topic, each with its BloomFilterData; every record dispatched to a
queue with an extension gets a bitmap with the positions of the groups whose expression it
matches, kept in its ext unit (rocketstore.store.consume_queue_ext). A pull of a group then
skips units whose bitmap lacks the group's positions without reading the CommitLog.

No false negatives: a group's filter carries the CommitLog offset from which every record's
bitmap was computed with it (``born_phy``: the dispatch position when it was registered,
taken under the lock the bitmap computation holds). A record below it, a record of a
different bitmap length, or a pull with another expression than the registered one is
evaluated from the record, as without the filter. RocketMQ uses the filter's birth time for
this, which lets a record stored just before the registration but dispatched after it
through; an offset does not. A unit without a bitmap (written while no table computed them)
is always evaluated.

The filters are kept in ``config/consumerFilter.json`` (RocketMQ's file and layout, plus each
filter's ``bornPhyOffset``), written when the table is made and before a removal takes
effect, so after a restart the bitmaps already on disk keep serving. Filters of another bloom
filter geometry, or without ``bornPhyOffset`` (RocketMQ's own), are not trusted."""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rocketstore._native.record import CorruptRecordError
from rocketstore.common.atomic_file import write_atomically
from rocketstore.common.bloom import BloomFilter, BloomFilterData
from rocketstore.common.sql92 import EXPRESSION_TYPE_SQL92, Sql92Filter, compile_sql92
from rocketstore.common.text import quote
from rocketstore.store.consume_queue_ext import CqExtUnit

if TYPE_CHECKING:
    from rocketstore.store.commit_log import CommitLog
    from rocketstore.store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)

#: under the store's config/ (RocketMQ's BrokerPathConfigHelper.getConsumerFilterPath)
CONSUMER_FILTER_FILE = "consumerFilter.json"


@dataclass(frozen=True)
class GroupFilter:
    """One group's SQL92 subscription to one topic (RocketMQ's ConsumerFilterData)."""
    topic: str
    group: str
    expression: str
    compiled: Sql92Filter
    bloom: BloomFilterData
    #: records at or after this CommitLog offset have bitmaps computed with this filter
    born_phy: int
    #: bloom.bit_pos as the native check takes it
    positions: np.ndarray


class FilterBitmaps:
    """The groups' filters and the bitmaps computed from them."""

    def __init__(self, bloom: BloomFilter, dispatch_position: Callable[[], int],
                 path: str | None = None) -> None:
        self.bloom = bloom
        #: the CommitLog offset of the next record dispatch will compute a bitmap for
        self._dispatch_position = dispatch_position
        self._by_topic: dict[str, dict[str, GroupFilter]] = {}
        self._lock = threading.Lock()
        self._computed_to = 0   # end of the newest record whose bitmap was computed
        self.path = path
        if path is not None:
            self._load(path)
            self._save()

    # ---- persistence -----------------------------------------------------------------------
    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("%s unreadable, consumer filters start empty: %s", path, exc)
            return
        by_topic = data.get("filterDataByTopic") if isinstance(data, dict) else None
        for topic, per_topic in (by_topic or {}).items():
            groups = (per_topic or {}).get("groupFilterData") or {}
            for group, entry in groups.items():
                try:
                    self._load_entry(str(topic), str(group), entry)
                except (TypeError, ValueError, KeyError) as exc:
                    log.warning("consumer filter of %s on %s in %s not loaded: %s",
                                quote(group), quote(topic), path, exc)

    def _load_entry(self, topic: str, group: str, entry: dict) -> None:
        born = entry.get("bornPhyOffset")
        if entry.get("expressionType") != EXPRESSION_TYPE_SQL92 or not isinstance(born, int):
            return      # RocketMQ's own entry: when its bitmaps were computed is unknown
        data = self.bloom.generate(group, topic)
        saved = entry.get("bloomFilterData") or {}
        if list(saved.get("bitPos") or []) != list(data.bit_pos) or \
                saved.get("bitNum") != data.bit_num:
            log.info("bloom filter changed: consumer filter of %s on %s starts again",
                     quote(group), quote(topic))
            return
        expression = str(entry["expression"])
        self._by_topic.setdefault(topic, {})[group] = GroupFilter(
            topic, group, expression, compile_sql92(expression), data, born,
            np.array(data.bit_pos, np.int32))

    def _save(self) -> None:
        if self.path is None:
            return
        by_topic = {
            topic: {"topic": topic, "groupFilterData": {
                group: {"consumerGroup": group, "topic": topic, "expression": f.expression,
                        "expressionType": EXPRESSION_TYPE_SQL92, "bornTime": 0, "deadTime": 0,
                        "clientVersion": 0, "bornPhyOffset": f.born_phy,
                        "bloomFilterData": {"bitPos": list(f.bloom.bit_pos),
                                            "bitNum": f.bloom.bit_num}}
                for group, f in groups.items()}}
            for topic, groups in self._by_topic.items()}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_atomically(self.path, json.dumps({"filterDataByTopic": by_topic}, indent=1))

    # ---- groups (the broker's heartbeats) ---------------------------------------------------
    def register(self, topic: str, group: str, expression: str,
                 expression_type: str | None = EXPRESSION_TYPE_SQL92) -> GroupFilter | None:
        """Know group's subscription to topic; a tag subscription removes any SQL92 one.
        Registering the same expression again keeps the filter (and its born_phy).
        ValueError for a bad expression."""
        if expression_type != EXPRESSION_TYPE_SQL92:
            self.unregister(topic, group)
            return None
        compiled = compile_sql92(expression)
        with self._lock:
            groups = self._by_topic.setdefault(topic, {})
            old = groups.get(group)
            if old is not None and old.expression == expression:
                return old
            born = max(self._dispatch_position(), self._computed_to)
            data = self.bloom.generate(group, topic)
            entry = GroupFilter(topic, group, expression, compiled, data, born,
                                np.array(data.bit_pos, np.int32))
            groups = dict(groups)       # readers iterate without the lock
            groups[group] = entry
            self._by_topic[topic] = groups
            self._save()
        log.info("consumer filter of %s on %s: %s (bitmaps from CommitLog offset %d)",
                 quote(group), quote(topic), quote(expression), born)
        return entry

    def unregister(self, topic: str, group: str) -> None:
        with self._lock:
            groups = self._by_topic.get(topic)
            if not groups or group not in groups:
                return
            groups = {g: f for g, f in groups.items() if g != group}
            # saved first: a restart never finds the filter with bitmaps computed without it
            saved = dict(self._by_topic)
            if groups:
                saved[topic] = groups
            else:
                del saved[topic]
            self._by_topic, before = saved, self._by_topic
            try:
                self._save()
            except OSError:
                self._by_topic = before
                raise

    def unregister_group(self, group: str) -> None:
        for topic in list(self._by_topic):
            self.unregister(topic, group)

    def get(self, topic: str, group: str) -> GroupFilter | None:
        groups = self._by_topic.get(topic)
        return None if groups is None else groups.get(group)

    def filters(self, topic: str) -> list[GroupFilter]:
        return list(self._by_topic.get(topic, {}).values())

    # ---- dispatch ------------------------------------------------------------------------
    def compute(self, topic: str, phy_end: int,
                properties: Callable[[], Mapping[str, str] | None]) -> bytes | None:
        """The bitmap of a record of topic ending at CommitLog offset phy_end (None: the
        topic has no SQL92 group). properties() gives the record's properties."""
        with self._lock:
            if phy_end > self._computed_to:
                self._computed_to = phy_end
            groups = self._by_topic.get(topic)
            if not groups:
                return None
            bits = bytearray(self.bloom.m // 8)
            props = properties()
            for entry in groups.values():
                try:
                    matched = entry.compiled.matches(props)
                except Exception:  # noqa: BLE001 - one expression must not stop dispatch
                    log.exception("bitmap of %s for %s failed", quote(topic), quote(entry.group))
                    matched = True      # unknown: the pull evaluates it
                if matched:
                    self.bloom.hash_to(entry.bloom, bits)
            return bytes(bits)

    def check_for(self, topic: str, group: str, expression: str) -> GroupFilter | None:
        """The filter a pull of group may trust for expression (None: evaluate every record)."""
        entry = self.get(topic, group)
        if entry is None or entry.expression != expression:
            return None
        return entry


def ext_unit_writer(commit_log: CommitLog, bitmaps: Callable[[], FilterBitmaps | None]
                    ) -> Callable[[ConsumeQueue, int, int, int], int]:
    """ConsumeQueue.ext_unit_of for a store: the record's ext unit (its tags code, store
    time and, with filter bitmaps on, its bitmap) appended to the queue's extension."""
    def ext_unit_of(cq: ConsumeQueue, phy: int, size: int, tags_code: int) -> int:
        if cq.ext is None:
            return 1
        try:
            msg = commit_log.look_message_by_offset(phy, size)
        except (CorruptRecordError, ValueError):
            msg = None
        table = bitmaps()
        bitmap = None
        if table is not None:
            bitmap = table.compute(cq.topic, phy + size,
                                   lambda: None if msg is None else msg.properties)
        return cq.ext.put(CqExtUnit(tags_code, 0 if msg is None else msg.store_timestamp,
                                    bitmap))
    return ext_unit_of
