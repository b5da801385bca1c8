"""Kafka's version mapping and error translation for transaction verification (KIP-890)."""
from __future__ import annotations

import pytest

from kafkalite.protocol.errors import ErrorCode as E
from kafkalite.server.txn_verification import (TransactionSupportedOperation as Op, map_coordinator_error,
                                               produce_error, produce_operation, txn_offset_commit_error,
                                               txn_offset_commit_operation)

RETRY_MESSAGE = "Unable to verify the partition has been added to the transaction. Underlying error: "


def test_operation_per_version() -> None:
    assert [produce_operation(v) for v in range(3, 14)] == [Op.DEFAULT_ERROR] * 8 + \
        [Op.GENERIC_ERROR_SUPPORTED, Op.ADD_PARTITION, Op.ADD_PARTITION]
    assert [txn_offset_commit_operation(v) for v in range(6)] == [Op.DEFAULT_ERROR] * 4 + \
        [Op.GENERIC_ERROR_SUPPORTED, Op.ADD_PARTITION]
    assert [op.supports_epoch_bump for op in Op] == [False, False, True]


@pytest.mark.parametrize("op", list(Op))
def test_coordinator_answers(op: Op) -> None:
    assert map_coordinator_error(E.PRODUCER_FENCED, op) == E.INVALID_PRODUCER_EPOCH
    assert map_coordinator_error(E.TRANSACTION_ABORTABLE, op) == \
        (E.INVALID_TXN_STATE if op is Op.DEFAULT_ERROR else E.TRANSACTION_ABORTABLE)
    for e in (E.INVALID_PRODUCER_ID_MAPPING, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR, E.INVALID_REQUEST):
        assert map_coordinator_error(e, op) == e


@pytest.mark.parametrize("op", list(Op))
def test_produce_answers(op: Op) -> None:
    assert produce_error(E.INVALID_TXN_STATE, op) == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    for e in (E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
        assert produce_error(e, op) == (E.NOT_ENOUGH_REPLICAS, RETRY_MESSAGE + e.name)
    # transaction version 2 clients are told CONCURRENT_TRANSACTIONS as is
    assert produce_error(E.CONCURRENT_TRANSACTIONS, op) == (
        (E.CONCURRENT_TRANSACTIONS, None) if op.supports_epoch_bump
        else (E.NOT_ENOUGH_REPLICAS, RETRY_MESSAGE + "CONCURRENT_TRANSACTIONS"))
    for e in (E.TRANSACTION_ABORTABLE, E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_ID_MAPPING):
        assert produce_error(e, op) == (e, None)


def test_txn_offset_commit_answers() -> None:
    assert txn_offset_commit_error(E.NETWORK_EXCEPTION) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert txn_offset_commit_error(E.NOT_ENOUGH_REPLICAS) == E.COORDINATOR_NOT_AVAILABLE
    assert txn_offset_commit_error(E.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    for e in (E.COORDINATOR_NOT_AVAILABLE, E.CONCURRENT_TRANSACTIONS, E.INVALID_TXN_STATE,
              E.INVALID_PRODUCER_EPOCH, E.NOT_COORDINATOR, E.NONE):
        assert txn_offset_commit_error(e) == e
