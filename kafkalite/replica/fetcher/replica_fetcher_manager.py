"""The follower side's fetchers (Kafka's ReplicaFetcherManager / AbstractFetcherManager): one
ReplicaFetcher per (leader broker, fetcher id), a partition going to fetcher
getFetcherId(tp) = hash % num.replica.fetchers of its leader's.

All calls come from the event loop (LeaderAndIsr, StopReplica, shutdown); the fetchers are tasks
this manager starts and, in shutdown, cancels and awaits.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, NamedTuple, Optional

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.server_config import KafkaConfig
from kafkalite.replica.fetcher.fetch_state import InitialFetchState, PartitionFetchState, fetcher_id
from kafkalite.replica.fetcher.replica_fetcher import ReplicaFetcher

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class BrokerIdAndFetcherId(NamedTuple):
    broker_id: int
    fetcher_id: int


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, config: KafkaConfig, replica_manager: "ReplicaManager",
                 endpoint_of: Callable[[int], Optional[tuple[str, int]]], broker_epoch: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self._endpoint_of = endpoint_of
        self._broker_epoch = broker_epoch
        self.num_fetchers = max(1, config.num_replica_fetchers)
        self.fetchers: dict[BrokerIdAndFetcherId, ReplicaFetcher] = {}
        # partitions whose leader's endpoint is not known yet: added on the next add/retry
        self.pending: dict[TopicPartition, InitialFetchState] = {}
        # fetchers being shut down (replaced or idle): awaited by shutdown()
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def get_fetcher_id(self, tp: TopicPartition) -> int:
        return fetcher_id(tp.topic, tp.partition, self.num_fetchers)

    def get_fetcher(self, tp: TopicPartition) -> Optional[ReplicaFetcher]:
        for f in self.fetchers.values():
            if f.fetch_state(tp) is not None:
                return f
        return None

    def fetch_state(self, tp: TopicPartition) -> Optional[PartitionFetchState]:
        f = self.get_fetcher(tp)
        return None if f is None else f.fetch_state(tp)

    # -- partitions ---------------------------------------------------------------------------
    def add_fetcher_for_partitions(self, states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Kafka's addFetcherForPartitions: each partition goes to the fetcher of (its leader,
        its fetcher id), created on demand, after leaving any other fetcher (the leader moved).
        A partition whose leader has no known endpoint waits in `pending` (with any earlier
        pending ones, retried on every call)."""
        if self._closed:
            return
        todo = dict(self.pending)
        todo.update(states)
        self.pending.clear()
        groups: dict[tuple[BrokerIdAndFetcherId, tuple[str, int]], dict[TopicPartition, InitialFetchState]] = {}
        for tp, initial in todo.items():
            endpoint = self._endpoint_of(initial.leader_id)
            if endpoint is None:
                if tp in states:
                    log.warning("No endpoint known for broker %d, the leader of %s: fetching waits for it",
                                initial.leader_id, tp)
                self.pending[tp] = initial
                self._remove_from_fetchers([tp])
                continue
            key = BrokerIdAndFetcherId(initial.leader_id, self.get_fetcher_id(tp))
            groups.setdefault((key, endpoint), {})[tp] = initial
        for (key, endpoint), initials in groups.items():
            # a partition leaves the fetcher of its previous leader before joining the new one
            for other_key, f in self.fetchers.items():
                if other_key != key:
                    f.remove_partitions(initials)
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.source_endpoint != endpoint:
                # the leader re-registered elsewhere: a new fetcher takes over what the old one held
                moved = fetcher.remove_all_partitions()
                self._stop(fetcher)
                fetcher = None
            else:
                moved = {}
            if fetcher is None:
                fetcher = ReplicaFetcher(broker_id=self.broker_id, source_broker_id=key.broker_id,
                                         source_endpoint=endpoint, fetcher_id=key.fetcher_id, config=self.config,
                                         replica_manager=self.replica_manager, broker_epoch=self._broker_epoch)
                self.fetchers[key] = fetcher
                fetcher.add_fetch_states({tp: s for tp, s in moved.items() if tp not in initials})
                fetcher.start()
            fetcher.add_partitions(initials)
            log.info("Added fetcher to broker %d for partitions %s", key.broker_id,
                     ", ".join(f"{tp} (offset {i.init_fetch_offset}, leader epoch {i.current_leader_epoch})"
                               for tp, i in initials.items()))

    def retry_pending(self) -> None:
        """Try the partitions waiting for their leader's endpoint again (after UpdateMetadata)."""
        if self.pending:
            self.add_fetcher_for_partitions({})

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        """Kafka's removeFetcherForPartitions: stop fetching them (they became leaders, or were
        stopped or deleted); returns the fetch states they had."""
        tps = list(tps)
        removed = self._remove_from_fetchers(tps)
        for tp in tps:
            self.pending.pop(tp, None)
        if tps:
            log.info("Removed fetcher for partitions %s", ", ".join(map(str, tps)))
        return removed

    def _remove_from_fetchers(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for f in self.fetchers.values():
            removed.update(f.remove_partitions(tps))
        return removed

    def shutdown_idle_fetchers(self) -> None:
        """Kafka's shutdownIdleFetcherThreads: fetchers left without partitions stop."""
        for key, f in list(self.fetchers.items()):
            if f.partition_count == 0:
                del self.fetchers[key]
                self._stop(f)

    def _stop(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.shutdown(), name=f"stop-{fetcher.name}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        """Kafka's closeAllFetchers: cancel and await every fetcher, close their connections."""
        log.info("shutting down")
        self._closed = True
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self.pending.clear()
        await asyncio.gather(*(f.shutdown() for f in fetchers), *list(self._stopping), return_exceptions=True)
        log.info("shutdown completed")
