"""Descriptors and mappings of the segment indexes: a segment at rest holds exactly one
descriptor (its ``.log``), index mappings are advised for random access, and a mapping is
never unmapped under a buffer that still points into it."""
from __future__ import annotations

import gc
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
    # Earlier tests' unreachable logs close their descriptors when collected: collect first, so
    # a collection during the test does not change the count.
    gc.collect()
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
    # the first append reserved the disk block it writes (4 KiB), not the 10 MiB file: more
    # reserved ahead would make the trim at close cost milliseconds on ext4
    assert path.stat().st_size == 10 * 1024 * 1024
    assert path.stat().st_blocks * 512 == 4 * 1024
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


def test_log_creation_out_of_descriptors_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    import resource

    import pytest

    from kafkalite.log.errors import KafkaStorageError
    from kafkalite.log.log_manager import LogManager

    lm = LogManager([tmp_path], LogConfig(), lock_dirs=False)
    lm.startup()
    # skip the budget: os.open inside Log.open itself hits EMFILE (no free number below 3)
    monkeypatch.setattr(lm._descriptor_budget, "reserve_one", lambda: None)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))
        with pytest.raises(KafkaStorageError, match="Too many open files"):
            lm.get_or_create_log("t", 0)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not (tmp_path / "t-0").exists()
    lg = lm.get_or_create_log("t", 0)          # the next attempt creates it from nothing
    assert lg.log_end_offset == 0 and (tmp_path / "t-0").is_dir()
    lm.shutdown()


def test_budget_refuses_the_last_descriptors() -> None:
    import resource

    import pytest

    from kafkalite.log.descriptor_limit import HEADROOM, DescriptorBudget
    from kafkalite.log.errors import KafkaStorageError

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = DescriptorBudget()
    n = open_fds()
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + HEADROOM, hard))
        with pytest.raises(KafkaStorageError, match=r"^\[Errno 24\] Too many open files: "):
            budget.reserve_one()
        resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))   # cannot even count: exhausted
        with pytest.raises(KafkaStorageError, match="Too many open files"):
            budget.reserve_one()
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + HEADROOM + 20, hard))
        budget.reserve_one()     # counts 20 spare: the next 10 creations are not counted
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + HEADROOM, hard))
        for _ in range(10):
            budget.reserve_one()
        with pytest.raises(KafkaStorageError):   # counted again
            budget.reserve_one()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_start_up_raises_the_soft_limit_to_the_hard_one() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        ["prlimit", "--nofile=256:1024", "--", sys.executable, "-c",
         "from kafkalite.log.descriptor_limit import raise_open_file_limit as r; "
         "import resource; print(r(), resource.getrlimit(resource.RLIMIT_NOFILE))"],
        capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(256, 1024) (1024, 1024)"


def test_descriptor_budget_of_the_segments_on_disk(tmp_path: Path) -> None:
    from kafkalite.log.descriptor_limit import count_segment_files, descriptor_shortfall_message

    for p in range(3):
        d = tmp_path / f"t-{p}"
        d.mkdir()
        for base in range(p + 1):
            (d / f"{base:020d}.log").touch()
            (d / f"{base:020d}.index").touch()
    (tmp_path / "t-0" / "00000000000000000009.log.deleted").touch()
    (tmp_path / "t-9.abc-delete").mkdir()
    (tmp_path / "t-9.abc-delete" / "00000000000000000000.log").touch()
    assert count_segment_files([tmp_path, tmp_path / "absent"]) == 6
    assert descriptor_shortfall_message(6000, 6100, 4096) == (
        "6000 log segments need 6100 open files but the open file limit (RLIMIT_NOFILE) is "
        "4096; raise it, e.g. `ulimit -n 12288` before starting or LimitNOFILE=12288 in the "
        "systemd unit")


def test_roll_out_of_descriptors_keeps_the_log_appendable(tmp_path: Path) -> None:
    import resource

    import pytest

    from kafkalite.log.errors import KafkaStorageError

    lg = Log.open(tmp_path / "t-0", LogConfig(), now_ms=T0)
    lg.append_as_leader(batch(3), 0, T0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))   # no descriptor number free
        with pytest.raises(KafkaStorageError, match="Too many open files"):
            lg.roll(now_ms=T0)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [s.base_offset for s in lg.segments] == [0]
    assert lg.active_segment.offset_index.max_entries == LogConfig().segment_index_bytes // 8
    lg.append_as_leader(batch(2), 0, T0)
    assert lg.log_end_offset == 5
    assert lg.roll(now_ms=T0).base_offset == 5
    lg.append_as_leader(batch(1), 0, T0)
    assert len(lg.read(0, 1 << 20).read_bytes()) == len(batch(3)) + len(batch(2)) + len(batch(1))
    assert len(lg.read(5, 1 << 20).read_bytes()) == len(batch(1))
    lg.close()


def test_first_append_of_a_segment_maps_no_index(tmp_path: Path) -> None:
    """Kafka's LogSegment.append writes an index entry for an append (at most one) only when the
    bytes appended before it exceed index.interval.bytes: a segment's first append, however
    large, writes none (so, with many partitions and one batch each, no index is mapped); the
    next one does, at the second append's position."""
    one = batch(50)                           # ~5.5 KiB, above the 4096-byte interval
    lg = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=4096), now_ms=T0)
    seg = lg.active_segment
    lg.append_as_leader(one, 0, T0)
    assert mapping_lines(seg.offset_index.path) == [] and mapping_lines(seg.time_index.path) == []
    assert (seg.offset_index.entries, seg.time_index.entries) == (0, 0)      # (maps them to look)
    lg.append_as_leader(one, 0, T0)
    assert seg.offset_index.entries == 1 and seg.offset_index.lookup(99) == (99, len(one))   # the batch's last offset
    assert seg.time_index.entries == 1
    lg.close()
