"""Type stub of rocketstore/_native/topic_queue_table.pyx: RocketMQ's topicQueueTable."""

from typing import Final, final

from typing_extensions import disjoint_base

MAX_QUEUE_ID: Final[int]
"""The highest queue id a topic may have."""

@final
class QueueCounters:
    """One topic's next queue offsets (native; no Python API)."""

@disjoint_base
class TopicQueueTable:
    """Next logical offset of every (topic, queue id)."""

    @property
    def version(self) -> int:
        """Bumped whenever a topic's counters are dropped (remove, clear)."""

    def get(self, topic: str, queue_id: int) -> int:
        """Next queue offset (0 for a queue not seen)."""

    def set(self, topic: str, queue_id: int, next_offset: int) -> None: ...
    def remove(self, topic: str) -> None: ...
    def remove_queue(self, topic: str, queue_id: int) -> None:
        """Forget one queue; the topic goes with its last queue."""
    def clear(self) -> None: ...
    def items(self) -> list[tuple[str, int, int]]:
        """(topic, queue_id, next_offset) of every queue seen, sorted."""

    def __len__(self) -> int: ...
