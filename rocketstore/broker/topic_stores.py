"""Where a topic's messages live: the broker routes by topic config. A memory topic
(``TopicConfig.memory``) lives in the :class:`~rocketstore.store.MemoryMessageStore`, every
other topic in the :class:`~rocketstore.store.MessageStore`.

The send and pull processors branch on the topic config they already hold; the processors
that answer queue offsets (QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, topic stats, consumer
progress, offset resets) ask :class:`TopicStores`, which answers the same questions as the
store by topic.
"""

from __future__ import annotations

import logging

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.store import MemoryMessageStore, MessageStore, default_max_bytes

log = logging.getLogger(__name__)


def open_memory_store(config: BrokerConfig, store_host: str) -> MemoryMessageStore:
    """The broker's memory store: memoryTopicMaxBytes (0: 75% of the memory available now),
    the store's message size and in-memory transfer limits."""
    max_bytes = config.memory_topic_max_bytes or default_max_bytes()
    store = config.store
    return MemoryMessageStore(max_bytes, store_host, max_message_size=store.max_message_size,
                              max_transfer_bytes=store.max_transfer_bytes_on_message_in_memory,
                              max_transfer_count=store.max_transfer_count_on_message_in_memory)


class TopicStores:
    """The queue questions of the broker's processors, answered by the store that holds the
    topic."""

    def __init__(self, store: MessageStore, memory: MemoryMessageStore,
                 topics: TopicConfigManager) -> None:
        self.store = store
        self.memory = memory
        self.topics = topics

    def is_memory(self, topic: str) -> bool:
        cfg = self.topics.table.get(topic)
        return cfg is not None and cfg.memory

    def for_topic(self, topic: str) -> MessageStore | MemoryMessageStore:
        return self.memory if self.is_memory(topic) else self.store

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.for_topic(topic).get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.for_topic(topic).get_min_offset_in_queue(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.for_topic(topic).get_offset_in_queue_by_time(topic, queue_id, timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        return self.for_topic(topic).get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.for_topic(topic).get_earliest_message_time(topic, queue_id)

    def topic_deleted(self, topic: str) -> None:
        """A deleted topic's memory messages go (a disk topic's stay until retention)."""
        if self.memory.delete_topic(topic):
            log.info("memory topic %s deleted with its messages", topic)
