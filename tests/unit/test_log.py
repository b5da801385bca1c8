"""Log: appends (validation, offsets, LogAppendTime, idempotence), reads, the four roll
conditions, timestamps lookups, truncation, retention, reopen and crash recovery — on real files."""
from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log import errors
from kafkalite.log.checkpoint import topic_id_to_string
from kafkalite.log.log import Log, parse_topic_partition
from kafkalite.log.producer_state import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import build_batch, decode_records, parse_header, split_batches
from kafkalite.log.segment import log_file, offset_index_file, time_index_file

T0 = 1_700_000_000_000


def batch(n: int = 2, ts: int = T0, *, codec: int = 0, pid: int = -1, epoch: int = -1,
          seq: int = -1, value: bytes = b"v", step: int = 1, key: bytes | None = b"k") -> bytes:
    b = MemoryRecordsBuilder(2, codec, 1 << 22, producer_id=pid, producer_epoch=epoch,
                             base_sequence=seq)
    for i in range(n):
        b.append(ts + i * step, key, value + str(i).encode())
    b.close()
    return bytes(b.buffer())


def open_log(path: Path, cfg: LogConfig | None = None, **kw) -> Log:
    return Log.open(path, cfg or LogConfig(), now_ms=kw.pop("now_ms", T0), **kw)


def batches_of(data: bytes) -> list:
    return [h for _p, h in split_batches(data)[0]]


def offsets_in(data: bytes) -> list[int]:
    out = []
    for p, h in split_batches(data)[0]:
        out += [r.offset for r in decode_records(data[p:p + h.size])]
    return out


def crash(lg: Log) -> None:
    """Simulate a crash: drop the log without flushing, trimming or writing anything."""
    lg.close_handlers()


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("my.topic-with-dashes-12") == ("my.topic-with-dashes", 12)
    assert parse_topic_partition("__consumer_offsets-0") == ("__consumer_offsets", 0)
    for bad in ("nodash", "topic-", "-3", "topic-x"):
        with pytest.raises(ValueError):
            parse_topic_partition(bad)


def test_append_assigns_offsets_and_epoch(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    assert (lg.log_end_offset, lg.log_start_offset, lg.size_in_bytes) == (0, 0, 0)
    i1 = lg.append_as_leader(batch(3), leader_epoch=7, now_ms=T0)
    i2 = lg.append_as_leader(batch(2, ts=T0 + 50), leader_epoch=8, now_ms=T0)
    assert (i1.first_offset, i1.last_offset, i1.num_batches, i1.num_records) == (0, 2, 1, 3)
    assert (i2.first_offset, i2.last_offset) == (3, 4)
    assert i2.max_timestamp == T0 + 51 and i2.offset_of_max_timestamp == 4
    assert i1.log_append_time == -1 and not i1.duplicate
    assert i1.valid_bytes == len(batch(3))
    assert lg.log_end_offset == 5
    data = lg.read(0, 1 << 20).read_bytes()
    hs = batches_of(data)
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 7), (3, 8)]
    assert offsets_in(data) == [0, 1, 2, 3, 4]
    for p, h in split_batches(data)[0]:
        assert DefaultRecordBatch(data[p:p + h.size]).validate_crc()
    lg.close()


def test_one_index_entry_per_append_and_per_batch_on_recovery(tmp_path: Path) -> None:
    """Kafka's LogSegment.append writes at most one offset-index entry per append (its last
    offset, at the position where the append starts) and one time-index entry, when the bytes
    appended before it exceed index.interval.bytes; leader and follower appends alike. Recovery
    sees batches, not appends, and indexes per batch (LogSegment.recover). Every offset and
    timestamp is found either way."""
    path = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=0)
    # Batch k holds offsets 2k, 2k+1 with timestamps T0+10k, T0+10k+1.
    s = len(batch(2))
    lg = open_log(path, cfg)
    lg.append_as_leader(batch(2, ts=T0) + batch(2, ts=T0 + 10) + batch(2, ts=T0 + 20), 0, T0)
    seg = lg.active_segment
    assert (seg.offset_index.entries, seg.time_index.entries) == (0, 0)    # nothing appended before it
    lg.append_as_leader(batch(2, ts=T0 + 30) + batch(2, ts=T0 + 40) + batch(2, ts=T0 + 50), 0, T0)
    lg.append_as_follower(b"".join(build_batch([(b"k", b"v0", T0 + 10 * k), (b"k", b"v1", T0 + 10 * k + 1)],
                                               base_offset=2 * k) for k in (6, 7, 8)))
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [(11, 3 * s), (17, 6 * s)]
    assert [seg.time_index.entry(i) for i in range(seg.time_index.entries)] == [(T0 + 51, 11), (T0 + 81, 17)]

    def assert_every_offset_and_timestamp_found(lg: Log) -> None:
        for offset in range(18):
            info = lg.read(offset, 1 << 20)
            first = batches_of(info.read_bytes())[0]
            assert first.base_offset == offset - offset % 2
            assert info.fetch_offset_metadata.relative_position_in_segment == (offset // 2) * s
            assert lg.fetch_offset_by_timestamp(T0 + 10 * (offset // 2) + offset % 2) \
                == (T0 + 10 * (offset // 2) + offset % 2, offset)
        assert lg.fetch_offset_by_timestamp(T0 + 2) == (T0 + 10, 2)

    assert_every_offset_and_timestamp_found(lg)
    lg.flush(0)
    crash(lg)
    lg = open_log(path, cfg, recovery_point=0)
    seg = lg.active_segment
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == \
        [(2 * k + 1, k * s) for k in range(1, 9)]
    assert [seg.time_index.entry(i) for i in range(seg.time_index.entries)] == \
        [(T0 + 10 * k + 1, 2 * k + 1) for k in range(1, 9)]
    assert_every_offset_and_timestamp_found(lg)
    lg.close()


def test_multi_batch_payload_is_all_or_nothing(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    good = batch(2)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(errors.CorruptRecordError):
        lg.append_as_leader(good + bytes(bad), 0, T0)
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    info = lg.append_as_leader(good + batch(3, codec=2), 0, T0)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 4, 2)
    assert offsets_in(lg.read(0, 1 << 20).read_bytes()) == [0, 1, 2, 3, 4]
    # A trailing partial batch is trimmed, as Kafka does.
    info = lg.append_as_leader(good + good[:20], 0, T0)
    assert info.valid_bytes == len(good) and lg.log_end_offset == 7
    assert lg.append_as_leader(b"", 0, T0).num_batches == 0
    lg.close()


def test_size_limits(tmp_path: Path) -> None:
    big = batch(50, value=b"x" * 100)
    lg = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=len(big) - 1))
    with pytest.raises(errors.RecordTooLargeError) as exc:
        lg.append_as_leader(big, 0, T0)
    assert exc.value.error_code == 10
    lg.update_config(LogConfig(max_message_bytes=len(big), segment_bytes=len(big) - 1))
    with pytest.raises(errors.RecordBatchTooLargeError) as exc2:
        lg.append_as_leader(big, 0, T0)
    assert exc2.value.error_code == 18
    lg.update_config(LogConfig(max_message_bytes=len(big)))
    assert lg.append_as_leader(big, 0, T0).last_offset == 49
    lg.close()


def test_log_append_time(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    info = lg.append_as_leader(batch(3, ts=5, codec=3), 1, now_ms=T0 + 999)
    assert info.log_append_time == T0 + 999 and info.max_timestamp == T0 + 999
    data = lg.read(0, 1 << 20).read_bytes()
    kb = DefaultRecordBatch(data)
    assert kb.validate_crc() and kb.timestamp_type == 1 and kb.max_timestamp == T0 + 999
    assert [r.timestamp for r in DefaultRecordBatch(data)] == [T0 + 999] * 3
    assert lg.fetch_offset_by_timestamp(T0 + 999) == (T0 + 999, 0)
    assert lg.fetch_offset_by_timestamp(6) == (T0 + 999, 0)
    lg.close()


def test_read_bounds(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    sizes = []
    for i in range(5):                       # offsets 0-2, 3-5, ..., 12-14
        b = batch(3, ts=T0 + i)
        sizes.append(len(b))
        lg.append_as_leader(b, 0, T0)
    full = lg.read(0, 1 << 20)
    assert full.size == sum(sizes) and full.fetch_offset == 0
    # Starts at the batch containing the offset.
    assert offsets_in(lg.read(4, 1 << 20).read_bytes())[0] == 3
    # Whole batches only, never beyond max_bytes...
    part = lg.read(0, sizes[0] + sizes[1] + 10)
    assert part.size == sizes[0] + sizes[1]
    # ...unless min_one_message and the first batch alone is bigger.
    assert lg.read(0, 10).size == 0
    assert lg.read(0, 10, None, True).size == sizes[0]
    assert lg.read(0, 0, None, True).size == sizes[0]
    # max_offset (the high watermark) is exclusive and cuts whole batches.
    assert offsets_in(lg.read(0, 1 << 20, max_offset=7).read_bytes()) == list(range(6))
    assert offsets_in(lg.read(0, 1 << 20, max_offset=6).read_bytes()) == list(range(6))
    assert lg.read(6, 1 << 20, max_offset=6).size == 0
    assert lg.read(7, 1 << 20, max_offset=8).size == 0      # batch 6-8 straddles the HW
    # At the log end: empty; past it or below the start: OFFSET_OUT_OF_RANGE.
    assert lg.read(15, 100).size == 0 and lg.read(15, 100).read_bytes() == b""
    with pytest.raises(errors.OffsetOutOfRangeError) as exc:
        lg.read(16, 100)
    assert exc.value.error_code == 1
    lg.maybe_increment_log_start_offset(4)
    with pytest.raises(errors.OffsetOutOfRangeError):
        lg.read(3, 100)
    assert offsets_in(lg.read(4, 1 << 20).read_bytes())[0] == 3   # the whole batch holding 4
    with pytest.raises(errors.OffsetOutOfRangeError):
        lg.maybe_increment_log_start_offset(10, high_watermark=9)
    lg.close()


def test_read_spans_segments_and_uses_file_slices(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2))
    for _ in range(6):
        lg.append_as_leader(b, 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    f = lg.read(2, 1 << 20)
    assert [(s.position, s.size) for s in f.file_slices] == \
        [(len(b), len(b)), (0, 2 * len(b)), (0, 2 * len(b))]
    assert f.size == 5 * len(b)
    joined = b"".join(os.pread(fd, size, pos) for fd, pos, size in f.file_slices)
    assert joined == f.read_bytes()
    assert offsets_in(joined) == list(range(2, 12))
    lg.close()


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=3 * len(b) + 5))
    for _ in range(7):
        lg.append_as_leader(b, 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 6, 12]
    assert [s.size for s in lg.segments] == [3 * len(b), 3 * len(b), len(b)]
    assert (tmp_path / "t-0" / "00000000000000000006.log").exists()
    # Rolled segments are trimmed.
    assert offset_index_file(tmp_path / "t-0", 0).stat().st_size == \
        lg.segments[0].offset_index.entries * 8
    lg.close()


def test_roll_on_segment_ms_uses_first_batch_timestamp(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    lg.append_as_leader(batch(1, ts=T0), 0, now_ms=T0)
    lg.append_as_leader(batch(1, ts=T0 + 1000), 0, now_ms=T0)       # 1000 is not > 1000
    assert len(lg.segments) == 1
    lg.append_as_leader(batch(1, ts=T0 + 1001), 0, now_ms=T0)       # message time decides
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_roll_on_segment_ms_without_timestamps_uses_creation_time(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000), now_ms=T0)
    no_ts = build_batch([(b"k", b"v", -1)])
    lg.append_as_leader(no_ts, 0, now_ms=T0 + 500)
    lg.append_as_leader(no_ts, 0, now_ms=T0 + 1000)
    assert len(lg.segments) == 1
    lg.append_as_leader(no_ts, 0, now_ms=T0 + 1001)
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert lg.segments[1].created_ms == T0 + 1001
    lg.close()


def test_roll_jitter_is_bounded(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000, segment_jitter_ms=400))
    for _ in range(20):
        lg.roll()
        assert 0 <= lg.active_segment.roll_jitter_ms < 400
    lg.close()


def test_roll_on_full_time_index(tmp_path: Path) -> None:
    # index.interval.bytes 0: every batch after the first gets an index entry. A 36-byte
    # time index has 3 slots and counts as full at 2 (one slot kept for the roll/close entry).
    lg = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0, segment_index_bytes=36))
    for i in range(10):
        lg.append_as_leader(batch(1, ts=T0 + i), 0, T0)
    assert [(s.base_offset, s.offset_index.entries, s.time_index.entries) for s in lg.segments] \
        == [(0, 2, 2), (3, 2, 2), (6, 2, 2), (9, 0, 0)]
    assert offsets_in(lg.read(0, 1 << 20).read_bytes()) == list(range(10))
    assert lg.fetch_offset_by_timestamp(T0 + 6) == (T0 + 6, 6)
    lg.close()


def test_roll_on_full_offset_index(tmp_path: Path) -> None:
    # Batches without timestamps never enter the time index: the 3-entry offset index fills.
    lg = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    no_ts = build_batch([(b"k", b"v", -1)])
    for _ in range(10):
        lg.append_as_leader(no_ts, 0, T0)
    assert [(s.base_offset, s.offset_index.entries, s.time_index.entries) for s in lg.segments] \
        == [(0, 3, 0), (4, 3, 0), (8, 1, 0)]
    assert offsets_in(lg.read(5, 1 << 20).read_bytes()) == list(range(5, 10))
    lg.close()


def test_roll_on_offset_overflow(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    lg.append_as_follower(build_batch([(b"k", b"v", T0)], base_offset=0))
    far = 2**31 + 10
    info = lg.append_as_follower(build_batch([(b"k", b"v", T0)], base_offset=far))
    assert info.first_offset == far
    assert [s.base_offset for s in lg.segments] == [0, far]
    assert lg.log_end_offset == far + 1
    assert offsets_in(lg.read(far, 1000).read_bytes()) == [far]
    assert offsets_in(lg.read(1, 1000).read_bytes()) == [far]        # the gap is skipped
    lg.close()


def test_follower_append_rules(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    b = build_batch([(b"a", b"1", T0), (b"b", b"2", T0)], base_offset=10,
                    partition_leader_epoch=3)
    info = lg.append_as_follower(b)
    assert (info.first_offset, info.last_offset, lg.log_end_offset) == (10, 11, 12)
    assert lg.read(10, 1000).read_bytes() == b          # kept byte for byte
    with pytest.raises(errors.UnexpectedAppendOffsetError):
        lg.append_as_follower(build_batch([(b"a", b"1", T0)], base_offset=11))
    two = build_batch([(b"a", b"1", T0)], base_offset=20) + build_batch([(b"a", b"1", T0)], base_offset=20)
    with pytest.raises(errors.OffsetsOutOfOrderError):
        lg.append_as_follower(two)
    assert lg.log_end_offset == 12
    lg.close()


def test_idempotent_duplicate_and_gap(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    lg = open_log(path)
    b0 = batch(2, pid=100, epoch=1, seq=0)
    b1 = batch(3, pid=100, epoch=1, seq=2)
    assert lg.append_as_leader(b0, 0, T0).first_offset == 0
    lg.append_as_leader(batch(1), 0, T0)
    i1 = lg.append_as_leader(b1, 0, T0)
    assert (i1.first_offset, i1.last_offset) == (3, 5)
    size = lg.size_in_bytes
    dup = lg.append_as_leader(b1, 0, T0 + 5)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 5)
    assert dup.log_append_time == T0 + 2      # Kafka answers with the cached batch timestamp
    assert lg.size_in_bytes == size and lg.log_end_offset == 6
    with pytest.raises(errors.OutOfOrderSequenceError) as exc:
        lg.append_as_leader(batch(1, pid=100, epoch=1, seq=9), 0, T0)
    assert exc.value.error_code == 45
    with pytest.raises(errors.InvalidProducerEpochError) as exc2:
        lg.append_as_leader(batch(1, pid=100, epoch=0, seq=5), 0, T0)
    assert exc2.value.error_code == 47
    assert lg.log_end_offset == 6
    lg.close()
    # The state is loaded from the snapshot written at close: as in Kafka it keeps each
    # producer's last batch, so a retry of that one is still recognised.
    again = open_log(path, had_clean_shutdown=True)
    dup = again.append_as_leader(b1, 0, T0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 5)
    assert again.append_as_leader(batch(1, pid=100, epoch=1, seq=5), 0, T0).first_offset == 6
    again.close()
    # Without the snapshot the log is replayed: every cached batch is back.
    for snap in path.glob("*.snapshot"):
        snap.unlink()
    third = open_log(path, had_clean_shutdown=True)
    dup = third.append_as_leader(b0, 0, T0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    third.close()


def test_compacted_topic_requires_keys(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(cleanup_policy="compact"))
    keyless = build_batch([(b"k", b"v", T0), (None, b"v", T0), (None, b"w", T0)])
    with pytest.raises(errors.InvalidRecordError) as exc:
        lg.append_as_leader(keyless, 0, T0)
    assert [i for i, _m in exc.value.record_errors] == [1, 2]
    assert lg.append_as_leader(batch(2), 0, T0).last_offset == 1
    # The broker's own coordinators are not clients: no client-only checks.
    assert lg.append_as_leader(keyless, 0, T0, origin=ORIGIN_COORDINATOR).last_offset == 4
    lg.close()


def test_timestamp_lookups(tmp_path: Path) -> None:
    b = batch(4, ts=T0, step=10)                 # per batch: T0, T0+10, T0+20, T0+30 (+ shift)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2, index_interval_bytes=0))
    for i in range(6):
        lg.append_as_leader(batch(4, ts=T0 + 100 * i, step=10, codec=i % 5), 0, T0)
    assert len(lg.segments) == 3
    assert lg.fetch_offset_by_timestamp(0) == (T0, 0)
    assert lg.fetch_offset_by_timestamp(T0 + 11) == (T0 + 20, 2)        # inside a batch
    assert lg.fetch_offset_by_timestamp(T0 + 230) == (T0 + 230, 11)
    assert lg.fetch_offset_by_timestamp(T0 + 231) == (T0 + 300, 12)     # next segment
    assert lg.fetch_offset_by_timestamp(T0 + 530) == (T0 + 530, 23)
    assert lg.fetch_offset_by_timestamp(T0 + 531) is None
    assert lg.max_timestamp_and_offset() == (T0 + 530, 23)
    found = lg.find_offset_by_timestamp(T0 + 11)
    assert found is not None and found.leader_epoch == 0
    # Below the log start offset records do not count.
    lg.maybe_increment_log_start_offset(5)
    assert lg.fetch_offset_by_timestamp(0) == (T0 + 110, 5)
    lg.close()


def test_max_timestamp_is_first_record_with_it(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    assert lg.max_timestamp_and_offset() == (-1, -1)
    lg.append_as_leader(build_batch([(b"a", b"", T0 + 5), (b"b", b"", T0 + 9), (b"c", b"", T0 + 1)]), 0, T0)
    lg.append_as_leader(build_batch([(b"d", b"", T0 + 9)]), 0, T0)
    assert lg.max_timestamp_and_offset() == (T0 + 9, 1)
    lg.append_as_leader(build_batch([(b"e", b"", T0 + 2), (b"f", b"", T0 + 10)]), 0, T0)
    assert lg.max_timestamp_and_offset() == (T0 + 10, 5)
    lg.close()


def test_truncate_to(tmp_path: Path) -> None:
    b = batch(3)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2, index_interval_bytes=0))
    for i in range(6):
        lg.append_as_leader(batch(3, ts=T0 + i), 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 6, 12]
    assert not lg.truncate_to(18) and not lg.truncate_to(100)
    assert lg.truncate_to(10)                  # inside batch 9-11: it goes whole
    assert lg.log_end_offset == 10             # as Kafka: the log end offset is the target
    assert [s.base_offset for s in lg.segments] == [0, 6]
    assert offsets_in(lg.read(0, 1 << 20).read_bytes()) == list(range(9))
    assert lg.max_timestamp_and_offset() == (T0 + 2 + 2, 8)
    info = lg.append_as_leader(batch(2, ts=T0 + 50), 0, T0)
    assert info.first_offset == 10
    assert offsets_in(lg.read(6, 1 << 20).read_bytes()) == [6, 7, 8, 10, 11]
    assert lg.truncate_to(6)
    assert [s.base_offset for s in lg.segments] == [0, 6] and lg.segments[1].size == 0
    assert lg.log_end_offset == 6
    assert not (tmp_path / "t-0" / "00000000000000000012.log").exists()
    lg.close()
    again = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    assert again.log_end_offset == 6
    assert offsets_in(again.read(0, 1 << 20).read_bytes()) == list(range(6))
    again.close()


def test_truncate_fully(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    lg.append_as_follower(build_batch([(b"k", b"v", T0)], base_offset=50))
    assert lg.segments[0].base_offset == 0
    lg.truncate_fully_and_start_at(30)
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (30, 30, 30)
    assert [s.base_offset for s in lg.segments] == [30]
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log") == \
        ["00000000000000000030.log"]
    assert lg.append_as_leader(batch(1), 0, T0).first_offset == 30
    # Truncating below the first segment's base empties the log too.
    assert lg.truncate_to(5)
    assert (lg.log_start_offset, lg.log_end_offset) == (5, 5)
    lg.close()


def test_retention_by_time(tmp_path: Path) -> None:
    b = batch(2)
    cfg = LogConfig(segment_bytes=len(b) * 2, retention_ms=1000)
    lg = open_log(tmp_path / "t-0", cfg)
    for i in range(6):                          # segments [0-3] ts T0.., [4-7], [8-11]
        lg.append_as_leader(batch(2, ts=T0 + 1000 * (i // 2)), 0, T0)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert lg.delete_old_segments(now_ms=T0 + 1001) == 0          # 1001 - 1 = 1000, not > 1000
    assert lg.delete_old_segments(now_ms=T0 + 1002) == 1
    assert [s.base_offset for s in lg.segments] == [4, 8] and lg.log_start_offset == 4
    assert not log_file(tmp_path / "t-0", 0).exists()
    # Not above the high watermark.
    assert lg.delete_old_segments(now_ms=T0 + 10**6, upper_bound_offset=7) == 0
    assert lg.delete_old_segments(now_ms=T0 + 10**6, upper_bound_offset=8) == 1
    # Everything expired: the active segment goes too, after rolling a fresh one.
    assert lg.delete_old_segments(now_ms=T0 + 10**6) == 1
    assert [s.base_offset for s in lg.segments] == [12] and lg.segments[0].size == 0
    assert (lg.log_start_offset, lg.log_end_offset) == (12, 12)
    assert lg.delete_old_segments(now_ms=T0 + 10**7) == 0         # never the empty active one
    assert lg.append_as_leader(batch(1), 0, T0).first_offset == 12
    lg.close()


def test_retention_by_size(tmp_path: Path) -> None:
    b = batch(2)
    cfg = LogConfig(segment_bytes=len(b) * 2, retention_bytes=len(b) * 3)
    lg = open_log(tmp_path / "t-0", cfg)
    for _ in range(7):
        lg.append_as_leader(b, 0, T0)
    assert [s.size for s in lg.segments] == [2 * len(b)] * 3 + [len(b)]
    # 7 batches, 3 allowed: 4 over -> the first two segments (2 batches each).
    assert lg.delete_retention_size_breached_segments() == 2
    assert [s.base_offset for s in lg.segments] == [8, 12] and lg.log_start_offset == 8
    assert lg.size_in_bytes == 3 * len(b)
    # "compact" alone disables time/size retention.
    lg.update_config(LogConfig(segment_bytes=len(b) * 2, retention_bytes=1, cleanup_policy="compact"))
    assert lg.delete_old_segments(T0) == 0
    lg.update_config(LogConfig(segment_bytes=len(b) * 2, retention_bytes=1, cleanup_policy="compact,delete"))
    assert lg.delete_old_segments(T0) == 1
    lg.close()


def test_log_start_offset_breach_deletes_segments(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2, retention_ms=-1))
    for _ in range(6):
        lg.append_as_leader(b, 0, T0)
    assert lg.maybe_increment_log_start_offset(9)
    assert not lg.maybe_increment_log_start_offset(3)
    assert lg.delete_old_segments(T0) == 2
    assert [s.base_offset for s in lg.segments] == [8] and lg.log_start_offset == 9
    lg.close()


def test_fetch_result_survives_segment_deletion(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2, retention_ms=1))
    for _ in range(4):
        lg.append_as_leader(b, 0, T0)
    f = lg.read(0, 1 << 20)
    expected = f.read_bytes()
    assert lg.delete_old_segments(now_ms=T0 + 10**6) == 2
    assert not log_file(tmp_path / "t-0", 0).exists()
    assert f.read_bytes() == expected          # descriptors held by the result stay valid
    lg.close()


def test_flush_and_recovery_point(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2))
    for _ in range(3):
        lg.append_as_leader(b, 0, T0)
    assert lg.recovery_point == 0 and lg.unflushed_messages == 6
    lg.flush(4)
    assert lg.recovery_point == 4
    lg.flush()
    assert lg.recovery_point == 6
    lg.update_config(LogConfig(segment_bytes=len(b) * 2, flush_messages=4))
    lg.append_as_leader(b, 0, T0)
    assert lg.recovery_point == 6
    lg.append_as_leader(b, 0, T0)
    assert lg.recovery_point == 10             # flush.messages reached
    lg.close()


def test_close_and_reopen_clean(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    b = batch(3)
    cfg = LogConfig(segment_bytes=len(b) * 3, index_interval_bytes=len(b))
    lg = open_log(path, cfg)
    for i in range(10):
        lg.append_as_leader(batch(3, ts=T0 + i), 2, T0)
    before = lg.read(0, 1 << 20).read_bytes()
    seg_info = [(s.base_offset, s.size, s.offset_index.entries, s.max_timestamp_so_far)
                for s in lg.segments]
    lg.close()
    assert time_index_file(path, 0).stat().st_size % 12 == 0
    again = open_log(path, cfg, had_clean_shutdown=True)
    assert again.log_end_offset == 30 and again.recovery_point == 30
    assert [(s.base_offset, s.size, s.offset_index.entries, s.max_timestamp_so_far)
            for s in again.segments] == seg_info
    assert again.read(0, 1 << 20).read_bytes() == before
    assert again.fetch_offset_by_timestamp(T0 + 5) == (T0 + 5, 11)
    assert again.append_as_leader(batch(1), 2, T0).first_offset == 30
    again.close()


def test_crash_with_garbage_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    b = batch(3)
    cfg = LogConfig(segment_bytes=len(b) * 3, index_interval_bytes=0)
    lg = open_log(path, cfg)
    for i in range(8):
        lg.append_as_leader(batch(3, ts=T0 + i), 0, T0)
    good = lg.read(0, 1 << 20).read_bytes()
    lg.flush(9)
    crash(lg)
    active = log_file(path, 18)
    with open(active, "ab") as f:
        f.write(os.urandom(100))
    again = open_log(path, cfg, recovery_point=9)
    assert again.log_end_offset == 24
    assert again.read(0, 1 << 20).read_bytes() == good
    assert active.stat().st_size == 2 * len(b)
    assert again.append_as_leader(batch(1), 0, T0).first_offset == 24
    again.close()


def test_crash_with_torn_batch(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    lg = open_log(path)
    for i in range(4):
        lg.append_as_leader(batch(5, ts=T0 + i), 0, T0)
    crash(lg)
    seg = log_file(path, 0)
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 17)                  # cut the last batch in the middle
    again = open_log(path)
    assert again.log_end_offset == 15
    assert offsets_in(again.read(0, 1 << 20).read_bytes()) == list(range(15))
    assert again.fetch_offset_by_timestamp(T0 + 7) is None
    assert again.max_timestamp_and_offset() == (T0 + 2 + 4, 14)
    again.close()


def test_crash_corruption_in_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    b = batch(2)
    cfg = LogConfig(segment_bytes=len(b) * 2)
    lg = open_log(path, cfg)
    for _ in range(6):
        lg.append_as_leader(b, 0, T0)
    crash(lg)
    middle = log_file(path, 4)
    with open(middle, "r+b") as f:             # flip a byte inside the second batch's records
        f.seek(len(b) + len(b) - 3)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = open_log(path, cfg, recovery_point=0)
    assert [s.base_offset for s in again.segments] == [0, 4]
    assert again.log_end_offset == 6
    assert not log_file(path, 8).exists()
    again.close()


def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    b = batch(2)
    cfg = LogConfig(segment_bytes=len(b) * 4, index_interval_bytes=0)
    lg = open_log(path, cfg)
    for i in range(8):
        lg.append_as_leader(batch(2, ts=T0 + i), 0, T0)
    entries = [(s.offset_index.entries, s.time_index.entries) for s in lg.segments]
    lg.close()
    offset_index_file(path, 0).unlink()
    time_index_file(path, 8).write_bytes(b"\x01" * 7)        # not whole entries
    again = open_log(path, cfg, had_clean_shutdown=True)
    assert [(s.offset_index.entries, s.time_index.entries) for s in again.segments] == entries
    assert offsets_in(again.read(0, 1 << 20).read_bytes()) == list(range(16))
    assert again.fetch_offset_by_timestamp(T0 + 5) == (T0 + 5, 9)
    again.close()


def test_leftover_files_are_cleaned(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    lg = open_log(path)
    lg.append_as_leader(batch(2), 0, T0)
    lg.close()
    (path / "00000000000000000000.log.deleted").write_bytes(b"x")
    (path / "00000000000000000000.index.deleted").write_bytes(b"x")
    (path / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (path / "00000000000000000500.index").write_bytes(b"")          # orphan index
    (path / "00000000000000000500.timeindex").write_bytes(b"")
    again = open_log(path, had_clean_shutdown=True)
    assert sorted(p.name for p in path.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "00000000000000000002.snapshot"]
    assert again.log_end_offset == 2
    again.close()


def test_interrupted_swap_is_completed(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    b = batch(2)
    lg = open_log(path, LogConfig(segment_bytes=len(b) * 2))
    for _ in range(6):
        lg.append_as_leader(b, 0, T0)
    lg.close()
    # A "cleaned" replacement for segments 0 and 4 left as a .swap (keeps offsets 2-3 and 6-7).
    data0 = log_file(path, 0).read_bytes()
    data4 = log_file(path, 4).read_bytes()
    (path / "00000000000000000000.log.swap").write_bytes(data0[len(b):] + data4[len(b):])
    again = open_log(path, LogConfig(segment_bytes=len(b) * 2), had_clean_shutdown=True)
    assert [s.base_offset for s in again.segments] == [0, 8]
    assert offsets_in(again.read(0, 1 << 20).read_bytes()) == [2, 3, 6, 7, 8, 9, 10, 11]
    assert not any(p.name.endswith(".swap") for p in path.iterdir())
    again.close()


def test_log_end_offset_below_checkpointed_start(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    lg = open_log(path)
    lg.append_as_leader(batch(2), 0, T0)
    lg.close()
    again = open_log(path, log_start_offset=50, had_clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (50, 50)
    assert [s.base_offset for s in again.segments] == [50]
    again.close()


def test_topic_id_in_partition_metadata(tmp_path: Path) -> None:
    path = tmp_path / "orders-3"
    lg = open_log(path)
    assert (lg.topic, lg.partition, lg.topic_id) == ("orders", 3, None)
    tid = uuid.UUID("5e1a0c3e-0b5a-4b8f-9c2e-7f1d2a3b4c5d")
    lg.assign_topic_id(tid)
    text = (path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_to_string(tid)}\n"
    assert len(topic_id_to_string(tid)) == 22
    lg.assign_topic_id(tid)
    with pytest.raises(errors.InconsistentTopicIdError):
        lg.assign_topic_id(uuid.uuid4())
    lg.close()
    assert open_log(path, had_clean_shutdown=True).topic_id == tid


def test_iter_batch_headers(tmp_path: Path) -> None:
    b = batch(2)
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=len(b) * 2))
    for e in range(5):
        lg.append_as_leader(b, e, T0)
    assert [(h.base_offset, h.partition_leader_epoch) for h in lg.iter_batch_headers()] == \
        [(0, 0), (2, 1), (4, 2), (6, 3), (8, 4)]
    assert [h.base_offset for h in lg.iter_batch_headers(5)] == [4, 6, 8]
    lg.close()


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    lg.close()
    with pytest.raises(errors.LogError):
        lg.append_as_leader(batch(1), 0, T0)
    assert parse_header(batch(1)).records_count == 1


def test_recovery_rewrites_indexes_in_place_and_trims_what_they_no_longer_hold(tmp_path: Path) -> None:
    """Recovery leaves a segment's index files in place while it rebuilds them (no cut to
    zero first): entries past the rebuilt ones are cut by the trim that ends it, so the files
    are byte for byte those rebuilt from no index files at all."""
    cfg = LogConfig(index_interval_bytes=0)     # an index entry per append after the first
    path = tmp_path / "t-0"
    lg = open_log(path, cfg)
    ends = []
    for i in range(6):
        lg.append_as_leader(batch(2, ts=T0 + 10 * i), 0, T0)
        ends.append(lg.active_segment.size)
    lg.close()
    assert offset_index_file(path, 0).stat().st_size == 5 * 8      # before the cut
    assert time_index_file(path, 0).stat().st_size == 5 * 12
    with open(log_file(path, 0), "r+b") as f:
        f.truncate(ends[3] + 30)                # batches 5 and 6 gone, a torn one left
    again = open_log(path, cfg, recovery_point=0)
    assert again.log_end_offset == 8
    assert again.active_segment.offset_index.entries == 3
    assert again.fetch_offset_by_timestamp(T0 + 30) == (T0 + 30, 6)
    assert again.max_timestamp_and_offset() == (T0 + 31, 7)
    crash(again)                                # a crash right after the recovery: the same again
    third = open_log(path, cfg, recovery_point=0)
    assert (third.log_end_offset, third.active_segment.offset_index.entries) == (8, 3)
    third.close()
    recovered = {f: f(path, 0).read_bytes() for f in (offset_index_file, time_index_file)}
    assert [len(b) for b in recovered.values()] == [3 * 8, 3 * 12]
    for f in recovered:
        f(path, 0).unlink()
    open_log(path, cfg, recovery_point=0).close()
    assert {f: f(path, 0).read_bytes() for f in recovered} == recovered
    fourth = open_log(path, cfg, had_clean_shutdown=True)
    assert fourth.fetch_offset_by_timestamp(T0 + 20) == (T0 + 20, 4)
    assert fourth.append_as_leader(batch(1, ts=T0 + 99), 0, T0).first_offset == 8
    assert fourth.max_timestamp_and_offset() == (T0 + 99, 8)
    assert fourth.active_segment.offset_index.entries == 3   # none for the first append after a load
    fourth.close()
