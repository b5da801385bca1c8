"""Log compaction on real files: the batch filter, whole cleaning rounds through LogCleaner
(choice of log, offset map, grouping, swap), tombstones and delete horizons, producer state,
races with appends/retention/truncation, crash recovery at every swap phase, and a hypothesis
state machine checking the cleaner against a dict model."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkalite.config.log_config import LogConfig
from kafkalite.log import cleaner as cleaner_mod
from kafkalite.log import cleaner_manager as cm
from kafkalite.log.checkpoint import read_offset_checkpoint
from kafkalite.log.cleaner import filter_batch
from kafkalite.log.cleaner_manager import (CLEANER_OFFSET_CHECKPOINT_FILE, CleanerConfig,
                                           LogCleaner)
from kafkalite.log.log import Log
from kafkalite.log.log_manager import LogManager
from kafkalite.log.offset_map import SkimpyOffsetMap
from kafkalite.log.record_batch import (COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE,
                                        COMPRESSION_SNAPPY, COMPRESSION_ZSTD, DELETE_HORIZON_MASK,
                                        build_batch, decode_records, parse_header,
                                        split_batches)

T0 = 1_700_000_000_000
RETENTION = 10_000      # delete.retention.ms in these tests


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def cfg(**kw) -> LogConfig:
    base = dict(segment_bytes=4096, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01,
                delete_retention_ms=RETENTION, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def new_manager(tmp_path: Path, config: LogConfig, name: str = "logs") -> LogManager:
    lm = LogManager([tmp_path / name], config, lock_dirs=False, clock_ms=lambda: T0)
    lm.startup({"t": config})
    return lm


def new_cleaner(lm: LogManager, clock: Clock, *, buffer: int = 1 << 20,
                upper_bound: Optional[Callable[[str, int], Optional[int]]] = None,
                on_phase: Optional[Callable[[str], None]] = None) -> LogCleaner:
    return LogCleaner(lm, CleanerConfig(dedupe_buffer_size=buffer, backoff_ms=10),
                      upper_bound=upper_bound, clock_ms=clock, on_phase=on_phase)


def run(coro):
    return asyncio.run(coro)


@contextlib.asynccontextmanager
async def cleaned_with_segment_deleter(lm: LogManager):
    """The background cleaner with the log manager's segment deleter running (replaced segments
    removed after file.delete.delay.ms), once t-0 is cleaned through offset 200; both stopped
    after the body."""
    lm.start_flusher()
    c = new_cleaner(lm, Clock())
    c.startup()
    try:
        assert await c.await_cleaned("t", 0, 200, 5)
        yield
    finally:
        await c.shutdown()
        await lm.stop_flusher()


def append(lg: Log, records: list[tuple[Optional[bytes], Optional[bytes]]], ts: int = T0,
           **kw) -> int:
    """Append one batch of (key, value); returns its first offset."""
    data = build_batch([(k, v, ts) for k, v in records], **kw)
    return lg.append_as_leader(data, 0, ts).first_offset


def read_batches(lg: Log) -> list[tuple[object, list]]:
    """Every batch of the log (header, decoded records), from the log start."""
    data = lg.read(lg.log_start_offset, 1 << 30).read_bytes() if lg.log_end_offset else b""
    out = []
    for p, h in split_batches(data)[0]:
        out.append((h, decode_records(memoryview(data)[p:p + h.size], h)))
    return out


def read_records(lg: Log) -> list[tuple[int, Optional[bytes], Optional[bytes]]]:
    return [(r.offset, r.key, r.value) for _h, recs in read_batches(lg) for r in recs]


def latest_per_key(history: list[tuple[int, Optional[bytes], Optional[bytes]]]
                   ) -> list[tuple[int, Optional[bytes], Optional[bytes]]]:
    last: dict[bytes, tuple[int, Optional[bytes], Optional[bytes]]] = {}
    for rec in history:
        last[rec[1]] = rec
    return sorted(last.values())


def fill(lg: Log, keys: int, updates: int, per_batch: int = 10, ts: int = T0, prefix: str = "k"
         ) -> list[tuple[int, bytes, bytes]]:
    """``updates`` records cycling over ``keys`` keys, ``per_batch`` per batch."""
    history = []
    i = 0
    while i < updates:
        recs = [(f"{prefix}{(i + j) % keys}".encode(), f"v{i + j}".encode())
                for j in range(min(per_batch, updates - i))]
        first = append(lg, recs, ts)
        history += [(first + j, k, v) for j, (k, v) in enumerate(recs)]
        i += len(recs)
    return history


def segment_files(d: Path) -> list[str]:
    return sorted(f.name for f in d.iterdir())


# -- broker settings ---------------------------------------------------------------------------

def test_cleaner_settings():
    from kafkalite.config.server_config import load_config
    c = load_config(None, []).config
    assert (c.log_cleaner_enable, c.log_cleaner_threads, c.log_cleaner_backoff_ms) == (True, 1, 15_000)
    assert (c.log_cleaner_dedupe_buffer_size, c.log_cleaner_io_buffer_size,
            c.log_cleaner_io_buffer_load_factor) == (128 * 1024 * 1024, 512 * 1024, 0.9)
    # the buffer is shared by the threads, as in Kafka; a map never has fewer than two slots
    assert CleanerConfig(num_threads=2, dedupe_buffer_size=4194304).map_memory == 2097152
    assert CleanerConfig(dedupe_buffer_size=1).map_memory == 48


# -- filter_batch: one batch in, one batch (or none) out ---------------------------------------

def _map(entries: dict[bytes, int], latest: int) -> SkimpyOffsetMap:
    m = SkimpyOffsetMap(24 * 101)
    for k, o in entries.items():
        m.put(k, o)
    m.update_latest_offset(latest)
    return m


def _kafka_python_view(data: bytes) -> tuple[DefaultRecordBatch, list]:
    """Parse with kafka-python's own implementation: an independent check of our encoding."""
    b = DefaultRecordBatch(bytes(data))
    assert b.validate_crc()
    return b, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY,
                                   COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_filter_rebuilds_a_batch_keeping_offsets_codec_and_fields(codec):
    recs = [(b"a", b"1", T0), (b"b", b"2", T0 + 5), (b"a", b"3", T0 + 9), (b"c", b"4", T0 + 2)]
    data = build_batch(recs, base_offset=100, compression=codec, producer_id=7,
                       producer_epoch=3, base_sequence=40, partition_leader_epoch=5,
                       headers=[("h", b"x")])
    h = parse_header(data)
    # "a" was updated at 102 (this batch), "b" later at 500 (another batch); "c" is current
    m = _map({b"a": 102, b"b": 500, b"c": 103}, latest=600)
    r = filter_batch(memoryview(data), h, m, T0, RETENTION, retain_empty=False)
    assert (r.records_read, r.records_retained, r.invalid, r.tombstone_horizon_ms) == (4, 2, 0, None)
    b, view = _kafka_python_view(r.data)
    assert view == [(102, T0 + 9, b"a", b"3", [("h", b"x")]), (103, T0 + 2, b"c", b"4", [("h", b"x")])]
    out = parse_header(r.data)
    assert (out.base_offset, out.last_offset, out.partition_leader_epoch) == (100, 103, 5)
    assert (out.producer_id, out.producer_epoch, out.base_sequence) == (7, 3, 40)
    assert out.compression_type == codec and out.records_count == 2
    assert out.max_timestamp == T0 + 9          # over the records that remain
    assert not out.attributes & DELETE_HORIZON_MASK


def test_filter_handles_multi_byte_varints_long_keys_values_and_headers():
    recs = []
    for i in range(300):                     # offset deltas past one and two varint bytes
        key = (b"K%d-" % (i % 7)) * (1 if i % 3 else 40)      # keys up to ~200 bytes
        value = None if i % 50 == 49 else bytes([i % 251]) * (1 if i % 5 else 20_000)
        recs.append((key, value, T0 + (i * 37_000 if i % 2 else -i * 1_000_000)))
    data = build_batch(recs, base_offset=1000, headers=[("a" * 70, b"h" * 300), ("b", None)])
    h = parse_header(data)
    last = {}
    for i, (k, _v, _t) in enumerate(recs):
        last[k] = 1000 + i
    m = _map(last, 5000)
    r = filter_batch(memoryview(data), h, m, T0, RETENTION, False)
    expected = [(1000 + i, t, k, v) for i, (k, v, t) in enumerate(recs) if last[k] == 1000 + i]
    assert [(o, t, k, v) for o, t, k, v, _h in _kafka_python_view(r.data)[1]] == expected
    assert all(hd == [("a" * 70, b"h" * 300), ("b", None)] for *_x, hd in _kafka_python_view(r.data)[1])
    out = parse_header(r.data)
    assert out.attributes & DELETE_HORIZON_MASK     # a tombstone survived: horizon set
    assert (out.base_offset, out.last_offset) == (1000, 1299)


def test_filter_keeps_an_unchanged_batch_byte_for_byte():
    data = build_batch([(b"a", b"1", T0), (b"b", b"2", T0)], base_offset=10)
    h = parse_header(data)
    mv = memoryview(data)
    r = filter_batch(mv, h, _map({b"a": 10, b"b": 11}, 11), T0, RETENTION, False)
    assert r.data is mv and r.records_retained == 2


def test_filter_drops_or_empties_a_batch_with_nothing_left():
    data = build_batch([(b"a", b"1", T0), (b"a", b"2", T0 + 1)], base_offset=10,
                       producer_id=9, producer_epoch=0, base_sequence=4)
    h = parse_header(data)
    m = _map({b"a": 50}, 60)
    assert filter_batch(memoryview(data), h, m, T0, RETENTION, False).data is None
    r = filter_batch(memoryview(data), h, m, T0, RETENTION, True)
    empty = parse_header(r.data)
    assert len(r.data) == 61 and empty.records_count == 0
    assert (empty.base_offset, empty.last_offset, empty.base_sequence, empty.last_sequence) == (10, 11, 4, 5)
    assert empty.base_timestamp == empty.max_timestamp == T0 + 1
    b, view = _kafka_python_view(r.data)
    assert view == [] and b.producer_id == 9


def test_filter_keeps_records_past_the_map_and_drops_keyless_ones():
    data = build_batch([(None, b"x", T0), (b"a", b"1", T0), (b"z", b"9", T0)], base_offset=20)
    h = parse_header(data)
    r = filter_batch(memoryview(data), h, _map({b"a": 30}, latest=21), T0, RETENTION, False)
    # 20: keyless, dropped; 21: "a" superseded at 30; 22: past the map's latest offset
    assert (r.records_retained, r.invalid) == (1, 1)
    assert [(o, k) for o, _t, k, _v, _h in _kafka_python_view(r.data)[1]] == [(22, b"z")]


def test_filter_sets_a_delete_horizon_once_and_drops_tombstones_after_it():
    data = build_batch([(b"a", None, T0 - 500), (b"b", b"2", T0 - 100)], base_offset=0)
    h = parse_header(data)
    m = _map({b"a": 0, b"b": 1}, 1)
    r = filter_batch(memoryview(data), h, m, T0, RETENTION, False)
    horizon = T0 + RETENTION
    assert r.tombstone_horizon_ms == horizon and r.records_retained == 2
    out = parse_header(r.data)
    assert out.attributes & DELETE_HORIZON_MASK and out.base_timestamp == horizon
    # record timestamps are unchanged (deltas re-based on the horizon)
    assert [(o, t, k, v) for o, t, k, v, _h in _kafka_python_view(r.data)[1]] == \
        [(0, T0 - 500, b"a", None), (1, T0 - 100, b"b", b"2")]
    # cleaned again before the horizon: unchanged, horizon kept
    r2 = filter_batch(memoryview(r.data), out, m, horizon - 1, RETENTION, False)
    assert r2.data is not None and bytes(r2.data) == bytes(r.data)
    assert r2.tombstone_horizon_ms == horizon
    # at the horizon the tombstone goes; the batch keeps its horizon flag and base timestamp
    r3 = filter_batch(memoryview(r.data), out, m, horizon, RETENTION, False)
    assert r3.records_retained == 1 and r3.tombstone_horizon_ms is None
    assert [(o, t, k) for o, t, k, _v, _h in _kafka_python_view(r3.data)[1]] == [(1, T0 - 100, b"b")]
    assert parse_header(r3.data).base_timestamp == horizon


def test_filter_keeps_control_and_transactional_batches_whole():
    ctrl = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", T0)], base_offset=5,
                       control=True, transactional=True, producer_id=3, producer_epoch=0)
    txn = build_batch([(b"a", b"1", T0)], base_offset=6, transactional=True, producer_id=3,
                      producer_epoch=0, base_sequence=0)
    m = _map({b"a": 99, b"\x00\x00\x00\x01": 99}, 100)
    for data in (ctrl, txn):
        mv = memoryview(data)
        assert filter_batch(mv, parse_header(data), m, T0, RETENTION, False).data is mv


# -- whole rounds ------------------------------------------------------------------------------

def test_round_keeps_the_latest_record_per_key_with_its_offset(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=20, updates=600)
    lg.roll()
    active = fill(lg, keys=3, updates=5)      # the active segment is never cleaned
    size_before = lg.size_in_bytes
    n_segments = len(lg.segments)
    assert n_segments >= 4
    c = new_cleaner(lm, Clock())
    assert run(c.clean_filthiest_log()) is True
    assert read_records(lg) == latest_per_key(history) + active
    assert lg.log_end_offset == 605
    assert lg.size_in_bytes < size_before // 10
    # each old segment was nearly full: one cleaned segment per old one (Kafka's grouping)
    assert len(lg.segments) == n_segments
    assert read_offset_checkpoint(tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT_FILE) == {("t", 0): 600}
    assert (tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 600\n"
    assert c.last_result.stats.messages_read == 600 and c.last_result.stats.messages_written == 20
    # nothing left to do
    assert run(c.clean_filthiest_log()) is False
    assert not [f for f in segment_files(lg.dir) if f.endswith((".cleaned", ".swap", ".deleted"))]
    lm.shutdown()


def test_reads_cross_the_gaps_from_any_offset(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=4, updates=200)
    lg.roll()
    run(new_cleaner(lm, Clock()).clean_filthiest_log())
    survivors = [o for o, _k, _v in latest_per_key(history)]
    assert survivors == [196, 197, 198, 199]
    for start in (0, 1, 150, 196, 198):
        data = lg.read(start, 1 << 20).read_bytes()
        first = [r.offset for p, h in split_batches(data)[0]
                 for r in decode_records(memoryview(data)[p:p + h.size], h) if r.offset >= start]
        assert first == [o for o in survivors if o >= start]
    lm.shutdown()


def test_tombstones_stay_until_the_delete_horizon_then_go_without_new_writes(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=5, updates=100)
    first = append(lg, [(b"k1", None), (b"k3", None)])
    lg.roll()
    clock = Clock(T0 + 1000)
    c = new_cleaner(lm, clock)
    assert run(c.clean_filthiest_log())
    live = [r for r in latest_per_key(history) if r[1] not in (b"k1", b"k3")]
    expected = sorted(live + [(first, b"k1", None), (first + 1, b"k3", None)])
    assert read_records(lg) == expected
    tomb_batch = [h for h, recs in read_batches(lg) if any(r.value is None for r in recs)]
    assert len(tomb_batch) == 1
    assert tomb_batch[0].attributes & DELETE_HORIZON_MASK
    assert tomb_batch[0].base_timestamp == clock.now + RETENTION
    assert c.last_result.pending_delete_horizon_ms == clock.now + RETENTION
    # nothing dirty and the horizon not reached: no round
    clock.now += RETENTION - 1
    assert run(c.clean_filthiest_log()) is False
    # the horizon passes: a round runs although nothing new was written, tombstones go
    clock.now += 1
    assert run(c.clean_filthiest_log()) is True
    assert read_records(lg) == live
    assert c.last_result.pending_delete_horizon_ms is None
    assert run(c.clean_filthiest_log()) is False
    lm.shutdown()


def test_tombstone_of_a_key_updated_later_goes_at_once(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    append(lg, [(b"a", b"1")])
    append(lg, [(b"a", None)])
    last = append(lg, [(b"a", b"2")])
    lg.roll()
    run(new_cleaner(lm, Clock()).clean_filthiest_log())
    assert read_records(lg) == [(last, b"a", b"2")]
    lm.shutdown()


def test_only_below_the_high_watermark_and_the_active_segment(tmp_path):
    config = cfg(segment_bytes=1 << 20)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    h1 = fill(lg, keys=2, updates=20)
    lg.roll()
    h2 = fill(lg, keys=2, updates=20)       # segment [20, 40)
    lg.roll()
    h3 = fill(lg, keys=2, updates=20)       # the active segment [40, 60)
    hw = {"value": 25}                      # inside the second segment
    c = new_cleaner(lm, Clock(), upper_bound=lambda t, p: hw["value"])
    assert run(c.clean_filthiest_log())
    # the segment holding the high watermark is not cleaned either (Kafka rounds down)
    assert read_records(lg) == latest_per_key(h1) + h2 + h3
    assert c.last_result.end_offset == 20
    hw["value"] = 60
    assert run(c.clean_filthiest_log())
    assert read_records(lg) == latest_per_key(h1 + h2) + h3
    # a partition the broker does not host (no known high watermark) is left alone
    c2 = new_cleaner(lm, Clock(), upper_bound=lambda t, p: None)
    append(lg, [(b"k0", b"x")])
    lg.roll()
    assert run(c2.clean_filthiest_log()) is False
    lm.shutdown()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    config = cfg(segment_bytes=1 << 20, min_compaction_lag_ms=60_000)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    old = fill(lg, keys=3, updates=30, ts=T0)
    lg.roll()
    recent = fill(lg, keys=3, updates=30, ts=T0 + 50_000)
    lg.roll()
    clock = Clock(T0 + 100_000)     # old is 100 s old, recent 50 s: within the lag
    c = new_cleaner(lm, clock)
    assert run(c.clean_filthiest_log())
    assert read_records(lg) == latest_per_key(old) + recent
    clock.now = T0 + 110_001
    assert run(c.clean_filthiest_log())
    assert read_records(lg) == latest_per_key(old + recent)
    lm.shutdown()


def test_max_compaction_lag_forces_a_round_below_the_dirty_ratio(tmp_path):
    config = cfg(segment_bytes=1 << 20, min_cleanable_dirty_ratio=0.9,
                 max_compaction_lag_ms=60_000)
    assert config.max_segment_ms == 60_000     # the active segment also rolls by the lag
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    distinct = fill(lg, keys=500, updates=500, ts=T0)     # nothing to remove: stays big
    lg.roll()
    clock = Clock(T0)
    c = new_cleaner(lm, clock)
    assert run(c.clean_filthiest_log()) is True           # never cleaned: ratio 1.0
    dirty = fill(lg, keys=2, updates=20, ts=T0 + 1000, prefix="d")
    # the next append rolls: its timestamp is past max.compaction.lag.ms of the first batch
    append(lg, [(b"x", b"y")], ts=T0 + 61_001)
    assert [s.base_offset for s in lg.segments] == [0, 500, 520]
    clock.now = T0 + 30_000
    assert run(c.clean_filthiest_log()) is False   # dirty ratio ~0.05 < 0.9, not overdue yet
    clock.now = T0 + 61_001
    assert run(c.clean_filthiest_log()) is True
    assert read_records(lg) == distinct + latest_per_key(dirty) + [(520, b"x", b"y")]
    lm.shutdown()


def test_dirtiest_log_first_and_only_compacted_logs(tmp_path):
    lm = new_manager(tmp_path, cfg(segment_bytes=1 << 20))
    a = lm.get_or_create_log("a", 0, cfg(segment_bytes=1 << 20))
    b = lm.get_or_create_log("b", 0, cfg(segment_bytes=1 << 20, cleanup_policy="compact,delete"))
    d = lm.get_or_create_log("d", 0, cfg(segment_bytes=1 << 20, cleanup_policy="delete"))
    for lg, n in ((a, 10), (b, 40), (d, 80)):
        fill(lg, keys=2, updates=n)
        lg.roll()
    fill(a, keys=2, updates=10)     # a: half clean, half dirty once b is cleaned
    c = new_cleaner(lm, Clock())
    assert run(c.clean_filthiest_log())
    assert c.last_result.key in (("a", 0), ("b", 0))
    assert run(c.clean_filthiest_log())
    assert {k for k in c.manager.all_cleaner_checkpoints()} == {("a", 0), ("b", 0)}
    assert run(c.clean_filthiest_log()) is False     # "delete"-only logs are never compacted
    assert len(read_records(d)) == 80
    cp = c.manager.all_cleaner_checkpoints()
    assert cp == {("a", 0): 10, ("b", 0): 40}
    lm.shutdown()


def test_a_dirty_section_of_distinct_keys_fits_one_round(tmp_path):
    # the map is sized for the dirty section's offset range (no more than the configured
    # buffer): every key of it fits, despite the slot count being rounded down to a prime
    config = cfg(segment_bytes=1 << 20)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = fill(lg, keys=3000, updates=3000, per_batch=100)
    lg.roll()
    c = new_cleaner(lm, Clock(), buffer=128 << 20)
    assert run(c.clean_filthiest_log())
    assert c.last_result.end_offset == 3000
    assert c.last_result.stats.buffer_utilization > 0.6
    assert run(c.clean_filthiest_log()) is False
    assert read_records(lg) == history
    lm.shutdown()


def test_small_offset_map_cleans_over_several_rounds(tmp_path):
    config = cfg(segment_bytes=1 << 20)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = []
    for _ in range(4):
        history += fill(lg, keys=100, updates=100)
        lg.roll()
    # a map of 53 slots holds 47 keys at the 0.9 load factor: each round maps part of it
    c = new_cleaner(lm, Clock(), buffer=24 * 53)
    ends = []
    for _ in range(20):
        if not run(c.clean_filthiest_log()):
            break
        ends.append(c.last_result.end_offset)
    assert ends == sorted(ends) and ends[-1] == 400 and len(ends) > 4
    assert c.last_result.stats.buffer_utilization <= 0.9
    assert read_records(lg) == latest_per_key(history)
    lm.shutdown()


def test_restart_keeps_the_cleaned_log_and_the_checkpoint(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=10, updates=300)
    lg.roll()
    run(new_cleaner(lm, Clock()).clean_filthiest_log())
    before = read_records(lg)
    lm.shutdown()
    lm2 = new_manager(tmp_path, cfg())
    lg2 = lm2.get_log(("t", 0))
    assert read_records(lg2) == before == latest_per_key(history)
    assert lg2.log_end_offset == 300
    c = new_cleaner(lm2, Clock())
    assert c.manager.all_cleaner_checkpoints() == {("t", 0): 300}
    more = fill(lg2, keys=10, updates=20)
    lg2.roll()
    assert run(c.clean_filthiest_log())
    assert c.last_result.first_dirty_offset == 300
    assert read_records(lg2) == latest_per_key(history + more)
    lm2.shutdown()


def test_a_recreated_partition_does_not_inherit_the_old_checkpoint(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    fill(lg, keys=5, updates=300)
    lg.roll()
    c = new_cleaner(lm, Clock())
    assert run(c.clean_filthiest_log()) and c.manager.all_cleaner_checkpoints() == {("t", 0): 300}
    lm.delete_log("t", 0)
    lg2 = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg2, keys=5, updates=500)
    lg2.roll()
    assert run(c.clean_filthiest_log())
    assert c.last_result.first_dirty_offset == 0 and c.last_result.end_offset == 500
    assert read_records(lg2) == latest_per_key(history)
    c.manager.maintain_uncleanable_partitions()
    assert read_offset_checkpoint(tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT_FILE) == {("t", 0): 500}
    lm.shutdown()


def test_active_producer_keeps_its_last_batch_and_its_sequence(tmp_path):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    pid = 4000
    append(lg, [(b"a", b"1"), (b"b", b"1")], producer_id=pid, producer_epoch=0, base_sequence=0)
    append(lg, [(b"a", b"2"), (b"b", b"2")], producer_id=pid, producer_epoch=0, base_sequence=2)
    # a non-idempotent writer supersedes both keys
    append(lg, [(b"a", b"3"), (b"b", b"3")])
    lg.roll()
    run(new_cleaner(lm, Clock()).clean_filthiest_log())
    batches = read_batches(lg)
    # the producer's first batch is gone, its last one stays empty (sequence 2..3)
    assert [(h.base_offset, h.last_offset, h.records_count, h.producer_id, h.base_sequence)
            for h, _r in batches] == [(2, 3, 0, pid, 2), (4, 5, 2, -1, -1)]
    assert read_records(lg) == [(4, b"a", b"3"), (5, b"b", b"3")]
    lm.shutdown()
    # after a restart the producer state is rebuilt from the log: the next sequence is 4
    lm2 = new_manager(tmp_path, cfg())
    lg2 = lm2.get_log(("t", 0))
    info = lg2.append_as_leader(build_batch([(b"c", b"1", T0)], producer_id=pid,
                                            producer_epoch=0, base_sequence=4), 0, T0)
    assert info.first_offset == 6 and not info.duplicate
    dup = lg2.append_as_leader(build_batch([(b"a", b"2", T0), (b"b", b"2", T0)], producer_id=pid,
                                           producer_epoch=0, base_sequence=2), 0, T0)
    assert dup.duplicate and dup.first_offset == 2
    lm2.shutdown()


def test_the_last_batch_of_a_cleaned_segment_stays_so_its_range_is_known(tmp_path):
    config = cfg(segment_bytes=100)         # one single-record batch per segment and group
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    for k, v in ((b"a", b"1"), (b"b", b"1"), (b"b", b"2"), (b"b", b"3"), (b"z", b"z")):
        append(lg, [(k, v)])
    assert [s.base_offset for s in lg.segments] == [0, 1, 2, 3, 4]
    run(new_cleaner(lm, Clock()).clean_filthiest_log())
    # offsets 1 and 2 are superseded by 3, but each is its segment's last batch: kept empty,
    # so every cleaned segment still ends where the old one did
    assert [(h.base_offset, h.last_offset, h.records_count) for h, _r in read_batches(lg)] == \
        [(0, 0, 1), (1, 1, 0), (2, 2, 0), (3, 3, 1), (4, 4, 1)]
    assert [s.next_offset() for s in lg.segments] == [1, 2, 3, 4, 5]
    assert read_records(lg) == [(0, b"a", b"1"), (3, b"b", b"3"), (4, b"z", b"z")]
    lm.shutdown()


# -- concurrency: the loop keeps working while a round runs in its thread ----------------------

class _Gate:
    """Hold a round's offset-map thread until the test has done its thing on the loop."""

    def __init__(self, monkeypatch):
        self.entered = threading.Event()
        self.release = threading.Event()
        real = cleaner_mod.build_offset_map

        def gated(*a, **kw):
            self.entered.set()
            assert self.release.wait(10)
            return real(*a, **kw)

        monkeypatch.setattr(cm, "build_offset_map", gated)

    async def wait_entered(self):
        for _ in range(1000):
            if self.entered.is_set():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("round did not start")


def test_appends_and_rolls_during_a_round(tmp_path, monkeypatch):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=5, updates=200)
    lg.roll()
    gate = _Gate(monkeypatch)

    async def scenario():
        c = new_cleaner(lm, Clock())
        task = asyncio.ensure_future(c.clean_filthiest_log())
        await gate.wait_entered()
        extra = fill(lg, keys=5, updates=300)     # rolls several times meanwhile
        gate.release.set()
        assert await task is True
        return extra

    extra = run(scenario())
    assert read_records(lg) == latest_per_key(history) + extra
    lm.shutdown()


def test_retention_during_a_round_cancels_the_swap(tmp_path, monkeypatch):
    config = cfg(cleanup_policy="compact,delete")
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = fill(lg, keys=5, updates=500)
    lg.roll()
    assert len(lg.segments) >= 3
    gate = _Gate(monkeypatch)
    second = lg.segments[1].base_offset

    async def scenario():
        c = new_cleaner(lm, Clock())
        task = asyncio.ensure_future(c.clean_filthiest_log())
        await gate.wait_entered()
        lg.maybe_increment_log_start_offset(second)
        assert lg.delete_old_segments(T0) == 1       # the first segment goes
        gate.release.set()
        assert await task is False                    # aborted, nothing swapped
        assert c.manager.all_cleaner_checkpoints() == {}
        assert not [f for f in segment_files(lg.dir) if ".cleaned" in f or ".swap" in f]
        assert read_records(lg) == [r for r in history if r[0] >= second]
        assert await c.clean_filthiest_log() is True  # the next round does it
        return c

    run(scenario())
    assert read_records(lg) == latest_per_key([r for r in history if r[0] >= second])
    lm.shutdown()


def test_truncation_during_a_round_cancels_the_swap(tmp_path, monkeypatch):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=5, updates=200)
    lg.roll()
    fill(lg, keys=5, updates=10)
    gate = _Gate(monkeypatch)

    async def scenario():
        c = new_cleaner(lm, Clock())
        task = asyncio.ensure_future(c.clean_filthiest_log())
        await gate.wait_entered()
        lg.truncate_to(150)
        gate.release.set()
        assert await task is False

    run(scenario())
    assert read_records(lg) == history[:150]
    lm.shutdown()


def test_shutdown_stops_a_round_and_leaves_no_cleaned_files(tmp_path, monkeypatch):
    lm = new_manager(tmp_path, cfg())
    lg = lm.get_or_create_log("t", 0, cfg())
    history = fill(lg, keys=5, updates=200)
    lg.roll()
    gate = _Gate(monkeypatch)

    async def scenario():
        c = new_cleaner(lm, Clock())
        c.startup()
        await gate.wait_entered()
        stop = asyncio.ensure_future(c.shutdown())
        await asyncio.sleep(0.01)
        gate.release.set()
        await asyncio.wait_for(stop, 5)
        assert c.rounds == 0

    run(scenario())
    assert read_records(lg) == history
    assert not [f for f in segment_files(lg.dir) if ".cleaned" in f or ".swap" in f]
    lm.shutdown()


def rolled_log_to_clean(tmp_path: Path, file_delete_delay_ms: int
                        ) -> tuple[LogManager, Log, list[tuple[int, bytes, bytes]]]:
    """t-0 of a new manager: 200 updates over 5 keys in segments rolled, so the cleaner
    (:func:`cleaned_with_segment_deleter`) has every one of them to clean."""
    config = cfg(file_delete_delay_ms=file_delete_delay_ms)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = fill(lg, keys=5, updates=200)
    lg.roll()
    return lm, lg, history


def test_background_loop_cleans_and_replaced_segments_are_deleted_after_the_delay(tmp_path):
    lm, lg, history = rolled_log_to_clean(tmp_path, file_delete_delay_ms=200)

    async def scenario():
        async with cleaned_with_segment_deleter(lm):
            deleted = [f for f in segment_files(lg.dir) if f.endswith(".deleted")]
            assert deleted                                  # still there, readable by old readers
            await asyncio.sleep(0.4)
            assert not [f for f in segment_files(lg.dir) if f.endswith(".deleted")]

    run(scenario())
    assert read_records(lg) == latest_per_key(history)
    lm.shutdown()


# -- crash safety: stop at each phase of the swap, then recover from the files -----------------

class Crash(Exception):
    pass


def _crash_at(phase: str) -> Callable[[str], None]:
    def hook(p: str) -> None:
        if p == phase:
            raise Crash(p)
    return hook


@pytest.mark.parametrize("phase", ["cleaned", "swap", "deleted", "final"])
def test_crash_at_each_swap_phase_leaves_old_or_new_never_a_mix(tmp_path, phase):
    config = cfg(segment_bytes=1 << 20)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = []
    for _ in range(5):                  # five small segments: one group
        history += fill(lg, keys=7, updates=40)
        lg.roll()
    active = fill(lg, keys=2, updates=3)
    original = read_records(lg)
    c = new_cleaner(lm, Clock(), on_phase=_crash_at(phase))
    assert run(c.clean_filthiest_log()) is False       # the "crash" interrupted the round
    on_disk = segment_files(lg.dir)
    marker = {"cleaned": ".log.cleaned", "swap": ".log.swap", "deleted": ".log.swap",
              "final": ".log.deleted"}[phase]
    assert any(f.endswith(marker) for f in on_disk), on_disk
    for log_ in lm.all_logs():
        log_.close_handlers()           # the process dies: nothing flushed or closed
    lm2 = new_manager(tmp_path, config)  # no clean-shutdown marker: recovery
    lg2 = lm2.get_log(("t", 0))
    leftovers = [f for f in segment_files(lg2.dir)
                 if f.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    if phase == "cleaned":
        assert read_records(lg2) == original
    else:
        assert read_records(lg2) == latest_per_key(history) + active
    assert lg2.log_end_offset == 203
    # and cleaning goes on from there
    assert run(new_cleaner(lm2, Clock()).clean_filthiest_log())
    assert read_records(lg2) == latest_per_key(history) + active
    lm2.shutdown()


def test_crash_after_the_first_group_commits(tmp_path):
    config = cfg(segment_bytes=2048)
    lm = new_manager(tmp_path, config)
    lg = lm.get_or_create_log("t", 0, config)
    history = fill(lg, keys=7, updates=400)
    lg.roll()
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 3
    c = new_cleaner(lm, Clock(), on_phase=_crash_at("swap"))
    run(c.clean_filthiest_log())
    for log_ in lm.all_logs():
        log_.close_handlers()
    lm2 = new_manager(tmp_path, config)
    lg2 = lm2.get_log(("t", 0))
    # segments are nearly full, so the first group is the first segment alone
    g1_end = bases[1]
    first_group = [r for r in history if r[0] < g1_end]
    m = {}
    for r in history:       # the round's map covers the whole dirty section
        m[r[1]] = r[0]
    cleaned_g1 = [r for r in first_group if m[r[1]] == r[0]]
    assert read_records(lg2) == cleaned_g1 + [r for r in history if r[0] >= g1_end]
    assert lg2.segments[0].next_offset() == g1_end    # the empty tail batch keeps the range
    lm2.shutdown()


def test_recovery_of_an_empty_swap_replaces_the_segment_at_its_base(tmp_path):
    config = cfg(segment_bytes=1 << 20)
    d = tmp_path / "logs" / "t-0"
    lg = Log.open(d, config, now_ms=T0)
    append(lg, [(b"a", b"1")])
    lg.roll()
    append(lg, [(b"b", b"1")])
    lg.close()
    # what a crash after the commit rename of a cleaned segment with no batch leaves
    (d / "00000000000000000000.log.swap").write_bytes(b"")
    lg2 = Log.open(d, config, now_ms=T0)
    assert [(s.base_offset, s.size) for s in lg2.segments] == [(0, 0), (1, lg2.segments[1].size)]
    assert read_records(lg2) == [(1, b"b", b"1")]
    assert "00000000000000000000.log.swap" not in segment_files(d)
    lg2.close()


# -- the cleaner against a dict model ----------------------------------------------------------

KEYS = [f"key{i}".encode() for i in range(6)]
step = st.one_of(
    st.tuples(st.just("append"),
              st.lists(st.tuples(st.integers(0, len(KEYS) - 1),
                                 st.one_of(st.none(), st.binary(min_size=0, max_size=6))),
                       min_size=1, max_size=6),
              st.sampled_from([COMPRESSION_NONE, COMPRESSION_GZIP])),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean"), st.integers(0, 2 * RETENTION)),
    st.tuples(st.just("crash"), st.sampled_from(["cleaned", "swap", "deleted", "final"])),
)


def _replay(records) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for _o, k, v in records:
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(step, min_size=1, max_size=40), st.integers(24 * 3, 24 * 40))
def test_cleaner_against_a_dict_model(tmp_path_factory, steps, buffer):
    tmp = tmp_path_factory.mktemp("prop")
    config = cfg(segment_bytes=600)
    lm = new_manager(tmp, config)
    lg = lm.get_or_create_log("t", 0, config)
    clock = Clock()
    c = new_cleaner(lm, clock, buffer=buffer)
    history: list[tuple[int, bytes, Optional[bytes]]] = []

    def check() -> None:
        now = read_records(lg)
        by_offset = {o: (k, v) for o, k, v in history}
        # only records that were written, at their offsets; the log end never moves
        assert all(by_offset.get(o) == (k, v) for o, k, v in now)
        assert lg.log_end_offset == len(history)
        # replaying the log gives the state replaying everything gives
        assert _replay(now) == _replay(history)
        # below the cleaner checkpoint a key appears at most once: its last record there
        cp = c.manager.all_cleaner_checkpoints().get(("t", 0), 0)
        last_below: dict[bytes, int] = {}
        for o, k, _v in history:
            if o < cp:
                last_below[k] = o
        for o, k, _v in now:
            if o < cp:
                assert last_below[k] == o

    async def go() -> None:
        nonlocal lm, lg, c
        for s in steps:
            if s[0] == "crash":
                # a round killed at this phase of its swap, then a restart from the files
                await new_cleaner(lm, clock, buffer=buffer,
                                  on_phase=_crash_at(s[1])).clean_filthiest_log()
                for log_ in lm.all_logs():
                    log_.close_handlers()
                lm = new_manager(tmp, config)
                lg = lm.get_log(("t", 0))
                c = new_cleaner(lm, clock, buffer=buffer)
                check()
            elif s[0] == "append":
                _, recs, codec = s
                data = [(KEYS[i], v) for i, v in recs]
                first = append(lg, data, clock.now, compression=codec)
                history.extend((first + j, k, v) for j, (k, v) in enumerate(data))
            elif s[0] == "roll":
                if lg.active_segment.size:
                    lg.roll()
            else:
                clock.now += s[1]
                await c.clean_filthiest_log()
                check()
        # then let everything be cleaned and every horizon pass
        if lg.active_segment.size:
            lg.roll()
        idle = 0
        for _ in range(1000):
            if await c.clean_filthiest_log():
                idle = 0
                check()
                continue
            idle += 1
            if idle == 2:
                break
            clock.now += RETENTION      # nothing to do: let pending horizons pass
        check()

    run(go())
    final = read_records(lg)
    state = _replay(history)
    last = {k: (o, v) for o, k, v in history}
    assert final == sorted((last[k][0], k, v) for k, v in state.items())
    lm.shutdown()


def test_replaced_segments_waiting_at_shutdown_are_removed_by_the_next_start(tmp_path):
    """As Kafka's scheduler drops its pending delete-file tasks at shutdown, the cleaner's
    replaced segments still waiting for file.delete.delay.ms stay as ``.deleted`` files, which
    the next start removes; the log reads the cleaned records."""
    lm, lg, history = rolled_log_to_clean(tmp_path, file_delete_delay_ms=600_000)

    async def scenario():
        async with cleaned_with_segment_deleter(lm):
            pass

    run(scenario())
    assert [f for f in segment_files(lg.dir) if f.endswith(".deleted")]
    lm.shutdown()
    again = new_manager(tmp_path, lg.config)
    reopened = again.get_log(("t", 0))
    assert not [f for f in segment_files(reopened.dir) if f.endswith(".deleted")]
    assert read_records(reopened) == latest_per_key(history)
    again.shutdown()
