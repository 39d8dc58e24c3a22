"""BrokerController: the broker's parts wired together, started and stopped (RocketMQ's
BrokerController, without the parts rocketstore does not have).

Start: the remoting server binds first (so a ``listenPort`` of 0 knows its port, which the
store writes into every record as its store host), then the store opens (recovery runs in a
worker thread; requests meanwhile are answered SYSTEM_BUSY "starting"), the tables load, the
processors are registered, the periodic work is scheduled, and the broker registers with every
name server. Stop: unregister, stop serving (held pulls are answered first), stop the schedule
service, write the tables and the consumer offsets, shut the store down (flushed).

Read-only (``readOnly=true``, with a ``brokerPermission`` without PERM_WRITE): the store is
opened read-only (no lock, no service, no file changed; a store not shut down cleanly is served
as its valid prefix, recovery truncates and rebuilds nothing), the tables and consumer offsets
live in memory and are never written, and the schedule, transaction check and HA services do
not run: serving such a broker leaves every file of the store as it was. A directory without a
CommitLog is refused.

Periodic work: consumer offsets written every ``flushConsumerOffsetInterval`` (in a worker
thread, from a snapshot), silent clients dropped every 10 s, registration every
``registerNameServerPeriod``. Table files are written in a worker thread too (one at a time,
newest content wins), so the event loop never waits for an fsync.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from rocketstore.broker.acl import AclFile, RequestGuard
from rocketstore.broker.client_groups import ConsumerManager, ProducerManager
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.broker.json_table import JsonTableFile
from rocketstore.broker.live_config import ConfigUpdate, persist_update, plan_update
from rocketstore.broker.long_polling import PullRequestHoldService
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.broker.processors.acl import AclAdminProcessor, AclDisabledProcessor
from rocketstore.broker.processors.admin import AdminBrokerProcessor
from rocketstore.broker.processors.end_transaction import EndTransactionProcessor
from rocketstore.broker.processors.heartbeat import ClientManageProcessor
from rocketstore.broker.processors.inspect import InspectProcessor
from rocketstore.broker.processors.maintenance import MaintenanceProcessor
from rocketstore.broker.processors.offsets import ConsumerOffsetProcessor
from rocketstore.broker.processors.pull import PullMessageProcessor
from rocketstore.broker.processors.query import QueryMessageProcessor
from rocketstore.broker.processors.send import SendMessageProcessor
from rocketstore.broker.processors.send_back import SendBackProcessor
from rocketstore.broker.processors.stats import BrokerStatsProcessor
from rocketstore.broker.rebalance_lock import RebalanceLockManager
from rocketstore.broker.registration import BrokerIdentity, BrokerRegistrar
from rocketstore.broker.replicas_manager import ReplicasManager
from rocketstore.broker.schedule import ScheduleMessageService
from rocketstore.broker.slave_sync import FIRST_SYNC_DELAY_S, SYNC_PERIOD_S, SlaveSynchronize
from rocketstore.broker.stats import BrokerStatsManager
from rocketstore.broker.subscription_group import SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.broker.topic_stores import TopicStores, open_memory_store
from rocketstore.broker.transaction import TransactionalMessageService
from rocketstore.broker.transaction_check import TransactionalMessageCheckService
from rocketstore.common.text import quote
from rocketstore.ha import HAClient, HAService, ha_runtime_info
from rocketstore.remoting import (
    RemotingClient,
    RemotingClientConfig,
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RemotingServerConfig,
    RequestCode,
    ResponseCode,
    create_request,
    create_response,
)
from rocketstore.store import CONFIG_DIR, MemoryMessageStore, MessageStore, StorePaths

log = logging.getLogger(__name__)

SCAN_NOT_ACTIVE_CHANNEL_S = 10.0


class BrokerController:
    """A broker over a MessageStore; see the module docstring."""

    def __init__(self, config: BrokerConfig,
                 store_opener: Callable[[str, Any], MessageStore] | None = None, *,
                 native_send: bool = True, config_file: str | os.PathLike[str] | None = None) -> None:
        self.config = config
        #: the properties file the broker was read from: UPDATE_BROKER_CONFIG writes changes
        #: there (None: changes last until the broker stops)
        self.config_file = config_file
        #: SEND_MESSAGE / V2 straight to the native SendPath (False: through the processor's Python
        #: entry points, which run the same rules)
        self._native_send = native_send
        self.root = os.path.abspath(config.store.store_path_root_dir)
        #: opens the store (a seam for tests: an injected flush function, a slow disk)
        self._store_opener = store_opener or (lambda root, cfg: MessageStore.open(root, cfg))
        #: readOnly=true: nothing under root is written (see the module docstring)
        self.read_only = config.store.read_only
        config_dir = os.path.join(self.root, CONFIG_DIR)
        self.stats = BrokerStatsManager(config.broker_cluster_name,
                                        enable_queue_stat=config.enable_detail_stat)
        self.topics = TopicConfigManager(config, JsonTableFile(os.path.join(config_dir, "topics.json")),
                                         on_change=self._topics_changed)
        self.groups = SubscriptionGroupManager(
            config, JsonTableFile(os.path.join(config_dir, "subscriptionGroup.json")),
            on_change=lambda: self.persist_soon(self.groups))
        self.offsets = ConsumerOffsetManager(self.root)
        self.producers = ProducerManager(config.channel_expired_timeout)
        self.consumers = ConsumerManager(config.channel_expired_timeout, self._notify_group_changed)
        self.locks = RebalanceLockManager(config.rebalance_lock_max_live_time)
        self.store: MessageStore | None = None
        #: memory topics' messages (memory=true topics): in memory only, empty at every start
        self.memory_store: MemoryMessageStore | None = None
        #: appends sends and answers them when stored (SYNC_FLUSH, SYNC_MASTER); set by start()
        self.writer: MessageWriter | None = None
        #: queue offsets by topic, from the store that holds it
        self.topic_stores: TopicStores | None = None
        self.server = RemotingServer(self._server_config(config.listen_port))
        self.fast_server: RemotingServer | None = None
        self.client = RemotingClient(RemotingClientConfig())
        self.registrar: BrokerRegistrar | None = None
        self.schedule: ScheduleMessageService | None = None
        self.transaction_check: TransactionalMessageCheckService | None = None
        self.hold_service: PullRequestHoldService | None = None
        #: replication: every broker listens on haListenPort (as RocketMQ); a slave follows
        #: its master with ha_client
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.slave_sync: SlaveSynchronize | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="broker-io")
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._pending_persist: dict[int, Any] = {}
        self._started = False
        #: /metrics (metricsExporterType=PROM)
        self.metrics: Any = None
        #: plain_acl.yml (aclEnable=true)
        self.acl_file: AclFile | None = None
        #: controller mode (enableControllerMode): the role comes from the controller
        self.replicas: ReplicasManager | None = None
        #: set when the controller names another master: the broker restarts in its new role
        self.role_changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._register_pending = False
        self._register_again = False

    def _server_config(self, port: int) -> RemotingServerConfig:
        return RemotingServerConfig(
            listen_port=port, bind_address=self.config.bind_address,
            server_channel_max_idle_time_seconds=self.config.server_channel_max_idle_time_seconds)

    # ---- addresses ----

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """``brokerIP1:port``: where clients reach this broker (what it registers)."""
        return self.config.broker_addr(self.port)

    # ---- life ----

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self.server.register_default_processor(self._starting)
        self.server.add_connection_listener(on_close=self._connection_closed)
        await self.server.start()
        port = self.server.port
        fast_port = self.config.fast_listen_port if self.config.listen_port else None
        store_config = self.config.store_config_for(port).replace(store_path_root_dir=self.root)
        try:
            if self.read_only:
                self._check_is_store()
            if self.config.enable_controller_mode:
                self.store = await self._settle_role(store_config)
            else:
                self.store = await loop.run_in_executor(None, self._store_opener, self.root,
                                                        store_config)
            self.topics.load()
            self.groups.load()
            self.offsets.load()
            if self.read_only:
                self._add_what_the_store_holds(self.store)
            if self.config.acl_enable:
                self.acl_file = AclFile(self.acl_file_path())
                self.acl_file.load()
        except BaseException:
            await self.server.stop()
            if self.store is not None:
                await loop.run_in_executor(None, self.store.shutdown)
            raise
        store = self.store
        memory = self.memory_store = open_memory_store(self.config, store.config.store_host)
        self._note_memory_topics()
        queues = self.topic_stores = TopicStores(store, memory, self.topics)
        writer = self.writer = MessageWriter(store, loop)
        pull = PullMessageProcessor(self.config, store, self.topics, self.groups, self.consumers,
                                    self.offsets, self.stats)
        pull.memory = memory
        self.hold_service = PullRequestHoldService(loop, pull.process_without_suspend)
        pull.hold_service = self.hold_service
        store.add_arrival_listener(self.hold_service.arrival)
        memory.add_arrival_listener(self.hold_service.arrival)
        self.client_processor = ClientManageProcessor(
            self.producers, self.consumers, self.groups, self.topics, self.locks,
            self.config.notify_consumer_ids_changed_enable, self.config.enable_property_filter,
            store.enable_filter_bitmaps(self.config.max_error_rate_of_bloom_filter,
                                        self.config.expect_consumer_num_use_filter)
            if self.config.enable_calc_filter_bit_map else None)
        self.schedule = ScheduleMessageService(store, writer, os.path.join(self.root, CONFIG_DIR, "delayOffset.json"))
        self.schedule.load()
        store.add_arrival_listener(self.schedule.arrival)
        transactions = TransactionalMessageService(store, self.topics)
        self.transaction_check = TransactionalMessageCheckService(
            self.config, store, transactions, self.offsets, self.producers, self.topics, loop)
        self.send_processor = SendMessageProcessor(self.config, writer, self.topics, self.groups,
                                                   self.stats, transactions, memory)
        self.pull_processor = pull
        send_back = SendBackProcessor(self.config, writer, self.topics, self.groups, self.stats)
        send_back.memory = memory
        stats_processor = BrokerStatsProcessor(
            self.config, store, self.stats, topics=self.topics, groups=self.groups,
            offsets=self.offsets, consumers=self.consumers, schedule=self.schedule,
            hold_service=self.hold_service, broker_addr=self.address, queues=queues)
        processors: list[Any] = [
            self.send_processor,
            pull,
            ConsumerOffsetProcessor(queues, self.offsets),
            QueryMessageProcessor(store, memory),
            self.client_processor,
            send_back,
            EndTransactionProcessor(self.config, writer, transactions),
            AdminBrokerProcessor(self.config, store, topics=self.topics, groups=self.groups,
                                 offsets=self.offsets, consumers=self.consumers,
                                 producers=self.producers, stats=self.stats,
                                 schedule=self.schedule, hold_service=self.hold_service,
                                 queues=queues),
            stats_processor,
            MaintenanceProcessor(store, self.topics, self.update_config),
            AclDisabledProcessor() if self.acl_file is None else AclAdminProcessor(
                self.acl_file, lambda: (self.config.broker_cluster_name, self.config.broker_name, self.address)),
            InspectProcessor(store, self.consumers, self.producers),
        ]
        self._processors = processors
        servers = self._servers = [self.server]
        if fast_port is not None:
            self.fast_server = RemotingServer(self._server_config(fast_port))
            self.fast_server.add_connection_listener(on_close=self._connection_closed)
            servers.append(self.fast_server)
        for server in servers:
            for processor in processors:
                if processor is self.send_processor:
                    self.send_processor.register_with(server, native=self._native_send)
                else:
                    processor.register_with(server)
            server.register_default_processor(None)
            if self.acl_file is not None:
                server.set_request_guard(RequestGuard(self.acl_file))
        if self.fast_server is not None:
            try:
                await self.fast_server.start()
            except OSError as exc:
                log.warning("not serving the fast port %d: %s", fast_port, exc)
                self.fast_server = None
        if not self.read_only:
            await self._start_ha(store)
        writer.ha = self.ha_service     # SYNC_MASTER's sends wait for its slaves
        stats_processor.ha_info = lambda: ha_runtime_info(
            self.config.store.broker_role, self.ha_service, self.ha_client)
        if self.replicas is not None:
            self._start_controller_mode(store)
        if not self.is_slave and not self.read_only:
            self.schedule.start()       # a slave's delayed messages come from its master
            self.transaction_check.start()      # and its transactions are its master's to check
        self._schedule_every(self.config.flush_consumer_offset_interval / 1000, self._persist_offsets)
        self._schedule_every(SCAN_NOT_ACTIVE_CHANNEL_S, self._scan_not_active_channels)
        self.stats.hold_times = store.put_hold_times
        self._schedule_every(1.0, self._stats_tick)
        self._started = True
        if self.config.metrics_exporter_type == "PROM":
            await self._start_metrics(loop)
        namesrv = self.config.namesrv_addrs
        if namesrv:
            self.registrar = BrokerRegistrar(
                self.client, namesrv,
                BrokerIdentity(self.config.broker_cluster_name, self.config.broker_name,
                               self.registration_broker_id, self.address,
                               self.config.ha_server_addr(
                                   port, None if self.ha_service is None else self.ha_service.port)),
                timeout=self.config.register_broker_timeout_mills / 1000,
                period=self.config.register_name_server_period / 1000)
            outcomes = await self.registrar.register_broker_all(
                self.topics.registration_table(), self.topics.data_version)
            self._registered(outcomes)
            self._schedule_every(self.config.register_name_server_period / 1000, self.register_soon)
        log.info("broker %s (%s) serving %s", self.config.broker_name, self.config.broker_cluster_name,
                 self.address)

    async def _start_metrics(self, loop: asyncio.AbstractEventLoop) -> None:
        from rocketstore.broker.metrics import broker_families
        from rocketstore.remoting.metrics import LoopSnapshotCollector, PrometheusExporter

        self.metrics = PrometheusExporter(
            LoopSnapshotCollector(loop, lambda: broker_families(self)),
            self.config.metrics_prom_exporter_host, self.config.metrics_prom_exporter_port)
        await loop.run_in_executor(None, self.metrics.start)

    def _add_what_the_store_holds(self, store: MessageStore) -> None:
        """A store served read-only shows every topic it holds and every group with
        committed offsets, in topics.json and subscriptionGroup.json or not."""
        counts = {topic: max(queues) + 1 for topic in store.topics() if (queues := store.queues(topic))}
        topics = self.topics.add_stored_topics(counts)
        groups = self.groups.add_stored_groups({key.rpartition("@")[2] for key in self.offsets.table})
        if topics or groups:
            log.info("read-only: served as found, without their table entries: topics %s; groups %s",
                     quote(", ".join(topics) or "-"), quote(", ".join(groups) or "-"))

    def _check_is_store(self) -> None:
        """A read-only broker serves an existing store: a directory without its CommitLog
        directory is refused (an empty store is not made)."""
        commit_log = StorePaths.of(self.root, self.config.store.store_path_commit_log).commitlog
        if not os.path.isdir(commit_log):
            raise FileNotFoundError(f"{self.root} is not a store: it has no CommitLog directory "
                                    f"({commit_log}); readOnly=true serves an existing store")

    def acl_file_path(self) -> str:
        """aclFile; by default plain_acl.yml beside the properties file (without one, in the
        store's config directory)."""
        if self.config.acl_file:
            return os.path.abspath(self.config.acl_file)
        if self.config_file is not None:
            return os.path.join(os.path.dirname(os.path.abspath(self.config_file)), "plain_acl.yml")
        return os.path.join(self.root, CONFIG_DIR, "plain_acl.yml")

    @property
    def serving_servers(self) -> list[RemotingServer]:
        """The remoting servers serving clients (the listen port's, the fast port's)."""
        return [s for s in (self.server, self.fast_server) if s is not None]

    def update_config(self, properties: dict[str, str]) -> ConfigUpdate:
        """UPDATE_BROKER_CONFIG: check ``properties`` (RocketMQ keys; ValueError names a bad
        one and changes nothing), put the settings read at every use in force at once, and
        write every known key to the broker's properties file (see live_config)."""
        assert self.store is not None
        update = plan_update(self.config, self.store.config, properties)
        if update.persist and self.config_file is not None and not self.read_only:
            persist_update(self.config_file, update.persist)
        if update.store:
            self.store.update_config(**update.store)
        if update.broker or update.store:
            old, new = self.config, self.config.replace(**update.broker)
            self.config = new
            for holder in (self.topics, self.groups, self.transaction_check, *self._processors):
                if getattr(holder, "config", None) is old:
                    holder.config = new
            self.client_processor.notify_enabled = new.notify_consumer_ids_changed_enable
            # the send paths read their settings once: new ones, registered in their place
            self.send_processor.reload_config(new)
            for server in self._servers:
                self.send_processor.register_with(server, native=self._native_send)
        if "broker_permission" in update.broker:
            self.topics.next_version()
        return update

    @property
    def registration_broker_id(self) -> int:
        """The brokerId registered with the name servers: in controller mode 0 for the
        master and the replica's id for a slave (RocketMQ 5)."""
        if self.replicas is not None:
            return 0 if self.replicas.is_master else self.config.broker_id
        return self.config.broker_id

    async def _settle_role(self, store_config: Any) -> MessageStore:
        """Controller mode: the role the controller gives, the store opened for it (see
        ReplicasManager.settle)."""
        replicas = self.replicas = ReplicasManager(self.config, self.client, self.root)
        replicas.role_changed = self.role_changed
        replicas.address = self.address
        replicas.ha_address = self.config.ha_server_addr(self.port, store_config.ha_listen_port)

        def open_store(role: str, master_ha: str | None) -> MessageStore:
            return self._store_opener(self.root, store_config.replace(
                broker_role=role, ha_master_address=master_ha))

        store, role, master_ha = await replicas.settle(open_store, self._stopping)
        self.config = self.config.replace(store=self.config.store.replace(
            broker_role=role, ha_master_address=master_ha))
        return store

    def _start_controller_mode(self, store: MessageStore) -> None:
        replicas = self.replicas
        assert replicas is not None
        for server in self._servers:
            replicas.serve_epochs(server, store)
        if replicas.is_master and self.ha_service is not None:
            replicas.start_sync_state_set(self.ha_service)
        ha_client = self.ha_client
        if ha_client is not None:
            replicas.ha_client_address = lambda: ha_client.local_address
        busy = [False]

        def tick() -> None:
            if busy[0] or self.role_changed.is_set():
                return
            busy[0] = True

            async def run() -> None:
                try:
                    await replicas.tick(store)
                finally:
                    busy[0] = False
            task = asyncio.ensure_future(run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._schedule_every(self.config.broker_heartbeat_interval / 1000, tick)

    @property
    def is_slave(self) -> bool:
        return self.config.store.broker_role == "SLAVE"

    async def _start_ha(self, store: MessageStore) -> None:
        """HAService on haListenPort; for a slave, HAClient towards haMasterAddress (or the
        address the name servers give, see _registered)."""
        self.ha_service = HAService(store, port=store.config.ha_listen_port,
                                    bind_address=self.config.bind_address)
        try:
            await self.ha_service.start()
        except OSError as exc:
            log.error("not listening on the HA port %d: %s", store.config.ha_listen_port, exc)
            self.ha_service = None
        if self.is_slave:
            self.ha_client = HAClient(store, store.config.ha_master_address
                                      or self.config.store.ha_master_address or None)
            await self.ha_client.start()
            self.slave_sync = SlaveSynchronize(
                self.client, self.address, topics=self.topics, groups=self.groups,
                offsets=self.offsets, schedule=self.schedule, persist=self._persist_synced)
            self._schedule_async_every(FIRST_SYNC_DELAY_S, SYNC_PERIOD_S, self.slave_sync.sync_all)

    def _persist_synced(self, manager: Any) -> None:
        """Write a table SlaveSynchronize changed, off the event loop."""
        if manager is self.offsets:
            self._persist_offsets()
        elif manager is self.schedule:
            self._io.submit(manager.persist)
        else:
            self.persist_soon(manager)

    def _registered(self, outcomes: list[Any]) -> None:
        """Report the registration (registering again soon when no name server answered);
        a slave without haMasterAddress follows the master the name servers name
        (RocketMQ's updateMasterHAServerAddrPeriodically); SlaveSynchronize asks the master
        address of the first reply."""
        assert self.registrar is not None
        self.registrar.after_registration(outcomes, self.register_soon)
        if self.slave_sync is not None:
            for outcome in outcomes:
                if outcome.ok and outcome.result is not None:
                    self.slave_sync.master_addr = outcome.result.master_addr
                    break
        if self.ha_client is None or self.config.store.ha_master_address:
            return
        for outcome in outcomes:
            if outcome.ok and outcome.result is not None and outcome.result.ha_server_addr:
                try:
                    self.ha_client.update_master_address(outcome.result.ha_server_addr)
                except ValueError as exc:
                    log.warning("name server %s: %s", outcome.namesrv_addr, exc)
                return

    def _starting(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, ResponseCode.SYSTEM_BUSY, "the broker is starting")

    async def stop(self) -> None:
        """Stop cleanly: unregister, stop serving, persist every table, shut the store down."""
        self._stopping.set()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self.registrar is not None:
            try:
                await self.registrar.stop(unregister=True)
            except Exception:
                log.exception("unregistering from the name servers failed")
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            await asyncio.get_running_loop().run_in_executor(None, metrics.stop)
        if self.hold_service is not None:
            self.hold_service.wake_all()
        if self.fast_server is not None:
            await self.fast_server.stop()
        await self.server.stop()
        await self.client.close()
        for task in list(self._tasks):
            task.cancel()
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.ha_service is not None:
            await self.ha_service.stop()
        loop = asyncio.get_running_loop()
        if self.schedule is not None and not self.read_only:     # its shutdown writes its offsets
            await loop.run_in_executor(None, self.schedule.shutdown)
        if self.transaction_check is not None:
            await loop.run_in_executor(None, self.transaction_check.shutdown)
        if self.memory_store is not None:
            self.memory_store.close()       # memory topics are lost at a stop, by design
        if self.store is not None:
            await loop.run_in_executor(self._io, self._persist_all)
            await loop.run_in_executor(None, self.store.shutdown)
        if self.writer is not None:
            self.writer.close()     # after the store's last flush: the sends it made durable
            self.writer = None
        self._io.shutdown(wait=True)
        self._started = False

    def _note_memory_topics(self) -> None:
        """One line on the memory topics' cap, and on the memory topics of topics.json: they
        start empty (their messages were in memory only)."""
        memory = self.memory_store
        assert memory is not None
        names = sorted(name for name, cfg in self.topics.table.items() if cfg.memory)
        if names or self.config.memory_topic_enable:
            log.info("memory topics hold at most %d bytes; %d memory topics start empty%s",
                     memory.max_bytes, len(names), f": {', '.join(names[:20])}" if names else "")
        if names and not self.config.memory_topic_enable:
            log.warning("memoryTopicEnable=false, but topics.json has %d memory topics: they are "
                        "served from memory; no more can be created", len(names))

    def _persist_all(self) -> None:
        if self.read_only:
            return
        for manager in (self.topics, self.groups):
            try:
                manager.persist()
            except OSError:
                log.exception("writing %s failed", manager.file.path)
        try:
            self.offsets.persist()
        except OSError:
            log.exception("writing the consumer offsets failed")
        if self.schedule is not None:
            self.schedule.persist()

    async def __aenter__(self) -> BrokerController:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # ---- periodic work ----

    def _schedule_every(self, period_s: float, action: Callable[[], None]) -> None:
        assert self._loop is not None
        loop = self._loop

        def tick() -> None:
            try:
                action()
            except Exception:
                log.exception("periodic broker task failed")
            self._timers.remove(handle[0])
            handle[0] = loop.call_later(period_s, tick)
            self._timers.append(handle[0])

        handle = [loop.call_later(period_s, tick)]
        self._timers.append(handle[0])

    def _schedule_async_every(self, first_s: float, period_s: float,
                              action: Callable[[], Awaitable[None]]) -> None:
        """Run ``action`` first_s from now, then every period_s after each run's start (at
        most one run at a time)."""
        assert self._loop is not None

        async def repeat() -> None:
            await asyncio.sleep(first_s)
            while True:
                began = asyncio.get_running_loop().time()
                try:
                    await action()
                except Exception:
                    log.exception("periodic broker task failed")
                await asyncio.sleep(max(0.0, period_s - (asyncio.get_running_loop().time() - began)))

        task = asyncio.ensure_future(repeat())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _stats_tick(self) -> None:
        assert self.store is not None
        self.stats.note_dispatch_behind(self.store.dispatch_behind_bytes())
        self.stats.tick()

    def _persist_offsets(self) -> None:
        if self.read_only:
            return
        snapshot = self.offsets.snapshot()
        if snapshot is not None:
            self._io.submit(self._write_offsets, snapshot)

    def _write_offsets(self, snapshot: Any) -> None:
        try:
            self.offsets.write(snapshot)
        except OSError:
            log.exception("writing the consumer offsets failed")

    def persist_soon(self, manager: TopicConfigManager | SubscriptionGroupManager) -> None:
        """Write a table file in the worker thread; the newest content wins."""
        if self.read_only:
            return
        data = manager.encode()
        key = id(manager)
        first = key not in self._pending_persist
        self._pending_persist[key] = data
        if first:
            self._io.submit(self._write_table, manager, key)

    def _write_table(self, manager: TopicConfigManager | SubscriptionGroupManager, key: int) -> None:
        data = self._pending_persist.pop(key, None)
        if data is None:
            return
        try:
            manager.file.write(data)
        except OSError:
            log.exception("writing %s failed", manager.file.path)

    def _topics_changed(self, register: bool) -> None:
        self.persist_soon(self.topics)
        if register and self._started:
            self.register_soon()

    def register_soon(self) -> None:
        """Register with every name server now; a change made while a registration is in
        flight is registered right after it (one registration at a time)."""
        if self.registrar is None:
            return
        if self._register_pending:
            self._register_again = True
            return
        self._register_pending = True

        async def register() -> None:
            try:
                while True:
                    self._register_again = False
                    assert self.registrar is not None
                    self._registered(await self.registrar.register_broker_all(
                        self.topics.registration_table(), self.topics.data_version))
                    if not self._register_again:
                        break
            finally:
                self._register_pending = False

        task = asyncio.ensure_future(register())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _scan_not_active_channels(self) -> None:
        dropped = self.consumers.scan_not_active(self.client_processor.group_notifies)
        dropped += self.producers.scan_not_active()
        for connection in set(dropped):
            # silent clients: their connection goes too, unless another client on it is alive
            if not self.consumers.connection_in_use(connection) and \
                    not self.producers.connection_in_use(connection):
                connection.close()

    # ---- connections ----

    def _connection_closed(self, connection: RemotingConnection) -> None:
        self.producers.connection_closed(connection)
        self.consumers.connection_closed(connection, self.client_processor.group_notifies
                                         if self._started else (lambda group: False))

    def _notify_group_changed(self, group: str, connections: list[RemotingConnection]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member of the group."""
        for connection in connections:
            if connection.is_closed:
                continue
            try:
                connection.invoke_oneway(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                        {"consumerGroup": group}))
            except Exception as exc:  # noqa: BLE001 - a closing connection
                log.debug("notifying %s failed: %s", connection.remote_address, exc)
