"""Log: the segments of one partition directory ``<topic>-<partition>`` (Kafka's UnifiedLog +
LocalLog, without tiered storage).

Appends validate every batch of the payload, assign offsets (rewriting baseOffset and the
partition leader epoch, outside the CRC), stamp LogAppendTime when configured, check the
idempotent producer's sequence, roll the active segment if needed *before* writing, and write
the whole payload with one gather write — all-or-nothing. Reads return file slices of whole
batches so the network layer can sendfile them or pread them.

Single writer: the Log is driven from one thread (the broker's event loop); reads use pread on
per-segment descriptors and keep no shared cursor, so a replica fetcher can read too.
"""
from __future__ import annotations

import bisect
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from kafkalite.config.log_config import LogConfig
from kafkalite.config.properties import parse_java_integer
from kafkalite.metrics.stats import LOG_FLUSH_STATS
from kafkalite.log.checkpoint import (PARTITION_METADATA_FILE, fsync_dir, fsync_file,
                                      read_partition_metadata, write_partition_metadata)
from kafkalite.log.append_policy import apply_compression_type, validate_records
from kafkalite.log.errors import (InconsistentTopicIdError, InvalidRecordError, KafkaStorageError,
                                  LogError,
                                  OffsetOutOfRangeError, OffsetsOutOfOrderError,
                                  RecordBatchTooLargeError, UnexpectedAppendOffsetError)
from kafkalite.log.producer_state import (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION,
                                          CompletedTxn, EndTxnMarker, ProducerStateManager)
from kafkalite.log.record_batch import (NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, BatchHeader,
                                        parse_end_txn_marker, parse_header, set_max_timestamp,
                                        split_batches, stamped_header, validate_batch)
from kafkalite.log.producer_snapshot import (CorruptSnapshotError, decode_snapshot, encode_snapshot,
                                             list_snapshots, read_snapshot_data, rename_if_same,
                                             rename_snapshot, snapshot_file, snapshot_names_among,
                                             write_snapshot_data)
from kafkalite.log.transaction_index import AbortedTxn
from kafkalite.log.log_offset_metadata import LogOffsetMetadata
from kafkalite.log.segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX,
                                   SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment,
                                   SegmentFile, TimestampAndOffset, log_file, offset_index_file,
                                   time_index_file, txn_index_file)

log = logging.getLogger(__name__)

__all__ = ["Log", "LogAppendInfo", "FetchDataInfo", "FileSlice", "TimestampAndOffset",
           "AbortedTxn", "parse_topic_partition", "ORIGIN_CLIENT", "ORIGIN_COORDINATOR",
           "ORIGIN_REPLICATION"]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``<topic>-<partition>``: topic names may contain '-' and '.', so split at the LAST '-'; the
    partition as Java's Integer.parseInt reads it (an optional '+', at most 2^31-1)."""
    topic, sep, part = dir_name.rpartition("-")
    # never negative: its '-' would be the separator. Up to 9 ASCII digits always fit an int
    # (the usual name, parsed without the regex: a start-up parses thousands)
    partition = int(part) if len(part) <= 9 and part.isascii() and part.isdigit() \
        else parse_java_integer(part)
    if not sep or not topic or partition is None:
        raise ValueError(f"Not a partition directory name: {dir_name!r}")
    return topic, partition


class LogAppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo). A named tuple: one is made per append, and a
    frozen dataclass's __init__ cost ~1 us of the ~45 us a small produce request takes."""
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int            # -1 unless LogAppendTime (a duplicate: the original's)
    log_start_offset: int
    num_batches: int
    valid_bytes: int
    duplicate: bool = False
    num_records: int = 0


class FileSlice(NamedTuple):
    fd: int
    position: int
    size: int


@dataclass(slots=True)
class FetchDataInfo:
    """Whole batches as they lie in the segment files.

    ``file_slices`` are ``(fd, position, size)`` for sendfile; :meth:`read_bytes` preads them.
    The result keeps the segment files open (``_files``) so a descriptor stays valid — and is
    never a reused number — for as long as the result is alive, even if the segment is deleted.
    """
    fetch_offset: int
    file_slices: list[FileSlice]
    size: int
    _files: tuple[SegmentFile, ...] = field(default=(), repr=False)
    # where ``fetch_offset`` lies (Kafka's fetchOffsetMetadata): a waiting fetch measures new
    # data from here
    fetch_offset_metadata: LogOffsetMetadata | None = None
    # each file's truncation count as the read located the slices: a send checks it did not move
    _truncations: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._truncations = tuple(f.truncations for f in self._files)

    @property
    def first_entry_incomplete(self) -> bool:
        return False    # only whole batches are returned

    def located_slices(self) -> list[tuple[FileSlice, SegmentFile, int]]:
        """Each slice with the file that keeps its descriptor open and that file's truncation
        count at read time (empty when the result holds no files)."""
        if len(self._files) != len(self.file_slices):
            return []
        return list(zip(self.file_slices, self._files, self._truncations))

    def read_bytes(self) -> bytes:
        """The bytes of every slice (short if a truncation raced the read)."""
        if not self.file_slices:
            return b""
        parts = [os.pread(fd, size, pos) for fd, pos, size in self.file_slices]
        return parts[0] if len(parts) == 1 else b"".join(parts)


@dataclass(slots=True)
class FlushJob:
    """What a flush of a log up to ``offset`` must make durable, taken on the writer's thread
    (:meth:`Log.prepare_flush`) so the fsyncs can run on another one (:meth:`Log.run_flush`);
    :meth:`Log.complete_flush` then advances the recovery point on the writer's thread."""
    dir: Path
    offset: int
    segments: list[LogSegment]
    snapshots: list[Path]
    checkpoint_syncs: list[Callable[[], None]]
    sync_dir: bool
    truncations: int
    errors: list[BaseException] = field(default_factory=list)


FlushScheduler = Callable[["Log", "int | None"], None]
# Called on an append to a log with a finite flush.ms: the LogManager flushes it once due.
FlushTimer = Callable[["Log"], None]
# flush.ms at or above this is Kafka's default Long.MAX_VALUE: no time-based flush.
FLUSH_MS_NEVER = 2**62
# Takes segments already renamed ``.deleted`` and removes them after the log's file.delete.delay.ms.
SegmentDeleter = Callable[["Log", "list[LogSegment]"], None]
# Why the log start offset moved: Kafka's LogStartOffsetIncrementReason, as its log line prints it.
LEADER_OFFSET_INCREMENTED = "leader offset increment"
SEGMENT_DELETION = "segment deletion"
CLIENT_RECORD_DELETION = "client delete records request"


def _as_byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    mv = records if isinstance(records, memoryview) else memoryview(records)
    if mv.ndim != 1 or mv.format not in ("B", "b", "c"):
        mv = mv.cast("B")
    elif mv.format != "B":
        mv = mv.cast("B")
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    return mv


def _with_max_timestamps(mv: memoryview, batches: list[tuple[int, BatchHeader]],
                         max_timestamps: list[int]) -> tuple[memoryview, list[tuple[int, BatchHeader]]]:
    """A copy of the payload whose batches carry their records' real maximum timestamp (CRC
    recomputed where it changed), with the batches' headers updated."""
    buf = bytearray(mv)
    out: list[tuple[int, BatchHeader]] = []
    for (pos, h), max_ts in zip(batches, max_timestamps):
        if max_ts != h.max_timestamp:
            set_max_timestamp(buf, pos, max_ts)
            h = parse_header(buf, pos)
        out.append((pos, h))
    return memoryview(bytes(buf)), out


def _base_offset_of(name: str) -> int | None:
    prefix = name[:20]
    if len(name) > 20 and name[20] == "." and prefix.isdigit():
        return int(prefix)
    return None


class Log:
    def __init__(self, dir: Path, config: LogConfig, segments: list[LogSegment], *,
                 log_start_offset: int, recovery_point: int, log_end_offset: int,
                 now_ms: int, has_partition_metadata: bool = True,
                 topic_partition: tuple[str, int] | None = None) -> None:
        self.dir = dir
        self._name = dir.name       # the partition's directory name, read on every append
        self.update_config(config)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._next_offset = log_end_offset
        self._last_flush_ms = now_ms
        self._closed = False
        # Bumped by every truncation: a cleaning round that began before one must not swap
        # its segments in (a truncated segment can roll again and look unchanged).
        self._truncations = 0
        self.producer_state = ProducerStateManager()
        # Offset of the newest producer-state snapshot written or loaded (-1: none).
        self._last_snapshot_offset = -1
        # The bytes of the snapshot at _last_snapshot_offset, when this log read or wrote them and
        # they are small (None otherwise): a close whose producer state is unchanged renames that
        # file without reading it again (10,000 logs: ~0.4 s of a shutdown's reads).
        self._last_snapshot_data: bytes | None = None
        # Files written without fsync (snapshots at roll, partition.metadata): the next flush
        # job syncs them.
        self._unsynced_files: list[Path] = []
        # fsyncs of other per-partition checkpoints (the leader-epoch file) that must be
        # durable before the recovery point passes what they describe.
        self._checkpoint_syncs: dict[str, Callable[[], None]] = {}
        # Set by the LogManager when an event loop runs the fsyncs in its thread pool: roll
        # and flush.messages then ask it for a flush instead of fsyncing on this thread.
        self.flush_scheduler: FlushScheduler | None = None
        # Set by the LogManager with its flusher: segments deleted by retention or truncation
        # are renamed ``.deleted`` and removed after file.delete.delay.ms (None: removed at once).
        self.segment_deleter: SegmentDeleter | None = None
        self.flush_timer: FlushTimer | None = None
        if topic_partition is not None:     # parsed by the caller (the log manager's load)
            self.topic, self.partition = topic_partition
        else:
            try:
                self.topic, self.partition = parse_topic_partition(dir.name)
            except ValueError:
                self.topic, self.partition = dir.name, -1
        self._topic_id: uuid.UUID | None = None
        try:
            if has_partition_metadata:
                self._topic_id = read_partition_metadata(dir)
        except (ValueError, OSError) as e:
            log.warning("%s: ignoring unreadable partition.metadata: %s", dir.name, e)

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, recovery_point: int = 0,
             log_start_offset: int = 0, had_clean_shutdown: bool = False,
             now_ms: int | None = None, topic_partition: tuple[str, int] | None = None) -> "Log":
        """Load (and if needed recover) the log in ``dir``, creating the directory if absent.

        Synchronous and possibly slow (recovery re-reads data): run it off the event loop.
        ``topic_partition``: ``dir``'s name already parsed (:func:`parse_topic_partition`).
        """
        now = _wall_ms() if now_ms is None else now_ms
        if not isinstance(dir, Path):
            dir = Path(dir)
        # The directory is listed once here and the names handed on (a start loads thousands
        # of logs; each listing and each mkdir of an existing directory is a system call).
        try:
            files = _files_in(dir)
        except FileNotFoundError:
            dir.mkdir(parents=True, exist_ok=True)
            files = set()
        swaps = _remove_temp_files_and_collect_swaps(dir, files)
        if swaps:
            _complete_swaps(dir, swaps, config, now)
            files = _files_in(dir)
        # After a crash the segments from the one holding the recovery point on are
        # re-validated and their indexes rebuilt: checking those indexes first is wasted work.
        segments, recovered = _load_segments(
            dir, config, now, None if had_clean_shutdown else recovery_point, files)
        if not had_clean_shutdown and segments:
            recovered |= _recover_from(segments, recovery_point)
        if not segments:
            segments = [_new_segment(dir, log_start_offset, config, now)]
        log_end_offset = segments[-1].next_offset()
        if log_end_offset < log_start_offset:
            # Everything we have lies below the checkpointed log start: start over there.
            log.warning("%s: log end offset %d below log start offset %d, deleting all segments",
                        dir.name, log_end_offset, log_start_offset)
            for s in segments:
                s.delete()
            segments = [_new_segment(dir, log_start_offset, config, now)]
            log_end_offset = log_start_offset
        segments[-1].resize_indexes(config.segment_index_bytes)
        for s in segments[:-1]:
            s.close_handlers()      # old segments map their indexes again only when read
        start = max(log_start_offset, segments[0].base_offset)
        rp = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
        self = cls(dir, config, segments, log_start_offset=start, recovery_point=rp,
                   log_end_offset=log_end_offset, now_ms=now,
                   has_partition_metadata=PARTITION_METADATA_FILE in files, topic_partition=topic_partition)
        # INFO for a log recovered after a crash, as Kafka logs it for every log; a clean
        # restart of thousands of logs would only repeat it
        level = logging.DEBUG if had_clean_shutdown else logging.INFO
        if log.isEnabledFor(level):     # its arguments cost more than the check
            log.log(level, "%sLoading producer state till offset %d with message format version 2",
                    _loader_ident(dir), log_end_offset)
        # segment loading and recovery touch no snapshot: ``files`` still lists them
        self._rebuild_producer_state(rebuild_txn_index=recovered, listed=files)
        return self

    def _rebuild_producer_state(self, rebuild_txn_index: set[int] | frozenset[int] = frozenset(),
                                listed: Iterable[str] | None = None) -> None:
        """Producer state at the log end offset: the newest valid snapshot at or below it (a
        corrupt one is deleted and the next older tried; snapshots above it are stale and
        deleted), then every batch from the snapshot's offset folded in (Kafka's
        rebuildProducerState). Without a snapshot the whole log is replayed.

        The segments whose base offset is in ``rebuild_txn_index`` were recovered (their
        transaction index emptied): the replay starts at or below them and indexes again the
        aborted transactions their markers complete, with the LSO the replay computes — the
        same one the original append recorded. ``listed``: the names in the log's directory,
        when the caller has just listed it."""
        end = self._next_offset
        # names, not Paths: a start-up rebuilds thousands of logs' state
        dir_name = os.fspath(self.dir)
        snapshots = snapshot_names_among(dir_name, _names_in(dir_name) if listed is None else listed)
        for off in [o for o in snapshots if o > end]:
            _unlink_missing_ok(os.path.join(dir_name, snapshots.pop(off)))
        limit = min(end, *rebuild_txn_index) if rebuild_txn_index else end
        psm = ProducerStateManager()
        start = -1
        start_data = b""
        for off in sorted((o for o in snapshots if o <= limit), reverse=True):
            try:
                start_data = read_snapshot_data(os.path.join(dir_name, snapshots[off]))
                entries = decode_snapshot(start_data)
            except CorruptSnapshotError as e:
                log.warning("%s: deleting unusable producer snapshot %s: %s", self.name,
                            snapshots[off], e)
                _unlink_missing_ok(os.path.join(dir_name, snapshots.pop(off)))
                continue
            for entry in entries:
                psm.load_producer_entry(entry)
            start = off
            break
        self._last_snapshot_offset = max(snapshots, default=-1)   # those left above: at most end
        self._last_snapshot_data = _kept_snapshot_data(start_data) \
            if start >= 0 and start == self._last_snapshot_offset else None
        psm.map_end_offset = max(start, 0)
        for i, seg in enumerate(self._segments):
            seg_end = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else end
            if seg_end <= start:
                continue
            headers, markers = _producer_batches(seg, end)
            if start > seg.base_offset:
                headers = [h for h in headers if h.base_offset >= start]
            completed = psm.apply_replicated(headers, markers)
            if seg.base_offset in rebuild_txn_index:
                _index_completed(seg, completed)
        psm.map_end_offset = end
        psm.on_log_start_offset_incremented(self._log_start_offset)
        self.producer_state = psm

    # -- producer-state snapshots ------------------------------------------------------------
    def take_producer_snapshot(self, *, sync: bool = True) -> bool:
        """Snapshot the producer state at the log end offset, unless one exists there
        (Kafka's takeSnapshot, at roll and at close). Returns whether one was written."""
        return self.take_producer_snapshot_at(self._next_offset, sync=sync)

    def take_producer_snapshot_at(self, offset: int, *, sync: bool = True,
                                  reuse_unchanged: bool = False) -> bool:
        """Without ``sync`` the file is fsynced by the next flush (before the recovery point
        passes ``offset``). ``reuse_unchanged`` (at close): when the newest snapshot lies inside
        the active segment (one taken at a close, not at a roll) and holds exactly the state
        at ``offset``, it is renamed to ``offset`` instead of writing a new file -- the same
        file under the same name; it no longer stands at its old offset, which a truncation
        below ``offset`` then reloads from an older snapshot."""
        if offset <= self._last_snapshot_offset:
            return False
        path = snapshot_file(self.dir, offset)
        data = encode_snapshot(self.producer_state.producers.values())
        last = self._last_snapshot_offset
        old = snapshot_file(self.dir, last)
        if reuse_unchanged and last > self._segments[-1].base_offset \
                and self._rename_if_same(old, path, data):
            if old in self._unsynced_files:
                self._unsynced_files.remove(old)
            if sync:
                fsync_file(path)
                fsync_dir(self.dir)
        else:
            write_snapshot_data(path, data, sync=sync)
        if not sync:
            self._unsynced_files.append(path)
        self._last_snapshot_offset = offset
        self._last_snapshot_data = _kept_snapshot_data(data)
        return True

    def _rename_if_same(self, old: Path, new: Path, data: bytes) -> bool:
        """:func:`rename_if_same`, without reading ``old`` when this log knows its bytes."""
        known = self._last_snapshot_data
        if known is None:
            return rename_if_same(old, new, data)
        if known != data:
            return False
        rename_snapshot(old, new)
        return True

    def producer_snapshot_offsets(self) -> list[int]:
        return list(list_snapshots(self.dir))

    def _delete_snapshots(self, predicate: Callable[[int], bool]) -> None:
        for off, path in list_snapshots(self.dir).items():
            if predicate(off):
                path.unlink(missing_ok=True)
        newest = max(list_snapshots(self.dir), default=-1)
        if newest != self._last_snapshot_offset:
            self._last_snapshot_data = None
        self._last_snapshot_offset = newest

    # -- properties --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def log_ident(self) -> str:
        """Kafka's UnifiedLog log prefix."""
        return f"[UnifiedLog partition={self.dir.name}, dir={self.dir.parent}] "

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self.update_config(config)

    def update_config(self, config: LogConfig) -> None:
        """New settings take effect from the next operation (index size: from the next roll)."""
        self._config = config
        policies = {p.strip() for p in config.cleanup_policy.split(",")}
        self._is_compacted = "compact" in policies
        self._is_delete = "delete" in policies
        timer: FlushTimer | None = getattr(self, "flush_timer", None)   # None in __init__
        if timer is not None and config.flush_ms < FLUSH_MS_NEVER \
                and self._next_offset > self._recovery_point:
            timer(self)     # unflushed data: due by the new flush.ms

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def truncations(self) -> int:
        return self._truncations

    @property
    def is_compacted(self) -> bool:
        return self._is_compacted

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id in ``partition.metadata`` (Kafka raises on a different one)."""
        if self._topic_id is not None:
            if self._topic_id != topic_id:
                raise InconsistentTopicIdError(
                    f"Tried to assign topic ID {topic_id} to log for {self.name}, but log "
                    f"already contained topic ID {self._topic_id}")
            return
        # fsynced by the next flush (Kafka flushes partition.metadata asynchronously too): a
        # crash before it loses only the id, which the next LeaderAndIsr assigns again.
        write_partition_metadata(self.dir, topic_id, sync=False)
        self._unsynced_files.append(self.dir / PARTITION_METADATA_FILE)
        self._topic_id = topic_id

    # -- appending ---------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int, *, origin: str = ORIGIN_CLIENT) -> LogAppendInfo:
        """Validate, assign offsets from the log end offset, and append.

        Raises the Kafka-mapped errors of :mod:`kafkalite.log.errors`; on any error nothing is
        written. A retried idempotent batch returns the original offsets with
        ``duplicate=True`` and appends nothing.
        """
        self._check_open()
        mv = _as_byte_view(records)
        batches, valid_bytes = split_batches(mv)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self._log_start_offset, 0, 0)
        config = self._config
        from_client = origin == ORIGIN_CLIENT
        markers: dict[int, EndTxnMarker] = {}
        for pos, h in batches:
            validate_batch(mv, pos, h, from_client=from_client,
                           max_message_bytes=config.max_message_bytes)
            if h.is_control:
                # Only the coordinators get here with a control batch (validate_batch refuses
                # clients'): it must be one well-formed marker of a transactional producer.
                if not h.is_transactional or not h.has_producer_id:
                    raise InvalidRecordError(
                        "A transaction marker must be a transactional batch with a producer id")
                markers[pos] = EndTxnMarker(*parse_end_txn_marker(mv[pos:pos + h.size], h))
        if from_client:
            # one walk over each batch's records: their structure, compacted-topic keys, the
            # timestamp window; then the records' real maximum timestamp in the header (Kafka's
            # LogValidator stamps it) and broker-side compression.type
            max_timestamps = validate_records(mv, batches, config, now_ms, self.name, self._is_compacted)
            if config.message_timestamp_type == "CreateTime" and \
                    any(m != h.max_timestamp for m, (_pos, h) in zip(max_timestamps, batches)):
                mv, batches = _with_max_timestamps(mv, batches, max_timestamps)
            recompressed = apply_compression_type(mv, batches, config, self.name)
            if recompressed is not None:
                mv, batches, valid_bytes = recompressed
        if valid_bytes > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {valid_bytes} bytes in append to partition {self.name}, "
                f"which exceeds the maximum configured segment size of {config.segment_bytes}.")

        stamp = now_ms if config.message_timestamp_type == "LogAppendTime" else None
        offset = self._next_offset
        assigned: list[BatchHeader] = []
        max_ts, offset_of_max_ts = NO_TIMESTAMP, -1
        for _pos, h in batches:
            if stamp is None:
                nh = h._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
            else:
                nh = h._replace(base_offset=offset, partition_leader_epoch=leader_epoch,
                                attributes=h.attributes | TIMESTAMP_TYPE_MASK, max_timestamp=stamp)
            if nh.max_timestamp > max_ts:
                max_ts, offset_of_max_ts = nh.max_timestamp, nh.last_offset
            offset = nh.last_offset + 1
            assigned.append(nh)
        first_offset, last_offset = assigned[0].base_offset, offset - 1
        markers_by_offset = {nh.base_offset: markers[pos]
                             for (pos, _h), nh in zip(batches, assigned) if pos in markers} \
            if markers else None

        updates, duplicate = self.producer_state.analyze(assigned, origin, markers_by_offset)
        if duplicate is not None:
            return LogAppendInfo(duplicate.first_offset, duplicate.last_offset, max_ts,
                                 offset_of_max_ts, duplicate.timestamp, self._log_start_offset,
                                 len(batches), valid_bytes, True,
                                 duplicate.last_offset - duplicate.first_offset + 1)

        segment = self._maybe_roll(valid_bytes, max_ts, last_offset, first_offset, now_ms)
        pieces: list[bytes | memoryview] = []
        infos: list[tuple[int, int, int]] = []
        for (pos, h), nh in zip(batches, assigned):
            size = h.size
            body = mv[pos:pos + size]
            head = stamped_header(h, body, nh.base_offset, leader_epoch, stamp)
            pieces.append(head)
            pieces.append(body[len(head):])
            infos.append((size, nh.last_offset, nh.max_timestamp))
        segment.append(pieces, infos)
        self._next_offset = last_offset + 1
        _index_completed(segment, self.producer_state.commit(updates, self._next_offset))
        self._maybe_flush(now_ms)
        return LogAppendInfo(first_offset, last_offset, max_ts, offset_of_max_ts,
                             stamp if stamp is not None else -1, self._log_start_offset,
                             len(batches), valid_bytes, False, last_offset - first_offset + 1)

    def append_as_follower(self, records: bytes | bytearray | memoryview, *,
                           now_ms: int | None = None) -> LogAppendInfo:
        """Append batches replicated from the leader: offsets, epochs and timestamps are kept
        as given (CRC still checked); offsets must increase and start at or after the log end
        offset."""
        self._check_open()
        now = _wall_ms() if now_ms is None else now_ms
        mv = _as_byte_view(records)
        batches, valid_bytes = split_batches(mv)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self._log_start_offset, 0, 0)
        max_ts, offset_of_max_ts = NO_TIMESTAMP, -1
        prev_last = -1
        infos: list[tuple[int, int, int]] = []
        headers: list[BatchHeader] = []
        markers: dict[int, EndTxnMarker] = {}
        for pos, h in batches:
            validate_batch(mv, pos, h, from_client=False)
            if h.is_control and h.has_producer_id and h.records_count > 0:
                markers[h.base_offset] = EndTxnMarker(*parse_end_txn_marker(mv[pos:pos + h.size], h))
            if h.last_offset_delta < 0 or h.base_offset <= prev_last:
                raise OffsetsOutOfOrderError(
                    f"Out of order offsets found in append to {self.name}: batch at "
                    f"{h.base_offset} after offset {prev_last}")
            prev_last = h.last_offset
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max_ts = h.max_timestamp, h.last_offset
            infos.append((h.size, h.last_offset, h.max_timestamp))
            headers.append(h)
        first_offset, last_offset = headers[0].base_offset, headers[-1].last_offset
        if first_offset < self._next_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.name}. First offset {first_offset} is less "
                f"than the next offset {self._next_offset}.", first_offset, last_offset)
        if valid_bytes > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {valid_bytes} bytes in append to partition {self.name}, "
                f"which exceeds the maximum configured segment size of {self._config.segment_bytes}.")
        updates, _dup = self.producer_state.analyze(headers, ORIGIN_REPLICATION, markers)
        segment = self._maybe_roll(valid_bytes, max_ts, last_offset, first_offset, now)
        segment.append([mv[:valid_bytes]], infos)
        self._next_offset = last_offset + 1
        _index_completed(segment, self.producer_state.commit(updates, self._next_offset))
        self._maybe_flush(now)
        return LogAppendInfo(first_offset, last_offset, max_ts, offset_of_max_ts, -1,
                             self._log_start_offset, len(batches), valid_bytes, False,
                             sum(h.last_offset_delta + 1 for h in headers))

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"Log {self.name} is closed")

    def _maybe_flush(self, now_ms: int) -> None:
        if self._next_offset - self._recovery_point >= self._config.flush_messages:
            if self.flush_scheduler is not None:
                self.flush_scheduler(self, None)    # fsync in the LogManager's thread pool
            else:
                self.flush(now_ms=now_ms)
        elif self.flush_timer is not None and self._config.flush_ms < FLUSH_MS_NEVER:
            self.flush_timer(self)      # flush.ms: flushed once unflushed data is that old

    # -- rolling -----------------------------------------------------------------------------
    def _maybe_roll(self, messages_size: int, max_timestamp: int, max_offset: int,
                    first_offset: int, now_ms: int) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(self._config, messages_size, max_timestamp, max_offset, now_ms):
            return self.roll(first_offset, now_ms=now_ms)
        return segment

    def roll(self, expected_next_offset: int | None = None, *, now_ms: int | None = None
             ) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset)."""
        self._check_open()
        started = time.monotonic()
        now = _wall_ms() if now_ms is None else now_ms
        new_offset = max(expected_next_offset or 0, self._next_offset)
        active = self._segments[-1]
        if active.base_offset == new_offset:
            if active.size == 0:
                # Nothing to roll away from: restart the empty segment's clock instead.
                active.created_ms = now
                return active
            raise LogError(f"Trying to roll a new segment for {self.name} with start offset "
                           f"{new_offset} equal to the active segment's, which has data")
        if new_offset < active.base_offset:
            raise LogError(f"Trying to roll a new segment for {self.name} with start offset "
                           f"{new_offset} below the active segment's {active.base_offset}")
        try:
            active.on_become_inactive()
            seg = _new_segment(self.dir, new_offset, self._config, now)
        except (OSError, KafkaStorageError) as e:
            # Out of descriptors or disk: the active segment stays active (indexes extended
            # again if possible; trimmed ones are valid, just full), the next append rolls again.
            try:
                active.resize_indexes(self._config.segment_index_bytes)
            except (OSError, KafkaStorageError):
                pass
            raise KafkaStorageError(f"Error while rolling {self.name} at offset {new_offset}: {e}") from e
        self._segments.append(seg)
        self._bases.append(new_offset)
        # The state as of the new segment's base: a restart replays from here, not from the
        # start of the log (Kafka snapshots at every roll).
        if self.producer_state.map_end_offset < new_offset:
            self.producer_state.map_end_offset = new_offset
        self.take_producer_snapshot_at(new_offset, sync=False)
        # Kafka's roll schedules a flush of everything below the new segment: it advances the
        # recovery point, so after a crash only the segments from here on are re-validated.
        if self.flush_scheduler is not None:
            self.flush_scheduler(self, new_offset)
        log.info("[LocalLog partition=%s, dir=%s] Rolled new log segment at offset %d in %d ms.", self.dir.name,
                 self.dir.parent, new_offset, (time.monotonic() - started) * 1000)
        return seg

    # -- reading -----------------------------------------------------------------------------
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = False, *, max_offset_metadata: LogOffsetMetadata | None = None
             ) -> FetchDataInfo:
        """Whole batches from the one containing ``fetch_offset``: none containing an offset at
        or past ``max_offset`` (exclusive: the high watermark), at most ``max_bytes`` unless
        ``min_one_message`` and the first batch alone is bigger (then that one batch).
        ``max_offset_metadata``: where ``max_offset`` lies, if known (the result's
        fetch_offset_metadata when reading at it)."""
        self._check_open()
        leo = self._next_offset
        if fetch_offset < self._log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {self.name}, but we "
                f"only have log segments in the range {self._log_start_offset} to {leo}.")
        if fetch_offset == leo:
            return FetchDataInfo(fetch_offset, [], 0, fetch_offset_metadata=self.log_end_offset_metadata)
        if max_offset is not None and fetch_offset >= max_offset:
            at_bound = max_offset_metadata is not None and max_offset_metadata.message_offset == fetch_offset \
                and not max_offset_metadata.message_offset_only
            return FetchDataInfo(fetch_offset, [], 0, fetch_offset_metadata=max_offset_metadata if at_bound
                                 else self.convert_to_offset_metadata(fetch_offset))
        segments = self._segments
        i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        slices: list[FileSlice] = []
        files: list[SegmentFile] = []
        total = 0
        remaining = max(0, max_bytes)
        first = True
        start_metadata: LogOffsetMetadata | None = None
        while i < len(segments):
            seg = segments[i]
            r = seg.read(fetch_offset, remaining, None, min_one_message and first, max_offset)
            i += 1
            if r is None:
                continue
            pos, size, reached_end = r
            if start_metadata is None:
                start_metadata = LogOffsetMetadata(fetch_offset, seg.base_offset, pos)
            if size > 0:
                slices.append(FileSlice(seg.fd, pos, size))
                files.append(seg.file)
                total += size
                remaining = max(0, remaining - size)
                first = False
            if not reached_end or remaining == 0:
                break
        # nothing at or after fetch_offset left (deleted meanwhile): Kafka answers at the log end
        return FetchDataInfo(fetch_offset, slices, total, tuple(files),
                             start_metadata if start_metadata is not None else self.log_end_offset_metadata)

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments[-1]
        return LogOffsetMetadata(self._next_offset, active.base_offset, active.size)

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` lies: the position of the batch holding it, found from the offset
        index and the batch headers after its entry, never by reading records (Kafka's
        convertToOffsetMetadataOrThrow). Raises OffsetOutOfRangeError outside the log."""
        self._check_open()
        if offset < self._log_start_offset or offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.name}, but we "
                f"only have log segments in the range {self._log_start_offset} to {self._next_offset}.")
        if offset == self._next_offset:
            return self.log_end_offset_metadata
        segments = self._segments
        for i in range(max(0, bisect.bisect_right(self._bases, offset) - 1), len(segments)):
            found = segments[i].translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segments[i].base_offset, found[0])
        return self.log_end_offset_metadata

    def iter_batches(self, buffer_size: int) -> Iterator[tuple[memoryview, BatchHeader]]:
        """Every batch from the log start to the log end offset as (bytes, header), read
        ``buffer_size`` bytes (or one larger batch) at a time: what a coordinator replays when
        it loads its partition. The first batch may begin before the log start offset (reads
        return whole batches). Stops early if a truncation races the read rather than spin.
        Raises LogError."""
        offset = self._log_start_offset
        end = self._next_offset
        while offset < end:
            data = memoryview(self.read(offset, buffer_size, None, True).read_bytes())
            batches, _valid = split_batches(data)
            start = offset
            for pos, header in batches:
                yield data[pos:pos + header.size], header
                offset = max(offset, header.next_offset)
            if offset == start:
                break

    def iter_batch_headers(self, start_offset: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches from the one containing ``start_offset`` (default: all)."""
        start = self._log_start_offset if start_offset is None else start_offset
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in list(self._segments[i:]):
            found = seg.translate_offset(start)
            if found is None:
                continue
            for _p, h in seg.iter_headers(found[0]):
                yield h

    # -- transactions ------------------------------------------------------------------------
    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest ongoing (undecided) transaction, None when none."""
        return self.producer_state.first_undecided_offset

    def last_stable_offset(self, high_watermark: int) -> int:
        """The last stable offset under ``high_watermark``: read_committed consumers see
        nothing at or past it. A completed transaction whose marker is not below the high
        watermark yet still holds it back (Kafka's unreplicated transactions)."""
        psm = self.producer_state
        psm.on_high_watermark_updated(high_watermark)
        fuo = psm.first_unstable_offset
        return high_watermark if fuo is None else min(fuo, high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``
        (Kafka's collectAbortedTransactions): from the segment holding ``start_offset`` on,
        until an index entry's LSO reaches the upper bound."""
        segments, bases = self._segments, self._bases
        i = max(0, bisect.bisect_right(bases, start_offset) - 1)
        out: list[AbortedTxn] = []
        for seg in segments[i:]:
            found = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(found.aborted_transactions)
            if found.is_complete:
                break
        return out

    # -- timestamps --------------------------------------------------------------------------
    def find_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """First record (at or after the log start offset) with timestamp >= target."""
        for seg in list(self._segments):
            if seg.size == 0 or seg.largest_timestamp() < target_timestamp:
                continue
            found = seg.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
            if found is not None:
                return found
        return None

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= target (ListOffsets)."""
        found = self.find_offset_by_timestamp(target_timestamp)
        return None if found is None else (found.timestamp, found.offset)

    def find_max_timestamp(self) -> TimestampAndOffset | None:
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.size == 0:
                continue
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        return None if best is None else best.find_max_timestamp_record()

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(timestamp, offset) of the record with the largest timestamp — the first such record
        — for ListOffsets MAX_TIMESTAMP; (-1, -1) for an empty log."""
        found = self.find_max_timestamp()
        return (-1, -1) if found is None else (found.timestamp, found.offset)

    # -- durability --------------------------------------------------------------------------
    def flush(self, up_to_offset: int | None = None, *, now_ms: int | None = None) -> None:
        """fsync the segments holding [recovery point, up_to_offset) and advance the recovery
        point (default: everything), on this thread."""
        job = self.prepare_flush(up_to_offset)
        if job is None:
            return
        self.run_flush(job)
        if job.errors:
            raise job.errors[0]
        self.complete_flush(job, now_ms=now_ms)

    def set_checkpoint_sync(self, name: str, sync: Callable[[], None]) -> None:
        """``sync`` (of the checkpoint file ``name``) runs in every flush job before the
        recovery point advances; a later one for the same file replaces it."""
        self._checkpoint_syncs[name] = sync

    def prepare_flush(self, up_to_offset: int | None = None) -> FlushJob | None:
        """The flush up to ``up_to_offset`` (default: the log end), or None when nothing is
        left to make durable. On the writer's thread."""
        self._check_open()
        offset = self._next_offset if up_to_offset is None else min(up_to_offset, self._next_offset)
        old = self._recovery_point
        if offset <= old and not self._unsynced_files:
            return None
        segments: list[LogSegment] = []
        new_files = False
        if offset > old:
            i = max(0, bisect.bisect_right(self._bases, old) - 1)
            for seg in self._segments[i:]:
                if seg.base_offset >= offset:
                    break
                segments.append(seg)
                new_files = new_files or seg.base_offset >= old
        snapshots, self._unsynced_files = self._unsynced_files, []
        return FlushJob(self.dir, offset, segments, snapshots, list(self._checkpoint_syncs.values()),
                        new_files or bool(snapshots), self._truncations)

    @staticmethod
    @LOG_FLUSH_STATS.timed   # Kafka's LogFlushRateAndTimeMs: one sample per log flush
    def run_flush(job: FlushJob) -> None:
        """The fsyncs of ``job``, on any thread (errors are collected in ``job.errors``: a
        segment deleted meanwhile by retention or truncation is not a failure of the log)."""
        for seg in job.segments:
            try:
                seg.flush()
            except Exception as e:
                job.errors.append(e)
        for path in job.snapshots:
            try:
                fsync_file(path)
            except FileNotFoundError:
                pass            # deleted since (truncation, retention): nothing to keep
            except OSError as e:
                job.errors.append(e)
        for sync in job.checkpoint_syncs:
            try:
                sync()
            except Exception as e:
                job.errors.append(e)
        if job.sync_dir:
            try:
                fsync_dir(job.dir)   # new segment and snapshot files must survive too
            except OSError as e:
                job.errors.append(e)

    def complete_flush(self, job: FlushJob, *, now_ms: int | None = None) -> bool:
        """Advance the recovery point to the job's offset (on the writer's thread). Not after a
        failed job, nor when the log was truncated meanwhile (the data it synced may be
        gone). Returns whether the recovery point moved."""
        self._last_flush_ms = _wall_ms() if now_ms is None else now_ms
        if job.errors and not self._closed:
            # the files this job was to sync stay owed to the next flush, which must sync them
            # before the recovery point passes what they describe
            self._unsynced_files[:0] = [p for p in job.snapshots if p not in self._unsynced_files]
        if self._closed or job.errors or job.truncations != self._truncations:
            return False
        if self._recovery_point < job.offset <= self._next_offset:
            self._recovery_point = job.offset
            return True
        return False

    def close(self, *, sync: bool = True) -> None:
        """Flush, write the final time index entries, trim the indexes, close the files.

        ``sync=False`` (a LogManager shutdown) writes everything without fsync and counts it
        flushed: the caller makes the whole file system durable with one syncfs before it
        writes the recovery-point checkpoint."""
        if self._closed:
            return
        if sync:
            self.flush()
        self.take_producer_snapshot_at(self._next_offset, sync=sync, reuse_unchanged=True)
        for seg in self._segments:
            seg.close()
        if not sync:
            self._recovery_point = self._next_offset
            self._unsynced_files = []
        self._closed = True

    def close_handlers(self) -> None:
        """Release mappings without flushing (the log is being deleted)."""
        if self._closed:
            return
        for seg in self._segments:
            seg.close_handlers()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    # -- truncation --------------------------------------------------------------------------
    def truncate_to(self, target_offset: int, *, now_ms: int | None = None) -> bool:
        """Remove everything from ``target_offset`` on (the batch containing it goes whole; the
        log end offset becomes ``target_offset`` as in Kafka). Returns whether anything changed."""
        self._check_open()
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset")
        if target_offset >= self._next_offset:
            return False
        now = _wall_ms() if now_ms is None else now_ms
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset, now_ms=now)
            return True
        self._truncations += 1
        keep = [s for s in self._segments if s.base_offset <= target_offset]
        self._remove_and_delete_segments(self._segments[len(keep):])
        self._segments = keep
        self._bases = [s.base_offset for s in keep]
        keep[-1].truncate_to(target_offset, now)
        self._next_offset = target_offset
        self._log_start_offset = min(target_offset, self._log_start_offset)
        self._recovery_point = min(self._recovery_point, target_offset)
        # Snapshots past the new end describe data that is gone.
        self._delete_snapshots(lambda off: off > target_offset)
        self._rebuild_producer_state()
        return True

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        self._check_open()
        now = _wall_ms() if now_ms is None else now_ms
        self._truncations += 1
        self._remove_and_delete_segments(self._segments)
        self._segments = [_new_segment(self.dir, new_offset, self._config, now)]
        self._bases = [new_offset]
        self._next_offset = new_offset
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self._delete_snapshots(lambda _off: True)

    # -- compaction --------------------------------------------------------------------------
    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment], *,
                         expected_truncations: int | None = None,
                         on_phase: Callable[[str], None] | None = None) -> bool:
        """Swap a cleaned segment (files ``<base>.*.cleaned``, flushed) in for ``old_segments``
        (Kafka's LocalLog.replaceSegments), so that a crash at any point leaves either the old
        segments or the new one, never a mix:

        1. ``.cleaned`` → ``.swap``, the ``.log`` last. From here on a restart completes the
           swap (``Log.open`` drops the segments in the swap's offset range, renames it);
           before it, a restart discards the ``.cleaned`` files.
        2. The segment list changes.
        3. The old segments' files → ``.deleted`` (a restart just removes those).
        4. ``.swap`` → final names; 5. the old segments, readable under their ``.deleted``
           names meanwhile, go to the log manager's segment deleter, which removes them after
           the log's file.delete.delay.ms (Kafka's asyncDelete), so a reader in another thread
           that still holds one finishes its read; without a deleter (no running log manager)
           they are deleted at once.

        ``on_phase`` is called at each boundary ("cleaned", "swap", "deleted", "final") — the
        crash tests stop there. Returns False, changing nothing, when ``old_segments`` are no
        longer a run of this log's non-active segments (retention got there first), the log is
        closed, or it was truncated since ``expected_truncations`` was read; the caller then
        deletes the cleaned files.
        """
        if not old_segments or new_segment.base_offset != old_segments[0].base_offset:
            raise ValueError("a cleaned segment replaces a run of segments starting at its base")
        if self._closed or (expected_truncations is not None
                            and expected_truncations != self._truncations):
            return False
        segs = self._segments
        first = next((k for k, seg in enumerate(segs) if seg is old_segments[0]), None)
        if first is None:
            return False
        end = first + len(old_segments)
        if end >= len(segs):        # never the active segment
            return False
        if any(segs[first + k] is not old for k, old in enumerate(old_segments)):
            return False
        phase = on_phase or (lambda _p: None)
        phase("cleaned")
        new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        phase("swap")
        # New list objects, bases first: a reader in another thread takes ``_segments`` and
        # then ``_bases``, so it never pairs the new (shorter) list with the old bases; the
        # old list with the new bases only makes it start at an earlier segment.
        new_segs = segs[:first] + [new_segment] + segs[end:]
        self._bases = [seg.base_offset for seg in new_segs]
        self._segments = new_segs
        for old in old_segments:
            old.change_file_suffixes("", DELETED_SUFFIX)
        fsync_dir(self.dir)
        phase("deleted")
        new_segment.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        phase("final")
        if self.segment_deleter is not None:
            self.segment_deleter(self, list(old_segments))
        else:
            for old in old_segments:
                old.delete()
        return True

    # -- log start offset and retention ------------------------------------------------------
    def maybe_increment_log_start_offset(self, new_log_start_offset: int,
                                         high_watermark: int | None = None,
                                         reason: str = CLIENT_RECORD_DELETION) -> bool:
        """Move the log start offset forward (DeleteRecords, a follower following its leader,
        segment deletion).
        It may not pass the high watermark (default: the log end offset). Returns whether it
        moved; logs the move with its reason, as Kafka's UnifiedLog."""
        self._check_open()
        hw = self._next_offset if high_watermark is None else high_watermark
        if new_log_start_offset > hw:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.name} since it is larger than the high watermark {hw}")
        if new_log_start_offset > self._log_start_offset:
            self._log_start_offset = new_log_start_offset
            if self._recovery_point < new_log_start_offset:
                self._recovery_point = new_log_start_offset
            log.info("%sIncremented log start offset to %d due to %s", self.log_ident, new_log_start_offset, reason)
            self._on_log_start_offset_incremented()
            return True
        return False

    def delete_old_segments(self, now_ms: int, upper_bound_offset: int | None = None) -> int:
        """Kafka's deleteOldSegments: segments below the log start offset, then (with
        ``cleanup.policy`` delete) by retention.bytes and retention.ms. Only segments wholly
        below ``upper_bound_offset`` (the high watermark; default the log end offset) go.
        Returns how many were deleted."""
        n = self.delete_log_start_offset_breached_segments(upper_bound_offset, now_ms=now_ms)
        if self._is_delete:
            n += self.delete_retention_size_breached_segments(upper_bound_offset, now_ms=now_ms)
            n += self.delete_retention_ms_breached_segments(now_ms, upper_bound_offset)
        return n

    def delete_log_start_offset_breached_segments(self, upper_bound_offset: int | None = None,
                                                  *, now_ms: int | None = None) -> int:
        start = self._log_start_offset

        def reason(segments: list[LogSegment]) -> None:
            log.info("%sDeleting segments due to log start offset %d breach: %s", self.log_ident, start,
                     ",".join(map(repr, segments)))
        return self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= start,
            upper_bound_offset, now_ms, reason)

    def delete_retention_ms_breached_segments(self, now_ms: int,
                                              upper_bound_offset: int | None = None) -> int:
        retention_ms = self._config.retention_ms
        if retention_ms < 0:
            return 0
        def reason(segments: list[LogSegment]) -> None:
            for seg in segments:
                basis = ("the largest record timestamp in the segment" if seg.max_timestamp_so_far >= 0
                         else "the last modified time of the segment")
                log.info("%sDeleting segment %r due to log retention time %dms breach based on %s",
                         self.log_ident, seg, retention_ms, basis)
        return self._delete_old_segments(
            lambda seg, nxt: now_ms - seg.largest_timestamp() > retention_ms,
            upper_bound_offset, now_ms, reason)

    def delete_retention_size_breached_segments(self, upper_bound_offset: int | None = None,
                                                *, now_ms: int | None = None) -> int:
        retention_bytes = self._config.retention_bytes
        size = self.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        diff = size - retention_bytes

        def should_delete(seg: LogSegment, _nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        def reason(segments: list[LogSegment]) -> None:
            remaining = size
            for seg in segments:
                remaining -= seg.size
                log.info("%sDeleting segment %r due to log retention size %d breach. Log size after deletion "
                         "will be %d.", self.log_ident, seg, retention_bytes, remaining)
        return self._delete_old_segments(should_delete, upper_bound_offset, now_ms, reason)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool],
                             upper_bound_offset: int | None, now_ms: int | None,
                             reason: Callable[[list[LogSegment]], None] | None = None) -> int:
        self._check_open()
        hw = self._next_offset if upper_bound_offset is None else upper_bound_offset
        deletable: list[LogSegment] = []
        segments = self._segments
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._next_offset
            if nxt is None and seg.size == 0:
                break   # never the empty active segment
            # Never past the high watermark, so the log start offset cannot exceed it.
            if not (hw >= upper and predicate(seg, nxt)):
                break
            deletable.append(seg)
        if not deletable:
            return 0
        count = len(deletable)
        if count == len(segments):
            # A log always keeps one segment: roll a fresh one first.
            new = self.roll(now_ms=now_ms)
            if deletable[-1].base_offset == new.base_offset:
                deletable = deletable[:-1]
        if reason is not None:
            reason(deletable)
        gone = {id(s) for s in deletable}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        self._remove_and_delete_segments(deletable)
        # as Kafka's deleteSegments: the new first segment's base, never past the log end
        self.maybe_increment_log_start_offset(self._segments[0].base_offset, reason=SEGMENT_DELETION)
        return count

    def _remove_and_delete_segments(self, segments: Sequence[LogSegment]) -> None:
        """Kafka's LocalLog.deleteSegmentFiles with asyncDelete: the files of segments just
        taken out of the log are renamed ``.deleted`` at once (a restart removes such files)
        and deleted after ``file.delete.delay.ms``, so a reader that located one of them just
        before (an index lookup, a fetch being sent) still finds its files."""
        if self.segment_deleter is None:
            for s in segments:
                s.delete()
            return
        renamed: list[LogSegment] = []
        for s in segments:
            s.close_handlers()
            if s.suffix != DELETED_SUFFIX:
                try:
                    s.change_file_suffixes(s.suffix, DELETED_SUFFIX)
                except (KafkaStorageError, OSError) as e:
                    log.warning("%s: deleting segment %d now, renaming it failed: %s",
                                self.name, s.base_offset, e)
                    s.delete()
                    continue
            renamed.append(s)
        if renamed:
            self.segment_deleter(self, renamed)

    def _on_log_start_offset_incremented(self) -> None:
        start = self._log_start_offset
        self.producer_state.on_log_start_offset_incremented(start)
        # Snapshots below the log start are not needed to rebuild the state — but the newest
        # is kept whatever its offset: a restart starts from it.
        offsets = list(list_snapshots(self.dir))
        newest = offsets[-1] if offsets else None
        self._delete_snapshots(lambda off: off < start and off != newest)


# -- loading helpers --------------------------------------------------------------------------

# A log keeps its newest snapshot's bytes up to this size: a state of ~20 producers; an empty one
# is 10 bytes (10,000 idle logs: ~0.5 MB).
_KEPT_SNAPSHOT_BYTES = 1024


def _kept_snapshot_data(data: bytes) -> bytes | None:
    return data if len(data) <= _KEPT_SNAPSHOT_BYTES else None


def _producer_batches(seg: LogSegment, end: int
                      ) -> tuple[list[BatchHeader], dict[int, EndTxnMarker]]:
    """The headers of ``seg``'s batches below ``end``, and the markers of its control batches
    (read from the file: a marker batch is one small record). A marker that does not parse is
    left out with a warning (the replay then skips that batch)."""
    headers: list[BatchHeader] = []
    markers: dict[int, EndTxnMarker] = {}
    for pos, h in seg.iter_headers():
        if h.base_offset >= end:
            break
        if h.is_control and h.has_producer_id and h.records_count > 0:
            try:
                markers[h.base_offset] = EndTxnMarker(
                    *parse_end_txn_marker(seg.read_batch(pos, h.size), h))
            except LogError as e:
                log.warning("%s: skipping unreadable transaction marker at offset %d: %s",
                            seg.dir.name, h.base_offset, e)
                continue
        headers.append(h)
    return headers, markers


def _index_completed(segment: LogSegment, completed: list[tuple[CompletedTxn, int]]) -> None:
    """Aborted transactions completed by markers in ``segment`` go to its transaction index
    with the LSO at their completion (Kafka's LogSegment.updateTxnIndex)."""
    for c, lso in completed:
        segment.update_txn_index(c.producer_id, c.first_offset, c.last_offset, c.is_aborted, lso)


def _new_segment(dir: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    """A fresh segment; leftovers of an earlier segment at this offset are removed first."""
    for path in (log_file(dir, base_offset), offset_index_file(dir, base_offset),
                 time_index_file(dir, base_offset), txn_index_file(dir, base_offset)):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    seg = LogSegment.open(dir, base_offset, config, now_ms=now_ms)
    try:
        seg.create_index_files()
    except BaseException:
        seg.close_handlers()
        seg.file.close()
        raise
    return seg


def _names_in(dir: str) -> list[str]:
    try:
        return os.listdir(dir)
    except FileNotFoundError:
        return []


def _unlink_missing_ok(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _files_in(dir: Path) -> set[str]:
    """The names of the files in ``dir`` (types from the directory itself: no stat per file)."""
    with os.scandir(dir) as it:
        return {e.name for e in it if e.is_file()}


def _remove_temp_files_and_collect_swaps(dir: Path, files: set[str]) -> list[Path]:
    """Kafka's LogLoader.removeTempFilesAndCollectSwapFiles: delete ``.deleted`` files and
    ``.cleaned`` files (an interrupted cleaning), and ``.swap`` files at or above the lowest
    cleaned offset (an incomplete split); return the remaining log swap files. ``files``: the
    names of the files in ``dir``; those deleted are taken out of it."""
    min_cleaned = None
    cleaned: list[Path] = []
    swaps: list[Path] = []
    names = [name for name in files if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX))]
    for name in names:
        f = dir / name
        if name.endswith(DELETED_SUFFIX):
            files.discard(name)
            f.unlink(missing_ok=True)
        elif name.endswith(CLEANED_SUFFIX):
            base = _base_offset_of(name)
            if base is not None:
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            cleaned.append(f)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(f)
    valid: list[Path] = []
    for f in swaps:
        base = _base_offset_of(f.name)
        if base is not None and (min_cleaned is None or base < min_cleaned) \
                and f.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            valid.append(f)
        else:
            # above the lowest cleaned offset, or an index swap file (indexes are rebuilt)
            files.discard(f.name)
            f.unlink(missing_ok=True)
    for f in cleaned:
        files.discard(f.name)
        f.unlink(missing_ok=True)
    return valid


def _complete_swaps(dir: Path, swaps: list[Path], config: LogConfig, now_ms: int) -> None:
    """Finish an interrupted swap (compaction): the swap segment replaces every segment in its
    offset range, then loses its ``.swap`` suffix."""
    if not swaps:
        return
    lo, hi = None, None
    bases: set[int] = set()
    for f in swaps:
        base = _base_offset_of(f.name)
        assert base is not None
        seg = LogSegment.open(dir, base, config, now_ms=now_ms, suffix=SWAP_SUFFIX)
        try:
            nxt = seg.next_offset()
        finally:
            seg.close_handlers()
            seg.offset_index.delete()
            seg.time_index.delete()
            seg.file.close()
        bases.add(base)
        lo = base if lo is None else min(lo, base)
        hi = nxt if hi is None else max(hi, nxt)
    for f in dir.iterdir():
        name = f.name
        base = _base_offset_of(name)
        if base is None or name.endswith(SWAP_SUFFIX) or not f.is_file():
            continue
        # The files a swap replaces: those in its offset range, and those at its own base
        # even when the swap holds no batch at all (its range is then empty).
        in_range = base in bases or (lo is not None and hi is not None and lo <= base < hi)
        if in_range and (
                name.endswith(LOG_SUFFIX) or name.endswith(INDEX_SUFFIX)
                or name.endswith(TIME_INDEX_SUFFIX) or name.endswith(TXN_INDEX_SUFFIX)):
            f.unlink(missing_ok=True)
    for f in swaps:
        os.replace(f, f.with_name(f.name[:-len(SWAP_SUFFIX)]))


def _load_segments(dir: Path, config: LogConfig, now_ms: int, recovery_point: int | None,
                   names: set[str]) -> tuple[list[LogSegment], set[int]]:
    """Open every ``.log`` file; drop orphan index files; rebuild missing indexes, and after a
    clean shutdown (no ``recovery_point``) those of the active segment when the last entry of
    an index or the batch headers after it do not match its file — after a crash, of the
    segments below the one holding ``recovery_point`` only (the others are recovered next).
    No index is mapped or read whole (Kafka's LogLoader: lazy indexes; their entries counted
    from the size of the trimmed files). ``names``: the files in ``dir`` (orphans deleted are
    taken out). Returns the segments and the base offsets of those recovered."""
    # (base offset, suffix) of every segment file; names are parsed once (thousands of logs)
    parsed = [(base, name[20:], name) for name in names if (base := _base_offset_of(name)) is not None]
    log_bases = {base for base, suffix, _name in parsed if suffix == LOG_SUFFIX}
    for base, suffix, name in parsed:
        if suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and base not in log_bases:
            log.info("%s: deleting orphaned index file %s", dir.name, name)
            names.discard(name)
            (dir / name).unlink(missing_ok=True)
    segments: list[LogSegment] = []
    recovered: set[int] = set()
    bases = sorted(log_bases)
    check_below: int | None = None
    if recovery_point is not None and bases:
        check_below = bases[max(0, bisect.bisect_right(bases, recovery_point) - 1)]
    try:
        for base in bases:
            prefix = f"{base:020d}"
            indexes_present = prefix + INDEX_SUFFIX in names and prefix + TIME_INDEX_SUFFIX in names
            has_txn_index = prefix + TXN_INDEX_SUFFIX in names
            seg = LogSegment.open(dir, base, config, now_ms=now_ms, txn_index_absent=not has_txn_index)
            segments.append(seg)
            if check_below is not None and base >= check_below:
                continue
            if not indexes_present:
                log.warning("%sCould not find offset index file corresponding to log file %s, "
                            "recovering segment and rebuilding index files...", _loader_ident(dir), seg.log_path)
            elif (base == bases[-1] and not seg.check_loaded()) or (
                    base != bases[-1] and has_txn_index and not _txn_index_sane(seg)):
                log.warning("%sFound a corrupted index file corresponding to log file %s, recovering "
                            "segment and rebuilding index files...", _loader_ident(dir), seg.log_path)
            else:
                continue
            _recover_segment(seg)
            recovered.add(base)
    except BaseException:
        for s in segments:
            s.close_handlers()
            s.file.close()
        raise
    return segments, recovered


def _txn_index_sane(seg: LogSegment) -> bool:
    """Kafka's load-time sanityCheck of an inactive segment: its transaction index only."""
    try:
        seg.txn_index.sanity_check()
    except Exception:
        return False
    return True


def _loader_ident(dir: Path) -> str:
    """Kafka's LogLoader log prefix."""
    return f"[LogLoader partition={dir.name}, dir={dir.parent}] "


def _recover_segment(seg: LogSegment) -> int:
    """seg.recover(), saying what it truncated (Kafka's LogSegment.recover lines, both at WARN
    here: the bytes are gone). Returns the bytes truncated."""
    truncated = seg.recover()
    if truncated > 0:
        ident = _loader_ident(seg.dir)
        log.warning("%sFound invalid messages in log segment %s at byte offset %d.", ident, seg.log_path, seg.size)
        log.warning("%sTruncated %d invalid bytes at the end of segment %s during recovery", ident, truncated,
                    seg.log_path)
    return truncated


def _recover_from(segments: list[LogSegment], recovery_point: int) -> set[int]:
    """After an unclean shutdown: re-validate every segment from the one holding the recovery
    point. A segment with an invalid tail is truncated and every later segment deleted.
    Returns the base offsets of the segments recovered."""
    bases = [s.base_offset for s in segments]
    first = i = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    recovered: set[int] = set()
    ident = _loader_ident(segments[0].dir)
    while i < len(segments):
        seg = segments[i]
        log.info("%sRecovering unflushed segment %d. %d/%d recovered for %s.", ident, seg.base_offset,
                 i - first, len(segments) - first, seg.dir.name)
        truncated = _recover_segment(seg)
        recovered.add(seg.base_offset)
        if truncated > 0:
            log.warning("%sCorruption found in segment %d, truncating to offset %d", ident, seg.base_offset,
                        seg.next_offset())
            if i + 1 < len(segments):
                log.info("%sDeleting segments as part of log recovery: %s", ident,
                         ",".join(map(repr, segments[i + 1:])))
            for later in segments[i + 1:]:
                later.delete()
            del segments[i + 1:]
            break
        i += 1
    return recovered
