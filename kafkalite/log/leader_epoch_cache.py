"""The leader-epoch cache of a partition (Kafka's LeaderEpochFileCache): which leader epoch began
at which offset, checkpointed to `leader-epoch-checkpoint` in the partition directory.

Writes replace the file atomically but do not fsync it on the caller's thread (the event loop):
:meth:`LeaderEpochCache.sync` makes it durable, and the log runs it in its flush job before its
recovery point advances, so an entry is durable before the data above it is. After a crash the
entries of the unflushed tail are taken again from its batches (Partition load).

It answers OffsetForLeaderEpoch: "where did epoch E end?" — what consumers use to detect log
truncation after a leader change (KIP-320), and what followers will truncate by.
"""
from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Iterable, Optional

from kafkalite.log.checkpoint import CheckpointError, atomic_write, fsync_dir, read_small_file

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


def format_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    entries = list(entries)
    lines = [str(_VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode()


def parse_epoch_checkpoint(text: str) -> list[tuple[int, int]]:
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != str(_VERSION):
        raise CheckpointError(f"{FILE_NAME}: unknown version or truncated file")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise CheckpointError(f"{FILE_NAME}: expected {count} entries, found {len(lines) - 2}")
    out = []
    for line in lines[2:]:
        epoch, offset = line.split()
        out.append((int(epoch), int(offset)))
    return out


class LeaderEpochCache:
    """Entries (epoch, start offset), both strictly increasing."""

    def __init__(self, path: Optional[Path], entries: Iterable[tuple[int, int]] = ()) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self._unsynced = False
        for e, o in entries:
            self._append(e, o)

    @classmethod
    def load(cls, partition_dir: Path) -> Optional["LeaderEpochCache"]:
        """The checkpointed cache, or None when there is no (readable) checkpoint to trust."""
        path = partition_dir / FILE_NAME
        try:
            return cls(path, parse_epoch_checkpoint(read_small_file(path).decode()))
        except (OSError, ValueError):
            return None

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def _append(self, epoch: int, start_offset: int) -> None:
        # A new entry supersedes any entry that does not precede it in both epoch and offset
        # (Kafka's assign: an epoch never goes backwards, nor does its start offset).
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` if it is new; True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch <= self._epochs[-1]:
            return False
        self._append(epoch, start_offset)
        self.flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's endOffsetFor: the end of the largest epoch <= requested,
        which is where the next larger epoch starts (or the log end for the latest epoch)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET   # newer than anything known
        if higher == 0:
            return requested_epoch, self._offsets[0]           # older than anything known
        return self._epochs[higher - 1], self._offsets[higher]

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after end_offset (the log was truncated there)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        if changed:
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at start_offset: entries wholly below it go; the one covering it
        is moved up to start there."""
        i = bisect.bisect_right(self._offsets, start_offset) - 1
        if i <= 0 and (not self._offsets or self._offsets[0] >= start_offset):
            return
        self._epochs = self._epochs[i:]
        self._offsets = [start_offset] + self._offsets[i + 1:]
        self.flush()

    def flush(self) -> None:
        """Write the checkpoint, no fsync (see :meth:`sync`). In place, not through a temp file
        and a rename: a restart assigns a new epoch in every partition, and creating 10,000
        files (a temp file each) costs the loop seconds while rewriting one block costs tens of
        microseconds. A write torn by a crash fails to parse (the entry count is checked), and
        the Partition then rebuilds the cache from the batches' leader epochs."""
        if self.path is None:
            return
        entries = self.entries
        data = format_epoch_checkpoint(entries)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            # A first write: what a crash can leave (an empty or cut file) fails to parse and
            # is rebuilt from the batches, which is where a new cache's entries come from.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            # Shorter content (truncation, a moved log start): a crash between the write and the
            # truncate would leave old lines behind, and the rebuild from the batches loses
            # epochs that have none, so that case goes through a temp file. Except when no entry
            # is left (an empty log's cache at start-up, a follower truncated fully): the rebuild
            # then loses nothing, and 10,000 empty partitions' restart would pay 10,000 renames.
            if os.fstat(fd).st_size > len(data) and entries:
                os.close(fd)
                fd = -1
                atomic_write(self.path, data, sync=False)
            else:
                if os.pwrite(fd, data, 0) != len(data):
                    raise OSError(f"short write to {self.path}")
                os.ftruncate(fd, len(data))
        finally:
            if fd >= 0:
                os.close(fd)
        self._unsynced = True

    def sync(self) -> None:
        """fsync the checkpoint written last, if not yet (thread-safe against :meth:`flush`:
        the flag is cleared first, so a write racing this one is synced by the next call)."""
        if not self._unsynced or self.path is None:
            return
        self._unsynced = False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return      # the partition was deleted
        try:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(self.path.parent)
        except BaseException:
            self._unsynced = True   # still owed: the next flush tries again
            raise
