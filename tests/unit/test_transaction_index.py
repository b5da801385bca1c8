"""The aborted-transaction index (Kafka's TransactionIndex): 34-byte entries, append order,
truncation, the search a read_committed fetch runs, and the sanity check."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalite.log.errors import CorruptIndexError
from kafkalite.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entry_layout_and_lazy_file(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert not idx.path.exists()
    assert idx.all_entries() == [] and idx.last_offset is None
    idx.append(AbortedTxn(7, 3, 9, 10))
    data = idx.path.read_bytes()
    assert ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 3, 9, 10)
    idx.append(AbortedTxn(8, 5, 12, 11))
    # A fresh reader sees both entries, in order.
    again = TransactionIndex(idx.path, 0)
    assert again.all_entries() == [AbortedTxn(7, 3, 9, 10), AbortedTxn(8, 5, 12, 11)]
    assert again.last_offset == 12


def test_last_offsets_must_increase(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "x.txnindex", 0)
    idx.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(2, 1, 5, 6))
    with pytest.raises(ValueError):
        TransactionIndex(idx.path, 0).append(AbortedTxn(2, 1, 4, 6))
    assert len(idx.path.read_bytes()) == ENTRY_SIZE


def test_truncate_to(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "x.txnindex", 0)
    for pid, (first, last) in enumerate([(0, 3), (4, 8), (9, 15)]):
        idx.append(AbortedTxn(pid, first, last, last + 1))
    idx.truncate_to(9)      # entries whose marker is at or past 9 go
    assert [t.last_offset for t in idx.all_entries()] == [3, 8]
    assert len(idx.path.read_bytes()) == 2 * ENTRY_SIZE
    idx.append(AbortedTxn(9, 9, 10, 11))
    assert [t.last_offset for t in TransactionIndex(idx.path, 0).all_entries()] == [3, 8, 10]
    idx.truncate_to(0)
    assert idx.path.read_bytes() == b"" and idx.last_offset is None


def test_collect_aborted_txns(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "x.txnindex", 0)
    idx.append(AbortedTxn(1, 0, 10, 11))
    idx.append(AbortedTxn(2, 5, 20, 8))     # another transaction held the LSO at 8
    idx.append(AbortedTxn(3, 21, 30, 31))
    r = idx.collect_aborted_txns(0, 5)
    # Only the first overlaps [0, 5); its LSO 11 >= 5 ends the search.
    assert r.aborted_transactions == [AbortedTxn(1, 0, 10, 11)] and r.is_complete
    r = idx.collect_aborted_txns(11, 25)
    assert r.aborted_transactions == [AbortedTxn(2, 5, 20, 8), AbortedTxn(3, 21, 30, 31)]
    assert r.is_complete
    r = idx.collect_aborted_txns(31, 40)
    assert r.aborted_transactions == [] and not r.is_complete


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    idx = TransactionIndex(path, 100)
    idx.sanity_check()                      # no file: fine
    idx.append(AbortedTxn(1, 100, 105, 106))
    idx.sanity_check()
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)               # torn entry
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 100, 105, 106))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 90, 99, 100))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()


def test_rename_and_delete(tmp_path: Path) -> None:
    idx = TransactionIndex(tmp_path / "a.txnindex", 0)
    idx.rename_to(tmp_path / "b.txnindex")          # no file yet: just the path
    idx.append(AbortedTxn(1, 0, 1, 2))
    assert (tmp_path / "b.txnindex").exists()
    idx.rename_to(tmp_path / "c.txnindex")
    assert not (tmp_path / "b.txnindex").exists()
    assert TransactionIndex(tmp_path / "c.txnindex", 0).all_entries() == [AbortedTxn(1, 0, 1, 2)]
    idx.delete()
    assert not (tmp_path / "c.txnindex").exists() and idx.all_entries() == []
