"""Producer-state snapshots (Kafka's ProducerStateManager layout): the file format, when they are
written and deleted, and that dedup and ongoing transactions survive a restart and a crash —
also after retention removed the segments holding a producer's batches."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalite.config.log_config import LogConfig
from kafkalite.log import errors
from kafkalite.log.log import Log
from kafkalite.log.log_manager import LogManager
from kafkalite.log.producer_snapshot import (CorruptSnapshotError, decode_snapshot,
                                             encode_snapshot, list_snapshots, snapshot_file)
from kafkalite.log.producer_state import ORIGIN_COORDINATOR, BatchMetadata, ProducerStateEntry
from kafkalite.log.record_batch import build_batch, build_end_txn_marker

T0 = 1_700_000_000_000


def data(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = False,
         ts: int = T0) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i, ts + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def open_log(path: Path, cfg: LogConfig | None = None, **kw) -> Log:
    return Log.open(path, cfg or LogConfig(), now_ms=kw.pop("now_ms", T0), **kw)


def state(lg: Log) -> dict:
    """What a snapshot preserves, per producer, and the first unstable offset."""
    out = {pid: (e.producer_epoch, e.last_seq, e.batches[-1].first_seq if e.batches else None,
                 e.last_data_offset, e.last_timestamp, e.coordinator_epoch,
                 e.current_txn_first_offset)
           for pid, e in lg.producer_state.producers.items()}
    return {"producers": out, "fuo": lg.first_unstable_offset}


# -- the file format --------------------------------------------------------------------------

def test_snapshot_layout() -> None:
    e1 = ProducerStateEntry(7, 3, last_timestamp=T0, coordinator_epoch=2,
                            current_txn_first_offset=40)
    e1.batches.append(BatchMetadata(10, 14, 41, 45, T0))
    e2 = ProducerStateEntry(5, 1, last_timestamp=T0 + 1, coordinator_epoch=-1)   # no batch
    raw = encode_snapshot([e1, e2])
    body = struct.pack(">i", 2) + \
        struct.pack(">qhiqiqiq", 5, 1, -1, -1, 0, T0 + 1, -1, -1) + \
        struct.pack(">qhiqiqiq", 7, 3, 14, 45, 4, T0, 2, 40)
    assert raw == struct.pack(">hI", 1, crc32c(body)) + body
    got = {e.producer_id: e for e in decode_snapshot(raw)}
    assert list(got[7].batches) == [BatchMetadata(10, 14, 41, 45, T0)]
    assert (got[7].producer_epoch, got[7].coordinator_epoch, got[7].current_txn_first_offset,
            got[7].last_timestamp) == (3, 2, 40, T0)
    assert not got[5].batches and got[5].current_txn_first_offset is None
    # Sequences wrap: a last sequence of 1 with offset delta 3 began at INT32_MAX - 1.
    e3 = ProducerStateEntry(9, 0, last_timestamp=T0)
    e3.batches.append(BatchMetadata(2**31 - 2, 1, 100, 103, T0))
    [back] = decode_snapshot(encode_snapshot([e3]))
    assert back.batches[0] == BatchMetadata(2**31 - 2, 1, 100, 103, T0)


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-1],                                   # torn
    lambda b: b[:10] + bytes([b[10] ^ 1]) + b[11:],     # flipped bit: CRC
    lambda b: struct.pack(">h", 2) + b[2:],             # unknown version
    lambda b: b"",
])
def test_corrupt_snapshots(mutate) -> None:
    e = ProducerStateEntry(1, 0, last_timestamp=T0)
    e.batches.append(BatchMetadata(0, 1, 0, 1, T0))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(mutate(encode_snapshot([e])))


# -- when snapshots are written and deleted ----------------------------------------------------

def test_written_at_roll_and_close(tmp_path: Path) -> None:
    size = len(data(1, 0))
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 2))
    for i in range(5):
        lg.append_as_leader(data(1, 2 * i), 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert list(list_snapshots(lg.dir)) == [4, 8]
    assert snapshot_file(lg.dir, 8).name == "00000000000000000008.snapshot"
    # The snapshot at 4 holds the state after offsets 0-3.
    [e] = decode_snapshot(snapshot_file(lg.dir, 4).read_bytes())
    assert (e.producer_id, e.last_seq, e.last_data_offset) == (1, 3, 3)
    lg.close()
    assert list(list_snapshots(lg.dir)) == [4, 8, 10]
    again = open_log(lg.dir, had_clean_shutdown=True)
    again.close()       # nothing new: no new snapshot
    assert list(list_snapshots(lg.dir)) == [4, 8, 10]


def test_close_with_unchanged_state_renames_the_newest_snapshot(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    lg.append_as_leader(data(1, 0), 0, T0)                                  # 0-1
    lg.close()
    assert list(list_snapshots(lg.dir)) == [2]
    written = snapshot_file(lg.dir, 2).read_bytes()
    # Records without a producer id leave the state as it was: the file moves to the new end.
    lg = open_log(lg.dir, had_clean_shutdown=True)
    lg.append_as_leader(build_batch([(None, b"v", T0)]), 0, T0)            # 2
    lg.close()
    assert list(list_snapshots(lg.dir)) == [3]
    assert snapshot_file(lg.dir, 3).read_bytes() == written
    lg = open_log(lg.dir, had_clean_shutdown=True)
    assert state(lg)["producers"] == {1: (0, 1, 0, 1, T0 + 1, -1, None)}
    # A changed state is a new file; the older one stays.
    lg.append_as_leader(data(1, 2), 0, T0)                                  # 3-4
    lg.close()
    assert list(list_snapshots(lg.dir)) == [3, 5]
    assert decode_snapshot(snapshot_file(lg.dir, 5).read_bytes())[0].last_seq == 3


def test_close_without_sync_follows_the_same_rule_and_counts_everything_flushed(tmp_path: Path) -> None:
    """close(sync=False), as a LogManager shutdown closes each log before one syncfs: the same
    snapshot rule as a synced close (the unchanged state's file renamed, inode and bytes kept; a
    changed state written anew at the log end offset), the recovery point at the log end offset
    and nothing left to fsync; a clean reopen loads the state from the snapshot."""
    lg = open_log(tmp_path / "t-0")
    lg.append_as_leader(data(1, 0), 0, T0)                                  # 0-1
    lg.close(sync=False)
    assert list(list_snapshots(lg.dir)) == [2] and lg.recovery_point == 2 and lg._unsynced_files == []
    written, inode = snapshot_file(lg.dir, 2).read_bytes(), snapshot_file(lg.dir, 2).stat().st_ino
    lg = open_log(lg.dir, had_clean_shutdown=True, recovery_point=2)
    lg.append_as_leader(build_batch([(None, b"v", T0)]), 0, T0)            # 2
    lg.close(sync=False)
    assert list(list_snapshots(lg.dir)) == [3] and lg.recovery_point == 3 and lg._unsynced_files == []
    renamed = snapshot_file(lg.dir, 3)
    assert (renamed.read_bytes(), renamed.stat().st_ino) == (written, inode)
    lg = open_log(lg.dir, had_clean_shutdown=True, recovery_point=3)
    assert state(lg)["producers"] == {1: (0, 1, 0, 1, T0 + 1, -1, None)}
    lg.append_as_leader(data(1, 2), 0, T0)                                  # 3-4
    lg.close(sync=False)
    assert list(list_snapshots(lg.dir)) == [3, 5] and lg.recovery_point == 5 and lg._unsynced_files == []
    assert snapshot_file(lg.dir, 3).stat().st_ino == inode
    lg = open_log(lg.dir, had_clean_shutdown=True, recovery_point=5)
    assert state(lg)["producers"] == {1: (0, 3, 2, 4, T0 + 1, -1, None)}
    lg.close()


def test_close_renames_without_reading_the_snapshot_it_loaded_or_wrote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes of the newest snapshot, read by the load or written by this log, decide the
    rename at close; the file is not read again (a shutdown of 10,000 logs did 10,000 reads).
    Once a truncation has removed that snapshot the log knows no bytes and reads again."""
    from kafkalite.log import producer_snapshot
    lg = open_log(tmp_path / "t-0")
    lg.append_as_leader(data(1, 0), 0, T0)                                  # 0-1
    lg.close()
    written = snapshot_file(lg.dir, 2).read_bytes()
    reads: list[str] = []
    real_read = producer_snapshot.read_small_file

    def counting_read(path):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return real_read(path)
    monkeypatch.setattr(producer_snapshot, "read_small_file", counting_read)
    lg = open_log(lg.dir, had_clean_shutdown=True)
    assert reads == [str(snapshot_file(lg.dir, 2))]                         # the load's read
    lg.append_as_leader(build_batch([(None, b"v", T0)]), 0, T0)            # 2
    lg.close()
    assert reads == [str(snapshot_file(lg.dir, 2))]                         # none at close
    assert list(list_snapshots(lg.dir)) == [3] and snapshot_file(lg.dir, 3).read_bytes() == written
    # Written by this log (a changed state), then renamed by the next close without a read.
    lg = open_log(lg.dir, had_clean_shutdown=True)
    lg.append_as_leader(data(1, 2), 0, T0)                                  # 3-4
    lg.take_producer_snapshot()                                             # at 5, as a close would
    lg.append_as_leader(build_batch([(None, b"v", T0)]), 0, T0)            # 5
    reads.clear()
    lg.close()
    assert reads == [] and list(list_snapshots(lg.dir)) == [3, 6]
    assert decode_snapshot(snapshot_file(lg.dir, 6).read_bytes())[0].last_seq == 3
    # A truncation below the newest snapshot: the log reloads an older one and knows its bytes
    # again only from that read.
    lg = open_log(lg.dir, had_clean_shutdown=True)
    assert lg.truncate_to(4)
    assert list(list_snapshots(lg.dir)) == [3]
    lg.close()


def test_close_never_renames_the_snapshot_taken_at_a_roll(tmp_path: Path) -> None:
    size = len(build_batch([(None, b"v", T0)]))
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 2))
    for _ in range(3):
        lg.append_as_leader(build_batch([(None, b"v", T0)]), 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert list(list_snapshots(lg.dir)) == [2]
    lg.close()
    assert list(list_snapshots(lg.dir)) == [2, 3]


def test_truncation_deletes_snapshots_above_and_reloads(tmp_path: Path) -> None:
    size = len(data(1, 0))
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 2))
    for i in range(5):
        lg.append_as_leader(data(1, 2 * i), 0, T0)
    lg.append_as_leader(data(2, 0, transactional=True), 0, T0)          # 10-11
    assert lg.truncate_to(6)
    assert list(list_snapshots(lg.dir)) == [4]
    assert state(lg)["producers"] == {1: (0, 5, 4, 5, T0 + 1, -1, None)}
    # Sequences continue from the truncated state.
    with pytest.raises(errors.OutOfOrderSequenceError):
        lg.append_as_leader(data(1, 8), 0, T0)
    assert lg.append_as_leader(data(1, 6), 0, T0).first_offset == 6
    lg.truncate_fully_and_start_at(100)
    assert list(list_snapshots(lg.dir)) == [] and state(lg)["producers"] == {}
    lg.close()


# -- restart and crash ------------------------------------------------------------------------

def _busy_log(path: Path) -> Log:
    size = len(data(1, 0))
    lg = open_log(path, LogConfig(segment_bytes=size * 2 + 20))
    lg.append_as_leader(data(1, 0), 0, T0)                               # 0-1
    lg.append_as_leader(data(2, 0, epoch=4, transactional=True), 0, T0)  # 2-3
    lg.append_as_leader(data(1, 2), 0, T0)                               # 4-5
    lg.append_as_leader(build_end_txn_marker(2, 4, 7, True, T0), 0, T0,
                        origin=ORIGIN_COORDINATOR)                        # 6
    lg.append_as_leader(data(3, 0, transactional=True, ts=T0 + 5), 0, T0)  # 7-8
    lg.append_as_leader(data(1, 4, n=1), 0, T0)                          # 9
    return lg


def test_state_survives_clean_restart(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t-0")
    before = state(lg)
    assert before == {"producers": {1: (0, 4, 4, 9, T0, -1, None),
                                    2: (4, 1, 0, 3, T0, 7, None),
                                    3: (0, 1, 0, 8, T0 + 6, -1, 7)},
                      "fuo": 7}
    lg.close()
    again = open_log(lg.dir, had_clean_shutdown=True)
    assert state(again) == before
    # Dedup of the last batch holds; producer 3's transaction is still open.
    dup = again.append_as_leader(data(1, 4, n=1), 0, T0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (9, 9)
    with pytest.raises(errors.InvalidTxnStateError):
        again.append_as_leader(data(3, 2), 0, T0)
    assert again.last_stable_offset(10) == 7
    again.close()


def test_state_survives_crash(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t-0")
    before = state(lg)
    snaps = list(list_snapshots(lg.dir))
    lg.close_handlers()                                  # crash: no snapshot at the end
    assert list(list_snapshots(lg.dir)) == snaps and 10 not in snaps
    again = open_log(lg.dir, recovery_point=0)
    after = state(again)
    # Replayed past the last roll snapshot: batches after it are back in full.
    assert after["fuo"] == before["fuo"]
    assert {p: v[:2] + v[3:] for p, v in after["producers"].items()} == \
        {p: v[:2] + v[3:] for p, v in before["producers"].items()}
    dup = again.append_as_leader(data(1, 4, n=1), 0, T0)
    assert dup.duplicate and dup.first_offset == 9
    again.close()


def test_corrupt_newest_snapshot_is_skipped(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t-0")
    before = state(lg)
    lg.close()
    newest = max(list_snapshots(lg.dir))
    path = snapshot_file(lg.dir, newest)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    again = open_log(lg.dir, had_clean_shutdown=True)
    assert not path.exists()
    after = state(again)
    assert after["fuo"] == before["fuo"]
    assert {p: v[:2] + v[3:] for p, v in after["producers"].items()} == \
        {p: v[:2] + v[3:] for p, v in before["producers"].items()}
    again.close()


def test_snapshot_above_log_end_is_deleted(tmp_path: Path) -> None:
    lg = _busy_log(tmp_path / "t-0")
    lg.close()
    stray = snapshot_file(lg.dir, 500)
    stray.write_bytes(snapshot_file(lg.dir, 10).read_bytes())
    again = open_log(lg.dir, had_clean_shutdown=True)
    assert not stray.exists() and again.log_end_offset == 10
    again.close()


# -- log start offset, retention, expiration --------------------------------------------------

def test_retention_keeps_transaction_state_through_restart(tmp_path: Path) -> None:
    size = len(data(1, 0))
    cfg = LogConfig(segment_bytes=size * 2 + 20, retention_ms=60_000)
    lg = open_log(tmp_path / "t-0", cfg)
    lg.append_as_leader(data(1, 0, transactional=True), 0, T0)           # 0-1, old, txn open
    lg.append_as_leader(data(2, 0), 0, T0)                               # 2-3, old
    now = T0 + 120_000
    lg.append_as_leader(data(3, 0, ts=now), 0, now)                      # 4-5
    lg.append_as_leader(data(3, 2, ts=now), 0, now)                      # 6-7
    lg.append_as_leader(data(3, 4, ts=now), 0, now)                      # 8-9
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert list(list_snapshots(lg.dir)) == [4, 8]
    assert lg.delete_old_segments(now) == 1
    assert lg.log_start_offset == 4
    # Producer 2's data is gone, its state stays (until producer.id.expiration.ms), as in
    # Kafka 2.8+; producer 1's transaction is still open.
    assert set(lg.producer_state.producers) == {1, 2, 3}
    assert lg.first_unstable_offset == 0
    assert list(list_snapshots(lg.dir)) == [4, 8]
    before = state(lg)
    lg.close()
    again = open_log(lg.dir, cfg, had_clean_shutdown=True, log_start_offset=4)
    assert state(again) == before
    again.close_handlers()
    crashed = open_log(lg.dir, cfg, recovery_point=4, log_start_offset=4)
    assert state(crashed)["fuo"] == 0 and set(crashed.producer_state.producers) == {1, 2, 3}
    # Producer 2's sequence is still checked: a gap is refused, the next batch accepted.
    with pytest.raises(errors.OutOfOrderSequenceError):
        crashed.append_as_leader(data(2, 17, ts=now), 0, now)
    assert crashed.append_as_leader(data(2, 2, ts=now), 0, now).first_offset == 10
    crashed.append_as_leader(build_end_txn_marker(1, 0, 0, False, now), 0, now,
                             origin=ORIGIN_COORDINATOR)                   # 12
    assert crashed.first_unstable_offset is None
    crashed.close()


def test_delete_records_keeps_producers_and_drops_old_snapshots(tmp_path: Path) -> None:
    size = len(data(1, 0))
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=size * 2 + 20))
    lg.append_as_leader(data(1, 0), 0, T0)        # 0-1
    lg.append_as_leader(data(2, 0), 0, T0)        # 2-3
    lg.append_as_leader(data(1, 2), 0, T0)        # 4-5
    lg.append_as_leader(data(4, 0), 0, T0)        # 6-7
    lg.append_as_leader(data(4, 2), 0, T0)        # 8-9
    assert list(list_snapshots(lg.dir)) == [4, 8]
    assert lg.maybe_increment_log_start_offset(5)
    assert set(lg.producer_state.producers) == {1, 2, 4}
    assert list(list_snapshots(lg.dir)) == [8]   # below the log start (the newest stays)
    # a retry of producer 2's batch below the log start is still a duplicate
    dup = lg.append_as_leader(data(2, 0), 0, T0)
    assert (dup.duplicate, dup.first_offset) == (True, 2)
    # once expired it is forgotten, and then any sequence is accepted (KIP-360)
    assert lg.producer_state.remove_expired_producers(T0 + 10_000, 5_000) == 3
    assert lg.append_as_leader(data(2, 99), 0, T0 + 10_000).first_offset == 10
    assert lg.producer_state.producers[2].last_seq == 100
    lg.close()


def test_log_manager_removes_expired_producers(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "logs"], LogConfig(), lock_dirs=False, clock_ms=lambda: T0)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(data(1, 0, ts=T0), 0, T0)
    lg.append_as_leader(data(2, 0, ts=T0, transactional=True), 0, T0)
    lg.append_as_leader(data(3, 0, ts=T0 + 1000), 0, T0)
    other = lm.get_or_create_log("u", 0)
    other.append_as_leader(data(5, 0, ts=T0), 0, T0)
    assert lm.remove_expired_producers(T0 + 10_001, 10_000) == 2      # 1 and 5; 2 is in a txn
    assert set(lg.producer_state.producers) == {2, 3}
    assert set(other.producer_state.producers) == set()
    assert lm.remove_expired_producers(T0 + 11_001, 10_000) == 1
    assert set(lg.producer_state.producers) == {2}
    lm.shutdown()
