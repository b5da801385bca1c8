"""Log compaction: the work of one cleaning round (Kafka's Cleaner), on segments that no longer
change.

A round over a log with a clean section ``[log start, first dirty)`` and a dirty section
``[first dirty, first uncleanable)`` (both below the active segment):

1. :func:`build_offset_map` reads the dirty section and records each key's last offset in a
   :class:`~kafkalite.log.offset_map.SkimpyOffsetMap`, stopping when the map reaches its load
   factor; ``map.latest_offset + 1`` is where this round ends.
2. :func:`group_segments_by_size` groups the segments below that end so no group outgrows one
   segment (log bytes and index bytes), and :func:`clean_group` rewrites each group into one
   ``.cleaned`` segment: a record survives if no later record has its key, a tombstone only
   until its batch's delete horizon. The swap itself (``.cleaned`` → ``.swap`` → final) is
   :meth:`kafkalite.log.log.Log.replace_segments`, run by the caller on the event loop.

This is the one place the broker looks inside record batches besides the compacted-topic key
check: :func:`filter_batch` (Kafka's ``MemoryRecords.filterTo`` with the cleaner's filter) keeps
a batch byte-for-byte when nothing changes, rebuilds it from the surviving records otherwise
(re-compressed with the batch's own codec), and drops it when nothing survives. Offsets never
change: a rebuilt batch keeps its base offset and its last offset delta, so later offsets of
the partition stay where they were and consumers read across the gaps.

Transactions (Kafka's CleanedTransactionMetadata): the aborted transactions of the cleaned
range come from the segments' ``.txnindex``; batches of an aborted transaction are discarded
(and never enter the offset map), committed transactional data is compacted like any other. A
COMMIT/ABORT marker stays while batches of its transaction are still in the log (an aborted
one keeps its ``.txnindex`` entry in the cleaned segment); once none is left the marker gets a
delete horizon (``now + delete.retention.ms``, KIP-534) and a later round removes it. The
round never goes past the first unstable offset (the cleaner manager's upper bound).

Everything here runs in a worker thread on descriptors duplicated from the segments, and never
touches a live segment's state: the event loop keeps appending, rolling and serving reads.
"""
from __future__ import annotations

import heapq
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from crc32c import crc32c

from kafkalite.config.log_config import LogConfig
from kafkalite.log.errors import CorruptRecordError
from kafkalite.log.offset_map import SkimpyOffsetMap
from kafkalite.log.record_batch import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK,
                                        COMPRESSION_NONE, CONTROL_TYPE_ABORT,
                                        CONTROL_TYPE_COMMIT, DELETE_HORIZON_MASK, HEADER_STRUCT,
                                        LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2,
                                        RECORD_BATCH_OVERHEAD, BatchHeader, _compress,
                                        _decompress, parse_control_type)
from kafkalite.log.segment import (CLEANED_SUFFIX, LogSegment, log_file, offset_index_file,
                                   time_index_file, txn_index_file)
from kafkalite.log.transaction_index import AbortedTxn, TransactionIndex

__all__ = ["CleanerStats", "CleaningAborted", "SourceSegment", "CleanedGroup", "FilterResult",
           "CleanedTransactionMetadata", "build_offset_map", "group_segments_by_size",
           "clean_group", "filter_batch", "iter_source_batches"]

_PREFIX = struct.Struct(">qiib")        # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount (the first CRC'd bytes)
_U32 = struct.Struct(">I")
_make_header = BatchHeader._make
_unpack_header = HEADER_STRUCT.unpack_from


class CleaningAborted(Exception):
    """The round was stopped (shutdown, or the log went away): nothing is swapped in."""


@dataclass
class CleanerStats:
    """Kafka's CleanerStats, the figures the round's summary line reports."""
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    messages_read: int = 0
    bytes_written: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start_time: float = field(default_factory=time.monotonic)
    map_done_time: float | None = None
    end_time: float | None = None

    def index_done(self) -> None:
        self.map_done_time = time.monotonic()

    def all_done(self) -> None:
        self.end_time = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return max(1e-9, (self.end_time or time.monotonic()) - self.start_time)

    @property
    def elapsed_index_secs(self) -> float:
        return max(0.0, (self.map_done_time or self.start_time) - self.start_time)


@dataclass(slots=True)
class SourceSegment:
    """An old segment as the cleaner sees it: a private duplicate of its descriptor and its
    size when the round began (a non-active segment never grows). ``segment`` is the live
    object, used only on the event loop to check it is still the log's at swap time."""
    segment: LogSegment
    base_offset: int
    fd: int
    size: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int


@dataclass(slots=True)
class CleanedGroup:
    segment: LogSegment             # the ``.cleaned`` segment, flushed, handlers closed
    sources: list[SourceSegment]
    # Earliest delete horizon of a written batch that still holds tombstones (None: none):
    # when it passes, another round can drop them.
    pending_delete_horizon_ms: int | None
    # Whether any batch was rewritten or dropped (a lone segment copied unchanged need not be
    # swapped in)
    changed: bool = True


class FilterResult(NamedTuple):
    """What :func:`filter_batch` made of one batch."""
    data: bytes | memoryview | None   # the batch to write (None: the batch is dropped)
    records_read: int
    records_retained: int
    tombstone_horizon_ms: int | None  # horizon of the written batch if it keeps tombstones
    invalid: int                      # keyless records dropped


# -- transactions -----------------------------------------------------------------------------

class CleanedTransactionMetadata:
    """What the cleaner knows about transactions while it walks batches in offset order
    (Kafka's CleanedTransactionMetadata): the aborted transactions of the range (from the
    transaction index) become "ongoing aborted" once the walk reaches their first offset; a
    transactional batch of one is discardable; any other transactional batch marks its
    producer's transaction as committed-with-data. A marker is discardable when no batch of
    its transaction was seen; an ABORT marker that stays copies its index entry to
    ``cleaned_index``."""

    __slots__ = ("_pending", "_seen", "_ongoing_committed", "_ongoing_aborted",
                 "cleaned_index")

    def __init__(self, aborted: Iterable[AbortedTxn] = (),
                 cleaned_index: TransactionIndex | None = None) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []    # heap by first offset
        self._seen: set[tuple[int, int]] = set()
        self._ongoing_committed: set[int] = set()
        # producer id -> [aborted txn, last offset of a batch of it seen in this walk]
        self._ongoing_aborted: dict[int, list] = {}
        self.cleaned_index = cleaned_index
        self.add_aborted_transactions(aborted)

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            key = (txn.producer_id, txn.first_offset)
            if key not in self._seen:       # consecutive segments' searches overlap
                self._seen.add(key)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_batch_read(self, h: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (discard it)."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        meta = self._ongoing_aborted.get(h.producer_id)
        if meta is not None:
            meta[1] = h.last_offset
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_control_batch_read(self, h: BatchHeader, control_type: int | None) -> bool:
        """A marker (``control_type`` None: an empty control batch, already cleaned): True
        when no batch of its transaction remains, so it may go after its delete horizon."""
        self._consume_aborted_up_to(h.last_offset)
        if control_type is None:
            return True
        pid = h.producer_id
        if control_type == CONTROL_TYPE_ABORT:
            meta = self._ongoing_aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if control_type == CONTROL_TYPE_COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


def _control_type(data: memoryview, h: BatchHeader) -> int | None:
    """The control record type of a control batch, None when it has no record left."""
    if h.records_count <= 0:
        return None
    spans = _parse_spans(_records_body(data, h), h.records_count)
    key = spans[0][_KEY] if spans else None
    try:
        return parse_control_type(None if key is None else bytes(key))
    except Exception as e:  # a malformed control record: keep the batch as it is
        raise CorruptRecordError(f"Unreadable control record at offset {h.base_offset}: {e}") from e


# -- reading ----------------------------------------------------------------------------------

def iter_source_batches(fd: int, size: int, start_pos: int = 0, chunk_size: int = 1 << 20,
                        check_done: Callable[[], None] | None = None
                        ) -> Iterator[tuple[int, memoryview, BatchHeader]]:
    """``(position, batch bytes, header)`` of each batch in ``[start_pos, size)`` of a segment
    file, read ``chunk_size`` at a time (a bigger batch alone). A malformed batch raises."""
    pos = start_pos
    chunk_size = max(chunk_size, RECORD_BATCH_OVERHEAD)
    while pos < size:
        if check_done is not None:
            check_done()
        chunk = os.pread(fd, min(chunk_size, size - pos), pos)
        n = len(chunk)
        if n < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"Truncated record batch at position {pos} of a segment")
        mv = memoryview(chunk)
        off = 0
        while n - off >= RECORD_BATCH_OVERHEAD:
            if mv[off + MAGIC_OFFSET] != MAGIC_V2:
                raise CorruptRecordError(f"Invalid magic at position {pos + off} of a segment")
            h = _make_header(_unpack_header(mv, off))
            bsize = h.batch_length + LOG_OVERHEAD
            if bsize < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(f"Invalid batch size {bsize} at position {pos + off}")
            if n - off < bsize:
                break
            yield pos + off, mv[off:off + bsize], h
            off += bsize
        if off == 0:
            # One batch bigger than the chunk: read it whole.
            h = _make_header(_unpack_header(mv, 0))
            bsize = h.batch_length + LOG_OVERHEAD
            if pos + bsize > size:
                raise CorruptRecordError(f"Record batch at position {pos} runs past the segment end")
            whole = os.pread(fd, bsize, pos)
            if len(whole) < bsize:
                raise CorruptRecordError(f"Short read of the record batch at position {pos}")
            yield pos, memoryview(whole), _make_header(_unpack_header(whole, 0))
            off = bsize
        pos += off


def _check_crc(data: memoryview, h: BatchHeader) -> None:
    if crc32c(data[ATTRIBUTES_OFFSET:]) != h.crc:
        raise CorruptRecordError(
            f"Record batch at offset {h.base_offset} is corrupt (CRC mismatch) in a cleaned segment")


def _records_body(data: memoryview, h: BatchHeader) -> bytes | memoryview:
    body = data[RECORD_BATCH_OVERHEAD:h.size]
    if h.compression_type != COMPRESSION_NONE:
        return _decompress(h.compression_type, body)
    return body


# A record's place in a records body, as a plain tuple (this is the cleaner's hot loop):
# (start, end, timestamp delta, position of the offset delta, offset delta, key, has value,
#  attributes). ``start`` is the record's length varint; from ``position of the offset delta``
# to ``end`` the bytes are copied unchanged when the record is re-based on a delete horizon.
_START, _END, _TS_DELTA, _REST, _OFFSET_DELTA, _KEY, _HAS_VALUE, _ATTRS = range(8)


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of more than one byte (the inline paths handle single bytes)."""
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("Varint is too long")


def _parse_spans(body: bytes | memoryview, count: int) -> list[tuple]:
    """Where each record lies in an (uncompressed) records body, with what the cleaner needs:
    offset delta, key, whether there is a value. Headers and values are skipped by the record
    length. Single-byte varints — nearly all of them — are decoded inline."""
    if not isinstance(body, bytes):
        body = bytes(body)      # indexing bytes is faster than a memoryview
    out: list[tuple] = []
    append = out.append
    pos = 0
    end = len(body)
    try:
        for _ in range(count):
            start = pos
            b = body[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = _varint_at(body, pos)
            rec_end = pos + length
            if length <= 0 or rec_end > end:
                raise CorruptRecordError(f"Invalid record length {length}")
            attributes = body[pos]
            b = body[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            elif body[pos + 2] < 0x80:
                raw = (b & 0x7F) | (body[pos + 2] << 7)
                ts_delta = (raw >> 1) ^ -(raw & 1)
                pos += 3
            else:
                ts_delta, pos = _varint_at(body, pos + 1)
            rest = pos
            b = body[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                offset_delta = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                offset_delta, pos = _varint_at(body, pos)
            b = body[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                klen, pos = _varint_at(body, pos)
            if klen >= 0:
                key = body[pos:pos + klen]
                pos += klen
            else:
                key = None
            if pos >= rec_end:
                raise CorruptRecordError("Record fields run past the record length")
            # value length -1 (no value, a tombstone) is the single zig-zag byte 0x01
            append((start, rec_end, ts_delta, rest, offset_delta, key, body[pos] != 1,
                    attributes))
            pos = rec_end
    except IndexError as e:
        raise CorruptRecordError(f"Found invalid record structure: {e!r}") from e
    if pos != end:
        raise CorruptRecordError(f"{end - pos} unconsumed bytes after all records consumed")
    return out


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# -- the offset map ---------------------------------------------------------------------------

def build_offset_map(sources: Sequence[SourceSegment], start: int, end: int,
                     offset_map: SkimpyOffsetMap, load_factor: float, stats: CleanerStats, *,
                     start_position: int = 0, io_buffer_size: int = 1 << 20,
                     check_done: Callable[[], None] | None = None,
                     aborted: Iterable[AbortedTxn] = ()) -> None:
    """Kafka's buildOffsetMap over the dirty ``sources`` (those overlapping [start, end), in
    order; ``start_position`` is where the first one's scan may begin): each key's last offset
    from ``start`` on. Stops when the map holds ``slots * load_factor`` keys — the round then
    ends at ``offset_map.latest_offset + 1``, possibly inside a segment. Records of the
    ``aborted`` transactions never enter the map; committed transactional records do."""
    txn_meta = CleanedTransactionMetadata(aborted)
    offset_map.clear()
    # The round covers at least everything below the first dirty offset (the clean section,
    # re-cleaned with this map), even when the dirty section is empty.
    offset_map.update_latest_offset(start - 1)
    max_keys = int(offset_map.slots * load_factor)
    put = offset_map.put
    for i, src in enumerate(sources):
        next_start = sources[i + 1].base_offset if i + 1 < len(sources) else end
        pos0 = start_position if i == 0 else 0
        for _pos, data, h in iter_source_batches(src.fd, src.size, pos0, io_buffer_size,
                                                 check_done):
            stats.map_bytes_read += h.size
            if h.last_offset < start:
                continue
            _check_crc(data, h)
            if h.is_control:
                txn_meta.on_control_batch_read(h, _control_type(data, h))
                stats.map_messages_read += max(h.records_count, 0)
            elif txn_meta.on_batch_read(h):
                stats.map_messages_read += max(h.records_count, 0)     # aborted: not keyed
            else:
                base = h.base_offset
                spans = _parse_spans(_records_body(data, h), h.records_count)
                for sp in spans:
                    key = sp[_KEY]
                    off = base + sp[_OFFSET_DELTA]
                    if key is not None and off >= start:
                        if offset_map.size >= max_keys:
                            return
                        put(key, off)
                stats.map_messages_read += len(spans)
            offset_map.update_latest_offset(h.last_offset)
        # Offsets may have gaps (an earlier round): the map covers the whole segment.
        offset_map.update_latest_offset(next_start - 1)


# -- grouping ---------------------------------------------------------------------------------

def group_segments_by_size(sources: Sequence[SourceSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SourceSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose summed log bytes fit
    ``segment.bytes`` and summed index bytes ``segment.index.bytes``, within one 32-bit offset
    range, become one cleaned segment, so cleaning does not leave ever smaller segments."""
    groups: list[list[SourceSegment]] = []
    segs = list(sources)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].index_bytes
        time_index_size = segs[i].time_index_bytes
        i += 1
        while i < len(segs):
            nxt = segs[i]
            last_offset = (segs[i + 1].base_offset - 1 if i + 1 < len(segs)
                           else first_uncleanable_offset - 1)
            if not (log_size + nxt.size <= max_size
                    and index_size + nxt.index_bytes <= max_index_size
                    and time_index_size + nxt.time_index_bytes <= max_index_size
                    and (nxt.size == 0 or last_offset - group[0].base_offset <= 2**31 - 1)):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.index_bytes
            time_index_size += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


# -- filtering one batch ----------------------------------------------------------------------

def filter_batch(data: memoryview, h: BatchHeader, offset_map: SkimpyOffsetMap, now_ms: int,
                 delete_retention_ms: int, retain_empty: bool,
                 txn: CleanedTransactionMetadata | None = None) -> FilterResult:
    """The cleaner's filter on one batch (Kafka's MemoryRecords.filterTo + LogCleaner's
    RecordFilter). A record survives when it lies past the map (``> latest_offset``), or has a
    key whose last offset in the map is not later than its own and is either a value or a
    tombstone whose batch's delete horizon has not passed. A batch keeping tombstones gets a
    delete horizon (``now + delete.retention.ms``, KIP-534) the first time it is cleaned.

    ``retain_empty`` keeps a batch whose records all go as an empty batch (header only, same
    base and last offset): the last batch of an active producer (its sequence numbers), and the
    last batch of a cleaned segment (so the segment keeps its offset range).

    With ``txn`` (the walk's transaction state, batches fed in offset order) transactions are
    Kafka's: an aborted transaction's batch loses all its records; a marker whose transaction
    has no batch left gets a delete horizon and, once it has passed, goes. Without it control
    and transactional batches are kept whole.
    """
    n_records = max(h.records_count, 0)
    if txn is None:
        if h.is_control or h.is_transactional:
            return FilterResult(data, n_records, n_records, None, 0)
    elif h.is_control:
        can_discard = txn.on_control_batch_read(h, _control_type(data, h))
        has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
        if can_discard and has_horizon and now_ms >= h.base_timestamp:
            # the marker's transaction is gone and delete.retention.ms has passed
            if retain_empty and n_records == 0:
                return FilterResult(data, 0, 0, None, 0)
            if retain_empty:
                return FilterResult(_empty_batch(h), n_records, 0, None, 0)
            return FilterResult(None, n_records, 0, None, 0)
        if can_discard and not has_horizon and n_records > 0:
            # KIP-534: the marker's delete horizon, set once, in its base timestamp
            body = _records_body(data, h)
            spans = _parse_spans(body, h.records_count)
            horizon = now_ms + delete_retention_ms
            return FilterResult(_rebuild(h, body, spans, horizon, True), n_records, n_records,
                                horizon, 0)
        return FilterResult(data, n_records, n_records,
                            h.base_timestamp if can_discard and has_horizon else None, 0)
    elif txn.on_batch_read(h):
        # a batch of an aborted transaction: every record goes
        if retain_empty and n_records == 0:
            return FilterResult(data, 0, 0, None, 0)
        if retain_empty:
            return FilterResult(_empty_batch(h), n_records, 0, None, 0)
        return FilterResult(None, n_records, 0, None, 0)
    body = _records_body(data, h)
    spans = _parse_spans(body, h.records_count)
    base = h.base_offset
    latest = offset_map.latest_offset
    has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
    horizon = h.base_timestamp if has_horizon else None
    retained: list[tuple] = []
    tombstones = False
    invalid = 0
    get = offset_map.get
    for sp in spans:
        off = base + sp[_OFFSET_DELTA]
        key = sp[_KEY]
        if off > latest:
            keep = True
        elif key is None:
            keep = False
            invalid += 1
        else:
            keep = off >= get(key) and (sp[_HAS_VALUE] or horizon is None or now_ms < horizon)
        if keep:
            retained.append(sp)
            if not sp[_HAS_VALUE]:
                tombstones = True
    n = len(spans)
    need_horizon = tombstones and not has_horizon
    if len(retained) == n and not need_horizon:
        return FilterResult(data, n, n, horizon if tombstones else None, invalid)
    if retained:
        new_horizon = now_ms + delete_retention_ms if need_horizon else horizon
        out = _rebuild(h, body, retained, new_horizon if need_horizon else None, has_horizon
                       or need_horizon)
        return FilterResult(out, n, len(retained), new_horizon if tombstones else None, invalid)
    if retain_empty:
        return FilterResult(_empty_batch(h), n, 0, None, invalid)
    return FilterResult(None, n, 0, None, invalid)


def _rebuild(h: BatchHeader, body: bytes | memoryview, retained: list[tuple],
             new_base_timestamp: int | None, horizon_flag: bool) -> bytes:
    """A batch of the ``retained`` records with the original base offset, last offset delta,
    producer fields and codec. Records are copied as they are; with a new base timestamp (the
    delete horizon) each record's timestamp delta is re-encoded so its timestamp is unchanged."""
    log_append = bool(h.attributes & 0x08)
    if new_base_timestamp is None:
        base_ts = h.base_timestamp
        pieces = [body[sp[_START]:sp[_END]] for sp in retained]
    else:
        base_ts = new_base_timestamp
        pieces = []
        for sp in retained:
            rec = bytes((sp[_ATTRS],)) + _varint(h.base_timestamp + sp[_TS_DELTA] - base_ts) \
                + bytes(body[sp[_REST]:sp[_END]])
            pieces.append(_varint(len(rec)) + rec)
    if log_append:
        max_ts = h.max_timestamp
    else:
        max_ts = max(h.base_timestamp + sp[_TS_DELTA] for sp in retained)
    payload = b"".join(pieces)
    codec = h.compression_type
    if codec != COMPRESSION_NONE:
        payload = _compress(codec, payload)
    attributes = h.attributes | DELETE_HORIZON_MASK if horizon_flag else h.attributes
    tail = _CRC_TAIL.pack(attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id,
                          h.producer_epoch, h.base_sequence, len(retained))
    crc = crc32c(payload, crc32c(tail))
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    return _PREFIX.pack(h.base_offset, length, h.partition_leader_epoch, MAGIC_V2) + \
        _U32.pack(crc) + tail + payload


def _empty_batch(h: BatchHeader) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader: no records, uncompressed, both timestamps
    the batch's max timestamp, same offsets and producer fields."""
    attributes = h.attributes & ~(COMPRESSION_CODEC_MASK | DELETE_HORIZON_MASK)
    tail = _CRC_TAIL.pack(attributes, h.last_offset_delta, h.max_timestamp, h.max_timestamp,
                          h.producer_id, h.producer_epoch, h.base_sequence, 0)
    crc = crc32c(tail)
    return _PREFIX.pack(h.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
                        h.partition_leader_epoch, MAGIC_V2) + _U32.pack(crc) + tail


# -- cleaning a group -------------------------------------------------------------------------

def _remove_cleaned_files(dir: Path, base_offset: int) -> None:
    for path in (log_file(dir, base_offset, CLEANED_SUFFIX),
                 offset_index_file(dir, base_offset, CLEANED_SUFFIX),
                 time_index_file(dir, base_offset, CLEANED_SUFFIX),
                 txn_index_file(dir, base_offset, CLEANED_SUFFIX)):
        path.unlink(missing_ok=True)


def clean_group(dir: Path, group: Sequence[SourceSegment], offset_map: SkimpyOffsetMap,
                config: LogConfig, now_ms: int, producer_last_offsets: Mapping[int, int],
                round_upper_bound: int, stats: CleanerStats, *, io_buffer_size: int = 1 << 20,
                check_done: Callable[[], None] | None = None,
                aborted_txns: Mapping[int, Sequence[AbortedTxn]] | None = None,
                producer_marker_epochs: Mapping[int, int] | None = None) -> CleanedGroup:
    """Kafka's cleanSegments: write the surviving batches of ``group`` into one segment named
    ``<first base offset>.log.cleaned`` (+ indexes), flushed, with the last old segment's
    modification time. The caller swaps it in, or deletes it.

    ``aborted_txns`` maps each source segment's base offset to the aborted transactions
    overlapping it (its transaction index search); with it transactions are cleaned as Kafka
    does and the kept ABORT markers' entries go to the cleaned segment's ``.txnindex``.
    ``producer_marker_epochs``: active producers whose last record is a marker, with their
    epoch — that marker stays (maybe empty) for fencing."""
    base = group[0].base_offset
    _remove_cleaned_files(dir, base)
    cleaned = LogSegment.open(dir, base, config, now_ms=now_ms, suffix=CLEANED_SUFFIX)
    txn = (CleanedTransactionMetadata(cleaned_index=cleaned.txn_index)
           if aborted_txns is not None else None)
    marker_epochs = producer_marker_epochs or {}
    pending: int | None = None
    changed = False
    try:
        pieces: list[bytes | memoryview] = []
        infos: list[tuple[int, int, int]] = []
        buffered = 0
        last_src = len(group) - 1
        for i, src in enumerate(group):
            if txn is not None and aborted_txns is not None:
                txn.add_aborted_transactions(aborted_txns.get(src.base_offset, ()))
            for pos, data, h in iter_source_batches(src.fd, src.size, 0, io_buffer_size,
                                                    check_done):
                _check_crc(data, h)
                retain_empty = ((h.producer_id >= 0
                                 and producer_last_offsets.get(h.producer_id) == h.last_offset)
                                or (h.is_control and h.producer_id >= 0
                                    and marker_epochs.get(h.producer_id) == h.producer_epoch)
                                or h.next_offset == round_upper_bound
                                # The last batch of the group: the cleaned segment then ends
                                # where the old ones did, which crash recovery relies on to
                                # know which old segments a ``.swap`` replaces.
                                or (i == last_src and pos + h.size == src.size))
                r = filter_batch(data, h, offset_map, now_ms, config.delete_retention_ms,
                                 retain_empty, txn)
                stats.bytes_read += h.size
                stats.messages_read += r.records_read
                stats.invalid_messages += r.invalid
                if r.data is not data:
                    changed = True
                if r.data is None:
                    continue
                stats.messages_written += r.records_retained
                stats.bytes_written += len(r.data)
                if r.tombstone_horizon_ms is not None:
                    pending = r.tombstone_horizon_ms if pending is None \
                        else min(pending, r.tombstone_horizon_ms)
                out = r.data
                if out is data:
                    max_ts = h.max_timestamp
                else:
                    max_ts = _U_MAX_TS.unpack_from(out, 35)[0]
                pieces.append(out)
                infos.append((len(out), h.last_offset, max_ts))
                buffered += len(out)
                if buffered >= io_buffer_size:
                    cleaned.append(pieces, infos)
                    pieces, infos, buffered = [], [], 0
            if pieces:
                cleaned.append(pieces, infos)
                pieces, infos, buffered = [], [], 0
        cleaned.on_become_inactive()
        cleaned.flush()
        mtime_ns = group[-1].last_modified_ms * 1_000_000
        os.utime(cleaned.log_path, ns=(mtime_ns, mtime_ns))
        cleaned.close_handlers()
    except BaseException:
        cleaned.delete()
        cleaned.file.close()
        raise
    return CleanedGroup(cleaned, list(group), pending, changed)


_U_MAX_TS = struct.Struct(">q")   # maxTimestamp lies at byte 35 of a batch
