# cython: language_level=3, boundscheck=False, wraparound=False
"""The counting half of the broker's statistics, in C: a StatsItem's two counters and the
send path's update of TOPIC_PUT_* and QUEUE_PUT_* (one call per stored send, no Python frame).

Snapshots, windows and the items' creation stay in Python (items.py, manager.py): they run on
a timer or once per topic and queue, not per send.
"""
cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject


cdef class Counter:
    """A counter (``value``) and how many times it was added to (``times``): RocketMQ's
    StatsItem's two AtomicLongs (64-bit)."""

    def __cinit__(self):
        self.value = 0
        self.times = 0

    def add(self, long long value, long long times=1):
        self.value += value
        self.times += times


@cython.final
cdef class PutCounts:
    """``record(topic, queue_id, messages, size)``: a stored send of ``messages`` (1, or a
    batch's count) and ``size`` bytes into TOPIC_PUT_NUMS/_SIZE, and QUEUE_PUT_NUMS/_SIZE when
    ``queue_stats``. ``topics`` is the live topic -> (nums, sizes, queues) table, ``queues`` a
    list by queue id of (nums, sizes) or None; ``new_topic(topic)`` and ``new_queue(topic,
    queue_id, queues)`` make and file the entries a first send needs."""

    def __init__(self, dict topics not None, new_topic, new_queue, bint queue_stats):
        self.topics = topics
        self.new_topic = new_topic
        self.new_queue = new_queue
        self.queue_stats = queue_stats

    cpdef record(self, str topic, Py_ssize_t queue_id, long long messages, long long size):
        cdef PyObject* found = PyDict_GetItem(self.topics, topic)
        cdef tuple entry = <tuple>found if found != NULL else self.new_topic(topic)
        cdef Counter nums = <Counter?>entry[0]
        cdef Counter sizes = <Counter?>entry[1]
        cdef list queues
        cdef object pair
        nums.value += messages
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        if not self.queue_stats:
            return None
        queues = <list?>entry[2]
        pair = None
        if 0 <= queue_id < PyList_GET_SIZE(queues):
            pair = <object>PyList_GET_ITEM(queues, queue_id)
        if pair is None:        # a queue's first put
            pair = self.new_queue(topic, queue_id, queues)
        nums = <Counter?>(<tuple?>pair)[0]
        sizes = <Counter?>(<tuple>pair)[1]
        nums.value += messages
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        return None
