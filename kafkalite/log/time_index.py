"""Sparse time index: timestamp (i64) -> relative offset (i32), Kafka's TimeIndex.

Entries hold the segment's maximum timestamp so far and the offset of the batch that reached
it; timestamps strictly increase. ``lookup(ts)`` returns the largest entry with timestamp <= ts:
every batch before that entry's offset has a smaller max timestamp, so the search for the first
record with timestamp >= ts may start there. The index keeps one slot free so the final
"max timestamp so far" entry written on roll/close always fits (Kafka's ``isFull``).
"""
from __future__ import annotations

import struct
from pathlib import Path

from kafkalite.log.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from kafkalite.log.index import AbstractIndex

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex):
    ENTRY = struct.Struct(">qi")
    entry_size = 12

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)

    @property
    def is_full(self) -> bool:
        if not self._loaded:    # asked before every append: answered without a mapping
            self._probe()
            return self._entries >= self._known_length() // self.entry_size - 1
        return self._entries >= self._max_entries - 1

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of ``slot``."""
        self._ensure()
        if not 0 <= slot < self._entries:
            raise IndexError(slot)
        ts, rel = self._entry(slot)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty; read
        without mapping the index when it is not mapped (a segment's max timestamp so far)."""
        last = self._last_raw_entry()
        if last is None:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = last
        return ts, self.base_offset + rel

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target, else (-1, base_offset)."""
        self._ensure()
        slot = self._largest_lower_bound_slot(target_timestamp, 0)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = self._entry(slot)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if ``timestamp`` is larger than the last entry's (Kafka's maybeAppend).
        The final entry of a roll or close (``skip_full_check``) goes to an index not mapped
        with one pwrite: a shutdown maps no index just to add it."""
        if not skip_full_check:
            self._ensure()
        if not skip_full_check and self.is_full:
            raise CorruptIndexError(f"Attempt to append to a full time index {self.path.name}")
        last_ts, last_offset = self.last_entry()   # also learns _entries when not mapped
        if self._entries != 0 and offset < last_offset:
            raise CorruptIndexError(
                f"Attempt to append an offset ({offset}) smaller than the last offset "
                f"({last_offset}) to time index {self.path.name}")
        if self._entries != 0 and timestamp < last_ts:
            raise CorruptIndexError(
                f"Attempt to append a timestamp ({timestamp}) smaller than the last timestamp "
                f"({last_ts}) to time index {self.path.name}")
        if timestamp > last_ts:
            if not 0 <= offset - self.base_offset <= INT32_MAX:
                raise LogSegmentOffsetOverflowError(
                    f"Offset {offset} does not fit a time index with base offset {self.base_offset}")
            if not self._loaded and self._append_unmapped(timestamp, offset - self.base_offset):
                return
            self._ensure()
            if self._entries >= self._max_entries:
                # Only reachable with skip_full_check on an index preallocated too small to
                # keep its spare slot; grow by one entry rather than overrun the mapping.
                self.resize((self._entries + 1) * self.entry_size)
            self._write_entry(timestamp, offset - self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._ensure()
        rel = offset - self.base_offset
        # Offsets in the time index are non-decreasing: binary search on them.
        slot = self._largest_lower_bound_slot(rel, 1)
        if slot < 0:
            new_entries = 0
        elif self._entry(slot)[1] == rel:
            # Several entries cannot share an offset (timestamps strictly increase per batch),
            # but be safe: drop every entry at ``rel``.
            while slot >= 0 and self._entry(slot)[1] == rel:
                slot -= 1
            new_entries = slot + 1
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def sanity_check(self) -> None:
        """The length, the last entry and the first (an index not mapped is checked without
        mapping it, as a segment loaded at start-up)."""
        last = self._last_raw_entry()
        self._check_length()
        if last is None:
            return
        last_ts, last_rel = last
        first = self._first_raw_entry()
        first_ts = last_ts if first is None else first[0]
        if last_ts < first_ts:
            raise CorruptIndexError(
                f"Corrupt time index {self.path.name}: last timestamp {last_ts} is smaller than "
                f"the first {first_ts}")
        if last_rel < 0:
            raise CorruptIndexError(
                f"Corrupt time index {self.path.name}: last offset {self.base_offset + last_rel} "
                f"is below the base offset {self.base_offset}")
