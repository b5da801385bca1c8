"""KafkaServer: wires the components together, starts them in order, and shuts them down
cleanly (in-flight requests answered, logs flushed, checkpoints and the clean-shutdown marker
written)."""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from kafkalite.config.broker_configs import broker_log_config
from kafkalite.config.dynamic_broker_config import (LOG_CLEANER_CONFIGS, LOG_CONFIGS, DynamicBrokerConfig)
from kafkalite.config.server_config import KafkaConfig
from kafkalite.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator, OffsetConfig
from kafkalite.coordinator.group.group_metadata_manager import GroupMetadataManager
from kafkalite.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from kafkalite.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from kafkalite.coordinator.transaction.transaction_state_manager import TransactionConfig, TransactionStateManager
from kafkalite.log.cleaner_manager import CleanerConfig, LogCleaner
from kafkalite.log.log_manager import LogManager
from kafkalite.metrics.stats import EventLoopLagMonitor, RequestMetrics
from kafkalite.network.socket_server import ConnectionInfo, Endpoint, SocketServer
from kafkalite.replica.alter_partition_manager import AlterPartitionManager, controller_endpoint_from
from kafkalite.replica.fetcher.replica_fetcher_manager import ReplicaFetcherManager
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.replica.replica_selector import create_replica_selector
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.cluster.topic_validation import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kafkalite.protocol import inter_broker
from kafkalite.server.handler import ApiSpec, lazy_spec
from kafkalite.server.kafka_apis import KafkaApis
from kafkalite.server.admin_manager import ZkAdminManager
from kafkalite.server.broker_epoch import BrokerEpoch
from kafkalite.controller.zk.znode_store import StoreError
from kafkalite.log.descriptor_limit import check_descriptor_budget
from kafkalite.server.event_loop_monitor import EventLoopMonitor
from kafkalite.server.cluster_member import (ClusterStartupError, InternalTopics, connect_local_store,
                                             connect_zookeeper, controlled_shutdown,
                                             internal_topic_records, wait_for_initial_metadata)
from kafkalite.server.dynamic_config_manager import DynamicConfigManager
from kafkalite.controller.broker_registration import registration_of
from kafkalite.controller.kafka_controller import ControllerConfig, KafkaController
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.cluster.metadata_cache import SECURITY_PROTOCOL_IDS, BrokerEndpoint, BrokerInfo, MetadataCache
from kafkalite.server.meta_properties import (MetaPropertiesError, broker_id_of, load_ensemble,
                                               write_meta_properties)
from kafkalite.server.scheduler import Scheduler
from kafkalite.server.services import BrokerServices

MIN_LISTEN_BACKLOG = 1024


if TYPE_CHECKING:
    from kafkalite.metrics.prometheus import PrometheusEndpoint

log = logging.getLogger(__name__)


def cleaner_config(cfg: KafkaConfig) -> CleanerConfig:
    """LogCleaner.cleanerConfig: the log.cleaner.* settings of a (current) broker config."""
    return CleanerConfig(num_threads=cfg.log_cleaner_threads,
                         dedupe_buffer_size=cfg.log_cleaner_dedupe_buffer_size,
                         dedupe_buffer_load_factor=cfg.log_cleaner_io_buffer_load_factor,
                         io_buffer_size=cfg.log_cleaner_io_buffer_size,
                         max_message_size=cfg.message_max_bytes,
                         backoff_ms=cfg.log_cleaner_backoff_ms)


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        # broker.id -1: the id comes from meta.properties or ZooKeeper at start-up (startup sets it)
        self.broker_id = config.broker_id
        self.started_at = time.monotonic()
        self.socket_server: Optional[SocketServer] = None
        self.kafka_apis: Optional[KafkaApis] = None
        self.log_manager: Optional[LogManager] = None
        self.replica_manager: Optional[ReplicaManager] = None
        self.alter_partition_manager: Optional[AlterPartitionManager] = None
        self.group_coordinator: Optional[GroupCoordinator] = None
        self.transaction_coordinator: Optional[TransactionCoordinator] = None
        self.add_partitions_to_txn_manager: Optional[AddPartitionsToTxnManager] = None
        self.scheduler = Scheduler()
        self.bound: list[Endpoint] = []
        self.log_cleaner: Optional[LogCleaner] = None
        self.dynamic_config = DynamicBrokerConfig(config, self.broker_id,
                                                  log_cleaner_enabled=config.log_cleaner_enable)
        # the metadata store (ZooKeeper with zookeeper.connect, else the local znode tree) and
        # what runs on it: the same controller code either way
        self.zk_store: Any = None
        self.zk: Any = None
        self.kafka_controller: Optional[KafkaController] = None
        self.config_manager: Optional[DynamicConfigManager] = None
        self.broker_epoch = BrokerEpoch()
        self.metadata_cache: Optional[MetadataCache] = None
        self.producer_ids: Any = None
        self.admin_manager: Optional[ZkAdminManager] = None
        self._shutdown_done = False
        # whether the shutdown unfreezes the GC's frozen objects (startup froze them for an
        # in-process broker; `kafkalite serve` owns its process's GC and exits after the shutdown)
        self._unfreeze_gc_at_shutdown = False
        # how late the loop runs callbacks (read by the metrics endpoint); started with the server
        self.event_loop_monitor = EventLoopMonitor()
        # kafkalite.metrics.prometheus.port: the Prometheus endpoint (None: off, nothing counted per request)
        self.request_metrics = RequestMetrics()
        self.metrics_endpoint: Optional[PrometheusEndpoint] = None
        self.metrics_address: Optional[tuple[str, int]] = None

    async def _get_or_generate_broker_id(self, cluster_id: str, log_dirs: list[str]) -> int:
        """KafkaServer.startup's meta.properties steps: every log dir's file verified against the
        cluster id and a configured broker.id; the broker id configured, else stored, else
        generated (/brokers/seqid's new version + reserved.broker.max.id); then the file written
        wherever it is missing or differs."""
        cfg = self.config
        ensemble = await asyncio.to_thread(load_ensemble, log_dirs)
        ensemble.verify(cluster_id, cfg.broker_id if cfg.broker_id >= 0 else None)
        broker_id = broker_id_of(cfg.broker_id, ensemble, cfg.broker_id_generation_enable)
        if broker_id is None and not self.cluster_mode and await self.zk.get_all_topics():
            # a single-node log dir from before meta.properties existed here: kafkalite ran
            # broker.id=-1 as broker 0 then, and every replica it stored names 0
            log.info("No meta.properties in a single-node log dir that holds topics: keeping broker id 0, "
                     "the id its replicas were written with")
            broker_id = 0
        if broker_id is None:
            try:
                broker_id = await self.zk.generate_broker_sequence_id() + cfg.reserved_broker_max_id
            except StoreError as e:
                raise ClusterStartupError(f"Failed to generate broker.id: {e}") from None
        for log_dir, meta in ensemble.rewritten(cluster_id, broker_id).items():
            log.info("Rewriting %s%smeta.properties", log_dir, os.sep)
            try:
                await asyncio.to_thread(write_meta_properties, log_dir, meta)
            except OSError as e:
                # Kafka takes the dir offline; kafkalite has no offline log dirs
                raise MetaPropertiesError(f"Error while writing meta.properties to {log_dir}: "
                                          f"{e.strerror or e}") from None
        return broker_id

    def _advertised(self, bound: list[Endpoint]) -> list[BrokerEndpoint]:
        protocols = self.config.listener_protocols()

        def protocol(name: str) -> int:
            return SECURITY_PROTOCOL_IDS.get(protocols.get(name, "PLAINTEXT"), 0)
        if self.config.advertised_listeners:
            return [BrokerEndpoint(e.name, e.host or socket.getfqdn(), e.port, protocol(e.name))
                    for e in self.config.advertised_endpoints()]
        return [BrokerEndpoint(e.listener_name, e.host if e.host not in ("", "0.0.0.0", "::") else socket.getfqdn(),
                               e.port, protocol(e.listener_name)) for e in bound]

    @property
    def cluster_mode(self) -> bool:
        return self.config.zookeeper_connect is not None

    async def _connect_metadata_store(self, log_dirs: list[Path]) -> None:
        if self.cluster_mode:
            self.zk_store, self.zk = await connect_zookeeper(self.config)
        else:
            # the embedded single-node mode: the same znodes in a file beside the logs
            self.zk_store, self.zk = await connect_local_store(Path(log_dirs[0]))

    async def startup(self) -> list[Endpoint]:
        cfg = self.config
        self.event_loop_monitor.start()
        log_dirs = cfg.log_dirs_list()
        # Created, validated and locked first: a second broker on these directories stops here,
        # before the embedded metadata store beside the logs is read or written.
        self.log_manager = LogManager(
            log_dirs, broker_log_config(self.dynamic_config.current),
            num_recovery_threads_per_data_dir=cfg.num_recovery_threads_per_data_dir)
        await asyncio.to_thread(self.log_manager.lock_log_dirs)
        # Fail in one line before the log load rather than with EMFILE midway through it. The
        # count lists every partition directory (0.15-0.3 s at 10,000, mostly system calls that
        # release the GIL): it runs in a worker thread while the metadata store loads.
        descriptor_budget = asyncio.ensure_future(asyncio.to_thread(check_descriptor_budget, log_dirs))
        try:
            await self._connect_metadata_store(log_dirs)
        except BaseException:
            await asyncio.gather(descriptor_budget, return_exceptions=True)
            raise
        await descriptor_budget
        cluster_id = await self.zk.get_or_create_cluster_id()
        log.info("Cluster ID = %s", cluster_id)
        # every component below takes the id decided here
        self.broker_id = await self._get_or_generate_broker_id(cluster_id, [str(d) for d in log_dirs])
        self.dynamic_config.broker_id = self.broker_id
        self.config_manager = DynamicConfigManager(
            self.broker_id, self.zk_store, self.zk, self.dynamic_config,
            default_log_config=lambda: broker_log_config(self.dynamic_config.current),
            apply_topic_config=self._apply_topic_config)
        await self.config_manager.load()
        # dynamic broker configs apply from the start, as Kafka's DynamicBrokerConfig.initialize
        # reads them before the log manager starts
        self.dynamic_config.load(self.config_manager)
        internal_topics = await internal_topic_records(self.zk)
        default_log_config = broker_log_config(self.dynamic_config.current)
        self.log_manager.default_config = default_log_config
        # Opening logs reads files (and recovers them after a crash): keep it off the loop.
        # The cyclic GC is paused meanwhile and the loaded logs frozen after: at 10,000
        # partitions each full pass re-scanned the whole heap of logs (0.2-0.4 s a pass, ~0.8 s
        # of the load, more in the LeaderAndIsr and UpdateMetadata that follow) and loading
        # makes next to no cyclic garbage. Unfrozen at shutdown, so an in-process broker's
        # logs are collectable once it stops.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            await asyncio.to_thread(self.log_manager.startup)
        finally:
            if gc_was_enabled:
                gc.enable()
        gc.freeze()
        self._unfreeze_gc_at_shutdown = gc_was_enabled
        # From here on the logs' fsyncs run in the log manager's thread pool.
        self.log_manager.start_flusher()

        cache = MetadataCache(cluster_id, self.broker_id)
        self.metadata_cache = cache
        listener = cfg.inter_broker_listener()
        # ISR changes go to the controller (Kafka's AlterPartitionManager); followers fetch from
        # their leaders (ReplicaFetcherManager), both over the inter-broker listener
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id, lambda: self.broker_epoch.current, controller_endpoint_from(cache, listener), cfg)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, cache,
                                              replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
                                              alter_partition_manager=self.alter_partition_manager,
                                              replica_selector=create_replica_selector(cfg.replica_selector_class))

        def endpoint_of(broker_id: int) -> Optional[tuple[str, int]]:
            ep = cache.alive_endpoint(broker_id, listener)
            return None if ep is None else (ep.host, ep.port)
        self.replica_manager.fetcher_manager = ReplicaFetcherManager(
            self.broker_id, cfg, self.replica_manager, endpoint_of, lambda: self.broker_epoch.current)

        specs: list[ApiSpec] = []
        handle_frame = lambda conn, frame: apis.handle_frame(conn, frame)  # noqa: E731
        self.socket_server = SocketServer(
            [Endpoint(e.name, e.host, e.port) for e in cfg.listener_endpoints()],
            handle_frame if cfg.kafkalite_metrics_prometheus_port is None else self.request_metrics.instrument(handle_frame),
            max_request_bytes=cfg.socket_request_max_bytes,
            send_buffer_bytes=cfg.socket_send_buffer_bytes,
            receive_buffer_bytes=cfg.socket_receive_buffer_bytes,
            # at least 1024: Kafka accepts on an acceptor thread of its own, kafkalite on the
            # event loop, between other work, so its queue must absorb a burst meanwhile
            listen_backlog=max(cfg.socket_listen_backlog_size, MIN_LISTEN_BACKLOG))
        self.bound = await self.socket_server.bind()

        broker_info = BrokerInfo(self.broker_id, tuple(self._advertised(self.bound)), cfg.broker_rack)
        # the controller's requests to this broker: handed to the handlers as objects, not
        # encoded to be decoded again here (other brokers get them over the network)
        own_connection = ConnectionInfo(f"controller-{self.broker_id}-local", cfg.inter_broker_listener(),
                                        "localhost", 0, cfg.listener_protocols().get(cfg.inter_broker_listener(),
                                                                                    "PLAINTEXT"))

        metrics = None if cfg.kafkalite_metrics_prometheus_port is None else self.request_metrics

        async def own_broker_handler(request: Any, api_version: int) -> Any:
            started = time.perf_counter()
            response = await apis.handle_request(request, api_version, f"controller-{self.broker_id}", own_connection)
            if metrics is not None:   # counted as the same request over a connection would be
                metrics.record(request.API_KEY, api_version, (time.perf_counter() - started) * 1000.0)
            return response
        self.kafka_controller = KafkaController(
            ControllerConfig(
                broker_id=self.broker_id, delete_topic_enable=cfg.delete_topic_enable,
                auto_leader_rebalance_enable=cfg.auto_leader_rebalance_enable,
                leader_imbalance_check_interval_seconds=cfg.leader_imbalance_check_interval_seconds,
                leader_imbalance_per_broker_percentage=cfg.leader_imbalance_per_broker_percentage,
                unclean_leader_election_enable=cfg.unclean_leader_election_enable,
                inter_broker_listener=cfg.inter_broker_listener(),
                controller_socket_timeout_ms=cfg.controller_socket_timeout_ms,
                own_address=self._loopback_address(cfg.inter_broker_listener()),
                own_broker_handler=own_broker_handler),
            registration_of(broker_info, cfg.listener_protocols()), self.zk_store, self.zk,
            on_broker_epoch=self.broker_epoch.set)
        try:
            await self.kafka_controller.register_broker()
        except StoreError as e:
            # e.g. broker.id still registered by another live session (a second broker with this
            # id, or this broker's previous process whose session has not expired yet), as in Kafka
            raise ClusterStartupError(f"cannot register broker {self.broker_id} in ZooKeeper: {e}") from None
        admin = ZkAdminManager(self.broker_id, self.zk, cache, default_log_config, cfg.num_partitions,
                               cfg.default_replication_factor, cfg.delete_topic_enable)
        self.admin_manager = admin
        coordinator_topics = InternalTopics(admin, cache, internal_topics, alone=not self.cluster_mode)
        zk = self.zk

        async def allocate_block(broker_id: int) -> tuple[int, int]:
            block = await zk.allocate_producer_id_block(broker_id)
            return block.first_producer_id, block.size
        # the first block is claimed by the first InitProducerId, as in Kafka 3.9
        self.producer_ids = ProducerIdManager(self.broker_id, allocate_block)
        group_storage = GroupMetadataManager(
            self.broker_id, cfg.offsets_topic_num_partitions, self.replica_manager, coordinator_topics,
            replication_factor=cfg.offsets_topic_replication_factor, segment_bytes=cfg.offsets_topic_segment_bytes,
            commit_timeout_ms=cfg.offsets_commit_timeout_ms, required_acks=cfg.offsets_commit_required_acks,
            max_metadata_size=cfg.offset_metadata_max_bytes, load_buffer_size=cfg.offsets_load_buffer_size)
        self.group_coordinator = GroupCoordinator(
            self.broker_id,
            GroupConfig(min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                        max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                        max_size=cfg.group_max_size,
                        initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms),
            OffsetConfig(max_metadata_size=cfg.offset_metadata_max_bytes,
                         retention_ms=cfg.offsets_retention_minutes * 60 * 1000,
                         retention_check_interval_ms=cfg.offsets_retention_check_interval_ms),
            group_storage)
        self.group_coordinator.startup()
        producer_ids = self.producer_ids
        self.transaction_coordinator = TransactionCoordinator(
            self.broker_id,
            TransactionStateManager(self.broker_id, self.replica_manager, coordinator_topics, TransactionConfig(
                transactional_id_expiration_ms=cfg.transactional_id_expiration_ms,
                transaction_max_timeout_ms=cfg.transaction_max_timeout_ms,
                num_partitions=cfg.transaction_state_log_num_partitions,
                replication_factor=cfg.transaction_state_log_replication_factor,
                segment_bytes=cfg.transaction_state_log_segment_bytes,
                load_buffer_size=cfg.transaction_state_log_load_buffer_size,
                min_isr=cfg.transaction_state_log_min_isr,
                abort_timed_out_transactions_interval_ms=cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                remove_expired_transactional_ids_interval_ms=cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
                request_timeout_ms=cfg.request_timeout_ms)),
            producer_ids, self.replica_manager, cache, self.group_coordinator,
            inter_broker_listener=cfg.inter_broker_listener())
        self.transaction_coordinator.startup()
        self.add_partitions_to_txn_manager = AddPartitionsToTxnManager(
            self.broker_id, cache, cfg.inter_broker_listener(), cfg.request_timeout_ms,
            self.transaction_coordinator.partition_for)
        services = BrokerServices(
            broker_id=self.broker_id, config=cfg, metadata_cache=cache,
            replica_manager=self.replica_manager, controller=coordinator_topics,
            producer_id_manager=producer_ids,
            fetch_sessions=FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots),
            group_coordinator=self.group_coordinator, group_metadata_manager=group_storage,
            transaction_coordinator=self.transaction_coordinator,
            dynamic_config=self.dynamic_config, admin_manager=admin,
            kafka_controller=self.kafka_controller, broker_epoch=self.broker_epoch,
            config_manager=self.config_manager, add_partitions_to_txn_manager=self.add_partitions_to_txn_manager)
        self._follow_coordinator_leadership()
        # each handler's module is imported and its handler made on the API's first request
        specs += [lazy_spec("api_versions", lambda m: m.make(lambda: specs))]
        specs += [self._lazy_handler(name, services) for name in (
            "metadata", "create_topics", "delete_topics", "produce", "fetch", "list_offsets", "init_producer_id",
            "offset_for_leader_epoch", "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
            "offset_commit", "offset_fetch", "describe_groups", "list_groups", "delete_groups", "offset_delete",
            "describe_configs", "alter_configs", "incremental_alter_configs", "create_partitions", "delete_records",
            "describe_cluster", "describe_log_dirs", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn",
            "write_txn_markers", "describe_transactions", "list_transactions", "txn_offset_commit",
            "describe_producers")]
        specs += self._inter_broker_specs(services)
        apis = self.kafka_apis = KafkaApis(specs)
        self._schedule_maintenance()
        self._start_log_cleaner()
        self._add_reconfigurables()
        await self.socket_server.start_serving()
        self.alter_partition_manager.start()
        self.config_manager.start()
        self.kafka_controller.startup()
        self._start_metrics_endpoint()
        # "ready" means serving with the cluster's metadata: a controller known, and alone (the
        # embedded mode) every partition led again
        await wait_for_initial_metadata(self.kafka_controller, cache, alone=not self.cluster_mode,
                                        timeout_s=max(10.0, cfg.zookeeper_session_timeout_ms / 1000))
        return self.bound

    def _start_metrics_endpoint(self) -> None:
        """The Prometheus endpoint, when kafkalite.metrics.prometheus.port is set: it reads this
        broker's components at each scrape (kafkalite.metrics.prometheus)."""
        port = self.config.kafkalite_metrics_prometheus_port
        rm, socket_server = self.replica_manager, self.socket_server
        if port is None or rm is None or socket_server is None:
            return
        groups = self.group_coordinator
        purgatories = [rm.produce_purgatory, rm.fetch_purgatory, rm.delete_records_purgatory]
        if groups is not None:
            purgatories += [groups.heartbeat_purgatory, groups.rebalance_purgatory]
        # Imported only when the endpoint is on: prometheus_client is ~50 ms of a broker's start-up.
        from kafkalite.metrics.prometheus import BrokerMetricSources, PrometheusEndpoint
        lag_monitor = EventLoopLagMonitor()    # fed by the server's loop monitor
        self.event_loop_monitor.on_sample = lag_monitor.record
        self.metrics_endpoint = PrometheusEndpoint(self.config.kafkalite_metrics_prometheus_host, port, BrokerMetricSources(
            broker_topic_stats=rm.broker_topic_stats, request_metrics=self.request_metrics,
            isr_stats=rm.isr_change_stats, lag_monitor=lag_monitor, replica_manager=rm,
            purgatories=lambda: purgatories, controller=self.kafka_controller,
            connection_counts=socket_server.connection_counts))
        self.metrics_address = self.metrics_endpoint.start()

    def _loopback_address(self, listener: str) -> Optional[tuple[str, int]]:
        """Where this broker's own controller reaches it: the bound inter-broker listener, over
        loopback when it is bound to every interface."""
        for e in self.bound:
            if e.listener_name == listener:
                host = "127.0.0.1" if e.host in ("", "0.0.0.0") else ("::1" if e.host == "::" else e.host)
                return host, e.port
        return None

    def _apply_topic_config(self, topic: str, config: Any) -> None:
        if self.replica_manager is not None:
            self.replica_manager.update_log_config(topic, config)
        # Kafka's TopicConfigHandler: unclean election turned on retries the topic's offline partitions
        if config.unclean_leader_election_enable and self.kafka_controller is not None:
            self.kafka_controller.enable_topic_unclean_leader_election(topic)

    @staticmethod
    def _lazy_handler(name: str, services: BrokerServices) -> ApiSpec:
        return lazy_spec(name, lambda module: module.make(services))

    def _inter_broker_specs(self, services: BrokerServices) -> list[ApiSpec]:
        """The controller-to-broker APIs, and ElectLeaders, served in cluster mode."""
        config_manager = self.config_manager
        assert config_manager is not None
        lai = self._lazy_handler("leader_and_isr", services)

        async def leader_and_isr_with_configs(ctx: Any, req: Any) -> Any:
            # a topic created through another broker: read its config before its logs are made
            await config_manager.prefetch_topic_configs(
                t for t, _ in inter_broker.leader_and_isr_partition_states(req, ctx.api_version))
            return await lai.handler(ctx, req)
        return [ApiSpec(lai.api_key, lai.min_version, lai.max_version, leader_and_isr_with_configs)] + [
            self._lazy_handler(name, services) for name in (
                "update_metadata", "stop_replica", "controlled_shutdown", "alter_partition", "elect_leaders",
                "alter_partition_reassignments", "list_partition_reassignments")]

    def _follow_coordinator_leadership(self) -> None:
        """Coordinators load and unload their partitions as this broker gains and loses their
        leadership (Kafka's onLeadershipChange)."""
        assert self.replica_manager is not None
        groups, txns = self.group_coordinator, self.transaction_coordinator
        assert groups is not None and txns is not None

        def became_leader(tp: TopicPartition, leader_epoch: int) -> None:
            if tp.topic == GROUP_METADATA_TOPIC_NAME:
                groups.on_election(tp.partition)
            elif tp.topic == TRANSACTION_STATE_TOPIC_NAME:
                txns.on_election(tp.partition, leader_epoch)

        def became_follower_or_stopped(tp: TopicPartition) -> None:
            if tp.topic == GROUP_METADATA_TOPIC_NAME:
                groups.on_resignation(tp.partition)
            elif tp.topic == TRANSACTION_STATE_TOPIC_NAME:
                txns.on_resignation(tp.partition)
        self.replica_manager.add_leadership_listener(became_leader, became_follower_or_stopped)

    def _schedule_maintenance(self) -> None:
        cfg = self.config
        lm = self.log_manager
        rm = self.replica_manager
        assert lm is not None and rm is not None

        def retention() -> None:
            # Kafka's LogManager.cleanupLogs: each deletion is logged at INFO by the log, with
            # its reason; the round at DEBUG
            log.debug("Beginning log cleanup...")
            now = int(time.time() * 1000)
            total = 0
            for p in list(rm.partitions.values()):
                total += p.log.delete_old_segments(now, upper_bound_offset=p.high_watermark)
            log.debug("Log cleanup completed. %d files deleted in %d seconds", total,
                      (int(time.time() * 1000) - now) // 1000)

        self.scheduler.schedule("kafka-log-retention", retention, cfg.log_retention_check_interval_ms,
                                initial_delay_ms=30_000 if cfg.log_retention_check_interval_ms > 30_000 else None)
        # written in the log manager's pool, and only when they changed
        self.scheduler.schedule("kafka-recovery-point-checkpoint", lm.checkpoint_recovery_points_async,
                                cfg.log_flush_offset_checkpoint_interval_ms)
        self.scheduler.schedule("kafka-log-start-offset-checkpoint", lm.checkpoint_log_start_offsets_async,
                                cfg.log_flush_start_offset_checkpoint_interval_ms)
        # replication-offset-checkpoint: each partition's high watermark, read back at start-up
        self.scheduler.schedule("highwatermark-checkpoint", rm.checkpoint_high_watermarks,
                                cfg.replica_high_watermark_checkpoint_interval_ms)
        # Kafka's isr-expiration: leaders drop followers that fell behind
        self.scheduler.schedule("isr-expiration", rm.shrink_isrs, max(1, cfg.replica_lag_time_max_ms // 2))
        # flush.ms (default log.flush.interval.ms): the log manager flushes each dirty log when due
        # Kafka's PeriodicProducerExpirationCheck: forget producers idle past producer.id.expiration.ms
        self.scheduler.schedule(
            "PeriodicProducerExpirationCheck",
            lambda: lm.remove_expired_producers(int(time.time() * 1000),
                                                self.dynamic_config.current.producer_id_expiration_ms),
            cfg.producer_id_expiration_check_interval_ms)

    def _start_log_cleaner(self) -> None:
        """Compaction (Kafka starts its LogCleaner with the LogManager when enabled)."""
        cfg = self.config
        rm = self.replica_manager
        assert rm is not None and self.log_manager is not None
        if not cfg.log_cleaner_enable or cfg.log_cleaner_threads < 1:
            return

        def last_stable_offset(topic: str, partition: int) -> Optional[int]:
            p = rm.get_partition(TopicPartition(topic, partition))
            return None if p is None else p.last_stable_offset

        self.log_cleaner = LogCleaner(self.log_manager, cleaner_config(self.dynamic_config.current),
                                      upper_bound=last_stable_offset)
        self.log_cleaner.startup()

    def _add_reconfigurables(self) -> None:
        """What a dynamic broker config change does to the running broker (Kafka's
        BrokerReconfigurables). producer.id.expiration.ms and transaction.partition.verification.enable
        are read from the current config where they are used; thread counts, listener, connection,
        SSL/SASL, metrics-reporter and remote-storage configs are stored and described but change
        nothing in a one-process asyncio broker (docs/operations.md)."""
        self.dynamic_config.add_reconfigurable(LOG_CONFIGS, self._reconfigure_log_defaults)
        if self.log_cleaner is not None:
            cleaner = self.log_cleaner
            self.dynamic_config.add_reconfigurable(
                LOG_CLEANER_CONFIGS, lambda _old, new: cleaner.reconfigure(cleaner_config(new)))

    def _reconfigure_log_defaults(self, _old: KafkaConfig, new: KafkaConfig) -> None:
        """DynamicLogConfig.reconfigure: new broker defaults for every log, topic overrides kept;
        each log uses them from its next append, roll or retention check."""
        assert self.log_manager is not None and self.replica_manager is not None
        defaults = broker_log_config(new)
        self.log_manager.default_config = defaults
        if self.admin_manager is not None:
            self.admin_manager.default_log_config = defaults
        assert self.config_manager is not None
        for topic in {tp.topic for tp in self.replica_manager.partitions}:
            self.replica_manager.update_log_config(topic, self.config_manager.topic_log_config(topic))

    async def shutdown(self) -> None:
        if self._shutdown_done:
            return
        self._shutdown_done = True
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        # No new connections; then every request still waiting is answered before the
        # connections close: parked JoinGroup/SyncGroup get NOT_COORDINATOR, long-poll fetches
        # and acks=all produces complete now with what the logs hold.
        if self.kafka_controller is not None and self.config.controlled_shutdown_enable \
                and self.metadata_cache is not None and self.broker_epoch.current >= 0:
            # leadership moves off this broker while it still serves (Kafka's controlledShutdown)
            await controlled_shutdown(self.config, self.broker_id, self.broker_epoch.current, self.metadata_cache)
        if self.socket_server is not None:
            self.socket_server.stop_accepting()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.shutdown()   # its timer and marker tasks
        if self.add_partitions_to_txn_manager is not None:
            await self.add_partitions_to_txn_manager.shutdown()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.replica_manager is not None:
            self.replica_manager.complete_delayed_requests()
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        if self.kafka_apis is not None:
            await self.kafka_apis.cancel_local_requests()   # the controller's, to this broker
        await self.scheduler.shutdown()
        if self.replica_manager is not None:
            if self.replica_manager.fetcher_manager is not None:
                await self.replica_manager.fetcher_manager.shutdown()
            await self.replica_manager.checkpoint_high_watermarks()
            self.replica_manager.shutdown()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.shutdown()
        if self.log_cleaner is not None:
            await self.log_cleaner.shutdown()   # before the logs close under it
        if self.log_manager is not None:
            await self.log_manager.stop_flusher()
            await asyncio.to_thread(self.log_manager.shutdown)
            if self._unfreeze_gc_at_shutdown:
                gc.unfreeze()   # frozen after the log load (startup)
        if self.kafka_controller is not None:
            await self.kafka_controller.shutdown()
        if self.config_manager is not None:
            self.config_manager.stop()
        if isinstance(self.producer_ids, ProducerIdManager):
            await self.producer_ids.shutdown()
        await self.event_loop_monitor.close()
        if self.zk_store is not None:
            await self.zk_store.close()   # the registration and (if held) /controller go with the session
