# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""RocketMQ's topicQueueTable: the next queue offset of every (topic, queue id), which the
record writer assigns and advances under the put lock."""
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc

from rocketstore._native.message import validate_topic

MAX_QUEUE_ID = MAX_QID


cdef class QueueCounters:
    """One topic's next queue offsets, indexed by queue id (-1: a queue not seen yet)."""

    def __dealloc__(self):
        free(self.next)

    cdef int64_t* slot(self, int queue_id) except NULL:
        cdef int new_n, i
        cdef int64_t* grown
        if queue_id < 0 or queue_id > MAX_QID:
            raise ValueError(f"queue_id must be in [0, {MAX_QUEUE_ID}], got {queue_id}")
        if queue_id >= self.n:
            new_n = max(queue_id + 1, self.n * 2, 8)
            grown = <int64_t*>realloc(self.next, new_n * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            for i in range(self.n, new_n):
                grown[i] = -1      # -1: queue not seen yet
            self.next = grown
            self.n = new_n
        return &self.next[queue_id]


cdef class TopicQueueTable:
    """Next logical offset of every (topic, queue id); only validated topics get an entry."""

    def __cinit__(self):
        self.topics = {}
        self.version = 0

    cdef QueueCounters counters(self, str topic, bint validate=True):
        cdef object c = self.topics.get(topic)
        if c is None:
            if validate:
                validate_topic(topic)
            c = QueueCounters()
            self.topics[topic] = c
        return <QueueCounters>c

    def get(self, str topic, int queue_id):
        """Next queue offset of the queue (0 for a queue not seen)."""
        c = self.topics.get(topic)
        if c is None or queue_id >= (<QueueCounters>c).n:
            return 0
        v = (<QueueCounters>c).next[queue_id]
        return v if v >= 0 else 0

    def set(self, str topic, int queue_id, int64_t next_offset):
        if queue_id < 0 or next_offset < 0:
            raise ValueError("queue_id and next_offset must be >= 0")
        self.counters(topic).slot(queue_id)[0] = next_offset

    def remove(self, str topic):
        self.topics.pop(topic, None)
        self.version += 1

    def remove_queue(self, str topic, int queue_id):
        """Forget one queue (its next put starts at offset 0 again); the topic goes with its
        last queue."""
        c = self.topics.get(topic)
        if c is None:
            return
        if 0 <= queue_id < (<QueueCounters>c).n:
            (<QueueCounters>c).next[queue_id] = -1
        for q in range((<QueueCounters>c).n):
            if (<QueueCounters>c).next[q] >= 0:
                break
        else:
            self.topics.pop(topic, None)
        self.version += 1

    def clear(self):
        self.topics.clear()
        self.version += 1

    def items(self):
        """(topic, queue_id, next_offset) of every queue seen, sorted."""
        out = []
        for topic, c in self.topics.items():
            for q in range((<QueueCounters>c).n):
                if (<QueueCounters>c).next[q] >= 0:
                    out.append((topic, q, (<QueueCounters>c).next[q]))
        out.sort()
        return out

    def __len__(self):
        return len(self.items())
