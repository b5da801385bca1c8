"""`__transaction_state` loads follow the partition's leadership: a load begun for an election that
was followed by a resignation and a new election does not install its older view (its coordinator
epoch), and does not end the newer load; a second election at the same epoch starts no second load."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kafkalite.coordinator.transaction.transaction_state_manager import (TRANSACTION_STATE_TOPIC_NAME,
                                                                         TransactionConfig, TransactionStateManager)
from kafkalite.replica.partition import TopicPartition


@dataclass
class _Leader:
    leader_epoch: int


class _Replicas:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, _Leader] = {}

    def get_partition(self, tp: TopicPartition) -> Optional[_Leader]:
        return self.partitions.get(tp)


class _NoTopic:
    alone = False
    live_brokers = [0, 1, 2]

    def topic_record(self, name: str) -> None:
        return None


def test_a_load_of_an_older_election_is_not_installed() -> None:
    replicas = _Replicas()
    m = TransactionStateManager(0, replicas, _NoTopic(), TransactionConfig(num_partitions=1))
    tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, 0)
    replicas.partitions[tp] = _Leader(4)
    assert m.begin_loading(0) is True
    assert m.begin_loading(0) is False            # the same election again: one load
    m.remove_partition(0)                         # resigned while loading
    replicas.partitions[tp] = _Leader(6)          # and elected again
    assert m.begin_loading(0) is True
    assert m.complete_loading(0, 4, {}) is False  # the first load ends first: stale
    assert (m.loading_partitions, m.is_owned(0)) == ({0}, False)
    assert m.complete_loading(0, 6, {}) is True
    assert (m.loading_partitions, m.is_owned(0)) == (set(), True)
    assert m.get_transaction_state("any-id")[0].name == "NONE"
