"""One follower fetcher: an asyncio task replicating the partitions this broker follows from one
source broker (Kafka's ReplicaFetcherThread over AbstractFetcherThread and RemoteLeaderEndPoint).

Each round: partitions still Truncating are settled first (to the high watermark, or, with no
start offset, by asking the leader with ListOffsets); then one Fetch (v17, Kafka 3.9's
fetchRequestVersion, full fetch without a session) carries every partition ready to fetch; the
answer per partition is appended (then the leader's HW and log start are taken), or truncated
(a diverging epoch), or re-positioned (OFFSET_OUT_OF_RANGE), or the partition is dropped
(fenced, gone) or backed off for replica.fetch.backoff.ms (other errors). A failed request backs
off every partition; the connection reopens on the next send.

The state lives in this task and the manager's synchronous calls (all on the event loop), so a
response is applied only to a partition whose state still is the one the request was built from.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.server_config import KafkaConfig
from kafkalite.log.errors import CorruptRecordError, InvalidRecordError
from kafkalite.network.broker_client import BrokerConnection
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.fetcher.fetch_state import (EpochEndOffset, InitialFetchState, OffsetTruncationState,
                                                   PartitionFetchState, ReplicaFetchPhase,
                                                   initial_partition_fetch_state, offset_truncation_state,
                                                   out_of_range_fetch_offset)
from kafkalite.tasks import cancel_and_wait

if TYPE_CHECKING:
    from kafkalite.replica.partition import Partition

log = logging.getLogger(__name__)

FETCH_VERSION = 17          # Kafka 3.9's MetadataVersion.fetchRequestVersion
LIST_OFFSETS_VERSION = 9    # Kafka 3.9's MetadataVersion.listOffsetRequestVersion
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
INVALID_SESSION_ID = 0
FINAL_EPOCH = -1            # with session id 0: a full fetch that opens no session
ZERO_UUID = uuid.UUID(int=0)

# partition errors after which the partition is retried once replica.fetch.backoff.ms has passed
_RETRIED_QUIETLY = {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER}
_RETRIED_WITH_WARNING = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                         ErrorCode.INCONSISTENT_TOPIC_ID}


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicaFetcher:
    """The fetcher for (source broker, fetcher id). Created and owned by ReplicaFetcherManager."""

    def __init__(self, *, broker_id: int, source_broker_id: int, source_endpoint: tuple[str, int],
                 fetcher_id: int, config: KafkaConfig, replica_manager: Any,
                 broker_epoch: Any) -> None:
        self.broker_id = broker_id
        self.source_broker_id = source_broker_id
        self.source_endpoint = source_endpoint
        self.fetcher_id = fetcher_id
        self.config = config
        self.replica_manager = replica_manager
        self._broker_epoch = broker_epoch
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{source_broker_id}"
        self._states: OrderedDict[TopicPartition, PartitionFetchState] = OrderedDict()
        self._wakeup = asyncio.Event()
        self._task: Optional[asyncio.Task[None]] = None
        self._stopping = False
        self._connection = BrokerConnection(source_endpoint[0], source_endpoint[1],
                                            client_id=f"broker-{broker_id}-fetcher-{fetcher_id}",
                                            request_timeout_ms=config.replica_socket_timeout_ms)
        # what was last logged per partition (None: the request as a whole): an error repeating
        # every backoff is logged once, until that partition (or request) succeeds again
        self._reported: dict[Optional[TopicPartition], str] = {}

    def __repr__(self) -> str:
        return f"{self.name}(leader={self.source_endpoint[0]}:{self.source_endpoint[1]})"

    # -- partitions (called by the manager, on the loop) ----------------------------------------
    @property
    def partitions(self) -> set[TopicPartition]:
        return set(self._states)

    @property
    def partition_count(self) -> int:
        return len(self._states)

    def fetch_state(self, tp: TopicPartition) -> Optional[PartitionFetchState]:
        return self._states.get(tp)

    def add_partitions(self, initial_states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Kafka's addPartitions: a partition already followed at the same leader epoch keeps
        its state; otherwise it starts anew (Truncating without a known last fetched epoch, or
        with fetch offset -1 when the start must be asked of the leader)."""
        for tp, initial in initial_states.items():
            state = initial_partition_fetch_state(initial, self._states.get(tp))
            if state is None:
                state = PartitionFetchState(initial.topic_id, -1, initial.current_leader_epoch,
                                            ReplicaFetchPhase.TRUNCATING, None)
            self._states[tp] = state
            self._states.move_to_end(tp)
            self._reported.pop(tp, None)
        self._wakeup.set()

    def add_fetch_states(self, states: Mapping[TopicPartition, PartitionFetchState]) -> None:
        """States moved over as they are from another fetcher of the same leader."""
        for tp, state in states.items():
            self._states[tp] = state
        self._wakeup.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for tp in tps:
            state = self._states.pop(tp, None)
            if state is not None:
                removed[tp] = state
            self._reported.pop(tp, None)
        return removed

    def remove_all_partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        return self.remove_partitions(list(self._states))

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            log.info("[%s] Starting", self.name)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        self._stopping = True
        if task is not None:
            log.info("[%s] Shutting down", self.name)
            # (the loop also checks _stopping: a cancellation can be lost, see kafkalite.tasks)
            await cancel_and_wait(task)
        await self._connection.close()
        if task is not None:
            log.info("[%s] Shutdown completed", self.name)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._maybe_truncate()
                if not await self._maybe_fetch():
                    await self._wait_for_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                # a bug must not end replication from this leader for good (Kafka's thread would
                # die): logged, then the round is tried again after the back-off
                log.exception("[%s] Error due to", self.name)
                await asyncio.sleep(self.config.replica_fetch_backoff_ms / 1000)

    async def _wait_for_work(self) -> None:
        """Nothing to fetch: sleep until partitions are added, a back-off ends, or
        replica.fetch.backoff.ms passes (Kafka's partitionMapCond.await(fetchBackOffMs))."""
        now = _now_ms()
        timeout_ms = self.config.replica_fetch_backoff_ms
        delays = [s.delayed_until_ms - now for s in self._states.values() if s.is_delayed(now)]
        if delays:
            timeout_ms = min(timeout_ms, min(delays))
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), max(timeout_ms, 1) / 1000)
        except asyncio.TimeoutError:
            pass

    # -- helpers ----------------------------------------------------------------------------
    def _report(self, key: Optional[TopicPartition], level: int, message: str, *args: Any,
                exc_info: Any = None) -> None:
        """Log a problem once: repeats of the same message are DEBUG until a success clears it."""
        text = message % args if args else message
        if self._reported.get(key) == text:
            log.debug("[%s] %s", self.name, text)
            return
        self._reported[key] = text
        log.log(level, "[%s] %s", self.name, text, exc_info=exc_info)

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        """Kafka's delayPartitions: back off replica.fetch.backoff.ms."""
        until = _now_ms() + self.config.replica_fetch_backoff_ms
        for tp in tps:
            state = self._states.get(tp)
            if state is not None:
                self._states[tp] = state.delayed(until)

    def _mark_failed(self, tp: TopicPartition) -> None:
        """Kafka's markPartitionFailed: stop fetching it until LeaderAndIsr adds it again."""
        if self._states.pop(tp, None) is not None:
            log.warning("[%s] Partition %s marked as failed", self.name, tp)

    def _follower_partition(self, tp: TopicPartition, state: PartitionFetchState) -> Optional["Partition"]:
        """The local partition if it still follows this fetcher's broker at the state's epoch
        (or an older one: the LeaderAndIsr that moved it on re-adds the partition)."""
        p = self.replica_manager.get_partition(tp)
        if (p is None or p.is_leader or p.leader_id != self.source_broker_id
                or p.leader_epoch > state.current_leader_epoch):
            return None
        return p

    def _drop_unfollowed(self, tp: TopicPartition, state: PartitionFetchState) -> Optional["Partition"]:
        p = self._follower_partition(tp, state)
        if p is None:
            self._states.pop(tp, None)
            self._reported.pop(tp, None)
            log.info("[%s] Removed partition %s: no longer a follower of broker %d at leader epoch %d",
                     self.name, tp, self.source_broker_id, state.current_leader_epoch)
        return p

    def _state_unchanged(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        return self._states.get(tp) is state

    def _notify_follower_append(self, tp: TopicPartition) -> None:
        # lets fetches waiting on this follower (KIP-392 consumers, delayed fetches) complete
        cb = getattr(self.replica_manager, "on_follower_append", None)
        if cb is not None:
            cb(tp)

    # -- truncation -----------------------------------------------------------------------------
    async def _maybe_truncate(self) -> None:
        now = _now_ms()
        for tp, state in list(self._states.items()):
            if not self._state_unchanged(tp, state) or not state.is_truncating(now):
                continue
            partition = self._drop_unfollowed(tp, state)
            if partition is None:
                continue
            if state.fetch_offset < 0:
                if not await self._fetch_offset_and_truncate(tp, state):
                    self._delay([tp])
            else:
                self._truncate_to_high_watermark(tp, state, partition)

    def _truncate_to_high_watermark(self, tp: TopicPartition, state: PartitionFetchState,
                                    partition: "Partition") -> None:
        """Kafka's truncateToHighWatermark, for a log whose epochs tell nothing."""
        hw = min(state.fetch_offset, partition.high_watermark)
        truncation = OffsetTruncationState(hw, True)
        log.info("[%s] Truncating partition %s with %s due to local high watermark %d",
                 self.name, tp, truncation, hw)
        if self._do_truncate(tp, partition, truncation):
            self._states[tp] = replace(state, fetch_offset=truncation.offset, state=ReplicaFetchPhase.FETCHING,
                                       last_fetched_epoch=partition.latest_epoch())

    def _do_truncate(self, tp: TopicPartition, partition: "Partition", truncation: OffsetTruncationState) -> bool:
        try:
            hw = partition.high_watermark
            partition.truncate_to(truncation.offset)
            if truncation.offset < hw:
                log.warning("[%s] Truncating %s to offset %d below high watermark %d",
                            self.name, tp, truncation.offset, hw)
            return True
        except Exception:
            log.exception("[%s] Unexpected error occurred during truncation for %s at offset %d",
                          self.name, tp, truncation.offset)
            self._mark_failed(tp)
            return False

    def _truncate_on_fetch_response(self, diverging: Mapping[TopicPartition, tuple[PartitionFetchState, EpochEndOffset]]
                                    ) -> None:
        """Kafka's truncateOnFetchResponse: the leader said where our last fetched epoch ends on
        its side; cut the log there and fetch on (a not-completed truncation is settled by the
        next fetch's diverging epoch, as with truncation on fetch Kafka fetches at once)."""
        for tp, (state, leader) in diverging.items():
            if not self._state_unchanged(tp, state):
                continue
            partition = self._drop_unfollowed(tp, state)
            if partition is None:
                continue

            def ours(epoch: int, p: "Partition" = partition) -> Optional[tuple[int, int]]:
                return p.end_offset_for_epoch(epoch)

            truncation = offset_truncation_state(leader, state.fetch_offset, partition.log_end_offset, ours)
            log.info("[%s] Truncating partition %s with %s due to leader epoch and offset %s",
                     self.name, tp, truncation, leader)
            if self._do_truncate(tp, partition, truncation):
                self._states[tp] = replace(state, fetch_offset=truncation.offset, state=ReplicaFetchPhase.FETCHING,
                                           last_fetched_epoch=partition.latest_epoch())
                self._states.move_to_end(tp)

    async def _fetch_offset_and_truncate(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        """Kafka's fetchOffsetAndTruncate (with handleOutOfRangeError's error handling):
        position by the leader's end (ours is beyond it: an unclean election) or log start (ours
        is wholly below it). False when the partition should back off."""
        try:
            leader_end = await self._fetch_leader_offset(tp, state.current_leader_epoch, LATEST_TIMESTAMP)
            leader_start: Optional[int] = None
            partition = self._follower_partition(tp, state)
            if partition is not None and leader_end >= partition.log_end_offset:
                leader_start = await self._fetch_leader_offset(tp, state.current_leader_epoch, EARLIEST_TIMESTAMP)
        except KafkaApiError as e:
            if e.code == ErrorCode.FENCED_LEADER_EPOCH:
                # dropped when the epoch is still ours, else fetched again at once (as Kafka)
                self._on_partition_fenced(tp, state.current_leader_epoch)
                return True
            self._report(tp, logging.INFO, "Could not fetch offset for %s due to error: %s", tp, e.code.name)
            return False
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            self._report(tp, logging.INFO, "Could not fetch offset for %s due to error: %r", tp, e)
            return False
        if not self._state_unchanged(tp, state):
            return True     # re-added or removed meanwhile: the new state decides
        partition = self._drop_unfollowed(tp, state)
        if partition is None:
            return True
        replica_end = partition.log_end_offset
        if leader_start is None and leader_end >= replica_end:
            return False    # the log grew meanwhile: ask again
        offset, action = out_of_range_fetch_offset(replica_end, leader_end, leader_start)
        try:
            if action == "truncate":
                log.warning("[%s] Reset fetch offset for partition %s from %d to current leader's latest offset %d",
                            self.name, tp, replica_end, leader_end)
                hw = partition.high_watermark
                partition.truncate_to(offset)
                if offset < hw:
                    log.warning("[%s] Truncating %s to offset %d below high watermark %d", self.name, tp, offset, hw)
            elif action == "truncate_fully":
                log.warning("[%s] Truncate fully and reset fetch offset for partition %s from %d to the current "
                            "leader's start offset %d because the local replica's end offset is smaller than the "
                            "current leader's start offsets.", self.name, tp, replica_end, offset)
                partition.truncate_fully_and_start_at(offset)
            else:
                log.info("[%s] Reset fetch offset for partition %s from %d to the current local replica's end "
                         "offset %d", self.name, tp, replica_end, offset)
        except Exception:
            log.exception("[%s] Error getting offset for partition %s", self.name, tp)
            self._mark_failed(tp)
            return True
        self._states[tp] = replace(state, fetch_offset=offset, state=ReplicaFetchPhase.FETCHING,
                                   last_fetched_epoch=partition.latest_epoch(),
                                   lag=max(0, leader_end - offset), delayed_until_ms=0)
        self._states.move_to_end(tp)
        return True

    async def _fetch_leader_offset(self, tp: TopicPartition, current_leader_epoch: int, timestamp: int) -> int:
        """RemoteLeaderEndPoint.fetchEarliestOffset / fetchLatestOffset: ListOffsets as a replica."""
        R = ListOffsetsRequest[LIST_OFFSETS_VERSION]
        T = R.ListOffsetsTopic
        request = R(replica_id=self.broker_id, isolation_level=0,
                    topics=[T(name=tp.topic, partitions=[T.ListOffsetsPartition(
                        partition_index=tp.partition, current_leader_epoch=current_leader_epoch,
                        timestamp=timestamp)])])
        response = await self._connection.send(request, LIST_OFFSETS_VERSION)
        for t in response.topics:
            if t.name != tp.topic:
                continue
            for p in t.partitions:
                if p.partition_index == tp.partition:
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaApiError(ErrorCode(p.error_code))
                    return p.offset
        raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets answered no {tp}")

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> bool:
        """Kafka's onPartitionFenced: our epoch is older than the leader's. If the state still has
        the epoch the request carried, drop the partition until the new LeaderAndIsr; else (the
        epoch moved meanwhile) retry. Returns whether the partition should back off."""
        state = self._states.get(tp)
        if state is None:
            return False
        if state.current_leader_epoch == request_epoch:
            log.info("[%s] Partition %s has an older epoch (%d) than the current leader. Will await the new "
                     "LeaderAndIsr state before resuming fetching.", self.name, tp, state.current_leader_epoch)
            self._mark_failed(tp)
            return False
        log.info("[%s] Partition %s has a newer epoch (%d) than the current leader. Retry the partition later.",
                 self.name, tp, state.current_leader_epoch)
        return True

    # -- fetch ----------------------------------------------------------------------------------
    def _build_fetch(self) -> tuple[Any, dict[tuple[uuid.UUID, int], tuple[TopicPartition, PartitionFetchState]]]:
        """RemoteLeaderEndPoint.buildFetch: every partition ready to fetch, by topic id."""
        now = _now_ms()
        R = FetchRequest[FETCH_VERSION]
        topics: dict[uuid.UUID, Any] = {}
        sent: dict[tuple[uuid.UUID, int], tuple[TopicPartition, PartitionFetchState]] = {}
        for tp, state in list(self._states.items()):
            if not state.is_ready_for_fetch(now):
                continue
            partition = self._drop_unfollowed(tp, state)
            if partition is None:
                continue
            topic_id = state.topic_id
            if topic_id == ZERO_UUID and partition.topic_id != ZERO_UUID:
                topic_id = partition.topic_id
                state = self._states[tp] = replace(state, topic_id=topic_id)
            if topic_id == ZERO_UUID:
                self._report(tp, logging.WARNING, "No topic id known for %s: not fetched", tp)
                continue
            t = topics.get(topic_id)
            if t is None:
                t = topics[topic_id] = R.FetchTopic(topic_id=topic_id, partitions=[])
            t.partitions.append(R.FetchTopic.FetchPartition(
                partition=tp.partition, current_leader_epoch=state.current_leader_epoch,
                fetch_offset=state.fetch_offset,
                last_fetched_epoch=-1 if state.last_fetched_epoch is None else state.last_fetched_epoch,
                log_start_offset=partition.log_start_offset,
                partition_max_bytes=self.config.replica_fetch_max_bytes))
            sent[(topic_id, tp.partition)] = (tp, state)
        if not sent:
            return None, sent
        cfg = self.config
        request = R(replica_state=R.ReplicaState(replica_id=self.broker_id,
                                                                replica_epoch=self._broker_epoch()),
                    max_wait_ms=cfg.replica_fetch_wait_max_ms, min_bytes=cfg.replica_fetch_min_bytes,
                    max_bytes=cfg.replica_fetch_response_max_bytes, isolation_level=0,
                    session_id=INVALID_SESSION_ID, session_epoch=FINAL_EPOCH,
                    topics=list(topics.values()), forgotten_topics_data=[], rack_id="")
        return request, sent

    async def _maybe_fetch(self) -> bool:
        """One Fetch round trip and its processing; False when nothing was ready to fetch."""
        request, sent = self._build_fetch()
        if request is None:
            return False
        try:
            response = await self._connection.send(request, FETCH_VERSION)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._report(None, logging.WARNING, "Error in response for fetch request to broker %d at %s:%d: %r",
                         self.source_broker_id, self.source_endpoint[0], self.source_endpoint[1], e)
            self._delay(tp for tp, _s in sent.values())
            return True
        if self._reported.pop(None, None) is not None:
            log.info("[%s] Fetching from broker %d again", self.name, self.source_broker_id)
        if response.error_code != ErrorCode.NONE:
            self._report(None, logging.WARNING, "Fetch request to broker %d failed: %s",
                         self.source_broker_id, ErrorCode(response.error_code).name)
            self._delay(tp for tp, _s in sent.values())
            return True
        for tp, state in self._process_fetch_response(response, sent):
            # Kafka's handleOutOfRangeError: ask the leader (ListOffsets) where to go on from
            if not self._state_unchanged(tp, state):
                continue
            if await self._fetch_offset_and_truncate(tp, state):
                new_state = self._states.get(tp)
                if new_state is not None and new_state is not state:
                    log.info("[%s] Current offset %d for partition %s is out of range, which typically implies "
                             "a leader change. Reset fetch offset to %d", self.name, state.fetch_offset, tp,
                             new_state.fetch_offset)
            else:
                self._delay([tp])
        return True

    def _process_fetch_response(self, response: Any,
                                sent: Mapping[tuple[uuid.UUID, int], tuple[TopicPartition, PartitionFetchState]]
                                ) -> list[tuple[TopicPartition, PartitionFetchState]]:
        """Kafka's processFetchRequest for the partitions whose state is still the one sent.
        Returns the partitions the leader answered OFFSET_OUT_OF_RANGE, to re-position."""
        with_error: list[TopicPartition] = []
        diverging: dict[TopicPartition, tuple[PartitionFetchState, EpochEndOffset]] = {}
        out_of_range: list[tuple[TopicPartition, PartitionFetchState]] = []
        for t in response.responses:
            for pd in t.partitions:
                entry = sent.get((t.topic_id, pd.partition_index))
                if entry is None:
                    continue
                tp, state = entry
                if not self._state_unchanged(tp, state):
                    continue    # removed, re-added or delayed while the request was out
                code = pd.error_code
                if code == ErrorCode.NONE:
                    de = pd.diverging_epoch
                    if de is not None and de.epoch >= 0:
                        # truncate first; the HW and log start come with the next fetch
                        diverging[tp] = (state, EpochEndOffset(de.epoch, de.end_offset, tp.partition))
                    elif not self._process_partition_data(tp, state, pd):
                        with_error.append(tp)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, state))
                elif code == ErrorCode.FENCED_LEADER_EPOCH:
                    if self._on_partition_fenced(tp, state.current_leader_epoch):
                        with_error.append(tp)
                elif code in _RETRIED_QUIETLY:
                    self._report(tp, logging.INFO, "Retrying %s later: the leader answered %s",
                                 tp, ErrorCode(code).name)
                    with_error.append(tp)
                elif code in _RETRIED_WITH_WARNING:
                    self._report(tp, logging.WARNING,
                                 "Received %s from the leader for partition %s. This error may be returned "
                                 "transiently when the partition is being created or deleted, but it is not "
                                 "expected to persist.", ErrorCode(code).name, tp)
                    with_error.append(tp)
                else:
                    self._report(tp, logging.ERROR, "Error for partition %s at offset %d: %s",
                                 tp, state.fetch_offset, _code_name(code))
                    with_error.append(tp)
        if diverging:
            self._truncate_on_fetch_response(diverging)
        if with_error:
            self._delay(with_error)
        return out_of_range

    def _process_partition_data(self, tp: TopicPartition, state: PartitionFetchState, pd: Any) -> bool:
        """ReplicaFetcherThread.processPartitionData: append, take the leader's HW and log start.
        False when the partition should back off."""
        partition = self._drop_unfollowed(tp, state)
        if partition is None:
            return True
        try:
            if state.fetch_offset != partition.log_end_offset:
                raise RuntimeError(f"Offset mismatch for partition {tp}: fetched offset = {state.fetch_offset}, "
                                   f"log end offset = {partition.log_end_offset}.")
            records = pd.records
            info = partition.append_records_to_follower(records) if records else None
            hw_moved = partition.update_follower_high_watermark(pd.high_watermark)
            if pd.log_start_offset >= 0:
                partition.update_follower_log_start_offset(pd.log_start_offset)
        except (CorruptRecordError, InvalidRecordError) as e:
            # transient (a truncation racing the leader's read): retried after the back-off
            self._report(tp, logging.ERROR, "Found invalid messages during fetch for partition %s offset %d: %s",
                         tp, state.fetch_offset, e)
            return False
        except Exception:
            log.exception("[%s] Unexpected error occurred while processing data for partition %s at offset %d",
                          self.name, tp, state.fetch_offset)
            self._mark_failed(tp)
            return True
        appended = info is not None and info.valid_bytes > 0
        next_offset = info.last_offset + 1 if appended and info is not None else state.fetch_offset
        lag = max(0, pd.high_watermark - next_offset)
        if appended or state.lag is None or lag != state.lag:
            self._states[tp] = replace(state, fetch_offset=next_offset, lag=lag, state=ReplicaFetchPhase.FETCHING,
                                       last_fetched_epoch=partition.latest_epoch() if appended
                                       else state.last_fetched_epoch)
            if appended:
                self._states.move_to_end(tp)
        if self._reported.pop(tp, None) is not None:
            log.info("[%s] Partition %s fetched again", self.name, tp)
        if appended or hw_moved:
            self._notify_follower_append(tp)
        return True


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"
