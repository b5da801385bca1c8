"""Producer-state snapshots: ``<20-digit offset>.snapshot`` beside the segments, in Kafka's layout
(ProducerStateManager, snapshot version 1), big-endian::

    version i16 (1) | crc u32 | count i32 | entries...
    entry: producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 | offsetDelta i32 |
           timestamp i64 | coordinatorEpoch i32 | currentTxnFirstOffset i64 (-1: none)

The CRC-32C covers everything after the crc field (the count and the entries). The file name's
offset is the log offset the snapshot reflects (the state after every batch below it). As in
Kafka only each producer's last batch is kept (``lastOffset``/``offsetDelta``/``lastSequence``;
``lastOffset`` -1 when the producer has no batch, e.g. only a marker).

Writes are atomic: a temp file, fsync, rename, fsync of the directory; a torn or corrupt file
fails its CRC and is skipped (and deleted) by the loader.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable

from crc32c import crc32c

from kafkalite.log.checkpoint import atomic_write, read_small_file
from kafkalite.log.errors import KafkaStorageError, LogError
from kafkalite.log.producer_state import BatchMetadata, ProducerStateEntry
from kafkalite.log.record_batch import INT32_MAX, NO_SEQUENCE

SNAPSHOT_SUFFIX = ".snapshot"
TEMP_SUFFIX = ".tmp"
PRODUCER_SNAPSHOT_VERSION = 1

_HEAD = struct.Struct(">hI")             # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
CRC_START = _HEAD.size                   # the CRC covers the bytes from here on
ENTRY_SIZE = _ENTRY.size
assert ENTRY_SIZE == 46


class CorruptSnapshotError(LogError):
    """A snapshot that fails its schema, version or CRC check (Kafka's CorruptSnapshotException)."""


def snapshot_file(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(dir: Path) -> dict[int, Path]:
    """The snapshots in ``dir`` by offset, ascending. Leftover temp files are removed."""
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return {}
    return snapshots_among(dir, names)


def snapshots_among(dir: Path, names: Iterable[str]) -> dict[int, Path]:
    """:func:`list_snapshots` of ``names``, the files of ``dir`` already listed (a log's load
    lists its directory once)."""
    return {off: dir / name for off, name in snapshot_names_among(dir, names).items()}


def snapshot_names_among(dir: Path | str, names: Iterable[str]) -> dict[int, str]:
    """:func:`snapshots_among` as file names (a start-up loads thousands of logs: no Path each)."""
    found: dict[int, str] = {}
    for name in names:
        if not name.endswith(SNAPSHOT_SUFFIX):
            if name.endswith(SNAPSHOT_SUFFIX + TEMP_SUFFIX):
                try:
                    os.unlink(os.path.join(dir, name))
                except FileNotFoundError:
                    pass
            continue
        if len(name) == 20 + len(SNAPSHOT_SUFFIX) and name[:20].isdigit():
            found[int(name[:20])] = name
    return dict(sorted(found.items())) if len(found) > 1 else found


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence (sequences wrap at INT32_MAX)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    items = sorted(entries, key=lambda e: e.producer_id)
    body += _COUNT.pack(len(items))
    for e in items:
        txn = e.current_txn_first_offset
        body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
                            e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
                            -1 if txn is None else txn)
    return _HEAD.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: only {len(data)} bytes")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                   f"{crc}. Computed crc: {computed}")
    (count,) = _COUNT.unpack_from(data, CRC_START)
    pos = CRC_START + _COUNT.size
    if count < 0 or len(data) - pos != count * ENTRY_SIZE:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {count} entries in {len(data) - pos} bytes")
    out: list[ProducerStateEntry] = []
    for _ in range(count):
        pid, epoch, seq, offset, delta, ts, coord_epoch, txn_first = _ENTRY.unpack_from(data, pos)
        pos += ENTRY_SIZE
        entry = ProducerStateEntry(pid, epoch, last_timestamp=ts, coordinator_epoch=coord_epoch,
                                   current_txn_first_offset=txn_first if txn_first >= 0 else None)
        if offset >= 0:
            first_seq = NO_SEQUENCE if seq == NO_SEQUENCE else _decrement_sequence(seq, delta)
            entry.batches.append(BatchMetadata(first_seq, seq, offset - delta, offset, ts))
        out.append(entry)
    return out


def read_snapshot_data(path: str | os.PathLike[str]) -> bytes:
    """A snapshot file's bytes, not yet decoded (:func:`decode_snapshot`)."""
    try:
        return read_small_file(path)
    except OSError as e:
        raise CorruptSnapshotError(f"Cannot read snapshot {path}: {e}") from e


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(read_snapshot_data(path))


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = True) -> None:
    """Write atomically: temp file, fsync, rename over ``path``, fsync the directory (without
    ``sync`` the fsyncs are the caller's: the log's flush job, as Kafka flushes the snapshot
    taken at a roll in its async flush)."""
    write_snapshot_data(path, encode_snapshot(entries), sync=sync)


def write_snapshot_data(path: Path, data: bytes, *, sync: bool = True) -> None:
    """:func:`write_snapshot` of an already encoded snapshot."""
    try:
        atomic_write(path, data, sync=sync)
    except OSError as e:
        path.with_name(path.name + TEMP_SUFFIX).unlink(missing_ok=True)   # atomic_write's temp file
        raise KafkaStorageError(f"I/O error writing producer snapshot {path}: {e}") from e


def rename_snapshot(old: Path, new: Path) -> None:
    """Rename the snapshot ``old`` to ``new`` (atomic: a crash leaves either name, each true for
    its offset when ``old`` holds the state at ``new``'s offset too)."""
    try:
        os.replace(old, new)
    except OSError as e:
        raise KafkaStorageError(f"I/O error renaming producer snapshot {old} to {new}: {e}") from e


def rename_if_same(old: Path, new: Path, data: bytes) -> bool:
    """Rename the snapshot ``old`` to ``new`` when it holds exactly ``data`` (the encoded state at
    ``new``'s offset): the file a write would create, without allocating an inode (0.2-1 ms per
    file on a busy ext4 against ~20 us for a rename; a shutdown writes one per partition). The
    rename is atomic: a crash leaves either name, each true for its offset. False, with nothing
    changed, when ``old`` differs or cannot be read."""
    try:
        if read_small_file(old) != data:
            return False
    except OSError:
        return False
    rename_snapshot(old, new)
    return True


__all__ = ["SNAPSHOT_SUFFIX", "CorruptSnapshotError", "snapshot_file", "list_snapshots", "snapshots_among",
           "snapshot_names_among",
           "encode_snapshot", "decode_snapshot", "read_snapshot", "read_snapshot_data", "write_snapshot",
           "write_snapshot_data", "rename_if_same", "rename_snapshot"]
