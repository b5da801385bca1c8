"""LogSegment: one ``.log`` file of record batches plus its ``.index``, ``.timeindex`` and (from
the first aborted transaction on) ``.txnindex``.

Files are named by the segment's base offset, 20 digits (``00000000000000000000.log``). Batches
are appended exactly as the Log hands them over (offsets already assigned) with one gather
write; the sparse indexes get at most one entry per append, once more than
``index.interval.bytes`` were appended since the last one (recovery, which sees batches, not
appends, indexes per batch, as Kafka's does). Reads find
positions through the offset index and a forward scan of batch headers — never of records.

Not thread-safe: the owning Log serialises writers. Reads only use ``os.pread`` on the shared
descriptor, so they carry no file position state.
"""
from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

from crc32c import crc32c

from kafkalite.config.log_config import LogConfig
from kafkalite.log.errors import KafkaStorageError, LogSegmentOffsetOverflowError
from kafkalite.log.offset_index import OffsetIndex
from kafkalite.log.record_batch import (ATTRIBUTES_OFFSET, HEADER_STRUCT, LOG_OVERHEAD,
                                        MAGIC_OFFSET, MAGIC_V2, NO_TIMESTAMP,
                                        RECORD_BATCH_OVERHEAD, BatchHeader, decode_records)
from kafkalite.log.time_index import TimeIndex
from kafkalite.log.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

INT32_MAX = 2**31 - 1
_HEADER_CHUNK = 8192            # header scans read this much at a time (many small batches/read)
_DATA_CHUNK = 1024 * 1024       # recovery reads whole batches in chunks this big
_IOV_MAX = 1024

_make_header = BatchHeader._make
_unpack_header = HEADER_STRUCT.unpack_from


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def log_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix(offset)}{LOG_SUFFIX}{suffix}"


def offset_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix(offset)}{INDEX_SUFFIX}{suffix}"


def time_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix(offset)}{TIME_INDEX_SUFFIX}{suffix}"


def txn_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix(offset)}{TXN_INDEX_SUFFIX}{suffix}"


def random_segment_jitter(config: LogConfig) -> int:
    """Kafka's LogConfig.randomSegmentJitter: uniform in [0, min(segment.jitter.ms, segment.ms))."""
    bound = min(config.segment_jitter_ms, config.segment_ms)
    if config.segment_jitter_ms <= 0 or bound <= 0:
        return 0
    return random.randrange(bound)


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None    # the batch's partitionLeaderEpoch, None when unknown (-1)


class SegmentFile:
    """The open ``.log`` descriptor, shared by the segment and in-flight fetch results.

    A deleted or truncated-away segment drops its reference instead of closing, so a
    FetchDataInfo still holding the descriptor never reads a number the kernel reused for some
    other file; the descriptor closes when the last holder lets go (or on explicit close at
    shutdown).
    """

    __slots__ = ("fd", "path", "truncations")

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # counted BEFORE each ftruncate: a fetch being sent from this file checks it (network/send.py)
        self.truncations = 0

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


def _pwritev_all(fd: int, pieces: Sequence[bytes | memoryview], position: int) -> int:
    """Gather-write ``pieces`` at ``position``, finishing short writes. Returns bytes written."""
    written = 0
    for i in range(0, len(pieces), _IOV_MAX):
        chunk = pieces[i:i + _IOV_MAX]
        expected = sum(len(p) for p in chunk)
        n = os.pwritev(fd, chunk, position)
        if n < expected:
            # Rare (signals, disk nearly full): finish the rest with plain writes.
            rest = b"".join(bytes(p) for p in chunk)[n:]
            pos = position + n
            while rest:
                k = os.pwrite(fd, rest, pos)
                if k <= 0:
                    raise OSError("short write to segment")
                rest = rest[k:]
                pos += k
        position += expected
        written += expected
    return written


class LogSegment:
    def __init__(self, dir: Path, base_offset: int, config: LogConfig, *, now_ms: int,
                 suffix: str = "", txn_index_absent: bool = False) -> None:
        """``txn_index_absent``: the caller listed the directory and saw no ``.txnindex``."""
        self.dir = dir
        self.base_offset = base_offset
        self.suffix = suffix            # "" for a live segment; .cleaned/.swap/.deleted while swapping
        # The files' names as strings; their Paths are made only when asked for (a start-up
        # opens thousands of segments, and four Paths cost more than the system calls)
        prefix = os.path.join(dir, filename_prefix(base_offset))
        self._log_fspath = f"{prefix}{LOG_SUFFIX}{suffix}"
        self._log_path: Path | None = None
        self.file = SegmentFile(self._log_fspath)
        try:
            self._size = os.fstat(self.file.fd).st_size
            self.offset_index = OffsetIndex(f"{prefix}{INDEX_SUFFIX}{suffix}",
                                            base_offset, config.segment_index_bytes)
            self.time_index = TimeIndex(f"{prefix}{TIME_INDEX_SUFFIX}{suffix}",
                                        base_offset, config.segment_index_bytes)
            # Opened lazily: the file exists only once a transaction was aborted here.
            self.txn_index = TransactionIndex(f"{prefix}{TXN_INDEX_SUFFIX}{suffix}",
                                              base_offset, absent=txn_index_absent)
        except BaseException:
            self.file.close()
            raise
        self.index_interval_bytes = max(0, config.index_interval_bytes)
        self.roll_jitter_ms = random_segment_jitter(config)
        self.created_ms = now_ms
        # Timestamp used for time-based rolling: the max timestamp of the first append
        # (None: not loaded yet; -1: the batch has none).
        self._rolling_based_timestamp: int | None = None
        # (max timestamp so far, offset of the batch that reached it); None: read from the
        # time index's last entry on first use, as Kafka does.
        self._max_ts_and_offset: tuple[int, int] | None = None
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None

    @classmethod
    def open(cls, dir: Path, base_offset: int, config: LogConfig, *, now_ms: int,
             suffix: str = "", txn_index_absent: bool = False) -> "LogSegment":
        return cls(dir, base_offset, config, now_ms=now_ms, suffix=suffix,
                   txn_index_absent=txn_index_absent)

    @property
    def log_path(self) -> Path:
        if self._log_path is None:
            self._log_path = Path(self._log_fspath)
        return self._log_path

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._log_fspath = os.fspath(path)
        self._log_path = path

    def __repr__(self) -> str:
        """Kafka's LogSegment.toString, which its log lines print (segment deletions). As Kafka's,
        the largest timestamp is the one known in memory (-1 if the time index was never read:
        a log line does not load it); the modification time is 0 for a file that is gone."""
        ts = -1 if self._max_ts_and_offset is None else self._max_ts_and_offset[0]
        try:
            modified = self.last_modified_ms()
        except OSError:
            modified = 0
        return (f"LogSegment(baseOffset={self.base_offset}, size={self._size}, lastModifiedTime={modified}, "
                f"largestRecordTimestamp={ts})")

    # -- basic state -------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    @property
    def fd(self) -> int:
        return self.file.fd

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def max_timestamp_and_offset_so_far(self) -> tuple[int, int]:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry()
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far[0]

    def last_modified_ms(self) -> int:
        return os.stat(self._log_fspath).st_mtime_ns // 1_000_000

    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when no batch has one (Kafka)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms()

    def next_offset(self) -> int:
        """The offset after the last batch (base_offset when empty)."""
        if self._next_offset is None:
            self._next_offset = self._scan_tail()[0]
        return self._next_offset

    # -- appending ---------------------------------------------------------------------------
    def append(self, pieces: Sequence[bytes | memoryview],
               batches: Sequence[tuple[int, int, int]]) -> None:
        """Write ``pieces`` (the batches' bytes, offsets assigned) at the end of the file.

        ``batches`` lists ``(size, last_offset, max_timestamp)`` per batch, in order: the
        segment tracks its max timestamp from them; the index entry, if any, is the append's.
        """
        if not batches:
            return
        last_offset = batches[-1][1]
        if not self.can_convert_to_relative_offset(last_offset):
            raise LogSegmentOffsetOverflowError(
                f"Offset {last_offset} does not fit segment {self.base_offset}")
        # At most one index entry per append (Kafka's LogSegment.append), and only when the bytes
        # appended since the last entry exceed the interval (this append's own bytes count for
        # the next one): its disk blocks first, so that a full disk fails the append here rather
        # than after the data is written. Small appends, and the first append to a segment,
        # leave the indexes unmapped.
        add_index_entry = self._bytes_since_last_index_entry > self.index_interval_bytes
        if add_index_entry:
            self.offset_index.reserve_entries(1)
            self.time_index.reserve_entries(1)
        start = self._size
        try:
            written = _pwritev_all(self.file.fd, pieces, start)
        except OSError as e:
            # Leave no partial batch behind: a torn write would be served or survive a restart.
            try:
                self.file.truncations += 1
                os.ftruncate(self.file.fd, start)
            except OSError:
                pass
            raise KafkaStorageError(f"I/O error appending to {self.log_path}: {e}") from e
        if start == 0:
            self._rolling_based_timestamp = max(b[2] for b in batches)
        self._size = start + written
        max_ts, max_off = self.max_timestamp_and_offset_so_far
        for _size, batch_last_offset, batch_max_ts in batches:
            if batch_max_ts > max_ts:
                max_ts, max_off = batch_max_ts, batch_last_offset
        self._max_ts_and_offset = (max_ts, max_off)
        if add_index_entry:
            # The append's last offset at the position where it starts: a lookup of any offset
            # in it scans forward from there. A full index only means the segment must roll
            # before the next append; the index is sparse, so skipping an entry costs nothing.
            oidx, tidx = self.offset_index, self.time_index
            if not oidx.is_full and not tidx.is_full:
                oidx.append(last_offset, start)
                tidx.maybe_append(max_ts, max_off)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += written
        self._next_offset = last_offset + 1

    # -- rolling -----------------------------------------------------------------------------
    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None and self._size > 0:
            for _pos, h in self.iter_headers(0):
                self._rolling_based_timestamp = h.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's rule: from the first batch's timestamp if it has one, else wall-clock time
        since the segment was created."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def first_batch_timestamp(self) -> int | None:
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else None

    def should_roll(self, config: LogConfig, messages_size: int, max_timestamp_in_messages: int,
                    max_offset_in_messages: int, now_ms: int) -> bool:
        reached_roll_ms = (self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
                           > config.max_segment_ms - self.roll_jitter_ms)
        size = self._size
        return (size > config.segment_bytes - messages_size
                or (size > 0 and reached_roll_ms)
                or self.offset_index.is_full
                or self.time_index.is_full
                or not self.can_convert_to_relative_offset(max_offset_in_messages))

    def on_become_inactive(self) -> None:
        """Write the final time index entry and trim both indexes (roll)."""
        ts, off = self.max_timestamp_and_offset_so_far
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def create_index_files(self) -> None:
        """A new segment's (empty) index files, made with it (see AbstractIndex.create_empty)."""
        self.offset_index.create_empty()
        self.time_index.create_empty()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- scanning ----------------------------------------------------------------------------
    def iter_headers(self, start_pos: int = 0, end_pos: int | None = None
                     ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` for batches starting at ``start_pos`` (a batch boundary).

        Reads headers only (in small chunks, so tiny batches share a read). Stops at a batch
        that would extend past ``end_pos`` or is malformed.
        """
        end = self._size if end_pos is None else min(end_pos, self._size)
        fd = self.file.fd
        pos = start_pos
        buf = b""
        buf_start = 0
        while pos + RECORD_BATCH_OVERHEAD <= end:
            off = pos - buf_start
            if off < 0 or off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = os.pread(fd, min(_HEADER_CHUNK, end - pos), pos)
                buf_start = pos
                off = 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    return
            if buf[off + MAGIC_OFFSET] != MAGIC_V2:
                return
            h = _make_header(_unpack_header(buf, off))
            size = h.batch_length + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > end:
                return
            yield pos, h
            pos += size

    def read_batch(self, position: int, size: int) -> bytes:
        return os.pread(self.file.fd, size, position)

    def _scan_tail(self) -> tuple[int, bool]:
        """(next offset, whether the batch headers parse exactly up to the end of the file),
        scanning from the last offset index entry."""
        # the last entry, read without mapping the index; a binary search only if it lies
        # past the end of the file
        _o, pos = self.offset_index.last_entry()
        if pos > self._size:
            _o, pos = self.offset_index.lookup_by_position(self._size)
        next_offset: int | None = None
        end = pos
        for p, h in self.iter_headers(pos):
            next_offset = h.next_offset
            end = p + h.size
        if next_offset is None:
            return self.base_offset, pos == 0 and self._size == 0
        return next_offset, end == self._size

    def check_loaded(self) -> bool:
        """Cheap consistency check of a segment loaded after a clean shutdown: indexes sane
        and the batch headers after the last index entry end exactly at the end of the file."""
        try:
            self.offset_index.sanity_check(self._size)
            self.time_index.sanity_check()
            self.txn_index.sanity_check()
        except Exception:
            return False
        next_offset, ok = self._scan_tail()
        if ok:
            self._next_offset = next_offset
        return ok

    def translate_offset(self, offset: int, starting_position: int = 0
                         ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        _o, pos = self.offset_index.lookup(offset)
        for p, h in self.iter_headers(max(pos, starting_position)):
            if h.last_offset >= offset:
                return p, h
        return None

    # -- reading -----------------------------------------------------------------------------
    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False, max_offset: int | None = None
             ) -> tuple[int, int, bool] | None:
        """Whole batches from the one containing ``start_offset``.

        Returns ``(position, size, reached_end)`` — ``reached_end`` when every batch to the end of
        the segment was taken — or None when no batch here has an offset >= start_offset.
        At most ``max_size`` bytes unless ``min_one_message`` and the first batch alone is
        bigger (then exactly that batch); nothing at or past ``max_position`` (bytes) or
        containing an offset >= ``max_offset`` (the high watermark, exclusive).
        """
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_pos, first = found
        limit = self._size if max_position is None else min(max_position, self._size)
        if max_offset is not None:
            bound = self.translate_offset(max_offset, start_pos)
            if bound is not None:
                limit = min(limit, bound[0])
        adjusted = max(max_size, first.size) if min_one_message else max_size
        budget_end = min(start_pos + adjusted, limit)
        end = start_pos + first.size
        if end > budget_end:
            return start_pos, 0, False
        # Batches between here and the last indexed batch starting before the budget end are
        # whole and within bounds: skip scanning their headers.
        if self.offset_index.entries:
            _o, indexed_pos = self.offset_index.lookup_by_position(budget_end)
            if indexed_pos > end:
                end = indexed_pos
        for p, h in self.iter_headers(end, limit):
            if p + h.size > budget_end:
                break
            end = p + h.size
        return start_pos, end - start_pos, end >= self._size

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``.

        The time index narrows the start; only batches whose max timestamp qualifies are
        decoded, and only until the record is found.
        """
        _ts, indexed_offset = self.time_index.lookup(timestamp)
        _o, pos = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for p, h in self.iter_headers(pos):
            if h.last_offset < starting_offset or h.max_timestamp < timestamp:
                continue
            for r in decode_records(self.read_batch(p, h.size), h):
                if r.timestamp >= timestamp and r.offset >= starting_offset:
                    epoch = h.partition_leader_epoch
                    return TimestampAndOffset(r.timestamp, r.offset, epoch if epoch >= 0 else None)
        return None

    def find_max_timestamp_record(self) -> TimestampAndOffset | None:
        """The first record carrying the segment's max timestamp (ListOffsets MAX_TIMESTAMP)."""
        max_ts, max_off = self.max_timestamp_and_offset_so_far
        if self._size == 0:
            return None
        _o, pos = self.offset_index.lookup(max_off)
        for p, h in self.iter_headers(pos):
            if h.max_timestamp != max_ts:
                continue
            for r in decode_records(self.read_batch(p, h.size), h):
                if r.timestamp == max_ts:
                    epoch = h.partition_leader_epoch
                    return TimestampAndOffset(r.timestamp, r.offset, epoch if epoch >= 0 else None)
        return None

    # -- recovery / truncation ---------------------------------------------------------------
    def _iter_batches_with_data(self) -> Iterator[tuple[int, memoryview, BatchHeader]]:
        """Yield ``(position, batch bytes, header)`` from the start, reading big chunks; stops at
        the first structurally invalid or incomplete batch."""
        fd = self.file.fd
        size = self._size
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= size:
            chunk = os.pread(fd, min(_DATA_CHUNK, size - pos), pos)
            n = len(chunk)
            if n < RECORD_BATCH_OVERHEAD:
                return
            mv = memoryview(chunk)
            off = 0
            bsize = 0
            h: BatchHeader | None = None
            while n - off >= RECORD_BATCH_OVERHEAD:
                if mv[off + MAGIC_OFFSET] != MAGIC_V2:
                    return
                h = _make_header(_unpack_header(mv, off))
                bsize = h.batch_length + LOG_OVERHEAD
                if bsize < RECORD_BATCH_OVERHEAD:
                    return
                if n - off < bsize:
                    break
                yield pos + off, mv[off:off + bsize], h
                off += bsize
            if off > 0:
                pos += off
                continue
            # The batch at ``pos`` is bigger than the chunk: read it alone.
            assert h is not None
            if pos + bsize > size:
                return
            whole = os.pread(fd, bsize, pos)
            if len(whole) < bsize:
                return
            yield pos, memoryview(whole), h
            pos += bsize

    def recover(self) -> int:
        """Re-validate every batch from the start, rebuild both indexes, truncate an invalid or
        torn tail. Returns the number of bytes truncated (Kafka's LogSegment.recover).

        The transaction index is emptied: its entries depend on producer state from earlier
        segments, so the Log rebuilds them while replaying producer state over this segment."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        valid = 0
        last_index_entry = 0
        max_ts, max_off = NO_TIMESTAMP, self.base_offset
        expected = self.base_offset
        self._rolling_based_timestamp = None
        interval = self.index_interval_bytes
        for pos, data, h in self._iter_batches_with_data():
            if pos != valid:        # defensive: batches must be contiguous
                break
            if crc32c(data[ATTRIBUTES_OFFSET:]) != h.crc:
                break
            if h.last_offset_delta < 0 or h.base_offset < expected \
                    or not self.can_convert_to_relative_offset(h.last_offset):
                break
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if valid - last_index_entry > interval:
                if not self.offset_index.is_full and not self.time_index.is_full:
                    self.offset_index.append(h.last_offset, valid)
                    self.time_index.maybe_append(max_ts, max_off)
                last_index_entry = valid
            if valid == 0:
                self._rolling_based_timestamp = h.max_timestamp
            valid += h.size
            expected = h.next_offset
        truncated = self._size - valid
        if truncated > 0:
            try:
                self.file.truncations += 1
                os.ftruncate(self.file.fd, valid)
            except OSError as e:
                raise KafkaStorageError(f"I/O error truncating {self.log_path}: {e}") from e
            self._size = valid
        self._max_ts_and_offset = (max_ts, max_off)
        self.offset_index.trim_to_valid_size()
        # A normally closed segment ends its time index with the max timestamp: do the same.
        self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._next_offset = expected
        self._bytes_since_last_index_entry = valid - last_index_entry
        return truncated

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the batch containing
        ``offset`` goes whole) and index entries from ``offset`` on. Returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # The truncated segment becomes the active one: give its indexes room again.
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        truncated = 0
        if mapping is not None:
            new_size = mapping[0]
            truncated = self._size - new_size
            try:
                self.file.truncations += 1
                os.ftruncate(self.file.fd, new_size)
            except OSError as e:
                raise KafkaStorageError(f"I/O error truncating {self.log_path}: {e}") from e
            self._size = new_size
        if self._size == 0:
            self.created_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = self._read_largest_timestamp()
        self._next_offset = None
        return truncated

    def _read_largest_timestamp(self) -> tuple[int, int]:
        last_ts, last_off = self.time_index.last_entry()
        _o, pos = self.offset_index.lookup(last_off)
        best = (last_ts, last_off)
        for _p, h in self.iter_headers(pos):
            if h.max_timestamp > best[0]:
                best = (h.max_timestamp, h.last_offset)
        return best

    # -- durability / lifecycle --------------------------------------------------------------
    def flush(self) -> None:
        try:
            os.fsync(self.file.fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"I/O error flushing {self.log_path}: {e}") from e

    def close(self) -> None:
        """Final time index entry, trim indexes, close the file (clean shutdown)."""
        if self._max_ts_and_offset is not None:
            ts, off = self._max_ts_and_offset
            self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.file.close()

    def close_handlers(self) -> None:
        """Release the index mappings; the ``.log`` descriptor closes when its last holder
        (this segment or a fetch result) lets go."""
        self.offset_index.close_handler()
        self.time_index.close_handler()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the segment's files from ``old_suffix`` to ``new_suffix`` (Kafka's
        changeFileSuffixes), the ``.log`` last: during a swap the ``.log`` rename is the step
        that counts at recovery, so it must not happen before the indexes are in place."""
        if self.suffix != old_suffix:
            raise ValueError(f"segment {self.base_offset} has suffix {self.suffix!r}, "
                             f"not {old_suffix!r}")
        self.offset_index.rename_to(offset_index_file(self.dir, self.base_offset, new_suffix))
        self.time_index.rename_to(time_index_file(self.dir, self.base_offset, new_suffix))
        self.txn_index.rename_to(txn_index_file(self.dir, self.base_offset, new_suffix))
        new_log = log_file(self.dir, self.base_offset, new_suffix)
        try:
            os.replace(self.log_path, new_log)
        except OSError as e:
            raise KafkaStorageError(f"I/O error renaming {self.log_path}: {e}") from e
        self.log_path = new_log
        self.file.path = new_log
        self.suffix = new_suffix

    def delete(self) -> None:
        """Remove the files: the ``.log`` first, so an interruption leaves only orphan indexes
        (removed at the next load) rather than a log without indexes being trusted."""
        self.close_handlers()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        self._size = 0

    def sanity_check(self) -> None:
        self.offset_index.sanity_check(self._size)
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    # -- transactions ------------------------------------------------------------------------
    def update_txn_index(self, producer_id: int, first_offset: int, last_offset: int,
                         is_aborted: bool, last_stable_offset: int) -> None:
        """Record a completed transaction whose marker lies in this segment: only aborts
        are indexed (Kafka's LogSegment.updateTxnIndex)."""
        if is_aborted:
            self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset,
                                             last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

