"""Compaction of transactional data as Kafka's LogCleaner does it: aborted records go (and never
supersede anything), committed transactional records are compacted like others, markers stay
while their transaction has batches, then get a delete horizon and go after it; the cleaner
never passes the first unstable offset."""
from __future__ import annotations

import asyncio
from pathlib import Path

from kafkalite.config.log_config import LogConfig
from kafkalite.log.cleaner_manager import CleanerConfig, LogCleaner
from kafkalite.log.log import Log
from kafkalite.log.log_manager import LogManager
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import (DELETE_HORIZON_MASK, build_batch, build_end_txn_marker,
                                        decode_records, split_batches)
from kafkalite.log.segment import txn_index_file
from kafkalite.log.transaction_index import AbortedTxn

T0 = 1_700_000_000_000
RETENTION = 10_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def cfg() -> LogConfig:
    return LogConfig(segment_bytes=4096, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01,
                     delete_retention_ms=RETENTION, file_delete_delay_ms=0)


def setup(tmp_path: Path) -> tuple[LogManager, Log]:
    lm = LogManager([tmp_path / "logs"], cfg(), lock_dirs=False, clock_ms=lambda: T0)
    lm.startup({"t": cfg()})
    return lm, lm.get_or_create_log("t", 0, cfg())


def cleaner(lm: LogManager, clock: Clock) -> LogCleaner:
    return LogCleaner(lm, CleanerConfig(backoff_ms=10), clock_ms=clock)


def clean(c: LogCleaner) -> bool:
    return asyncio.run(c.clean_filthiest_log())


def put(lg: Log, records: list[tuple[bytes, bytes]], **kw) -> int:
    data = build_batch([(k, v, T0) for k, v in records], **kw)
    return lg.append_as_leader(data, 0, T0).first_offset


def txn(lg: Log, pid: int, seq: int, records: list[tuple[bytes, bytes]]) -> int:
    return put(lg, records, producer_id=pid, producer_epoch=0, base_sequence=seq,
               transactional=True)


def end(lg: Log, pid: int, commit: bool) -> int:
    return lg.append_as_leader(build_end_txn_marker(pid, 0, 0, commit, T0), 0, T0,
                               origin=ORIGIN_COORDINATOR).first_offset


def batches(lg: Log) -> list[tuple[int, int, bool, bool, list]]:
    """(base, last, is_control, has delete horizon, [(offset, key, value)]) of every batch."""
    data = lg.read(lg.log_start_offset, 1 << 30).read_bytes()
    out = []
    for p, h in split_batches(data)[0]:
        recs = decode_records(memoryview(data)[p:p + h.size], h)
        out.append((h.base_offset, h.last_offset, h.is_control,
                    bool(h.attributes & DELETE_HORIZON_MASK),
                    [] if h.is_control else [(r.offset, r.key, r.value) for r in recs]))
    return out


def test_aborted_data_goes_markers_follow_after_the_delete_horizon(tmp_path: Path) -> None:
    lm, lg = setup(tmp_path)
    assert put(lg, [(b"a", b"1"), (b"b", b"1")]) == 0                   # 0-1
    assert txn(lg, 10, 0, [(b"a", b"2"), (b"b", b"2")]) == 2             # 2-3, aborted below
    assert txn(lg, 11, 0, [(b"a", b"3"), (b"c", b"3")]) == 4             # 4-5, committed
    assert end(lg, 10, False) == 6
    assert end(lg, 11, True) == 7
    assert put(lg, [(b"e", b"8")], producer_id=10, producer_epoch=0, base_sequence=2) == 8
    lg.roll()
    assert lg.collect_aborted_transactions(0, 9) == [AbortedTxn(10, 2, 6, 4)]

    clock = Clock(T0 + 1000)
    c = cleaner(lm, clock)
    assert clean(c)
    # b=1 survives the aborted b=2; a=1 is superseded by the committed a=3; the aborted batch
    # is gone; both markers stay (their transactions had batches in this pass).
    assert batches(lg) == [
        (0, 1, False, False, [(1, b"b", b"1")]),
        (4, 5, False, False, [(4, b"a", b"3"), (5, b"c", b"3")]),
        (6, 6, True, False, []),
        (7, 7, True, False, []),
        (8, 8, False, False, [(8, b"e", b"8")]),
    ]
    # The kept ABORT marker's entry moved to the cleaned segment's index.
    assert lg.collect_aborted_transactions(0, 9) == [AbortedTxn(10, 2, 6, 4)]
    assert c.last_result.pending_delete_horizon_ms is None

    # Next round: nothing of the aborted transaction is left, the ABORT marker gets a
    # delete horizon (its index entry goes); the COMMIT marker's transaction still has data.
    assert put(lg, [(b"z", b"9")]) == 9
    lg.roll()
    clock.now = T0 + 2000
    assert clean(c)
    got = batches(lg)
    assert [(b[0], b[2], b[3]) for b in got] == [
        (0, False, False), (4, False, False), (6, True, True), (7, True, False),
        (8, False, False), (9, False, False)]
    assert lg.collect_aborted_transactions(0, 10) == []
    assert not txn_index_file(lg.dir, 0).exists() or \
        txn_index_file(lg.dir, 0).read_bytes() == b""
    horizon = clock.now + RETENTION
    assert c.last_result.pending_delete_horizon_ms == horizon

    # Before the horizon the marker stays; at it, it goes.
    clock.now = horizon - 1
    assert clean(c) is False
    clock.now = horizon
    assert clean(c)
    assert [(b[0], b[2]) for b in batches(lg)] == [
        (0, False), (4, False), (7, True), (8, False), (9, False)]
    assert [r for b in batches(lg) for r in b[4]] == [
        (1, b"b", b"1"), (4, b"a", b"3"), (5, b"c", b"3"), (8, b"e", b"8"), (9, b"z", b"9")]
    lm.shutdown()


def test_cleaner_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    lm, lg = setup(tmp_path)
    put(lg, [(b"a", b"1")])                                              # 0
    txn(lg, 20, 0, [(b"a", b"2")])                                       # 1, open
    lg.roll()
    put(lg, [(b"a", b"3")])                                              # 2
    lg.roll()
    assert lg.first_unstable_offset == 1
    c = cleaner(lm, Clock(T0 + 1000))
    # The only cleanable segment would be [0, 2), but the transaction at 1 is undecided.
    assert clean(c) is False
    assert [r for b in batches(lg) for r in b[4]] == [(0, b"a", b"1"), (1, b"a", b"2"),
                                                     (2, b"a", b"3")]
    assert end(lg, 20, True) == 3
    lg.roll()
    assert clean(c)
    # a=3 supersedes both; producer 20's last batch stays empty (its sequence), the COMMIT
    # marker stays while that batch of its transaction is there.
    assert batches(lg) == [(1, 1, False, False, []), (2, 2, False, False, [(2, b"a", b"3")]),
                           (3, 3, True, False, [])]
    lm.shutdown()
    # The cleaned log reloads to the same producer state.
    lm2 = LogManager([tmp_path / "logs"], cfg(), lock_dirs=False, clock_ms=lambda: T0)
    lm2.startup({"t": cfg()})
    lg2 = lm2.get_log(("t", 0))
    e = lg2.producer_state.producers[20]
    assert (e.last_seq, e.current_txn_first_offset) == (0, None)
    assert lg2.first_unstable_offset is None
    lm2.shutdown()
