"""Sparse offset index: relative offset (i32) -> file position (i32), Kafka's OffsetIndex.

An entry ``(offset, position)`` says the batch starting at ``position`` has last offset
``offset``; ``lookup(target)`` returns the largest entry with offset <= target, from where a
forward scan of batch headers finds the batch containing ``target``.
"""
from __future__ import annotations

import struct
from pathlib import Path

from kafkalite.log.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from kafkalite.log.index import AbstractIndex

INT32_MAX = 2**31 - 1


class OffsetIndex(AbstractIndex):
    ENTRY = struct.Struct(">ii")
    entry_size = 8

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def last_offset(self) -> int:
        self._ensure()
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._entry(self._entries - 1)[0]

    def entry(self, slot: int) -> tuple[int, int]:
        """(absolute offset, position) of ``slot``."""
        self._ensure()
        if not 0 <= slot < self._entries:
            raise IndexError(slot)
        rel, pos = self._entry(slot)
        return self.base_offset + rel, pos

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target, else (base_offset, 0)."""
        self._ensure()
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, 0)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self._entry(slot)
        return self.base_offset + rel, pos

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """Largest entry with file position <= ``position``, else (base_offset, 0)."""
        self._ensure()
        slot = self._largest_lower_bound_slot(position, 1)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self._entry(slot)
        return self.base_offset + rel, pos

    def append(self, offset: int, position: int) -> None:
        self._ensure()
        if not self.can_append_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Offset {offset} does not fit an index with base offset {self.base_offset}")
        if self._entries > 0 and offset <= self.last_offset:
            raise CorruptIndexError(
                f"Attempt to append an offset ({offset}) to position {self._entries} no larger "
                f"than the last offset appended ({self.last_offset}) to {self.path.name}")
        if self._entries >= self._max_entries:
            raise CorruptIndexError(f"Attempt to append to a full index {self.path.name}")
        self._write_entry(offset - self.base_offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        self._ensure()
        rel = offset - self.base_offset
        slot = self._largest_lower_bound_slot(rel, 0)
        if slot < 0:
            new_entries = 0
        elif self._entry(slot)[0] == rel:
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, else (base_offset, 0); read without
        mapping the index when it is not mapped (a segment's next offset at load)."""
        last = self._last_raw_entry()
        return (self.base_offset, 0) if last is None else (self.base_offset + last[0], last[1])

    def sanity_check(self, log_size: int | None = None) -> None:
        """The length and the last entry (and, when mapped, its order against the one before);
        an index not mapped is checked without mapping it, as a segment loaded at start-up."""
        last = self._last_raw_entry()
        self._check_length()
        if last is None:
            return
        rel, pos = last
        if rel < 0:
            raise CorruptIndexError(
                f"Corrupt index {self.path.name}: last offset {self.base_offset + rel} is below "
                f"the base offset {self.base_offset}")
        if log_size is not None and pos >= log_size:
            raise CorruptIndexError(
                f"Corrupt index {self.path.name}: last position {pos} is beyond the log size "
                f"{log_size}")
        if self._loaded and self._entries > 1:
            prev_rel, prev_pos = self._entry(self._entries - 2)
            if prev_rel >= rel or prev_pos >= pos:
                raise CorruptIndexError(f"Corrupt index {self.path.name}: entries out of order")
