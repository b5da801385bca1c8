"""Base of the sparse, memory-mapped segment indexes (Kafka's AbstractIndex).

An index file is preallocated to ``segment.index.bytes`` (rounded down to a whole number of
entries) while its segment is active and trimmed to its valid entries when the segment rolls
or closes. It is mapped lazily on first use (as Kafka's LazyIndex) so idle old segments cost no
mapping. Entries are sorted, so lookups binary search.

An index that was never trimmed (a crash) ends in zero-filled preallocated space; on load the
zero tail is found by binary search and not counted — a real entry is never all zeros except
in a corner the sanity check catches, and then the segment rebuilds the index from the log.
"""
from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from kafkalite.log.errors import CorruptIndexError


def round_down_to_entry(size: int, entry_size: int) -> int:
    return size - size % entry_size


class AbstractIndex:
    ENTRY: struct.Struct  # set by subclasses
    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        if max_index_size < self.entry_size:
            raise ValueError(f"Invalid max index size: {max_index_size}")
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mmap: mmap.mmap | None = None
        self._loaded = False
        self._length = 0
        self._entries = 0
        self._max_entries = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def _load(self) -> None:
        newly_created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if newly_created:
                os.ftruncate(fd, round_down_to_entry(self.max_index_size, self.entry_size))
            self._length = os.fstat(fd).st_size
            self._mmap = mmap.mmap(fd, self._length) if self._length > 0 else None
        finally:
            os.close(fd)   # the mapping keeps its own reference to the file
        self._max_entries = self._length // self.entry_size
        self._loaded = True
        self._entries = 0 if newly_created else self._count_valid_entries()

    def _ensure(self) -> None:
        if not self._loaded:
            self._load()

    def _count_valid_entries(self) -> int:
        """Entries of a pre-existing file: all whole entries minus a zero-filled tail."""
        n = self._max_entries
        if n == 0:
            return 0
        lo, hi = 1, n          # find the first unused slot in [1, n)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_unused(mid):
                hi = mid
            else:
                lo = mid + 1
        if lo == 1 and self._is_unused(0):
            return 0
        return lo

    def _is_unused(self, slot: int) -> bool:
        assert self._mmap is not None
        start = slot * self.entry_size
        return self._mmap[start:start + self.entry_size] == bytes(self.entry_size)

    def resize(self, new_size: int) -> bool:
        """Set the file length (whole entries), remapping. Returns whether it changed."""
        self._ensure()
        rounded = round_down_to_entry(new_size, self.entry_size)
        if rounded == self._length:
            return False
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, rounded)
            self._mmap = mmap.mmap(fd, rounded) if rounded > 0 else None
        finally:
            os.close(fd)
        self._length = rounded
        self._max_entries = rounded // self.entry_size
        self._entries = min(self._entries, self._max_entries)
        return True

    def trim_to_valid_size(self) -> None:
        self._ensure()
        self.resize(self._entries * self.entry_size)

    def reset(self) -> None:
        """Drop every entry and re-extend to the maximum size (an active segment's index)."""
        self._ensure()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    def close(self) -> None:
        """Trim and unmap (Kafka's AbstractIndex.close)."""
        if self._loaded:
            self.trim_to_valid_size()
            self._release()

    def close_handler(self) -> None:
        """Unmap without trimming (the files are going away)."""
        self._release()

    def _release(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        self._loaded = False

    def delete(self) -> None:
        self._release()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    # -- entries -----------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        self._ensure()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._ensure()
        return self._max_entries

    @property
    def is_full(self) -> bool:
        self._ensure()
        return self._entries >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        self._ensure()
        return self._entries * self.entry_size

    def _entry(self, slot: int) -> tuple[int, int]:
        assert self._mmap is not None
        return self.ENTRY.unpack_from(self._mmap, slot * self.entry_size)

    def _write_entry(self, a: int, b: int) -> None:
        assert self._mmap is not None
        self.ENTRY.pack_into(self._mmap, self._entries * self.entry_size, a, b)
        self._entries += 1

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = max(0, min(entries, self._entries))

    def _largest_lower_bound_slot(self, target: int, field: int) -> int:
        """Slot of the largest entry whose ``field`` <= target, or -1."""
        n = self._entries
        if n == 0:
            return -1
        unpack = self.ENTRY.unpack_from
        mm = self._mmap
        size = self.entry_size
        if unpack(mm, 0)[field] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if unpack(mm, mid * size)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _check_length(self) -> None:
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self.path.name} is corrupt, found {self._length} bytes which is "
                f"not a multiple of {self.entry_size}")
