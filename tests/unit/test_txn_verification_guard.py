"""The stand-in for Kafka's VerificationGuard (TransactionVerifier.snapshot / stale_verifications):
a verification answered by another broker's coordinator no longer holds when the producer's
state on the partition changed meanwhile (a marker, or a transaction that began and ended),
unless the producer now has a transaction open there; other producers' appends do not matter.
In process: LogManager + ReplicaManager + a leader partition."""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite.log.log import ORIGIN_COORDINATOR
from kafkalite.log.log_manager import LogManager
from kafkalite.log.record_batch import build_batch, build_end_txn_marker
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.server.txn_verification import TransactionVerifier

TP = TopicPartition("t", 0)
CONFIG = LogConfig(segment_index_bytes=64 * 1024)
NOW = int(time.time() * 1000)
PID, OTHER = 7, 8


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    lm = LogManager([tmp_path], CONFIG)
    lm.startup()
    manager = ReplicaManager(0, lm)
    manager.become_leader(TP, uuid.uuid4(), 0, [0], [0], CONFIG)
    yield manager
    manager.shutdown()
    lm.shutdown()


def verifier(rm: ReplicaManager) -> TransactionVerifier:
    return TransactionVerifier(SimpleNamespace(transaction_partition_verification_enable=True), rm, None, None,
                               broker_id=0)


def append(rm: ReplicaManager, records: bytes, origin: str = "client") -> None:
    kw = {"origin": origin} if origin != "client" else {}
    r = asyncio.run(rm.append_records(5000, 1, {TP: records}, **kw))[TP]
    assert r.error == ErrorCode.NONE, r


def txn_data(pid: int, seq: int) -> bytes:
    return build_batch([(None, b"v", NOW)], producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def marker(pid: int, commit: bool) -> bytes:
    return build_end_txn_marker(pid, 0, 0, commit, NOW)


def test_nothing_in_between_holds(rm: ReplicaManager) -> None:
    v = verifier(rm)
    guards = v.snapshot(PID, [TP])
    assert v.stale_verifications(PID, 0, guards) == {}


def test_a_marker_in_between_refuses(rm: ReplicaManager) -> None:
    v = verifier(rm)
    guards = v.snapshot(PID, [TP])
    append(rm, marker(PID, commit=False), ORIGIN_COORDINATOR)
    assert v.stale_verifications(PID, 0, guards) == {TP: ErrorCode.INVALID_TXN_STATE}


def test_a_transaction_begun_and_ended_in_between_refuses(rm: ReplicaManager) -> None:
    # Kafka's ABA case: verified, the transaction ends, a new one starts unaware of the partition
    append(rm, txn_data(PID, 0))
    append(rm, marker(PID, commit=True), ORIGIN_COORDINATOR)
    v = verifier(rm)
    guards = v.snapshot(PID, [TP])
    append(rm, txn_data(PID, 1))
    append(rm, marker(PID, commit=False), ORIGIN_COORDINATOR)
    assert v.stale_verifications(PID, 0, guards) == {TP: ErrorCode.INVALID_TXN_STATE}


def test_a_transaction_opened_in_between_holds(rm: ReplicaManager) -> None:
    # another request of the producer, verified too, opened the transaction first
    v = verifier(rm)
    guards = v.snapshot(PID, [TP])
    append(rm, txn_data(PID, 0))
    assert v.stale_verifications(PID, 0, guards) == {}


def test_other_producers_do_not_matter(rm: ReplicaManager) -> None:
    v = verifier(rm)
    guards = v.snapshot(PID, [TP])
    append(rm, txn_data(OTHER, 0))
    append(rm, marker(OTHER, commit=True), ORIGIN_COORDINATOR)
    assert v.stale_verifications(PID, 0, guards) == {}
