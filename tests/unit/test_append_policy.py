"""Topic configs applied on append: the CreateTime timestamp window and broker-side recompression,
on real Log instances (files in tmp_path) and on batches built by kafka-python's encoder."""
from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log.append_policy import recompress_batch, validate_records
from kafkalite.log.errors import InvalidTimestampError, RecordTooLargeError
from kafkalite.log.log import Log
from kafkalite.log.record_batch import decode_records, parse_header, split_batches, validate_batch

NOW = 1_700_000_000_000
CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batch(timestamps: list[int], codec: str = "none", producer_id: int = -1, base_sequence: int = -1,
          value: bytes = b"value-" * 20) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC[codec], is_transactional=False,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i, ts in enumerate(timestamps):
        assert b.append(i, ts, b"k%d" % i, value, [("h", b"v")]) is not None
    return bytes(b.build())


def stored(lg: Log) -> bytes:
    data = lg.read(0, 1 << 20, lg.log_end_offset, True)
    return data.read_bytes()


def test_timestamp_window_names_each_bad_record(tmp_path: Path) -> None:
    cfg = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    lg = Log.open(tmp_path / "t-0", cfg, now_ms=NOW)
    bad = batch([NOW - 1000, NOW - 1001, NOW + 500, NOW + 501])
    with pytest.raises(InvalidTimestampError) as exc:
        lg.append_as_leader(bad, 0, NOW)
    assert exc.value.error_code == 32
    assert str(exc.value) == "One or more records have been rejected due to invalid timestamp"
    window = f"[{NOW - 1000}, {NOW + 500}]"
    assert exc.value.record_errors == [
        (1, f"Timestamp {NOW - 1001} of message with offset 1 is out of range. The timestamp should be within {window}"),
        (3, f"Timestamp {NOW + 501} of message with offset 3 is out of range. The timestamp should be within {window}")]
    assert lg.log_end_offset == 0                      # nothing written
    info = lg.append_as_leader(batch([NOW - 1000, NOW + 500]), 0, NOW)
    assert (info.first_offset, info.last_offset) == (0, 1)


def test_difference_max_ms_and_log_append_time(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_difference_max_ms=10), now_ms=NOW)
    with pytest.raises(InvalidTimestampError) as exc:
        lg.append_as_leader(batch([NOW - 11], codec="gzip"), 0, NOW)     # compressed batches are checked too
    assert exc.value.record_errors == [(0, f"Timestamp {NOW - 11} of message with offset 0 is out of range. "
                                           f"The timestamp should be within [{NOW - 10}, {NOW + 10}]")]
    # LogAppendTime topics do not check producer timestamps
    lg.update_config(LogConfig(message_timestamp_difference_max_ms=10, message_timestamp_type="LogAppendTime"))
    assert lg.append_as_leader(batch([NOW - 11]), 0, NOW).log_append_time == NOW


def test_unbounded_side_prints_java_long_arithmetic() -> None:
    # one side bounded: the other bound is printed as Java computes it (now + Long.MAX_VALUE wraps)
    def errors(cfg: LogConfig, ts: int) -> str:
        raw = batch([ts])
        mv = memoryview(raw)
        with pytest.raises(InvalidTimestampError) as exc:
            validate_records(mv, split_batches(mv)[0], cfg, NOW, "t-0", compacted=False)
        return exc.value.record_errors[0][1]

    assert errors(LogConfig(message_timestamp_after_max_ms=0), NOW + 10).endswith(
        f"within [{NOW - (2**63 - 1)}, {NOW}]")
    assert errors(LogConfig(message_timestamp_before_max_ms=1000), NOW - 2000).endswith(
        f"within [{NOW - 1000}, {NOW - 2**63 - 1}]")


@pytest.mark.parametrize("source,target", [("none", "gzip"), ("none", "zstd"), ("gzip", "lz4"),
                                           ("snappy", "none"), ("lz4", "snappy"), ("zstd", "gzip")])
def test_recompress_keeps_records_and_header(source: str, target: str) -> None:
    raw = batch([NOW, NOW + 5, NOW - 7], codec=source, producer_id=42, base_sequence=7)
    h = parse_header(raw)
    out = recompress_batch(memoryview(raw), 0, h, CODEC[target])
    nh = parse_header(out)
    validate_batch(out, 0, nh)                          # CRC and client checks pass
    assert nh.compression_type == CODEC[target]
    assert nh._replace(crc=0, batch_length=0, attributes=0) == h._replace(crc=0, batch_length=0, attributes=0)
    assert (nh.attributes & ~7) == (h.attributes & ~7)
    assert decode_records(out, nh) == decode_records(raw, h)
    assert [r.timestamp for r in DefaultRecordBatch(out)] == [NOW, NOW + 5, NOW - 7]   # kafka-python reads it


@pytest.mark.parametrize("topic_codec,sent,expected", [
    ("gzip", "none", 1), ("gzip", "gzip", 1), ("uncompressed", "lz4", 0), ("producer", "snappy", 2),
    ("zstd", "gzip", 4)])
def test_log_stores_the_topic_codec(tmp_path: Path, topic_codec: str, sent: str, expected: int) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(compression_type=topic_codec), now_ms=NOW)
    raw = batch([NOW, NOW + 1], codec=sent, producer_id=3, base_sequence=0)
    info = lg.append_as_leader(raw, 5, NOW)
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 1, False)
    data = stored(lg)
    h = parse_header(data)
    assert (h.compression_type, h.base_offset, h.partition_leader_epoch, h.producer_id) == (expected, 0, 5, 3)
    assert [(r.key, r.timestamp) for r in decode_records(data, h)] == [(b"k0", NOW), (b"k1", NOW + 1)]
    assert lg.size_in_bytes == len(data)
    # an idempotent retry of the same batch is still recognised after recompression
    again = lg.append_as_leader(raw, 5, NOW)
    assert (again.first_offset, again.duplicate) == (0, True)
    assert lg.log_end_offset == 2


def test_recompressed_batch_must_fit_max_message_bytes(tmp_path: Path) -> None:
    raw = batch([NOW] * 50, codec="gzip")       # repetitive values: gzip is much smaller than plain
    plain_size = len(recompress_batch(memoryview(raw), 0, parse_header(raw), 0))
    lg = Log.open(tmp_path / "t-0", LogConfig(compression_type="uncompressed", max_message_bytes=len(raw) + 10),
                  now_ms=NOW)
    with pytest.raises(RecordTooLargeError) as exc:
        lg.append_as_leader(raw, 0, NOW)
    assert str(exc.value) == (f"Message batch size is {plain_size} bytes in append to partition t-0 which exceeds "
                              f"the maximum configured size of {len(raw) + 10}.")
    assert lg.log_end_offset == 0
