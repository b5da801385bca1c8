"""Sending COMMIT/ABORT markers to the leaders of a transaction's partitions (Kafka's
TransactionMarkerChannelManager).

The partitions of one marker are grouped by their current leader in the metadata cache:
* partitions this broker leads are written by the local writer (txn_marker_writer, what the
  WriteTxnMarkers handler runs), with no request to ourselves;
* the others go to their leader in WriteTxnMarkers v1 (what a Kafka 3.9 broker sends: IBP >= 2.8)
  over one connection per destination broker on the inter-broker listener. Each destination
  has a queue and a sender task with one request in flight (Kafka's NetworkClient allows one per
  connection): the markers queued meanwhile, of any transactions, leave together in the next
  request;
* a partition the metadata does not know is most likely deleted: Kafka skips it;
* a partition whose leader is unknown (-1), not alive or unreachable, or whose request failed
  (disconnected, timed out, malformed answer), is reported as unreachable: the coordinator
  retries it with the leader the metadata names then (Kafka's unknown-broker queue and
  re-enqueue on disconnection). `wait_for_retry` wakes early when the metadata changes.

The per-partition errors a leader answers are classified by the coordinator
(TransactionMarkerRequestCompletionHandler's rules).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from kafkalite.network.inter_broker_connections import InterBrokerConnections
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

log = logging.getLogger(__name__)

# WriteTxnMarkers version a Kafka 3.9 broker sends (MetadataVersion.writeTxnMarkersRequestVersion)
WRITE_TXN_MARKERS_VERSION = 1

# (producer id, producer epoch, coordinator epoch, commit, partitions) -> error per partition
LocalMarkerWriter = Callable[[int, int, int, bool, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]


@dataclass
class MarkerOutcome:
    """What became of one marker's partitions."""
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)   # a leader's answer
    deleted: list[TopicPartition] = field(default_factory=list)            # unknown to the metadata
    unreachable: list[TopicPartition] = field(default_factory=list)        # no live leader / request failed


@dataclass
class _QueuedMarker:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: list[TopicPartition]
    future: "asyncio.Future[Optional[dict[TopicPartition, ErrorCode]]]"   # None: no answer


class _Destination:
    def __init__(self) -> None:
        self.queue: list[_QueuedMarker] = []
        self.ready = asyncio.Event()
        self.task: Optional[asyncio.Task[None]] = None
        # repr of the unexpected error the last send raised: the coordinator retries its markers
        # every backoff, and a failure that repeats is logged in full once, not per retry
        self.last_unexpected_error: Optional[str] = None


def build_request(markers: list[_QueuedMarker]) -> Any:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    out = []
    for m in markers:
        by_topic: dict[str, list[int]] = {}
        for tp in m.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out.append(M(producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
                     coordinator_epoch=m.coordinator_epoch,
                     topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
    return WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION](markers=out)


def errors_by_producer_id(response: Any) -> dict[int, dict[TopicPartition, ErrorCode]]:
    """WriteTxnMarkersResponse.errorsByProducerId (entries of one producer id merged)."""
    out: dict[int, dict[TopicPartition, ErrorCode]] = {}
    for marker in response.markers or ():
        errors = out.setdefault(marker.producer_id, {})
        for t in marker.topics or ():
            for p in t.partitions or ():
                try:
                    errors[TopicPartition(t.name, p.partition_index)] = ErrorCode(p.error_code)
                except ValueError:
                    errors[TopicPartition(t.name, p.partition_index)] = ErrorCode.UNKNOWN_SERVER_ERROR
    return out


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, metadata_cache: Any, listener_name: str, request_timeout_ms: int,
                 write_local: LocalMarkerWriter) -> None:
        self.broker_id = broker_id
        self.cache = metadata_cache
        self.write_local = write_local
        self.connections = InterBrokerConnections(metadata_cache, listener_name,
                                                  f"broker-{broker_id}-txn-marker-sender", request_timeout_ms)
        self._destinations: dict[int, _Destination] = {}
        self._metadata_changed = asyncio.Event()
        self._running = False

    # ==== lifecycle ==================================================================================

    def start(self) -> None:
        if not self._running:
            self._running = True
            self.cache.add_listener(self._on_metadata_change)

    async def shutdown(self) -> None:
        self._running = False
        tasks = [d.task for d in self._destinations.values() if d.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for d in self._destinations.values():
            for m in d.queue:
                if not m.future.done():
                    m.future.cancel()
        self._destinations.clear()
        await self.connections.close()

    def _on_metadata_change(self, _change: Any) -> None:
        # wake the marker loops waiting for a leader; a fresh event for the next wait
        event, self._metadata_changed = self._metadata_changed, asyncio.Event()
        event.set()

    async def wait_for_retry(self, backoff_s: float) -> None:
        """Sleep `backoff_s`, less if the metadata changes meanwhile (a new leader may be known)."""
        try:
            await asyncio.wait_for(self._metadata_changed.wait(), backoff_s)
        except asyncio.TimeoutError:
            pass

    # ==== sending ====================================================================================

    async def send_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                           partitions: list[TopicPartition]) -> MarkerOutcome:
        """Write the marker to every partition's current leader; see the module doc."""
        outcome = MarkerOutcome()
        local: list[TopicPartition] = []
        remote: dict[int, list[TopicPartition]] = {}
        for tp in dict.fromkeys(partitions):
            info = self.cache.partition_info(tp)
            if info is None:
                outcome.deleted.append(tp)
            elif info.leader == self.broker_id:
                local.append(tp)
            elif info.leader >= 0 and self._running and self.connections.connection(info.leader) is not None:
                remote.setdefault(info.leader, []).append(tp)
            else:
                outcome.unreachable.append(tp)
        # remote markers are queued first, then the local ones written in this task right away
        # (no extra task: the marker is in the log as soon as the coordinator gets to it)
        remote_waits = [(tps, self._enqueue(broker_id, _QueuedMarker(
            producer_id, producer_epoch, coordinator_epoch, commit, tps, asyncio.get_running_loop().create_future())))
            for broker_id, tps in remote.items()]
        answers: list[tuple[list[TopicPartition], Optional[dict[TopicPartition, ErrorCode]]]] = []
        if local:
            answers.append((local, await self.write_local(producer_id, producer_epoch, coordinator_epoch, commit,
                                                          local)))
        for tps, future in remote_waits:
            answers.append((tps, await future))
        for tps, answer in answers:
            for tp in tps:
                error = answer.get(tp) if answer is not None else None
                if error is None:
                    outcome.unreachable.append(tp)
                else:
                    outcome.errors[tp] = error
        return outcome

    def _enqueue(self, broker_id: int, marker: _QueuedMarker
                 ) -> "asyncio.Future[Optional[dict[TopicPartition, ErrorCode]]]":
        dest = self._destinations.get(broker_id)
        if dest is None:
            dest = self._destinations[broker_id] = _Destination()
        if dest.task is None or dest.task.done():
            dest.task = asyncio.get_running_loop().create_task(self._send_loop(broker_id, dest),
                                                               name=f"txn-marker-sender-{broker_id}")
        dest.queue.append(marker)
        dest.ready.set()
        return marker.future

    async def _send_loop(self, broker_id: int, dest: _Destination) -> None:
        while True:
            await dest.ready.wait()
            dest.ready.clear()
            batch, dest.queue = dest.queue, []
            batch = [m for m in batch if not m.future.done()]
            if not batch:
                continue
            try:
                answers = await self._send(broker_id, batch)
                if answers is not None:     # answered: an error seen before is news again
                    dest.last_unexpected_error = None
            except Exception as e:
                # a sender that died would leave its markers' futures unanswered and their
                # transactions waiting for ever: answer "no answer", the coordinator retries them
                if repr(e) != dest.last_unexpected_error:
                    dest.last_unexpected_error = repr(e)
                    log.exception("Sending WriteTxnMarkers to broker %d failed unexpectedly; the markers will be "
                                  "retried (the same error again is logged at DEBUG)", broker_id)
                else:
                    log.debug("Sending WriteTxnMarkers to broker %d failed again: %r", broker_id, e)
                answers = None
            for m in batch:
                if not m.future.done():
                    m.future.set_result(answers.get(m.producer_id) if answers is not None else None)

    async def _send(self, broker_id: int, batch: list[_QueuedMarker]
                    ) -> Optional[dict[int, dict[TopicPartition, ErrorCode]]]:
        conn = self.connections.connection(broker_id)
        if conn is None:
            return None
        try:
            response = await conn.send(build_request(batch), WRITE_TXN_MARKERS_VERSION)
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.info("WriteTxnMarkers to broker %d failed (%s); the markers will be retried", broker_id, e)
            return None
        return errors_by_producer_id(response)
