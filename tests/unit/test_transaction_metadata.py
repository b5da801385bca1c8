"""Transaction state machine: Kafka's legal transitions, epoch rules, two-phase transitions."""
from __future__ import annotations

import pytest

from kafkalite.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH, IllegalTransactionStateError, TransactionMetadata, TransactionState as S,
    end_txn_decision, epoch_bump, is_epoch_exhausted, is_valid_transition, state_from_id,
    state_from_name)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)

LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def test_state_ids_and_names() -> None:
    assert [int(s) for s in S] == list(range(8))
    assert [s.state_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                         "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert state_from_id(7) is S.PREPARE_EPOCH_FENCE
    with pytest.raises(IllegalTransactionStateError):
        state_from_id(8)
    assert state_from_name("Ongoing") is S.ONGOING
    assert state_from_name("ongoing") is None


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transition_table(current: S, target: S) -> None:
    assert is_valid_transition(current, target) == ((current, target) in LEGAL)


def test_epoch_exhaustion() -> None:
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    assert is_epoch_exhausted(32767)


def test_epoch_bump_rules() -> None:
    assert epoch_bump(3, 2, None) == (4, NO_PRODUCER_EPOCH)        # new producer instance
    assert epoch_bump(3, 2, 3) == (4, 3)                           # KIP-360 recovery
    assert epoch_bump(-1, -1, 7) == (0, -1)                        # fresh metadata
    assert epoch_bump(4, 3, 3) == (4, 3)                           # retry of a bump
    assert epoch_bump(4, 3, 1) is ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("state,commit,expected", [
    (S.ONGOING, True, S.PREPARE_COMMIT), (S.ONGOING, False, S.PREPARE_ABORT),
    (S.COMPLETE_COMMIT, True, ErrorCode.NONE), (S.COMPLETE_COMMIT, False, ErrorCode.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, ErrorCode.NONE), (S.COMPLETE_ABORT, True, ErrorCode.INVALID_TXN_STATE),
    (S.PREPARE_COMMIT, True, ErrorCode.CONCURRENT_TRANSACTIONS), (S.PREPARE_COMMIT, False, ErrorCode.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, False, ErrorCode.CONCURRENT_TRANSACTIONS), (S.PREPARE_ABORT, True, ErrorCode.INVALID_TXN_STATE),
    (S.EMPTY, True, ErrorCode.INVALID_TXN_STATE), (S.EMPTY, False, ErrorCode.INVALID_TXN_STATE),
])
def test_end_txn_decision(state: S, commit: bool, expected: object) -> None:
    assert end_txn_decision(state, commit) == expected


def test_end_txn_in_dead_state_is_a_bug() -> None:
    with pytest.raises(IllegalTransactionStateError):
        end_txn_decision(S.DEAD, True)


def _fresh(producer_id: int = 1000) -> TransactionMetadata:
    return TransactionMetadata("txn", producer_id, txn_timeout_ms=60_000, txn_last_update_timestamp=1)


def test_full_commit_cycle() -> None:
    m = _fresh()
    t = m.prepare_increment_producer_epoch(30_000, None, 10)
    assert not isinstance(t, ErrorCode)
    assert (t.state, t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms) == (S.EMPTY, 0, -1, 30_000)
    assert m.pending_state is S.EMPTY and m.producer_epoch == -1   # nothing applied before completion
    m.complete_transition_to(t)
    assert (m.state, m.producer_epoch, m.pending_state, m.txn_timeout_ms) == (S.EMPTY, 0, None, 30_000)

    t = m.prepare_add_partitions({TP0}, 20)
    assert t.txn_start_timestamp == 20
    m.complete_transition_to(t)
    t = m.prepare_add_partitions({TP1}, 25)
    assert t.txn_start_timestamp == 20 and t.topic_partitions == {TP0, TP1}
    m.complete_transition_to(t)
    assert m.state is S.ONGOING and m.topic_partitions == {TP0, TP1}

    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 30)
    m.complete_transition_to(t)
    assert m.state is S.PREPARE_COMMIT
    m.remove_partition(TP0)
    assert m.topic_partitions == {TP1}
    t = m.prepare_complete(40)
    assert t.state is S.COMPLETE_COMMIT and t.topic_partitions == frozenset()
    m.complete_transition_to(t)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp, m.txn_last_update_timestamp) == \
        (S.COMPLETE_COMMIT, set(), 20, 40)
    # the next transaction starts afresh
    t = m.prepare_add_partitions({TP0}, 50)
    assert t.txn_start_timestamp == 50


def test_pending_state_blocks_a_second_transition() -> None:
    m = _fresh()
    m.complete_transition_to(m.prepare_increment_producer_epoch(60_000, None, 1))  # type: ignore[arg-type]
    m.prepare_add_partitions({TP0}, 2)
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_add_partitions({TP1}, 3)


def test_illegal_transition_raises_and_sets_no_pending_state() -> None:
    m = _fresh()
    m.complete_transition_to(m.prepare_increment_producer_epoch(60_000, None, 1))  # type: ignore[arg-type]
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2)      # Empty -> PrepareCommit
    assert m.pending_state is None


def test_completing_another_transition_than_prepared_fails() -> None:
    m = _fresh()
    t = m.prepare_increment_producer_epoch(60_000, None, 1)
    m.pending_state = None
    with pytest.raises(IllegalTransactionStateError):
        m.complete_transition_to(t)  # type: ignore[arg-type]


def test_fence_bumps_epoch_then_prepare_abort() -> None:
    m = _fresh()
    m.complete_transition_to(m.prepare_increment_producer_epoch(60_000, None, 1))  # type: ignore[arg-type]
    m.complete_transition_to(m.prepare_add_partitions({TP0}, 2))
    fence = m.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1, -1)
    # the coordinator then turns the fence into PrepareAbort at the bumped epoch
    m.pending_state = None
    m.producer_epoch = fence.producer_epoch
    m.last_producer_epoch = NO_PRODUCER_EPOCH
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, 3)
    assert (t.state, t.producer_epoch, t.topic_partitions) == (S.PREPARE_ABORT, 1, frozenset({TP0}))
    m.complete_transition_to(t)
    assert m.state is S.PREPARE_ABORT


def test_failed_fence_does_not_bump_twice() -> None:
    m = _fresh()
    m.complete_transition_to(m.prepare_increment_producer_epoch(60_000, None, 1))  # type: ignore[arg-type]
    m.complete_transition_to(m.prepare_add_partitions({TP0}, 2))
    m.producer_epoch = 5
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 5


def test_fence_at_max_epoch_is_refused() -> None:
    m = _fresh()
    m.state, m.producer_epoch = S.ONGOING, 32767
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_fence_producer_epoch()


def test_kip360_bump_and_retry() -> None:
    m = _fresh()
    m.complete_transition_to(m.prepare_increment_producer_epoch(60_000, None, 1))  # type: ignore[arg-type]
    t = m.prepare_increment_producer_epoch(60_000, 0, 2)
    assert not isinstance(t, ErrorCode)
    assert (t.producer_epoch, t.last_producer_epoch) == (1, 0)
    m.complete_transition_to(t)
    retry = m.prepare_increment_producer_epoch(60_000, 0, 3)   # the answer to the bump was lost
    assert not isinstance(retry, ErrorCode)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (1, 0)
    m.pending_state = None
    assert m.prepare_increment_producer_epoch(60_000, 7, 4) is ErrorCode.PRODUCER_FENCED
    assert m.pending_state is None


def test_producer_id_rotation_on_exhausted_epoch() -> None:
    m = _fresh()
    m.producer_epoch = 32766
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_increment_producer_epoch(60_000, None, 1)
    t = m.prepare_producer_id_rotation(2000, 60_000, 2, record_last_epoch=True)
    assert (t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch) == (2000, 1000, 0, 32766)
    m.complete_transition_to(t)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id) == (2000, 0, 1000)


def test_rotation_refused_with_a_pending_transaction() -> None:
    m = _fresh()
    m.state = S.ONGOING
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_producer_id_rotation(2000, 60_000, 2, record_last_epoch=False)


def test_dead_from_complete_only() -> None:
    m = _fresh()
    m.state, m.producer_epoch = S.COMPLETE_ABORT, 3
    t = m.prepare_dead()
    assert t.state is S.DEAD
    m.pending_state = None
    m.state = S.ONGOING
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_dead()


def test_remove_partition_only_while_preparing() -> None:
    m = _fresh()
    m.state = S.ONGOING
    m.topic_partitions = {TP0}
    with pytest.raises(IllegalTransactionStateError):
        m.remove_partition(TP0)
