"""Transactions in the log: markers (Kafka's EndTransactionMarker layout), the transactional
produce rules, the last stable offset, the aborted-transaction index per segment, and how
truncation, recovery and replication keep both consistent."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite.log import errors
from kafkalite.log.log import Log
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, build_batch,
                                        build_end_txn_marker, decode_records, parse_end_txn_marker,
                                        parse_header, split_batches)
from kafkalite.log.segment import txn_index_file
from kafkalite.log.transaction_index import AbortedTxn

T0 = 1_700_000_000_000


def txn(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True,
        ts: int = T0) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i, ts + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0,
           ts: int = T0) -> bytes:
    return build_end_txn_marker(pid, epoch, coordinator_epoch, commit, ts)


def open_log(path: Path, cfg: LogConfig | None = None, **kw) -> Log:
    return Log.open(path, cfg or LogConfig(), now_ms=kw.pop("now_ms", T0), **kw)


def end(lg: Log, pid: int, commit: bool, **kw) -> int:
    return lg.append_as_leader(marker(pid, commit, **kw), 0, T0, origin=ORIGIN_COORDINATOR).first_offset


def produce(lg: Log, data: bytes) -> int:
    return lg.append_as_leader(data, 0, T0).first_offset


# -- markers ----------------------------------------------------------------------------------

def test_end_txn_marker_layout() -> None:
    data = build_end_txn_marker(42, 3, 7, True, T0, partition_leader_epoch=5)
    h = parse_header(data)
    assert h.attributes == 0x30                     # transactional | control, no codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, -1)
    assert (h.records_count, h.last_offset_delta, h.partition_leader_epoch) == (1, 0, 5)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0)
    [rec] = decode_records(data)
    assert rec.key == struct.pack(">hh", 0, CONTROL_TYPE_COMMIT)
    assert rec.value == struct.pack(">hi", 0, 7)
    assert parse_end_txn_marker(data, h) == (CONTROL_TYPE_COMMIT, 7)
    abort = build_end_txn_marker(42, 3, 9, False, T0)
    assert parse_end_txn_marker(abort, parse_header(abort)) == (CONTROL_TYPE_ABORT, 9)


@pytest.mark.parametrize("key,value", [
    (b"\x00\x00", struct.pack(">hi", 0, 1)),                 # key too short
    (struct.pack(">hh", -1, 0), struct.pack(">hi", 0, 1)),    # negative key version
    (struct.pack(">hh", 0, 5), struct.pack(">hi", 0, 1)),     # not COMMIT/ABORT
    (struct.pack(">hh", 0, 1), b"\x00\x00\x00"),              # value too short
    (struct.pack(">hh", 0, 1), None),
])
def test_malformed_markers_are_invalid_record(tmp_path: Path, key, value) -> None:
    data = build_batch([(key, value, T0)], producer_id=1, producer_epoch=0, transactional=True,
                       control=True)
    with pytest.raises(errors.InvalidRecordError):
        parse_end_txn_marker(data, parse_header(data))
    lg = open_log(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecordError) as exc:
        lg.append_as_leader(data, 0, T0, origin=ORIGIN_COORDINATOR)
    assert exc.value.error_code == 87 and lg.log_end_offset == 0


def test_only_coordinators_write_markers(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecordError) as exc:
        lg.append_as_leader(marker(1, True), 0, T0)
    assert exc.value.error_code == 87
    # A control batch without the transactional bit is no marker.
    bad = build_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0), T0)],
                      producer_id=1, producer_epoch=0, control=True)
    with pytest.raises(errors.InvalidRecordError):
        lg.append_as_leader(bad, 0, T0, origin=ORIGIN_COORDINATOR)
    assert lg.log_end_offset == 0


# -- transactions and the last stable offset --------------------------------------------------

def test_abort_indexes_transaction_and_advances_lso(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    assert produce(lg, txn(1, 0)) == 0                          # 0-1, txn of producer 1
    assert produce(lg, txn(2, 0, transactional=False)) == 2     # 2-3, idempotent only
    assert produce(lg, txn(1, 2)) == 4                          # 4-5
    assert lg.first_unstable_offset == 0
    assert lg.last_stable_offset(6) == 0
    e = lg.producer_state.producers[1]
    assert (e.current_txn_first_offset, e.last_seq, e.coordinator_epoch) == (0, 3, -1)
    assert end(lg, 1, False, coordinator_epoch=4) == 6
    assert lg.first_unstable_offset is None
    assert lg.last_stable_offset(7) == 7
    e = lg.producer_state.producers[1]
    assert (e.current_txn_first_offset, e.coordinator_epoch, e.producer_epoch) == (None, 4, 0)
    assert lg.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 0, 6, 7)]
    assert lg.collect_aborted_transactions(7, 8) == []
    path = txn_index_file(lg.dir, 0)
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 6, 7)
    # A commit is not indexed.
    assert produce(lg, txn(1, 4)) == 7
    assert end(lg, 1, True, coordinator_epoch=4) == 9
    assert len(path.read_bytes()) == 34
    assert lg.last_stable_offset(10) == 10
    lg.close()


def test_interleaved_transactions(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    produce(lg, txn(1, 0, n=1))                  # 0
    produce(lg, txn(2, 0, n=1))                  # 1
    produce(lg, txn(1, 1, n=1))                  # 2
    assert lg.first_unstable_offset == 0
    assert end(lg, 1, False) == 3
    # Producer 2's transaction still holds the LSO at 1: the index records it.
    assert lg.collect_aborted_transactions(0, 4) == [AbortedTxn(1, 0, 3, 1)]
    assert lg.first_unstable_offset == 1 and lg.last_stable_offset(4) == 1
    assert end(lg, 2, False) == 4
    assert lg.collect_aborted_transactions(0, 5) == [AbortedTxn(1, 0, 3, 1),
                                                     AbortedTxn(2, 1, 4, 5)]
    assert lg.collect_aborted_transactions(4, 5) == [AbortedTxn(2, 1, 4, 5)]
    assert lg.first_unstable_offset is None and lg.last_stable_offset(5) == 5
    lg.close()


def test_completed_transaction_waits_for_high_watermark(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    produce(lg, txn(1, 0))                       # 0-1
    end(lg, 1, True)                             # 2
    assert lg.first_unstable_offset is None
    # Until the high watermark passes the marker the outcome is not replicated.
    assert lg.last_stable_offset(1) == 0
    assert lg.last_stable_offset(2) == 0
    assert lg.last_stable_offset(3) == 3
    assert lg.last_stable_offset(3) == 3
    lg.close()


def test_marker_without_transaction_is_appended(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    assert end(lg, 5, False, epoch=2, coordinator_epoch=3) == 0
    assert lg.log_end_offset == 1
    e = lg.producer_state.producers[5]
    assert (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset) == (2, 3, None)
    assert lg.collect_aborted_transactions(0, 1) == []
    assert not txn_index_file(lg.dir, 0).exists()
    lg.close()


def test_marker_fencing(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    produce(lg, txn(1, 0, epoch=3))
    end(lg, 1, True, epoch=3, coordinator_epoch=5)
    produce(lg, txn(1, 2, epoch=3))             # 3-4
    with pytest.raises(errors.InvalidProducerEpochError) as exc:
        end(lg, 1, False, epoch=2, coordinator_epoch=5)
    assert exc.value.error_code == 47
    with pytest.raises(errors.TransactionCoordinatorFencedError) as exc2:
        end(lg, 1, False, epoch=3, coordinator_epoch=4)
    assert exc2.value.error_code == 52
    assert lg.log_end_offset == 5 and lg.first_unstable_offset == 3
    # A newer epoch (the coordinator bumped it to abort) is accepted.
    assert end(lg, 1, False, epoch=4, coordinator_epoch=6) == 5
    e = lg.producer_state.producers[1]
    assert (e.producer_epoch, e.coordinator_epoch, len(e.batches)) == (4, 6, 0)
    assert lg.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 3, 5, 6)]
    lg.close()


def test_transactional_produce_rules(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    produce(lg, txn(1, 0))
    with pytest.raises(errors.InvalidTxnStateError) as exc:
        produce(lg, txn(1, 2, transactional=False))
    assert exc.value.error_code == 48
    assert lg.log_end_offset == 2
    assert lg.producer_state.producers[1].last_seq == 1
    # A retry of the transactional batch is a duplicate answered with its offsets.
    info = lg.append_as_leader(txn(1, 0), 0, T0)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)
    end(lg, 1, True)
    # After the commit the producer may write outside a transaction again.
    assert produce(lg, txn(1, 2, transactional=False)) == 3
    assert lg.first_unstable_offset is None
    lg.close()


# -- segments, truncation, recovery, replication ----------------------------------------------

def _three_segment_log(tmp_path: Path) -> tuple[Log, int]:
    size = len(txn(1, 0))
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 2 + 10))
    produce(lg, txn(1, 0))                       # 0-1   segment 0
    produce(lg, txn(2, 0))                       # 2-3   segment 0
    produce(lg, txn(3, 0))                       # 4-5   segment 4
    end(lg, 2, False)                            # 6     segment 4
    produce(lg, txn(3, 2))                       # 7-8   segment 7
    end(lg, 1, False)                            # 9     segment 7
    return lg, size


def test_aborted_transactions_across_segments(tmp_path: Path) -> None:
    lg, _ = _three_segment_log(tmp_path)
    assert [s.base_offset for s in lg.segments] == [0, 4, 7]
    assert lg.first_unstable_offset == 4
    expected = [AbortedTxn(2, 2, 6, 0), AbortedTxn(1, 0, 9, 4)]
    # The search starts in segment 0 (no index file) and walks on: the entries' LSOs (0, 4)
    # never reach the upper bound, so every later segment is read.
    assert lg.collect_aborted_transactions(0, 10) == expected
    assert lg.collect_aborted_transactions(7, 10) == [AbortedTxn(1, 0, 9, 4)]
    assert lg.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 9, 4)]
    assert not txn_index_file(lg.dir, 0).exists()
    assert txn_index_file(lg.dir, 4).exists() and txn_index_file(lg.dir, 7).exists()
    lg.close()


def test_truncation_keeps_index_and_state_consistent(tmp_path: Path) -> None:
    lg, _ = _three_segment_log(tmp_path)
    assert lg.truncate_to(9)                     # producer 1's abort goes
    assert lg.collect_aborted_transactions(0, 9) == [AbortedTxn(2, 2, 6, 0)]
    assert txn_index_file(lg.dir, 7).read_bytes() == b""
    assert lg.producer_state.producers[1].current_txn_first_offset == 0
    assert lg.first_unstable_offset == 0
    assert lg.truncate_to(6)                     # segment 7 and the abort at 6 go
    assert [s.base_offset for s in lg.segments] == [0, 4]
    assert not txn_index_file(lg.dir, 7).exists()
    assert lg.collect_aborted_transactions(0, 6) == []
    ongoing = {pid: e.current_txn_first_offset for pid, e in lg.producer_state.producers.items()}
    assert ongoing == {1: 0, 2: 2, 3: 4}
    # The same abort can be written again.
    assert end(lg, 2, False) == 6
    assert lg.collect_aborted_transactions(0, 7) == [AbortedTxn(2, 2, 6, 0)]
    lg.close()


def test_recovery_rebuilds_transaction_index(tmp_path: Path) -> None:
    lg, _ = _three_segment_log(tmp_path)
    before = lg.collect_aborted_transactions(0, 10)
    d = lg.dir
    lg.close_handlers()                          # crash: nothing flushed or trimmed
    txn_index_file(d, 4).unlink()
    with open(txn_index_file(d, 7), "ab") as f:
        f.write(b"\x00\x07")                     # torn entry
    again = open_log(d, LogConfig(segment_bytes=1 << 20), recovery_point=0)
    assert again.collect_aborted_transactions(0, 10) == before
    assert txn_index_file(d, 7).read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 9, 4)
    assert again.first_unstable_offset == 4
    again.close()
    # A clean shutdown keeps the files; a torn index alone is caught by the sanity check.
    with open(txn_index_file(d, 4), "ab") as f:
        f.write(b"\x01")
    third = open_log(d, had_clean_shutdown=True)
    assert third.collect_aborted_transactions(0, 10) == before
    assert len(txn_index_file(d, 4).read_bytes()) == 34
    third.close()


def test_follower_folds_markers(tmp_path: Path) -> None:
    leader, _ = _three_segment_log(tmp_path)
    data = leader.read(0, 1 << 20).read_bytes()
    assert [h.base_offset for _p, h in split_batches(data)[0]] == [0, 2, 4, 6, 7, 9]
    follower = open_log(tmp_path / "f-0")
    follower.append_as_follower(data)
    assert follower.collect_aborted_transactions(0, 10) == \
        leader.collect_aborted_transactions(0, 10)
    assert follower.first_unstable_offset == 4
    ongoing = {p: e.current_txn_first_offset for p, e in follower.producer_state.producers.items()}
    assert ongoing == {1: None, 2: None, 3: 4}
    leader.close()
    follower.close()


def test_abort_after_a_clean_load_without_txn_index(tmp_path: Path) -> None:
    """A clean load that listed no .txnindex never opens one; the first abort after it creates
    the file, and every reader (the log, a reload, a crash recovery) sees its entry."""
    d = tmp_path / "t-0"
    lg = open_log(d)
    produce(lg, txn(1, 0))
    end(lg, 1, True)
    lg.close()
    assert not txn_index_file(d, 0).exists()
    again = open_log(d, had_clean_shutdown=True)
    assert again.collect_aborted_transactions(0, 10) == []
    produce(again, txn(1, 2))
    assert end(again, 1, False) == 5
    assert again.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 3, 5, 6)]
    assert txn_index_file(d, 0).read_bytes() == struct.pack(">hqqqq", 0, 1, 3, 5, 6)
    again.close()
    third = open_log(d, had_clean_shutdown=True)
    assert third.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 3, 5, 6)]
    third.close_handlers()                      # crash: recovered from 0, index rebuilt
    fourth = open_log(d, recovery_point=0)
    assert fourth.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 3, 5, 6)]
    assert txn_index_file(d, 0).read_bytes() == struct.pack(">hqqqq", 0, 1, 3, 5, 6)
    fourth.close()
