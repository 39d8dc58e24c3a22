"""What push and pull consumers share: subscriptions, rebalancing, offsets, pulling a queue.

RocketMQ's RebalanceImpl and the common half of its consumer implementations. Rebalancing runs
every ``rebalance_interval`` (20 s) and at once when a broker says the group changed
(NOTIFY_CONSUMER_IDS_CHANGED): for each subscribed topic, clustering consumers ask a broker for
the group's members and each keeps the queues the allocation strategy gives it (every member
computes the same split); broadcasting consumers take every queue. A queue that is no longer
ours has its offset committed and its pulling stopped; a new queue starts at the committed
offset, or where ``consume_from_where`` says for a group that never committed. Offsets are
committed every ``persist_consumer_offset_interval`` (5 s) and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from rocketstore.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rocketstore.client.config import ConsumerConfig, parse_consume_timestamp
from rocketstore.client.errors import MQClientError
from rocketstore.client.instance import ClientInstance
from rocketstore.client.message import (
    RETRY_GROUP_TOPIC_PREFIX,
    MessageConst,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    retry_topic,
)
from rocketstore.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rocketstore.client.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from rocketstore.client.subscription import Selector, SubscriptionData
from rocketstore.common.consume import ConsumeFromWhere, ConsumeType, MessageModel
from rocketstore.common.pull_sys_flag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rocketstore.remoting.codes import ROCKETMQ_VERSION_4_9_8_DESC
from rocketstore.remoting.route_bodies import MASTER_ID

log = logging.getLogger(__name__)


class BaseConsumer:
    """The shared core; subclasses start and stop the work on each queue."""

    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY

    def __init__(self, config: ConsumerConfig,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None) -> None:
        self.config = config
        self.group = config.consumer_group
        self.allocate_strategy: AllocateMessageQueueStrategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.subscribe_info: dict[str, set[MessageQueue]] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.instance: ClientInstance | None = None
        self.offset_store: OffsetStore | None = None
        #: the broker id each queue is pulled from next (the last pull's suggestWhichBrokerId;
        #: RocketMQ's PullAPIWrapper.pullFromWhichNodeTable)
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self.orderly = False
        self._running = False
        #: when start() ran (ms; the running info's PROP_CONSUMER_START_TIMESTAMP)
        self.started_ms = 0
        self._rebalance_event: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    # ---- life ----

    @property
    def running(self) -> bool:
        return self._running

    @property
    def client_id(self) -> str | None:
        return self.instance.client_id if self.instance else None

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def _check_running(self) -> ClientInstance:
        if not self._running or self.instance is None:
            raise MQClientError("the consumer is not running: call start() first")
        return self.instance

    async def _start_core(self) -> None:
        if self.group == "DEFAULT_CONSUMER":
            raise MQClientError("consumer_group must be set (DEFAULT_CONSUMER is reserved)")
        instance = ClientInstance(self.config)
        await instance.start()
        self.instance = instance
        if self.clustering:
            self.offset_store = RemoteBrokerOffsetStore(_BrokerAccess(self), self.group)
        else:
            instance_key = f"{self.config.client_ip}@{self.config.instance_name}"
            self.offset_store = LocalFileOffsetStore(self.config.local_offset_store_dir, instance_key, self.group)
        await self.offset_store.load()
        instance.consumers[self.group] = self
        self._running = True
        self.started_ms = int(time.time() * 1000)
        self._rebalance_event = asyncio.Event()
        for topic in list(self.subscriptions):
            try:
                await instance.update_route(topic)
            except Exception as exc:  # noqa: BLE001 - the route loop tries again
                log.warning("route of %s not found at start: %s", topic, exc)
        try:
            await self._check_client_in_broker()
        except BaseException:
            await self._shutdown_core()
            raise
        await instance.send_heartbeat_to_all_brokers()
        self._tasks.append(asyncio.ensure_future(self._rebalance_loop()))
        self._tasks.append(asyncio.ensure_future(self._persist_loop()))
        if self.orderly and self.clustering:
            self._tasks.append(asyncio.ensure_future(self._lock_loop()))
        self.rebalance_immediately()

    async def _check_client_in_broker(self) -> None:
        """An SQL92 subscription is checked by a broker of its topic before the consumer
        starts (MQClientInstance.checkClientInBroker): one the broker refuses fails start()."""
        instance = self._check_running()
        for topic, subscription in self.subscriptions.items():
            route = instance.topic_routes.get(topic)
            if subscription.is_tag_type or route is None:
                continue
            for broker in route.broker_datas:
                address = instance.broker_address(broker.broker_name)
                if address is not None:
                    await instance.api.check_client_config(address, self.group, instance.client_id,
                                                           subscription, instance.timeout)
                    break

    async def _shutdown_core(self) -> None:
        if not self._running or self.instance is None:
            return
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for mq, pq in list(self.process_queues.items()):
            pq.dropped = True
            await self._stop_queue(mq, pq)
        await self.persist_offsets()
        if self.orderly and self.clustering:
            await self.unlock_all()
        self.process_queues.clear()
        instance = self.instance
        instance.consumers.pop(self.group, None)
        await instance.unregister(None, self.group)
        await instance.shutdown()

    # ---- subscriptions ----

    def _subscribe(self, topic: str, expression: Selector) -> None:
        data = SubscriptionData.build(topic, expression)
        self.subscriptions[topic] = data
        if self._running and self.instance is not None:
            self.instance.spawn(self._after_subscription_change(topic), f"subscribing to {topic}")

    async def _after_subscription_change(self, topic: str) -> None:
        assert self.instance is not None
        await self.instance.update_route(topic)
        await self.instance.send_heartbeat_to_all_brokers()
        self.rebalance_immediately()

    def _unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self._running:
            self.rebalance_immediately()

    def _subscribe_retry_topic(self) -> None:
        """Clustering consumers also read their group's retry topic."""
        if self.clustering:
            topic = retry_topic(self.group)
            self.subscriptions.setdefault(topic, SubscriptionData.build(topic, "*"))

    # ---- ConsumerMember ----

    def subscribed_topics(self) -> set[str]:
        return set(self.subscriptions)

    def update_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        if self.subscribe_info.get(topic) != queues:
            self.subscribe_info[topic] = queues
            self.rebalance_immediately()

    def consumer_data(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.config.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group,
            "messageModel": self.config.message_model.value,
            "subscriptionDataSet": [sub.to_json() for sub in self.subscriptions.values()],
            "unitMode": False,
        }

    def rebalance_immediately(self) -> None:
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    def running_info(self) -> dict[str, Any]:
        return {
            "properties": {
                "consumeType": self.consume_type.value,
                "messageModel": self.config.message_model.value,
                "consumeOrderly": str(self.orderly).lower(),
                "clientId": self.client_id,
                # ConsumerRunningInfo's PROP_* keys, which mqadmin consumerStatus reads
                "PROP_CONSUME_TYPE": self.consume_type.value,
                "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
                "PROP_NAMESERVER_ADDR": self.config.namesrv_addr or "",
                "PROP_CLIENT_VERSION": ROCKETMQ_VERSION_4_9_8_DESC,
                "PROP_THREADPOOL_CORE_SIZE": str(getattr(self.config, "consume_thread_min", 0)),
                "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
            },
            "subscriptionSet": [sub.to_json() for sub in self.subscriptions.values()],
            # a map keyed by MessageQueue objects, as fastjson writes ConsumerRunningInfo's
            # TreeMap (dumps_object_keys writes a key of field pairs as an object)
            "mqTable": {tuple(sorted(mq.to_json().items())): pq.info() for mq, pq in self.process_queues.items()},
        }

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """An admin reset the group's offsets (RESET_CONSUMER_CLIENT_OFFSET): drop what is
        cached, take the new offsets, and let rebalancing start the queues again."""
        assert self.offset_store is not None
        for mq, pq in list(self.process_queues.items()):
            if mq.topic == topic:
                pq.dropped = True
                pq.clear()
                await self._stop_queue(mq, pq)
        for mq, offset in offsets.items():
            if mq.topic == topic:
                self.offset_store.update_offset(mq, offset, False)
                try:
                    await self.offset_store.persist(mq)
                except Exception as exc:  # noqa: BLE001
                    log.warning("committing the reset offset of %s failed: %s", mq, exc)
        for mq in [mq for mq in self.process_queues if mq.topic == topic]:
            del self.process_queues[mq]
        self.rebalance_immediately()

    # ---- rebalancing ----

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_event is not None
        while self._running:
            try:
                await asyncio.wait_for(self._rebalance_event.wait(), self.config.rebalance_interval / 1000)
            except asyncio.TimeoutError:
                pass
            self._rebalance_event.clear()
            try:
                await self.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - rebalancing goes on at the next turn
                log.warning("rebalance of %s failed: %s", self.group, exc)

    async def do_rebalance(self) -> None:
        instance = self._check_running()
        for topic in list(self.subscriptions):
            queues = self.subscribe_info.get(topic)
            if not queues:
                continue
            if not self.clustering:
                await self._update_process_queues(topic, set(queues))
                continue
            client_ids = await instance.find_consumer_id_list(topic, self.group)
            if not client_ids:
                log.info("no member of %s known to the brokers of %s yet", self.group, topic)
                continue
            allocated = self.allocate_strategy(self.group, instance.client_id, sorted(queues), sorted(client_ids))
            await self._update_process_queues(topic, set(allocated))
        for mq, pq in list(self.process_queues.items()):
            if mq.topic not in self.subscriptions:
                pq.dropped = True
                await self._release_queue(mq, pq)
                self.process_queues.pop(mq, None)

    async def _update_process_queues(self, topic: str, allocated: set[MessageQueue]) -> None:
        assert self.offset_store is not None
        for mq, pq in list(self.process_queues.items()):
            if mq.topic == topic and mq not in allocated:
                pq.dropped = True
                await self._release_queue(mq, pq)
                self.process_queues.pop(mq, None)
                log.info("%s: %s is no longer ours", self.group, mq)
        for mq in sorted(allocated - set(self.process_queues)):
            if self.orderly and self.clustering and not await self.lock(mq):
                log.info("%s: %s is locked by another member; later", self.group, mq)
                continue
            self.offset_store.remove_offset(mq)
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                log.info("%s: no start offset for %s yet", self.group, mq)
                continue
            pq = ProcessQueue()
            if self.orderly and self.clustering:
                pq.locked = True
            self.process_queues[mq] = pq
            log.info("%s: %s is ours from offset %d", self.group, mq, offset)
            self._start_queue(mq, pq, offset)

    async def _release_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Stop working on a queue that is no longer ours: commit its offset, forget it."""
        assert self.offset_store is not None
        await self._stop_queue(mq, pq)
        try:
            await self.offset_store.persist(mq)
        except Exception as exc:  # noqa: BLE001
            log.info("committing the offset of %s failed: %s", mq, exc)
        self.offset_store.remove_offset(mq)
        if self.orderly and self.clustering:
            await self.unlock(mq)

    def _start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        raise NotImplementedError

    async def _stop_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        raise NotImplementedError

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly assigned queue starts: the committed offset, else per
        ``consume_from_where``; -1 when that cannot be known now (try again later)."""
        assert self.offset_store is not None
        instance = self._check_running()
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1
        where = self.config.consume_from_where
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        try:
            if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (
                    where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET and is_retry):
                return 0
            address = await self._address(mq)
            if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET or is_retry:
                return await instance.api.get_max_offset(address, mq, instance.timeout)
            timestamp = parse_consume_timestamp(self.config.consume_timestamp)
            return await instance.api.search_offset(address, mq, timestamp, instance.timeout)
        except Exception as exc:  # noqa: BLE001
            log.warning("start offset of %s: %s", mq, exc)
            return -1

    # ---- offsets ----

    async def _persist_loop(self) -> None:
        while self._running:
            await asyncio.sleep(self.config.persist_consumer_offset_interval / 1000)
            try:
                await self.persist_offsets()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("committing offsets of %s failed: %s", self.group, exc)

    async def persist_offsets(self) -> None:
        if self.offset_store is not None:
            await self.offset_store.persist_all(list(self.process_queues))

    # ---- broker access ----

    async def _address(self, mq: MessageQueue) -> str:
        instance = self._check_running()
        address = instance.broker_address(mq.broker_name)
        if address is None:
            await instance.update_route(mq.topic)
            address = instance.broker_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"the broker {mq.broker_name} of {mq} is in no route")
        return address

    async def _pull_address(self, mq: MessageQueue) -> tuple[str, bool]:
        """Where to pull mq from: the broker the last pull suggested (the master at first), or
        any of its broker group's when that one is not in the route; whether it is a slave."""
        instance = self._check_running()
        broker_id = self.pull_from_which_node.get(mq, MASTER_ID)
        found = instance.find_broker_address_in_subscribe(mq.broker_name, broker_id)
        if found is None:
            await instance.update_route(mq.topic)
            found = instance.find_broker_address_in_subscribe(mq.broker_name, broker_id)
        if found is None:
            raise MQClientError(f"the broker {mq.broker_name} of {mq} is in no route")
        return found

    async def pull_queue(self, mq: MessageQueue, subscription: SubscriptionData, offset: int, max_nums: int,
                         *, suspend: bool, commit_offset: int = 0) -> PullResult:
        """One PULL_MESSAGE; the messages come back filtered by tag, with their MIN_OFFSET and
        MAX_OFFSET properties set (PullAPIWrapper.processPullResult)."""
        instance = self._check_running()
        address, from_slave = await self._pull_address(mq)
        sys_flag = FLAG_SUBSCRIPTION
        if suspend:
            sys_flag |= FLAG_SUSPEND
        if commit_offset > 0 and not from_slave:    # a slave keeps no committed offset
            sys_flag |= FLAG_COMMIT_OFFSET
        timeout = (self.config.consumer_timeout_millis_when_suspend if suspend
                   else instance.config.mq_client_api_timeout) / 1000
        result = await instance.api.pull_message(
            address, self.group, mq, offset, max_nums, sys_flag, commit_offset,
            self.config.broker_suspend_max_time_millis, subscription, timeout)
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        if result.messages:
            kept = subscription.filter(result.messages)
            min_text, max_text = str(result.min_offset), str(result.max_offset)
            for msg in kept:
                msg.properties[MessageConst.MIN_OFFSET] = min_text
                msg.properties[MessageConst.MAX_OFFSET] = max_text
            result.messages = kept
            if not kept:
                result.pull_status = PullStatus.NO_MATCHED_MSG
        return result

    def reset_retry_topic(self, messages: Iterable[MessageExt]) -> None:
        """A message from the retry topic shows its original topic (resetRetryAndNamespace)."""
        group_retry = retry_topic(self.group)
        for msg in messages:
            original = msg.properties.get(MessageConst.RETRY_TOPIC)
            if original and msg.topic == group_retry:
                msg.topic = original

    # ---- orderly locks ----

    async def lock(self, mq: MessageQueue) -> bool:
        instance = self._check_running()
        try:
            address = await self._address(mq)
            locked = await instance.api.lock_batch_mq(address, self.group, instance.client_id, [mq], instance.timeout)
        except Exception as exc:  # noqa: BLE001
            log.info("locking %s failed: %s", mq, exc)
            return False
        now_locked = mq in locked
        pq = self.process_queues.get(mq)
        if pq is not None:
            pq.locked = now_locked
            if now_locked:
                pq.last_lock_timestamp = time.monotonic()
        return now_locked

    async def lock_all(self) -> None:
        instance = self._check_running()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in by_broker.items():
            address = instance.broker_address(broker_name)
            if address is None:
                continue
            try:
                locked = await instance.api.lock_batch_mq(address, self.group, instance.client_id, mqs,
                                                          instance.timeout)
            except Exception as exc:  # noqa: BLE001
                log.info("renewing locks on %s failed: %s", broker_name, exc)
                continue
            for mq in mqs:
                pq = self.process_queues.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_timestamp = time.monotonic()

    async def unlock(self, mq: MessageQueue) -> None:
        instance = self.instance
        if instance is None:
            return
        address = instance.broker_address(mq.broker_name)
        if address is None:
            return
        try:
            await instance.api.unlock_batch_mq(address, self.group, instance.client_id, [mq], instance.timeout)
        except Exception as exc:  # noqa: BLE001
            log.info("unlocking %s failed: %s", mq, exc)

    async def unlock_all(self) -> None:
        instance = self.instance
        if instance is None:
            return
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in by_broker.items():
            address = instance.broker_address(broker_name)
            if address is None:
                continue
            try:
                await instance.api.unlock_batch_mq(address, self.group, instance.client_id, mqs, instance.timeout)
            except Exception as exc:  # noqa: BLE001
                log.info("unlocking queues on %s failed: %s", broker_name, exc)

    async def _lock_loop(self) -> None:
        while self._running:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)
            await self.lock_all()


class _BrokerAccess:
    """The consumer as the remote offset store sees it."""

    def __init__(self, consumer: BaseConsumer) -> None:
        self._consumer = consumer

    def broker_address(self, broker_name: str) -> str | None:
        instance = self._consumer.instance
        return instance.broker_address(broker_name) if instance else None

    async def update_route(self, topic: str) -> bool:
        instance = self._consumer._check_running()
        return await instance.update_route(topic)

    async def query_consumer_offset(self, address: str, group: str, mq: MessageQueue) -> int | None:
        instance = self._consumer._check_running()
        return await instance.api.query_consumer_offset(address, group, mq, instance.timeout)

    async def update_consumer_offset(self, address: str, group: str, mq: MessageQueue, offset: int) -> None:
        instance = self._consumer.instance
        if instance is None:
            raise MQClientError("the consumer is not running")
        await instance.api.update_consumer_offset(address, group, mq, offset, instance.timeout)
