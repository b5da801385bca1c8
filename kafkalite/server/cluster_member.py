"""What a broker adds in cluster mode (`zookeeper.connect` set): the ZooKeeper session, its
registration and the controller it runs, the admin manager, config sync, producer-id blocks,
the coordinators' view of their internal topics, and controlled shutdown (Kafka's KafkaServer
in ZooKeeper mode)."""
from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any, Optional

from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.cluster.topic_validation import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kafkalite.config.server_config import KafkaConfig
from kafkalite.cluster.topic_record import NewTopic, TopicRecord, TopicResult
from kafkalite.controller.zk.kafka_zk_client import KafkaZkClient
from kafkalite.controller.zk.local_store import LocalZNodeStore
from kafkalite.controller.zk.znode_store import StoreError, ZNodeStore
from kafkalite.network.broker_client import BrokerConnection
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.inter_broker import ControlledShutdownRequest

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3


class ClusterStartupError(Exception):
    """A start-up failure an operator caused (ZooKeeper unreachable, broker id taken): one line."""


async def connect_zookeeper(cfg: KafkaConfig) -> tuple[ZNodeStore, KafkaZkClient]:
    # kazoo is loaded only by brokers that use ZooKeeper (the embedded mode starts faster without it)
    from kafkalite.controller.zk.kazoo_store import KazooZNodeStore
    store = KazooZNodeStore(cfg.zookeeper_connect or "", session_timeout_ms=cfg.zookeeper_session_timeout_ms,
                            connection_timeout_ms=cfg.zookeeper_connection_timeout_ms_effective,
                            max_in_flight=cfg.zookeeper_max_in_flight_requests)
    try:
        await store.start()
    except StoreError as e:
        raise ClusterStartupError(str(e)) from None
    zk = KafkaZkClient(store)
    await zk.create_top_level_paths()
    return store, zk


async def connect_local_store(directory: Path) -> tuple[LocalZNodeStore, KafkaZkClient]:
    """The embedded single-node mode's metadata store: the znode tree in a file beside the logs."""
    store = LocalZNodeStore(directory)
    try:
        await store.start()
    except StoreError as e:
        raise ClusterStartupError(str(e)) from None
    zk = KafkaZkClient(store)
    await zk.create_top_level_paths()
    return store, zk


async def wait_for_initial_metadata(controller: Any, cache: MetadataCache, alone: bool, timeout_s: float) -> None:
    """Until this broker knows a controller and its own registration is in its metadata; alone
    (the embedded mode, where this broker is the controller) also until the failover that makes it
    leader of every partition has been applied. Gives up quietly after `timeout_s`: a cluster
    member keeps starting and serves once the controller reaches it, as Kafka does."""
    deadline = asyncio.get_running_loop().time() + timeout_s

    def ready() -> bool:
        if cache.controller_id < 0 or controller.broker_id not in cache.brokers:
            return False
        if not alone:
            return True
        if not controller.is_active or controller.events.current_event is not None or controller.events.queue_size:
            return False
        led = controller.context.partition_leadership
        return all(cache.topic(tp.topic) is not None and tp.partition in cache.topic(tp.topic).partitions
                   for tp in led)
    # checked every 5 ms and at once when the cache changes: the wake-up is queued by the
    # UpdateMetadata that completes the start, ahead of the clients' requests that arrive with it
    # (a Metadata for 10,000 partitions polled meanwhile would otherwise delay the check ~0.15 s)
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    listener = lambda _change: changed.set()  # noqa: E731
    cache.add_listener(listener)
    try:
        while not ready():
            if loop.time() > deadline:
                log.warning("Started before the controller's metadata arrived; serving what is known so far")
                return
            changed.clear()
            timer = loop.call_later(0.005, changed.set)
            try:
                await changed.wait()
            finally:
                timer.cancel()
    finally:
        cache.remove_listener(listener)


async def internal_topic_records(zk: KafkaZkClient) -> dict[str, TopicRecord]:
    """The coordinators' topics as ZooKeeper has them (their partition counts decide where a
    group or transactional id lives, so they are read before the coordinators start)."""
    out: dict[str, TopicRecord] = {}
    found = await zk.get_topic_assignments([GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME])
    for name, ta in found.items():
        if ta.partitions:
            out[name] = TopicRecord(name, ta.topic_id or uuid.UUID(int=0),
                                    {p: list(a.replicas) for p, a in ta.partitions.items()})
    return out


class InternalTopics:
    """What the group and transaction coordinators ask of "the controller" about their internal
    topics, in cluster mode: whether the topic exists (the metadata cache, or ZooKeeper as read
    at start-up), the live brokers, and its creation — started through the admin manager without
    waiting, as Kafka's AutoTopicCreationManager does, while FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE and the client retries.

    `alone`: the embedded single broker (no zookeeper.connect), which creates the topics with a
    replication factor reduced to the live brokers; a ZooKeeper-mode broker passes False and asks
    for the configured factor, as Kafka does (coordinator.internal_topics)."""

    def __init__(self, admin: Any, cache: MetadataCache, preloaded: dict[str, TopicRecord], *,
                 alone: bool) -> None:
        self.admin = admin
        self.cache = cache
        self.preloaded = preloaded
        self.alone = alone
        self._creating: dict[str, asyncio.Task[None]] = {}

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.cache.brokers)

    def topic_record(self, name: str) -> Optional[TopicRecord]:
        info = self.cache.topic(name)
        if info is not None and info.partitions:
            return TopicRecord(name, info.topic_id, {p: list(i.replicas) for p, i in info.partitions.items()})
        return self.preloaded.get(name)

    def create_topics(self, topics: list[NewTopic], validate_only: bool) -> list[TopicResult]:
        results = []
        for t in topics:
            if t.name not in self._creating:
                self._creating[t.name] = asyncio.get_running_loop().create_task(self._create(t))
            results.append(TopicResult(t.name, ErrorCode.NONE, None))
        return results

    async def _create(self, t: NewTopic) -> None:
        try:
            result = (await self.admin.create_topics([t], validate_only=False, timeout_ms=0))[0]
            if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT):
                # a client error (e.g. INVALID_REPLICATION_FACTOR while fewer brokers than the
                # factor are alive): INFO, as Kafka's ZkAdminManager logs it; the next
                # FindCoordinator tries again
                log.info("Error processing create topic request for topic %s: %s: %s", t.name,
                         result.error.name, result.message)
        except Exception:
            log.exception("Could not create internal topic %s", t.name)
        finally:
            self._creating.pop(t.name, None)


async def controlled_shutdown(cfg: KafkaConfig, broker_id: int, broker_epoch: int, cache: MetadataCache) -> bool:
    """Ask the controller to move this broker's leaderships away, retrying as Kafka's
    KafkaServer.controlledShutdown does; True once the controller says none remain."""
    listener = cfg.inter_broker_listener()
    if set(cache.brokers) <= {broker_id}:
        # no other live broker could take a leadership: nothing to ask (Kafka would retry in vain)
        log.info("Controlled shutdown skipped: no other live broker to move leadership to")
        return True
    for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
        controller_id = cache.controller_id
        controller = cache.brokers.get(controller_id)
        ep = controller.endpoint(listener) if controller is not None else None
        if ep is None:
            log.warning("No controller known to send ControlledShutdown to (attempt %d)", attempt)
        else:
            conn = BrokerConnection(ep.host, ep.port, client_id=f"broker-{broker_id}",
                                    request_timeout_ms=cfg.request_timeout_ms)
            try:
                response = await conn.send(ControlledShutdownRequest[CONTROLLED_SHUTDOWN_VERSION](
                    broker_id=broker_id, broker_epoch=broker_epoch), CONTROLLED_SHUTDOWN_VERSION)
                remaining = [TopicPartition(p.topic_name, p.partition_index) for p in response.remaining_partitions]
                if response.error_code == ErrorCode.NONE and not remaining:
                    log.info("Controlled shutdown request returned successfully after %d attempt(s)", attempt)
                    return True
                log.info("Remaining partitions to move: %s", ",".join(map(str, remaining)))
                log.info("Error from controller: %s", ErrorCode(response.error_code).name)
            except Exception as e:
                log.warning("Error during controlled shutdown, possibly because leader movement took longer "
                            "than the configured controller.socket.timeout.ms and/or request.timeout.ms: %s", e)
            finally:
                await conn.close()
        if attempt < cfg.controlled_shutdown_max_retries:
            log.warning("Retrying controlled shutdown after the previous attempt failed...")
            await asyncio.sleep(cfg.controlled_shutdown_retry_backoff_ms / 1000)
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
    return False
