"""The leader's channel for ISR changes: AlterPartition requests to the active controller
(Kafka's DefaultAlterPartitionManager over its NodeToControllerChannelManager, ZooKeeper mode).

- One pending change per partition: a submit for a partition whose previous change is still
  unsent or in flight fails at once with OPERATION_NOT_ATTEMPTED.
- One request in flight at a time; everything queued when it leaves goes in it. An item leaves
  the queue only when the answer names its partition, so a partition the controller left out of
  its answer is sent again with the next request (Kafka does the same).
- The request goes at the version a 3.9 broker speaks (v3: topic ids and the ISR with broker
  epochs, -1 in ZooKeeper mode), or v1 (topic names) if some topic has no id.
- No timeout of its own: a broken connection, a request timeout (controller.socket.timeout.ms)
  or NOT_CONTROLLER sends the same request again, to whoever is the controller by then (after
  RETRY_BACKOFF_MS, Kafka's reconnect back-off); no known controller is polled every
  NO_CONTROLLER_BACKOFF_MS. Another top-level error (STALE_BROKER_EPOCH ...) keeps the items and
  sends a fresh request (fresh broker epoch) after RETRY_BACKOFF_MS.
- A partition error fails its future with KafkaApiError(code); success gives the controller's
  LeaderAndIsr.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kafkalite.cluster.metadata_cache import MetadataCache
from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.server_config import KafkaConfig
from kafkalite.network.broker_client import BrokerConnection
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.protocol.inter_broker import IBP_3_9_VERSIONS, AlterPartitionRequest
from kafkalite.tasks import cancel_and_wait

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
ALTER_PARTITION_VERSION = IBP_3_9_VERSIONS[AlterPartitionRequest.API_KEY]  # 3
NAMES_ONLY_VERSION = 1          # the newest version naming topics (AlterPartitionRequest.Builder)
RETRY_BACKOFF_MS = 50           # DefaultAlterPartitionManager's scheduleOnce(..., 50)
NO_CONTROLLER_BACKOFF_MS = 100  # NodeToControllerRequestThread.doWork's pollOnce(100)
NO_BROKER_EPOCH = -1            # ZooKeeper-mode brokers send no epochs with the ISR
LEADER_RECOVERY_STATES = (0, 1)  # RECOVERED, RECOVERING

ControllerEndpoint = Callable[[], Optional[tuple[int, str, int]]]


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


@dataclass
class AlterPartitionItem:
    tp: TopicPartition
    topic_id: uuid.UUID
    leader_and_isr: LeaderAndIsr
    future: "asyncio.Future[LeaderAndIsr]"
    controller_epoch: int  # only the ZooKeeper-writing manager of IBP < 2.7 used it


def controller_endpoint_from(cache: MetadataCache, listener_name: str) -> ControllerEndpoint:
    """(controller id, host, port) of the controller the metadata cache knows, on the
    inter-broker listener; None while unknown or not alive (Kafka's
    MetadataCacheControllerNodeProvider)."""
    def endpoint() -> Optional[tuple[int, str, int]]:
        controller_id = cache.controller_id
        if controller_id < 0:
            return None
        ep = cache.alive_endpoint(controller_id, listener_name)
        return None if ep is None else (controller_id, ep.host, ep.port)
    return endpoint


def build_request(broker_id: int, broker_epoch: int, items: list[AlterPartitionItem]
                  ) -> tuple[AlterPartitionRequest, int, dict[uuid.UUID, str]]:
    """The request, its version and topic id -> name for reading the answer (not the metadata
    cache: it may not know a topic id yet). Grouped by topic name; a topic's id is its first
    item's."""
    R = AlterPartitionRequest
    by_topic: dict[str, list[AlterPartitionItem]] = {}
    for item in items:
        by_topic.setdefault(item.tp.topic, []).append(item)
    names_by_id: dict[uuid.UUID, str] = {}
    use_topic_ids = True
    topics = []
    for name, topic_items in by_topic.items():
        topic_id = topic_items[0].topic_id
        use_topic_ids &= topic_id != ZERO_UUID
        names_by_id[topic_id] = name
        partitions = [R.TopicData.PartitionData(
            partition_index=i.tp.partition, leader_epoch=i.leader_and_isr.leader_epoch,
            new_isr=list(i.leader_and_isr.isr),
            new_isr_with_epochs=[R.TopicData.PartitionData.BrokerState(broker_id=b, broker_epoch=NO_BROKER_EPOCH)
                                 for b in i.leader_and_isr.isr],
            leader_recovery_state=i.leader_and_isr.leader_recovery_state,
            partition_epoch=i.leader_and_isr.partition_epoch) for i in topic_items]
        topics.append(R.TopicData(topic_name=name, topic_id=topic_id, partitions=partitions))
    version = ALTER_PARTITION_VERSION if use_topic_ids else NAMES_ONLY_VERSION
    return R(broker_id=broker_id, broker_epoch=broker_epoch, topics=topics), version, names_by_id


def partition_results(response: Any, version: int, names_by_id: dict[uuid.UUID, str]
                      ) -> dict[TopicPartition, LeaderAndIsr | ErrorCode]:
    """Each partition the answer names: the controller's LeaderAndIsr or the partition's error."""
    results: dict[TopicPartition, LeaderAndIsr | ErrorCode] = {}
    for topic in response.topics:
        name = names_by_id.get(topic.topic_id) if version > 1 else topic.topic_name
        if not name:
            log.error("Received an unexpected topic %s in the alter partition response, ignoring it.", topic)
            continue
        for p in topic.partitions:
            tp = TopicPartition(name, p.partition_index)
            if p.error_code != ErrorCode.NONE:
                results[tp] = _error_code(p.error_code)
            elif p.leader_recovery_state not in LEADER_RECOVERY_STATES:
                log.error("Controller returned an invalid leader recovery state (%d) for %s: %s",
                          p.leader_recovery_state, tp, p)
                results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                results[tp] = LeaderAndIsr(p.leader_id, p.leader_epoch, tuple(p.isr),
                                           p.leader_recovery_state, p.partition_epoch)
    return results


def _error_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _has_not_controller(response: Any) -> bool:
    # Kafka's errorCounts().containsKey(NOT_CONTROLLER): the top level or any partition
    return response.error_code == ErrorCode.NOT_CONTROLLER or any(
        p.error_code == ErrorCode.NOT_CONTROLLER for t in response.topics for p in t.partitions)


class AlterPartitionManager:
    """See the module doc. start() launches the sender task, shutdown() cancels it and fails
    every pending future with OPERATION_NOT_ATTEMPTED."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int],
                 controller_endpoint: ControllerEndpoint, config: KafkaConfig) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller_endpoint = controller_endpoint
        self._request_timeout_ms = config.controller_socket_timeout_ms
        # keyed by TopicPartition, not topic id: a re-created topic's change must wait for the
        # old one's (Kafka's unsentIsrUpdates); items stay here while in flight
        self.unsent_isr_updates: dict[TopicPartition, AlterPartitionItem] = {}
        self._wakeup = asyncio.Event()
        self._task: Optional[asyncio.Task[None]] = None
        self._connection: Optional[BrokerConnection] = None
        self._connection_target: Optional[tuple[int, str, int]] = None
        self._shut_down = False
        self.requests_sent = 0  # sends on the wire, retries included (for tests and logs)

    def start(self) -> None:
        if self._task is None and not self._shut_down:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"alter-partition-manager-{self.broker_id}")

    async def shutdown(self) -> None:
        self._shut_down = True
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self._close_connection()
        items, self.unsent_isr_updates = list(self.unsent_isr_updates.values()), {}
        for item in items:
            _fail(item.future, KafkaApiError(ErrorCode.OPERATION_NOT_ATTEMPTED,
                                             f"AlterPartitionManager shut down before the ISR change state "
                                             f"{item.leader_and_isr} for partition {item.tp} was answered"))

    def submit(self, tp: TopicPartition, topic_id: uuid.UUID, leader_and_isr: LeaderAndIsr,
               controller_epoch: int) -> "asyncio.Future[LeaderAndIsr]":
        future: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        if self._shut_down or tp in self.unsent_isr_updates:
            _fail(future, KafkaApiError(
                ErrorCode.OPERATION_NOT_ATTEMPTED,
                f"Failed to enqueue ISR change state {leader_and_isr} for partition {topic_id}:{tp}"))
            return future
        self.unsent_isr_updates[tp] = AlterPartitionItem(tp, topic_id, leader_and_isr, future, controller_epoch)
        self._wakeup.set()
        return future

    # -- the sender task ------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self.unsent_isr_updates:
                continue
            try:
                error = await self._send(list(self.unsent_isr_updates.values()))
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not stop ISR changes for good
                log.exception("Unexpected error sending AlterPartition")
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            if error != ErrorCode.NONE:
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)
            if self.unsent_isr_updates:
                self._wakeup.set()

    async def _send(self, items: list[AlterPartitionItem]) -> ErrorCode:
        """Send one request for `items` until some controller answers it; apply the answer and
        return its top-level error."""
        broker_epoch = self._broker_epoch()
        request, version, names_by_id = build_request(self.broker_id, broker_epoch, items)
        log.debug("Sending AlterPartition v%d to controller %s", version, request)
        while True:
            target = self._controller_endpoint()
            if target is None:
                log.debug("Controller isn't cached, retrying after backoff")
                await asyncio.sleep(NO_CONTROLLER_BACKOFF_MS / 1000)
                continue
            conn = await self._connection_to(target)
            self.requests_sent += 1
            try:
                response = await conn.send(request, version)
            except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                log.info("AlterPartition to controller %d at %s:%d failed (%s); retrying", target[0],
                         target[1], target[2], e or type(e).__name__)
                await self._close_connection()
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)
                continue
            if _has_not_controller(response):
                log.debug("AlterPartition received NOT_CONTROLLER from %d; disconnecting from the stale controller",
                          target[0])
                await self._close_connection()
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)
                continue
            log.debug("Received AlterPartition response %s", response)
            return self._handle_response(response, version, broker_epoch, items, names_by_id)

    def _handle_response(self, response: Any, version: int, sent_broker_epoch: int,
                         items: list[AlterPartitionItem], names_by_id: dict[uuid.UUID, str]) -> ErrorCode:
        error = _error_code(response.error_code)
        if error == ErrorCode.STALE_BROKER_EPOCH:
            log.warning("Broker had a stale broker epoch (%d), retrying.", sent_broker_epoch)
        elif error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            log.error("Broker is not authorized to send AlterPartition to controller")
        elif error != ErrorCode.NONE:
            log.warning("Controller returned an unexpected top-level error when handling AlterPartition "
                        "request: %s", error.name)
        else:
            results = partition_results(response, version, names_by_id)
            # by what was sent, not what came back, so a left-out partition stays queued
            for item in items:
                result = results.get(item.tp)
                if result is None:
                    log.warning("Partition %s:%s was sent but not included in the response", item.topic_id, item.tp)
                    continue
                # removed before completing, so the callback may submit the next change
                del self.unsent_isr_updates[item.tp]
                if isinstance(result, LeaderAndIsr):
                    _complete(item.future, result)
                else:
                    _fail(item.future, KafkaApiError(result))
        return error

    async def _connection_to(self, target: tuple[int, str, int]) -> BrokerConnection:
        if self._connection is None or self._connection_target != target:
            await self._close_connection()
            self._connection = BrokerConnection(target[1], target[2], client_id=f"broker-{self.broker_id}",
                                                request_timeout_ms=self._request_timeout_ms)
            self._connection_target = target
        return self._connection

    async def _close_connection(self) -> None:
        conn, self._connection, self._connection_target = self._connection, None, None
        if conn is not None:
            await conn.close()


def _complete(future: "asyncio.Future[LeaderAndIsr]", value: LeaderAndIsr) -> None:
    if not future.done():  # the caller may have given up on it
        future.set_result(value)


def _fail(future: "asyncio.Future[LeaderAndIsr]", error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
        # retrieved here so an ignored failure does not log "exception was never retrieved"
        future.exception()
