"""Offset and time indexes: memory-mapped files, binary-search lookups, truncation, trimming,
reload (including an untrimmed, zero-padded file after a crash) and sanity checks."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.log.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from kafkalite.log.offset_index import OffsetIndex
from kafkalite.log.time_index import TimeIndex

BASE = 1000


def test_offset_index_preallocates_and_trims(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    idx = OffsetIndex(path, BASE, 85)       # rounded down to 10 entries of 8 bytes
    assert idx.entries == 0 and idx.max_entries == 10
    assert path.stat().st_size == 80
    assert idx.lookup(5000) == (BASE, 0)
    for i in range(10):
        assert not idx.is_full
        idx.append(BASE + 10 * i + 5, 100 * (i + 1))
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.append(BASE + 500, 5000)
    assert idx.last_offset == BASE + 95
    idx.truncate_to(BASE + 40)               # drops entries with offset >= 1040
    assert idx.entries == 4 and idx.last_offset == BASE + 35
    idx.trim_to_valid_size()
    assert path.stat().st_size == 32
    idx.close()
    again = OffsetIndex(path, BASE, 80)
    assert again.entries == 4
    assert [again.entry(i) for i in range(4)] == [(BASE + 5, 100), (BASE + 15, 200),
                                                 (BASE + 25, 300), (BASE + 35, 400)]
    again.resize(80)
    assert again.max_entries == 10 and again.entries == 4 and path.stat().st_size == 80
    again.close()


def test_offset_index_lookup_and_truncate_edges(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", BASE, 800)
    entries = [(BASE + 3, 61), (BASE + 9, 500), (BASE + 20, 900)]
    for o, p in entries:
        idx.append(o, p)
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup(BASE + 3) == (BASE + 3, 61)
    assert idx.lookup(BASE + 8) == (BASE + 3, 61)
    assert idx.lookup(BASE + 9) == (BASE + 9, 500)
    assert idx.lookup(10**9) == (BASE + 20, 900)
    assert idx.lookup_by_position(499) == (BASE + 3, 61)
    assert idx.lookup_by_position(900) == (BASE + 20, 900)
    assert idx.lookup_by_position(10) == (BASE, 0)
    with pytest.raises(CorruptIndexError):
        idx.append(BASE + 20, 1000)           # not increasing
    with pytest.raises(LogSegmentOffsetOverflowError):
        idx.append(BASE + 2**31, 2000)
    idx.truncate_to(BASE + 9)                 # exact hit: that entry goes too
    assert idx.entries == 1
    idx.truncate_to(BASE + 100)               # nothing at or above: unchanged
    assert idx.entries == 1
    idx.truncate_to(BASE)                     # below everything: empty
    assert idx.entries == 0
    idx.close()



def test_close_trims_a_mapped_index_without_mapping_it_again(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's close: trim to the entries, then unmap. The cut file is not mapped again on the
    # way (every shutdown closes thousands of mapped indexes); what is on disk is the same.
    from kafkalite.log import index as index_module
    mappings: list[int] = []
    real_mapping = index_module.FileMapping

    def counted(fd: int, length: int) -> object:
        mappings.append(length)
        return real_mapping(fd, length)
    monkeypatch.setattr(index_module, "FileMapping", counted)
    for cls, name, entry in ((OffsetIndex, "00000000000000001000.index", 8),
                             (TimeIndex, "00000000000000001000.timeindex", 12)):
        path = tmp_path / name
        idx = cls(path, BASE, 10 * 1024 * 1024)
        for i in range(3):
            if cls is OffsetIndex:
                idx.append(BASE + 10 * i, 100 * i)
            else:
                idx.maybe_append(1_700_000_000_000 + i, BASE + 10 * i)
        assert path.stat().st_size == 10 * 1024 * 1024 // entry * entry and mappings
        mappings.clear()
        idx.close()
        assert mappings == [] and path.stat().st_size == 3 * entry
        idx.close()                                   # a second close changes nothing
        assert path.stat().st_size == 3 * entry
        again = cls(path, BASE, 10 * 1024 * 1024)
        assert again.entries == 3
        again.close()

def test_entries_after_a_trim_reserve_no_block_past_the_one_they_are_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An index trimmed to 24 bytes, mapped again and extended (a recovered active segment) has
    # its first block still; the next entries go there. Reserving from the trimmed length plus a
    # block reserved a second block that the close's trim freed again (ext4 without a journal
    # discards it synchronously: one device round trip per index at shutdown).
    from kafkalite.log import index as index_module
    reserved: list[tuple[int, int]] = []
    real_fallocate = os.posix_fallocate

    def recorded(fd: int, offset: int, length: int) -> None:
        reserved.append((offset, offset + length))
        real_fallocate(fd, offset, length)
    monkeypatch.setattr(index_module.os, "posix_fallocate", recorded)
    path = tmp_path / "00000000000000001000.timeindex"
    idx = TimeIndex(path, BASE, 10 * 1024 * 1024)
    for i in range(2):
        idx.maybe_append(1_700_000_000_000 + i, BASE + i)
    assert reserved == [(0, 4096)]
    idx.close()
    assert path.stat().st_size == 24
    again = TimeIndex(path, BASE, 10 * 1024 * 1024)
    assert again.entries == 2 and again.entry(1) == (1_700_000_000_001, BASE + 1)   # mapped at 24 bytes
    again.resize(10 * 1024 * 1024 // 12 * 12)
    reserved.clear()
    for i in range(2, 400):                       # 400 entries of 12 bytes: the second block too
        again.maybe_append(1_700_000_000_000 + i, BASE + i)
    assert reserved and reserved[0][0] == 24 and reserved[-1][1] == 8192
    assert all(end % 4096 == 0 and end - start <= 4096 for start, end in reserved)
    assert [end for _s, end in reserved] == [4096, 8192]
    again.close()
    assert path.stat().st_size == 400 * 12
    final = TimeIndex(path, BASE, 10 * 1024 * 1024)
    assert final.entries == 400 and final.entry(399) == (1_700_000_000_399, BASE + 399)
    final.close()


def test_untrimmed_index_after_crash_counts_only_real_entries(tmp_path: Path) -> None:
    path = tmp_path / "b.index"
    idx = OffsetIndex(path, BASE, 8 * 1000)
    for i in range(7):
        idx.append(BASE + i * 2 + 1, 64 * (i + 1))
    idx.flush()
    idx.close_handler()                       # no trim: the file keeps its zero tail
    assert path.stat().st_size == 8000
    again = OffsetIndex(path, BASE, 8 * 1000)
    assert again.entries == 7 and again.last_offset == BASE + 13
    again.sanity_check(log_size=10_000)
    tpath = tmp_path / "b.timeindex"
    tidx = TimeIndex(tpath, BASE, 12 * 100)
    for i in range(5):
        tidx.maybe_append(10_000 + i, BASE + i)
    tidx.close_handler()
    tagain = TimeIndex(tpath, BASE, 12 * 100)
    assert tagain.entries == 5 and tagain.last_entry() == (10_004, BASE + 4)
    again.close()
    tagain.close()


def test_offset_index_sanity_checks(tmp_path: Path) -> None:
    path = tmp_path / "c.index"
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x01\x00\x00\x00")   # 10 bytes: not whole entries
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, 80).sanity_check()
    idx = OffsetIndex(tmp_path / "d.index", BASE, 80)
    idx.append(BASE + 5, 4000)
    idx.sanity_check(log_size=5000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=4000)       # points past the end of the log
    idx.close()


def test_time_index_semantics(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    idx = TimeIndex(path, BASE, 12 * 5)       # 5 slots, full at 4 (one kept for the close entry)
    assert idx.last_entry() == (-1, BASE)
    assert idx.lookup(123) == (-1, BASE)
    idx.maybe_append(-1, BASE)                # no timestamp: never indexed
    assert idx.entries == 0
    idx.maybe_append(100, BASE + 1)
    idx.maybe_append(100, BASE + 1)           # same entry again: ignored
    idx.maybe_append(150, BASE + 4)
    idx.maybe_append(200, BASE + 9)
    assert idx.entries == 3 and not idx.is_full
    idx.maybe_append(250, BASE + 12)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(300, BASE + 13)
    idx.maybe_append(300, BASE + 13, skip_full_check=True)
    assert idx.entries == 5
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(400, BASE + 2, skip_full_check=True)     # offset going back
    assert idx.lookup(99) == (-1, BASE)
    assert idx.lookup(100) == (100, BASE + 1)
    assert idx.lookup(199) == (150, BASE + 4)
    assert idx.lookup(10**12) == (300, BASE + 13)
    idx.truncate_to(BASE + 9)
    assert idx.entries == 2 and idx.last_entry() == (150, BASE + 4)
    idx.truncate_to(BASE + 5)
    assert idx.entries == 2
    idx.close()
    assert path.stat().st_size == 24
    again = TimeIndex(path, BASE, 60)
    assert again.entries == 2 and again.last_entry() == (150, BASE + 4)
    again.sanity_check()
    again.close()


def test_time_index_sanity_check_detects_decreasing(tmp_path: Path) -> None:
    path = tmp_path / "e.timeindex"
    import struct
    path.write_bytes(struct.pack(">qi", 500, 1) + struct.pack(">qi", 400, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE, 120).sanity_check()


def test_delete_removes_file(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "f.index", BASE, 80)
    idx.append(BASE + 1, 100)
    idx.delete()
    assert not (tmp_path / "f.index").exists()
    assert not os.listdir(tmp_path)


@settings(max_examples=40, deadline=None)
@given(gaps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), min_size=0, max_size=60),
       probes=st.lists(st.integers(-10, 3500), min_size=1, max_size=20),
       cut=st.integers(-5, 3500))
def test_offset_index_matches_model(tmp_path_factory: pytest.TempPathFactory, gaps: list,
                                    probes: list, cut: int) -> None:
    d = tmp_path_factory.mktemp("oi")
    idx = OffsetIndex(d / "x.index", BASE, 8 * 64)
    model: list[tuple[int, int]] = []
    off, pos = BASE, 0
    for dg, dp in gaps:
        off += dg
        pos += dp
        idx.append(off, pos)
        model.append((off, pos))

    def expect(target: int) -> tuple[int, int]:
        below = [e for e in model if e[0] <= target]
        return below[-1] if below else (BASE, 0)

    for p in probes:
        assert idx.lookup(BASE + p) == expect(BASE + p)
    idx.truncate_to(BASE + cut)
    model = [e for e in model if e[0] < BASE + cut]
    assert idx.entries == len(model)
    for p in probes:
        assert idx.lookup(BASE + p) == expect(BASE + p)
    idx.close()
    again = OffsetIndex(d / "x.index", BASE, 8 * 64)
    assert [again.entry(i) for i in range(again.entries)] == model
    again.close()


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4)), max_size=40),
       probes=st.lists(st.integers(-5, 1000), min_size=1, max_size=15),
       cut=st.integers(0, 200))
def test_time_index_matches_model(tmp_path_factory: pytest.TempPathFactory, steps: list,
                                  probes: list, cut: int) -> None:
    d = tmp_path_factory.mktemp("ti")
    idx = TimeIndex(d / "x.timeindex", BASE, 12 * 100)
    model: list[tuple[int, int]] = []
    ts, off = 0, BASE
    for dts, doff in steps:
        ts += dts
        off += doff
        idx.maybe_append(ts, off)
        if (not model and ts > -1) or (model and ts > model[-1][0]):
            model.append((ts, off))

    def expect(target: int) -> tuple[int, int]:
        below = [e for e in model if e[0] <= target]
        return below[-1] if below else (-1, BASE)

    assert idx.entries == len(model)
    for p in probes:
        assert idx.lookup(p) == expect(p)
    idx.truncate_to(BASE + cut)
    model = [e for e in model if e[1] < BASE + cut]
    assert idx.entries == len(model)
    for p in probes:
        assert idx.lookup(p) == expect(p)
    idx.close()


@pytest.mark.parametrize("slots", [10, 600])            # 80 bytes: read whole; 4,800: fstat + preads
@pytest.mark.parametrize("used", [0, 1, 2, 9, 10])
@pytest.mark.parametrize("trimmed", [True, False])
def test_probe_without_mapping_answers_as_the_mapped_index(tmp_path: Path, slots: int, used: int,
                                                           trimmed: bool) -> None:
    """The last entry, the first (sanity check) and fullness of an index read without mapping
    it (a segment loaded at start-up) equal the mapped index's, for a file read with one call
    and one read with preads, trimmed or with the zero tail of a crash."""
    path = tmp_path / "00000000000000001000.index"
    entries = b"".join(OffsetIndex.ENTRY.pack(3 * i + 1, 100 * (i + 1)) for i in range(used))
    path.write_bytes(entries if trimmed else entries + bytes(8 * (slots - used)))
    probed = OffsetIndex(path, BASE, 8 * slots)
    last = probed.last_entry()
    full = probed.is_full
    probed.sanity_check(log_size=100 * used + 1)
    assert not probed._loaded                # answered by the probe alone
    assert last == ((BASE + 3 * (used - 1) + 1, 100 * used) if used else (BASE, 0))
    mapped = OffsetIndex(path, BASE, 8 * slots)
    assert (mapped.entries, mapped.last_entry(), mapped.is_full) == (used, last, full)
    assert full == (trimmed or used == slots)
    with pytest.raises(CorruptIndexError) if used else _no_error():
        probed.sanity_check(log_size=100 * used)     # the last position is past the log's end
    mapped.close()
    probed.close()


def _no_error():  # type: ignore[no-untyped-def]
    import contextlib
    return contextlib.nullcontext()


def test_probe_of_a_time_index_checks_its_first_entry_without_mapping(tmp_path: Path) -> None:
    """A small time index whose last timestamp is below its first fails the sanity check read
    from one read of the file, as the mapped one does."""
    path = tmp_path / "00000000000000001000.timeindex"
    tidx = TimeIndex(path, BASE, 12 * 10)
    tidx.maybe_append(20_000, BASE + 1)
    tidx.maybe_append(20_005, BASE + 3)
    tidx.trim_to_valid_size()
    tidx.close()
    data = bytearray(path.read_bytes())
    data[12:20] = (10_000).to_bytes(8, "big")      # the last timestamp below the first
    path.write_bytes(bytes(data))
    probed = TimeIndex(path, BASE, 12 * 10)
    with pytest.raises(CorruptIndexError):
        probed.sanity_check()
    assert not probed._loaded
    probed.close_handler()
