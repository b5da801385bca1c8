"""`kafkalite dump-log`: print the contents of log segment, index, time index, transaction index
and producer snapshot files, line for line as Kafka's kafka-dump-log.sh (DumpLogSegments) does.

    kafkalite dump-log --files DIR/00000000000000000000.log[,...] [--deep-iteration]
                       [--print-data-log] [--index-sanity-check] [--verify-index-only]

Unlike the other tools this one reads files, not a broker: the files of a kafkalite or a Kafka
log directory (both write Kafka's on-disk format). Files are read whole, not mapped, and never
written. Kafka's mismatch reports (index entries that do not point at a batch's last offset,
time index entries that disagree with the log, offsets that are not consecutive) go to stderr
after all files, as Kafka prints them. A file Kafka's tool would stop on with an exception (a
corrupt batch, a missing file) ends the run with that exception's message on one line, exit 1.
Kafka's decoders for __consumer_offsets and __transaction_state records are not implemented:
keys and values print as UTF-8 text (Kafka's default StringDecoder).
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, TextIO

from kafkalite.tools import common
from kafkalite.tools.common import INT32_MAX, ToolError

TOOL = "dump-log"

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
LOG_OVERHEAD = 12                 # offset + size: what every magic shares
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14
RECORD_BATCH_OVERHEAD = 61
OFFSET_INDEX_ENTRY = struct.Struct(">ii")      # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")        # timestamp, relative offset
SNAPSHOT_HEAD = struct.Struct(">hIi")          # version, crc, count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
# Kafka's names of the file kinds it dumps.
LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX = ".txnindex", ".snapshot"


class DumpError(Exception):
    """What Kafka's tool dies of (an exception out of main): its message, exit code 1."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="print the contents of log segment and index files",
                       description="Parse log segment, index, time index, transaction index and "
                                   "producer snapshot files and print their contents (as "
                                   "kafka-dump-log.sh).")
    p.add_argument("--files", required=True, nargs="+", metavar="FILE",
                   help="the files to dump: comma separated, as Kafka's tool takes them, or several "
                        "arguments")
    p.add_argument("--deep-iteration", action="store_true",
                   help="print every record, not only the batches (implied by --print-data-log)")
    p.add_argument("--print-data-log", action="store_true",
                   help="print the keys and values of the records (implies --deep-iteration)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print only the key and value of a record, not its offset, timestamp and sizes")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check the index against the log without printing its entries")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the sanity check a broker runs on an index at start-up")
    p.add_argument("--max-message-size", type=common.positive_int, default=DEFAULT_MAX_MESSAGE_SIZE,
                   metavar="BYTES", help=f"size of the largest batch (default {DEFAULT_MAX_MESSAGE_SIZE})")
    p.add_argument("--max-bytes", type=common.positive_int, default=INT32_MAX, metavar="BYTES",
                   help="read at most this many bytes of each .log file")
    common.add_version_arg(p)   # Kafka's DumpLogSegmentsOptions take --version too (CommandDefaultOptions)
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


# --------------------------------------------------------------------------------------------
# Java's ways of printing values, which Kafka's output is made of
# --------------------------------------------------------------------------------------------

def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_optional_long(value: Optional[int]) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def java_string(data: bytes) -> str:
    """`new String(bytes, UTF_8)`: malformed input becomes U+FFFD."""
    return data.decode("utf-8", errors="replace")


def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


# --------------------------------------------------------------------------------------------
# Batches of a .log file, as Kafka's FileLogInputStream finds them
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileBatch:
    position: int
    size: int                 # log overhead included
    magic: int
    data: memoryview          # the whole batch


def file_batches(data: memoryview, display_name: str, start: int = 0,
                 end: Optional[int] = None) -> Iterator[FileBatch]:
    """The complete batches between start and end, lazily: Kafka prints the batches before a
    corrupt one, then dies of it. A size below the smallest record overhead is corruption
    (Kafka's CorruptRecordException); a batch running past the end stops the walk."""
    end = len(data) if end is None else min(end, len(data))
    position = start
    while position < end - HEADER_SIZE_UP_TO_MAGIC:
        size = struct.unpack_from(">i", data, position + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            raise DumpError(f"Found record size {size} smaller than minimum record overhead "
                            f"({RECORD_OVERHEAD_V0}) in file {display_name}.")
        if position > end - LOG_OVERHEAD - size:
            break
        magic = struct.unpack_from(">b", data, position + 16)[0]
        yield FileBatch(position, size + LOG_OVERHEAD, magic, data[position:position + size + LOG_OVERHEAD])
        position += size + LOG_OVERHEAD


@dataclass(frozen=True)
class BatchView:
    """What DumpLogSegments prints of one batch, either magic."""
    magic: int
    base_offset: int
    last_offset: int
    count: Optional[int]
    base_sequence: int
    producer_id: int
    producer_epoch: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: Optional[int]
    timestamp_type: int
    max_timestamp: int
    size: int
    codec: int
    crc: int
    is_valid: bool
    base_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)


def view_batch(batch: FileBatch) -> BatchView:
    from kafkalite.log import record_batch as rb

    if batch.magic >= 2:
        if batch.size < RECORD_BATCH_OVERHEAD:
            raise DumpError(f"Record batch is corrupt (the size {batch.size} is smaller than the minimum "
                            f"allowed overhead {RECORD_BATCH_OVERHEAD})")
        h = rb.BatchHeader._make(rb.HEADER_STRUCT.unpack_from(batch.data, 0))
        return BatchView(
            magic=batch.magic, base_offset=h.base_offset, last_offset=h.last_offset, count=h.records_count,
            base_sequence=h.base_sequence, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
            partition_leader_epoch=h.partition_leader_epoch, is_transactional=h.is_transactional,
            is_control=h.is_control,
            delete_horizon_ms=h.base_timestamp if h.attributes & rb.DELETE_HORIZON_MASK else None,
            timestamp_type=h.timestamp_type, max_timestamp=h.max_timestamp, size=batch.size,
            codec=h.compression_type, crc=h.crc, is_valid=rb.compute_crc(batch.data, 0, batch.size) == h.crc,
            base_timestamp=h.base_timestamp)
    from kafkalite.log import legacy_records as lr

    m = lr.parse_message(batch.data, 0, batch.size)
    return BatchView(
        magic=m.magic, base_offset=m.offset, last_offset=m.offset, count=None, base_sequence=-1,
        producer_id=-1, producer_epoch=-1, partition_leader_epoch=-1, is_transactional=False,
        is_control=False, delete_horizon_ms=None,
        timestamp_type=-1 if m.magic == 0 else m.timestamp_type, max_timestamp=m.timestamp,
        size=batch.size, codec=m.codec, crc=m.crc, is_valid=m.crc_valid)


def batch_line(b: BatchView, position: int) -> str:
    from kafkalite.log.record_batch import CODEC_NAMES

    if b.magic >= 2:
        head = (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
                f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} "
                f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
                f"partitionLeaderEpoch: {b.partition_leader_epoch} isTransactional: "
                f"{java_bool(b.is_transactional)} isControl: {java_bool(b.is_control)} "
                f"deleteHorizonMs: {java_optional_long(b.delete_horizon_ms)}")
    else:
        head = f"offset: {b.last_offset}"
    return (f"{head} position: {position} {TIMESTAMP_TYPES[b.timestamp_type]}: {b.max_timestamp} "
            f"size: {b.size} magic: {b.magic} compresscodec: {CODEC_NAMES.get(b.codec, b.codec)} "
            f"crc: {b.crc} isvalid: {java_bool(b.is_valid)}")


@dataclass(frozen=True)
class RecordView:
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    sequence: int
    header_keys: tuple[str, ...]
    legacy_crc: Optional[int] = None       # magic 0/1 records print their own validity and CRC
    legacy_valid: bool = True


def batch_records(batch: FileBatch, view: BatchView) -> list[RecordView]:
    if batch.magic >= 2:
        from kafkalite.log.record_batch import decode_records

        try:
            records = decode_records(batch.data)
        except Exception as e:  # noqa: BLE001 - Kafka dies of the same corruption
            raise DumpError(str(e)) from None
        return [RecordView(r.offset, r.timestamp, r.key, r.value,
                           -1 if view.base_sequence < 0 else
                           increment_sequence(view.base_sequence, r.offset - view.base_offset),
                           tuple(k for k, _ in r.headers)) for r in records]
    from kafkalite.log import legacy_records as lr

    wrapper = lr.parse_message(batch.data, 0, batch.size)
    inner = lr.inner_messages(wrapper) if wrapper.codec else [wrapper]
    return [RecordView(m.offset, m.timestamp, m.key, m.value, -1, (), m.crc, m.crc_valid) for m in inner]


MessageParser = Callable[[RecordView], "tuple[Optional[str], Optional[str]]"]


def string_parser(record: RecordView) -> tuple[Optional[str], Optional[str]]:
    """Kafka's default: key and value as UTF-8 strings (StringDecoder)."""
    return (None if record.key is None else java_string(record.key),
            None if record.value is None else java_string(record.value))


def control_text(record: RecordView) -> str:
    key = record.key or b""
    if len(key) < 4:
        raise DumpError(f"Invalid value size found for end control record key. Must have at least 4 "
                        f"bytes, but found only {len(key)}")
    version, type_id = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise DumpError(f"Invalid version found for control record: {version}. May indicate data corruption")
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if name in ("ABORT", "COMMIT"):
        value = record.value or b""
        if len(value) < 6:
            raise DumpError(f"Invalid value size found for end transaction marker. Must have at least "
                            f"6 bytes, but found only {len(value)}")
        _version, coordinator_epoch = struct.unpack_from(">hi", value, 0)
        return f" endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
    return f" controlType: {name}({type_id})"


def record_line(record: RecordView, view: BatchView, print_contents: bool, skip_metadata: bool,
                parser: MessageParser) -> str:
    parts: list[str] = []
    prefix = "| "
    if not skip_metadata:
        parts.append(f"{prefix}offset: {record.offset} {TIMESTAMP_TYPES[view.timestamp_type]}: "
                     f"{record.timestamp} keySize: {-1 if record.key is None else len(record.key)} "
                     f"valueSize: {-1 if record.value is None else len(record.value)}")
        prefix = " "
        if view.magic >= 2:
            parts.append(f" sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]")
        if record.legacy_crc is not None:
            # Kafka's format string has the stray brace.
            parts.append(f" isValid: {java_bool(record.legacy_valid)} crc: {record.legacy_crc}}}")
        if view.is_control:
            parts.append(control_text(record))
    if print_contents and not view.is_control:
        key, payload = parser(record)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# The dump itself
# --------------------------------------------------------------------------------------------

@dataclass
class Reports:
    """Kafka's end-of-run reports on stderr, keyed by absolute path in first-seen order."""
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out: list[str] = []
        for name, pairs in self.index_mismatches.items():
            out.append(f"Mismatches in :{name}")
            # Kafka prepends to its list: the last mismatch comes first.
            out += [f"  Index offset: {a}, log offset: {b}" for a, b in reversed(pairs)]
        for name, pairs in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{name}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs]
        for name, pairs in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{name}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in pairs]
        for pairs in self.time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs]
        for name, pairs in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {name}")
            out += [f"  {a} is followed by {b}" for a, b in reversed(pairs)]
        return out


@dataclass(frozen=True)
class Options:
    print_data: bool
    deep: bool
    skip_record_metadata: bool
    verify_only: bool
    index_sanity_only: bool
    max_message_size: int
    max_bytes: int
    parser: MessageParser


def display_path(arg: str) -> str:
    """java.io.File's toString of a path as typed: repeated and trailing slashes dropped."""
    if not arg:
        return arg
    collapsed = "/".join(p for i, p in enumerate(arg.split("/")) if p or i == 0)
    return collapsed if collapsed else "/"


def java_absolute(path: str) -> str:
    """java.io.File's getAbsolutePath: the working directory prepended, `..` left as it is."""
    return display_path(path if path.startswith("/") else f"{os.getcwd()}/{path}")


def read_file(path: str) -> memoryview:
    try:
        with open(path, "rb") as f:
            return memoryview(f.read())
    except FileNotFoundError:   # Kafka dies of java.nio.file.NoSuchFileException: <path>
        raise DumpError(path) from None
    except IsADirectoryError:
        raise DumpError(f"{path} (Is a directory)") from None
    except PermissionError:
        raise DumpError(f"{path} (Permission denied)") from None


def base_offset_of(path: str) -> int:
    """The offset in a segment file's name (`00000000000000000042.log` -> 42), as Kafka reads it."""
    stem = os.path.basename(path).split(".")[0]
    try:
        return int(stem)
    except ValueError:
        raise DumpError(f'For input string: "{stem}"') from None


def sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(java_absolute(path)), os.path.basename(path).split(".")[0] + suffix)


def dump_log(path: str, opts: Options, reports: Reports, out: Callable[[str], None]) -> None:
    shown = display_path(path)
    if path.endswith(LOG_SUFFIX):
        out(f"Log starting offset: {base_offset_of(path)}")
    data = read_file(path)
    end = min(opts.max_bytes, len(data))
    valid = 0
    last_offset = -1
    for batch in file_batches(data, shown, 0, end):
        view = view_batch(batch)
        out(batch_line(view, valid))
        if opts.deep:
            for record in batch_records(batch, view):
                if last_offset != -1 and record.offset != last_offset + 1:
                    reports.non_consecutive.setdefault(java_absolute(path), []).append((last_offset, record.offset))
                last_offset = record.offset
                out(record_line(record, view, opts.print_data, opts.skip_record_metadata, opts.parser))
        valid += batch.size
    trailing = end - valid
    if trailing > 0 and opts.max_bytes == INT32_MAX:
        out(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")


def index_entries(data: memoryview, entry: struct.Struct) -> int:
    return len(data) // entry.size


def finish_sanity_check(kind: str, path: str, data: memoryview, entry: struct.Struct,
                        out: Callable[[str], None]) -> None:
    """The last of Kafka's index sanity checks, a whole number of entries, then its verdict."""
    if len(data) % entry.size:
        raise DumpError(f"{kind} {java_absolute(path)} is corrupt, found {len(data)} bytes which is "
                        f"neither positive nor a multiple of {entry.size}")
    out(f"{display_path(path)} passed sanity check.")


def offset_index_lookup(index: memoryview, entries: int, base_offset: int, target: int) -> int:
    """The position of the largest index entry with offset <= target, 0 when there is none
    (Kafka's OffsetIndex.lookup)."""
    lo, hi, found = 0, entries - 1, -1
    while lo <= hi:
        mid = (lo + hi) // 2
        rel, position = OFFSET_INDEX_ENTRY.unpack_from(index, mid * OFFSET_INDEX_ENTRY.size)
        if base_offset + rel <= target:
            found, lo = position, mid + 1
        else:
            hi = mid - 1
    return 0 if found < 0 else found


def dump_index(path: str, opts: Options, reports: Reports, out: Callable[[str], None]) -> None:
    base = base_offset_of(path)
    log_data = read_file(sibling(path, LOG_SUFFIX))
    index = read_file(path)
    entries = index_entries(index, OFFSET_INDEX_ENTRY)
    if entries == 0:
        out(f"{display_path(path)} is empty.")
        return
    if opts.index_sanity_only:
        last_rel = OFFSET_INDEX_ENTRY.unpack_from(index, (entries - 1) * OFFSET_INDEX_ENTRY.size)[0]
        if base + last_rel < base:
            raise DumpError(f"Corrupt index found, index file {java_absolute(path)} has non-zero size but the "
                            f"last offset is {base + last_rel} which is less than the base offset {base}")
        return finish_sanity_check("Index file", path, index, OFFSET_INDEX_ENTRY, out)
    for i in range(entries):
        rel, position = OFFSET_INDEX_ENTRY.unpack_from(index, i * OFFSET_INDEX_ENTRY.size)
        offset = base + rel
        # A preallocated index of a crashed broker ends in zeros: stop at the first one.
        if offset == base and i > 0:
            return
        first = next(file_batches(log_data, display_path(sibling(path, LOG_SUFFIX)), position,
                                  position + opts.max_message_size), None)
        if first is None:   # Kafka dies of NoSuchElementException here
            raise DumpError(f"no batch at position {position} of {sibling(path, LOG_SUFFIX)}")
        batch_last = view_batch(first).last_offset
        if batch_last != offset:
            reports.index_mismatches.setdefault(java_absolute(path), []).append((offset, batch_last))
        if not opts.verify_only:
            out(f"offset: {offset} position: {position}")


def dump_time_index(path: str, opts: Options, reports: Reports, out: Callable[[str], None]) -> None:
    base = base_offset_of(path)
    log_data = read_file(sibling(path, LOG_SUFFIX))
    index_path = sibling(path, INDEX_SUFFIX)
    index = read_file(index_path) if os.path.exists(index_path) else memoryview(b"")
    time_index = read_file(path)
    entries = index_entries(time_index, TIME_INDEX_ENTRY)
    if opts.index_sanity_only:
        if entries:
            first_ts = TIME_INDEX_ENTRY.unpack_from(time_index, 0)[0]
            last_ts, last_rel = TIME_INDEX_ENTRY.unpack_from(time_index, (entries - 1) * TIME_INDEX_ENTRY.size)
            where = f"time index file ({java_absolute(path)}) has non-zero size"
            if last_ts < first_ts:
                raise DumpError(f"Corrupt time index found, {where} but the last timestamp is {last_ts} which "
                                f"is less than the first timestamp {first_ts}")
            if base + last_rel < base:
                raise DumpError(f"Corrupt time index found, {where} but the last offset is {base + last_rel} "
                                f"which is less than the first offset {base}")
        return finish_sanity_check("Time index file", path, time_index, TIME_INDEX_ENTRY, out)
    shown_log = display_path(sibling(path, LOG_SUFFIX))
    index_count = index_entries(index, OFFSET_INDEX_ENTRY)
    absolute = java_absolute(path)
    prev_timestamp = -1
    for i in range(entries):
        timestamp, rel = TIME_INDEX_ENTRY.unpack_from(time_index, i * TIME_INDEX_ENTRY.size)
        offset = base + rel
        if offset == base and i > 0:
            return
        position = offset_index_lookup(index, index_count, base, offset)
        found = None
        for batch in file_batches(log_data, shown_log, position):
            view = view_batch(batch)
            if view.last_offset >= offset:
                found = (batch, view)
                break
        if found is None:
            reports.time_not_found.setdefault(absolute, []).append((offset, -1))
        elif found[1].last_offset != offset:
            reports.time_not_found.setdefault(absolute, []).append((offset, found[1].last_offset))
        else:
            max_timestamp = max([-1] + [r.timestamp for r in batch_records(*found)])
            if max_timestamp != timestamp:
                reports.time_mismatches.setdefault(absolute, []).append((timestamp, max_timestamp))
            if prev_timestamp >= timestamp:
                reports.time_out_of_order.setdefault(absolute, []).append((timestamp, prev_timestamp))
        if not opts.verify_only:
            out(f"timestamp: {timestamp} offset: {offset}")
        prev_timestamp = timestamp


def dump_txn_index(path: str, out: Callable[[str], None]) -> None:
    from kafkalite.log.transaction_index import ABORTED_TXN_VERSION, decode_entries

    try:
        entries = decode_entries(bytes(read_file(path)), java_absolute(path))
    except DumpError:
        raise
    except Exception as e:  # noqa: BLE001 - a corrupt index is what Kafka dies of too
        raise DumpError(str(e)) from None
    for t in entries:
        out(f"version: {ABORTED_TXN_VERSION} producerId: {t.producer_id} firstOffset: {t.first_offset} "
            f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")


def snapshot_lines(data: bytes) -> list[str]:
    """Kafka's lines for a producer snapshot; ValueError carries Kafka's corruption message."""
    from crc32c import crc32c

    if len(data) < SNAPSHOT_HEAD.size:
        raise ValueError("Snapshot failed schema validation: Error reading field 'version': "
                         "java.nio.BufferUnderflowException")
    version, crc, count = SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != 1:
        raise ValueError(f"Snapshot contained an unknown file version {version}")
    if count < 0 or len(data) - SNAPSHOT_HEAD.size < count * SNAPSHOT_ENTRY.size:
        raise ValueError("Snapshot failed schema validation: Error reading array of size "
                         f"{count}, only {len(data) - SNAPSHOT_HEAD.size} bytes available")
    computed = crc32c(data[6:])
    if crc != computed:
        raise ValueError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                         f"Computed crc: {computed}")
    lines = []
    for i in range(count):
        pid, epoch, seq, offset, delta, ts, coordinator_epoch, txn_first = SNAPSHOT_ENTRY.unpack_from(
            data, SNAPSHOT_HEAD.size + i * SNAPSHOT_ENTRY.size)
        line = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coordinator_epoch} "
                f"currentTxnFirstOffset: {java_optional_long(txn_first if txn_first >= 0 else None)} "
                f"lastTimestamp: {ts} ")
        if offset >= 0:
            line += (f"firstSequence: {decrement_sequence(seq, delta)} lastSequence: {seq} "
                     f"lastOffset: {offset} offsetDelta: {delta} timestamp: {ts}")
        lines.append(line)
    return lines


def dump_producer_snapshot(path: str, out: Callable[[str], None], err: Callable[[str], None]) -> None:
    try:
        lines = snapshot_lines(bytes(read_file(path)))
    except ValueError as e:
        err(str(e))
        return
    for line in lines:
        out(line)


def options_from(args: argparse.Namespace) -> Options:
    return Options(print_data=args.print_data_log, deep=args.deep_iteration or args.print_data_log,
                   skip_record_metadata=args.skip_record_metadata, verify_only=args.verify_index_only,
                   index_sanity_only=args.index_sanity_check, max_message_size=args.max_message_size,
                   max_bytes=args.max_bytes, parser=string_parser)


def file_arguments(values: list[str]) -> list[str]:
    return [f for value in values for f in value.split(",")]


def dump_files(files: list[str], opts: Options, stdout: TextIO, stderr: TextIO) -> int:
    """Dump each file in turn, then the reports; 1 when a file ends the run as Kafka's does."""
    def out(line: str) -> None:
        stdout.write(line + "\n")

    def err(line: str) -> None:
        stdout.flush()
        stderr.write(line + "\n")

    reports = Reports()
    for path in files:
        out(f"Dumping {display_path(path)}")
        name = os.path.basename(path)
        suffix = name[name.rfind("."):] if "." in name else ""
        if suffix == LOG_SUFFIX:
            dump_log(path, opts, reports, out)
        elif suffix == INDEX_SUFFIX:
            dump_index(path, opts, reports, out)
        elif suffix == TIME_INDEX_SUFFIX:
            dump_time_index(path, opts, reports, out)
        elif suffix == SNAPSHOT_SUFFIX:
            dump_producer_snapshot(path, out, err)
        elif suffix == TXN_INDEX_SUFFIX:
            dump_txn_index(path, out)
        else:
            err(f"Ignoring unknown file {display_path(path)}")
    for line in reports.lines():
        err(line)
    stdout.flush()
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        return dump_files(file_arguments(args.files), options_from(args), sys.stdout, sys.stderr)
    except DumpError as e:
        raise ToolError(str(e)) from None
