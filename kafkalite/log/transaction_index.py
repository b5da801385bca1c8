"""The aborted-transaction index of one segment, ``<base offset>.txnindex`` (Kafka's
TransactionIndex).

An append-only file of fixed 34-byte entries, one per transaction aborted by a marker in the
segment, in the order of their markers::

    version i16 (0) | producerId i64 | firstOffset i64 | lastOffset i64 | lastStableOffset i64

``lastOffset`` is the ABORT marker's offset and ``lastStableOffset`` the LSO right after the
abort. A read_committed fetch collects the entries overlapping its range so the consumer can
drop the aborted records; the LSO of an entry tells the search when later segments cannot hold
anything relevant any more.

The file is created on the first append (most segments never see an abort). Only the owning
segment (on the event loop) writes; reads use ``pread`` and see whole entries.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterator, NamedTuple

from kafkalite.fileio import NamedFile
from kafkalite.log.errors import CorruptIndexError, KafkaStorageError

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    # True when an entry's LSO reaches the upper bound: no later segment can add anything.
    is_complete: bool


def decode_entries(data: bytes, path: Path | str = "") -> list[AbortedTxn]:
    """Every entry of a txn index file's bytes. A partial trailing entry or an unknown version
    is corruption (CorruptIndexError)."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            f"Transaction index {path} has a partial entry: size {len(data)} is not a multiple "
            f"of {ENTRY_SIZE}")
    out: list[AbortedTxn] = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index {path}, "
                f"current version is {ABORTED_TXN_VERSION}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex(NamedFile):
    def __init__(self, path: Path | str, start_offset: int, *, absent: bool = False) -> None:
        """``absent``: the caller knows the file does not exist (a load that listed the
        directory), so reading it needs no system call until an append creates it."""
        self._set_file_name(path)
        self._absent = absent
        self.start_offset = start_offset
        self._last_offset: int | None = None
        self._last_offset_loaded = False
        # The entries as last read or written: only this object writes the file, so a
        # read_committed fetch does not re-read it every time.
        self._cache: list[AbortedTxn] | None = None

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name})"

    # -- reading -------------------------------------------------------------------------------
    def _read_all(self) -> bytes:
        if self._absent:
            return b""
        try:
            with open(self._fspath, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""
        except OSError as e:
            raise KafkaStorageError(f"I/O error reading {self.path}: {e}") from e

    def all_entries(self) -> list[AbortedTxn]:
        cache = self._cache
        if cache is None:
            data = self._read_all()
            # A torn trailing entry (crash mid-write) is ignored by readers; sanity_check
            # flags it.
            usable = len(data) - len(data) % ENTRY_SIZE
            cache = self._cache = decode_entries(data[:usable], self._fspath)
        return cache

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.all_entries())

    @property
    def last_offset(self) -> int | None:
        if not self._last_offset_loaded:
            entries = self.all_entries()
            self._last_offset = entries[-1].last_offset if entries else None
            self._last_offset_loaded = True
        return self._last_offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        """Entries overlapping ``[fetch_offset, upper_bound_offset)``; complete once an entry's
        LSO reaches the upper bound (Kafka's collectAbortedTxns)."""
        found: list[AbortedTxn] = []
        for txn in self.all_entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Whole entries of version 0, none ending before the segment's base offset."""
        for txn in decode_entries(self._read_all(), self._fspath):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less "
                    f"than start offset {self.start_offset}")

    # -- writing -------------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and last >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {last} of index "
                f"{self.path}")
        try:
            fd = os.open(self._fspath, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            self._absent = False
            try:
                os.write(fd, txn.encode())
            finally:
                os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"I/O error appending to {self.path}: {e}") from e
        self._last_offset = txn.last_offset
        self._last_offset_loaded = True
        if self._cache is not None:
            self._cache = self._cache + [txn]   # a new list: readers may hold the old one

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= ``offset`` (and a torn tail)."""
        data = self._read_all()
        entries = decode_entries(data[:len(data) - len(data) % ENTRY_SIZE], self._fspath)
        keep = 0
        for txn in entries:
            if txn.last_offset >= offset:
                break
            keep += 1
        new_size = keep * ENTRY_SIZE
        if new_size != len(data):
            try:
                os.truncate(self._fspath, new_size)
            except OSError as e:
                raise KafkaStorageError(f"I/O error truncating {self.path}: {e}") from e
        self._last_offset = entries[keep - 1].last_offset if keep else None
        self._last_offset_loaded = True
        self._cache = entries[:keep]

    def reset(self) -> None:
        """Empty the index (segment recovery rebuilds it); the file goes away."""
        self.delete()

    def flush(self) -> None:
        if self._absent:
            return
        try:
            fd = os.open(self._fspath, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        except OSError as e:
            raise KafkaStorageError(f"I/O error flushing {self.path}: {e}") from e
        finally:
            os.close(fd)

    def rename_to(self, path: Path) -> None:
        if not self._absent:
            try:
                os.replace(self._fspath, path)
            except FileNotFoundError:
                pass
        self._set_file_name(path)

    def delete(self) -> None:
        if not self._absent:    # recovery resets every recovered segment's: most have none
            try:
                os.unlink(self._fspath)
            except FileNotFoundError:
                pass
        self._absent = True
        self._last_offset = None
        self._last_offset_loaded = True
        self._cache = []


__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "ENTRY_SIZE",
           "decode_entries"]
