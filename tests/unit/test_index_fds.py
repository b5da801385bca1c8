"""Descriptors and mappings of the segment indexes: a segment at rest holds exactly one
descriptor (its ``.log``), index mappings are advised for random access, and a mapping is
never unmapped under a buffer that still points into it."""
from __future__ import annotations

import os
from pathlib import Path

from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log.index import FileMapping
from kafkalite.log.log import Log
from kafkalite.log.offset_index import OffsetIndex
from kafkalite.log.time_index import TimeIndex

T0 = 1_700_000_000_000


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def batch(n: int) -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 22)
    for i in range(n):
        b.append(T0 + i, b"k", b"v" * 100)
    b.close()
    return bytes(b.buffer())


def mapping_lines(path: Path) -> list[str]:
    """The /proc/self/smaps block of every mapping of ``path``."""
    blocks, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(" ", 1)[0]
            if "-" in first and all(c in "0123456789abcdef-" for c in first):
                current = [line] if line.rstrip().endswith(str(path)) else None
                if current is not None:
                    blocks.append(current)
            elif current is not None:
                current.append(line)
    return ["".join(b) for b in blocks]


def mapped(address: int) -> bool:
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
            if lo <= address < hi:
                return True
    return False


def test_one_descriptor_per_segment_with_indexes_in_use(tmp_path: Path) -> None:
    cfg = LogConfig(index_interval_bytes=1, segment_bytes=1 << 20)
    before = open_fds()
    logs = [Log.open(tmp_path / f"t-{p}", cfg, now_ms=T0) for p in range(50)]
    assert open_fds() - before == 50
    for lg in logs:
        for _ in range(3):
            lg.append_as_leader(batch(5), 0, T0)
        assert len(lg.read(0, 1 << 20).read_bytes()) == 3 * len(batch(5))
    # every active segment's offset and time index is mapped and written, still one fd each
    assert all(lg.active_segment.offset_index.entries == 2 for lg in logs)
    assert all(lg.active_segment.time_index.entries == 1 for lg in logs)   # same max timestamp
    assert open_fds() - before == 50
    for lg in logs[:10]:
        lg.roll()
    assert open_fds() - before == 60          # a rolled log has two segments, two .log files
    for lg in logs:
        lg.close()
    assert open_fds() == before


def test_index_mapping_is_random_access_and_holds_no_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    before = open_fds()
    idx = OffsetIndex(path, 0, 10 * 1024 * 1024)
    idx.append(5, 4096)
    assert open_fds() == before
    blocks = mapping_lines(path)
    assert len(blocks) == 1
    flags = next(line for line in blocks[0].splitlines() if line.startswith("VmFlags:"))
    assert " rr" in flags                   # MADV_RANDOM: no read-ahead on first touches
    # the first append reserved disk blocks ahead of it (64 KiB), not the 10 MiB file
    assert path.stat().st_size == 10 * 1024 * 1024
    assert path.stat().st_blocks * 512 == 64 * 1024
    idx.close()
    assert mapping_lines(path) == []
    assert path.stat().st_size == 8


def test_time_index_reopens_lazily_after_close_handler(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    idx = TimeIndex(path, 100, 1200)
    idx.maybe_append(T0, 105)
    idx.maybe_append(T0 + 10, 110)
    idx.close_handler()
    assert mapping_lines(path) == []
    assert idx.lookup(T0 + 5) == (T0, 105)    # mapped again on use
    assert len(mapping_lines(path)) == 1
    idx.close()


def test_mapping_outlives_a_buffer_still_pointing_into_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcdefgh" * 512)
    fd = os.open(path, os.O_RDWR)
    try:
        m = FileMapping(fd, 4096)
    finally:
        os.close(fd)
    assert m.view is not None
    held = m.view[8:16]                       # a buffer that escaped the owner
    address = m.address
    m.close()
    assert m.view is None
    assert mapped(address)                    # not unmapped under ``held``
    assert bytes(held) == b"abcdefgh"
    held.release()
    del held
    fd = os.open(path, os.O_RDWR)
    try:
        other = FileMapping(fd, 4096)
    finally:
        os.close(fd)
    other.close()                             # closing any mapping unmaps the retired ones
    assert not mapped(address)
