"""Base of the sparse, memory-mapped segment indexes (Kafka's AbstractIndex).

An index file is preallocated to ``segment.index.bytes`` (rounded down to a whole number of
entries) while its segment is active and trimmed to its valid entries when the segment rolls
or closes. It is mapped lazily on first use (as Kafka's LazyIndex) so idle old segments cost no
mapping. Entries are sorted, so lookups binary search.

An index that was never trimmed (a crash) ends in zero-filled preallocated space; on load the
zero tail is found by binary search and not counted — a real entry is never all zeros except
in a corner the sanity check catches, and then the segment rebuilds the index from the log.

Descriptors: CPython's ``mmap.mmap`` (before 3.13's ``trackfd=False``) dup()s the file
descriptor and keeps it for the mapping's life, which made every partition cost three
descriptors. The file is mapped here with libc's ``mmap`` through ctypes instead, and the
descriptor closed at once: a segment at rest holds only its ``.log`` open, like Kafka. The
mapping is advised ``MADV_RANDOM``: index access is a binary search or an append, and the
kernel's default read-ahead made each first touch of a preallocated index read megabytes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import struct
import sys
import threading
from pathlib import Path
from typing import Callable

from kafkalite.fileio import NamedFile
from kafkalite.log.errors import CorruptIndexError, KafkaStorageError

# Disk blocks are reserved ahead of the append position one block at a time: writing into a
# hole of a sparse file through a mapping raises SIGBUS when the disk is full, an explicit
# allocation fails with ENOSPC instead. One block, not more: on ext4, trimming a file whose
# reserved (unwritten) blocks reach past the new end costs 1-2 ms per file (measured: 10,000
# trims at shutdown took 20 s with 64 KiB reserved ahead, 0.2 s with one block).
_ALLOCATE_AHEAD = 4096


def round_down_to_entry(size: int, entry_size: int) -> int:
    return size - size % entry_size


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int64)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.madvise.restype = ctypes.c_int
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)

# Mappings closed while something still referenced their memory: unmapped once nothing does.
_retired: list["FileMapping"] = []
# Logs are opened in worker threads too (LeaderAndIsr) while the loop closes others: one thread
# at a time retires and unmaps, so no mapping is unmapped twice (its address may be reused).
_retired_lock = threading.Lock()


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


class FileMapping:
    """A shared read-write mapping of a whole file that holds no descriptor.

    The memory is reachable only through ``view`` while the mapping is open; ``close`` releases
    the view and unmaps, unless some other object still holds a buffer on the memory (then the
    unmap waits, see ``_retired``), so a stale view can never touch unmapped memory.
    """

    __slots__ = ("address", "length", "view", "_array")

    def __init__(self, fd: int, length: int) -> None:
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            raise _oserror("mmap")
        self.address: int = address
        self.length = length
        _libc.madvise(address, length, _MADV_RANDOM)   # advice only: a failure changes nothing
        self._array = (ctypes.c_char * length).from_address(address)
        self.view: memoryview | None = memoryview(self._array).cast("B")

    def close(self) -> None:
        if self.view is None:
            return
        view, self.view = self.view, None
        view.release()
        with _retired_lock:
            if not self._try_unmap():
                _retired.append(self)
            _unmap_retired_locked()

    def _try_unmap(self) -> bool:
        # This object's own reference plus getrefcount's argument: nothing else has a buffer.
        if sys.getrefcount(self._array) > 2:
            return False
        self._array = None  # type: ignore[assignment]
        _libc.munmap(self.address, self.length)
        return True


def _unmap_retired_locked() -> None:
    if _retired:
        _retired[:] = [m for m in _retired if not m._try_unmap()]


# An index file up to this long is probed with one read of the whole file.
_PROBE_READ = 4096


def _count_valid_slots(is_unused: Callable[[int], bool], n: int) -> int:
    """Entries among ``n`` slots: all when the last is used, else all minus the zero-filled
    tail (a preallocated file never trimmed), found by binary search."""
    if n == 0 or not is_unused(n - 1):
        return n
    lo, hi = 1, n - 1      # find the first unused slot in [1, n - 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if is_unused(mid):
            hi = mid
        else:
            lo = mid + 1
    if lo == 1 and is_unused(0):
        return 0
    return lo


def _unused_in(data: bytes, slot: int, size: int) -> bool:
    return data.count(0, slot * size, (slot + 1) * size) == size


class AbstractIndex(NamedFile):
    ENTRY: struct.Struct  # set by subclasses
    entry_size: int

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int) -> None:
        if max_index_size < self.entry_size:
            raise ValueError(f"Invalid max index size: {max_index_size}")
        self._set_file_name(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._map: FileMapping | None = None
        self._mmap: memoryview | None = None     # self._map.view; never handed out
        self._allocated = 0                      # bytes of the file known to have disk blocks
        self._loaded = False
        # Known without a mapping (``_probe``): the file's length and its entries, read with
        # one pread when the file is trimmed, as most are (Kafka counts them from the size).
        self._probed = False
        self._probed_last: tuple[int, int] | None = None
        self._probed_first: tuple[int, int] | None = None     # for sanity checks
        self._present: bool | None = None   # whether the file exists, when known
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        # The length the file gets when it is next mapped: an active segment's index is
        # extended to segment.index.bytes only once something is written to it.
        self._pending_length: int | None = None
        # The file holds bytes past its valid entries (a reset that left them in place, see
        # ``reset``): the next trim cuts them.
        self._stale_tail = False

    # -- lifecycle ---------------------------------------------------------------------------
    def _load(self, reserve_entries: int = 0) -> None:
        """Map the file (created at its full size if missing); ``reserve_entries`` more entries
        get their disk blocks through the same descriptor."""
        try:
            fd = os.open(self._fspath, os.O_RDWR | os.O_CLOEXEC)
            newly_created = False
        except FileNotFoundError:
            if self._fspath.endswith(".deleted"):   # segment.DELETED_SUFFIX (segment imports us)
                raise   # a deleted segment's index is gone: never re-created as an orphan file
            fd = os.open(self._fspath, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            newly_created = True
        try:
            if newly_created:
                os.ftruncate(fd, round_down_to_entry(self.max_index_size, self.entry_size))
            st = os.fstat(fd)
            length = st.st_size
            entries = 0 if newly_created else (
                self._entries if self._probed else self._count_valid_entries(fd, length))
            pending, self._pending_length = self._pending_length, None
            if pending is not None and pending != length:
                os.ftruncate(fd, pending)
                length = pending
            self._length = length
            self._allocated = min(length, st.st_blocks * 512)
            self._map_file(fd)
            self._max_entries = self._length // self.entry_size
            self._entries = min(entries, self._max_entries)
            if reserve_entries:
                self._allocate_through(min(self._length, (self._entries + reserve_entries) * self.entry_size), fd)
        finally:
            os.close(fd)   # a mapping needs no descriptor
        self._loaded = True
        self._present = True
        self._probed = False

    def _probe(self) -> None:
        """Learn the file's length and entries without mapping it (a missing file counts as
        the empty index ``_load`` would create)."""
        if self._loaded or self._probed:
            return
        try:
            fd = os.open(self._fspath, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._length = round_down_to_entry(self.max_index_size, self.entry_size)
            self._entries = 0
            self._probed_last = self._probed_first = None
            self._present = False
        else:
            self._present = True
            size = self.entry_size
            try:
                # A small file (an active segment's trimmed index, most at start-up) is read
                # whole with one call, its length that of what was read: no fstat, no preads.
                head = os.read(fd, _PROBE_READ)
                if len(head) < _PROBE_READ:
                    self._length = n = len(head)
                    n //= size
                    # a trimmed file (most are): its last slot is its last entry
                    self._entries = n if n and head.count(0, (n - 1) * size, n * size) != size \
                        else _count_valid_slots(lambda slot: _unused_in(head, slot, size), n)
                    raw = head[(self._entries - 1) * size:self._entries * size] if self._entries else b""
                else:
                    self._length = os.fstat(fd).st_size
                    n = self._length // size
                    # a trimmed file (most are): its last slot is its last entry, one pread
                    raw = os.pread(fd, size, (n - 1) * size) if n else b""
                    if n and raw != bytes(size):
                        self._entries = n
                    else:
                        self._entries = self._count_valid_entries(fd, self._length)
                        raw = os.pread(fd, size, (self._entries - 1) * size) if self._entries else b""
                first = head[:size] if self._entries > 1 else raw
            finally:
                os.close(fd)
            self._probed_last = self.ENTRY.unpack(raw) if len(raw) == self.entry_size else None
            self._probed_first = self.ENTRY.unpack(first) if len(first) == size else None
        self._probed = True

    def _known_length(self) -> int:
        """The length the file has (or gets when mapped), without mapping it."""
        if self._loaded:
            return self._length
        self._probe()
        return self._length if self._pending_length is None else self._pending_length

    def _first_raw_entry(self) -> tuple[int, int] | None:
        """The first entry (None: empty), read with the probe when the index is not mapped."""
        if self._loaded:
            return self._entry(0) if self._entries else None
        self._probe()
        return self._probed_first if self._entries else None

    def _last_raw_entry(self) -> tuple[int, int] | None:
        """The last entry, read with one pread when the index is not mapped (None: empty)."""
        if self._loaded:
            return self._entry(self._entries - 1) if self._entries else None
        self._probe()
        return self._probed_last if self._entries else None

    def _ensure(self) -> None:
        if not self._loaded:
            self._load()

    def _map_file(self, fd: int) -> None:
        self._map = FileMapping(fd, self._length) if self._length > 0 else None
        self._mmap = self._map.view if self._map is not None else None

    def _unmap(self) -> None:
        m, self._map, self._mmap = self._map, None, None
        if m is not None:
            m.close()

    def _allocate_through(self, end: int, fd: int | None = None) -> None:
        """Reserve disk blocks up to ``end`` before writing there through the mapping (through
        ``fd`` when the caller has the file open)."""
        if end <= self._allocated:
            return
        # Through the block that holds ``end``, counted from the file's start: ``_allocated``
        # is not block-aligned after a trim (a file cut to 24 bytes keeps its first block), and
        # a target counted from it reserved a second block that the next trim freed again (on
        # ext4 without a journal, one synchronous discard per index at shutdown: 10,000
        # recovered logs' closes took 1 s longer)
        target = min(self._length, -(-end // _ALLOCATE_AHEAD) * _ALLOCATE_AHEAD)
        try:
            if fd is not None:
                os.posix_fallocate(fd, self._allocated, target - self._allocated)
            else:
                own = os.open(self._fspath, os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.posix_fallocate(own, self._allocated, target - self._allocated)
                finally:
                    os.close(own)
        except OSError as e:
            raise KafkaStorageError(f"Error while allocating index {self.path}: {e}") from e
        self._allocated = target

    def _count_valid_entries(self, fd: int, length: int) -> int:
        """Entries of a pre-existing file: every whole entry when the last one is used (a
        trimmed index: one pread, as Kafka counts them from the size), else all minus the
        zero-filled tail of a preallocated file never trimmed (a crash), by binary search."""
        return _count_valid_slots(lambda slot: self._is_unused(fd, slot), length // self.entry_size)

    def _is_unused(self, fd: int, slot: int) -> bool:
        size = self.entry_size
        return os.pread(fd, size, slot * size) == bytes(size)

    def resize(self, new_size: int) -> bool:
        """Set the file length (whole entries), remapping. Returns whether it changed. An index
        not mapped is resized when it is next mapped (never, if nothing uses it)."""
        rounded = round_down_to_entry(new_size, self.entry_size)
        if not self._loaded:
            if rounded == self._known_length():
                return False
            self._pending_length = rounded
            return True
        if rounded == self._length:
            return False
        self._unmap()
        fd = os.open(self._fspath, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, rounded)
            self._length = rounded
            self._allocated = min(self._allocated, rounded)
            self._map_file(fd)
        finally:
            os.close(fd)
        self._max_entries = rounded // self.entry_size
        self._entries = min(self._entries, self._max_entries)
        if rounded <= self._entries * self.entry_size:
            self._stale_tail = False
        return True

    def reserve_entries(self, n: int) -> None:
        """Reserve disk blocks for ``n`` more entries now, so that appending them cannot fail
        (KafkaStorageError here, before the caller writes anything else)."""
        if not self._loaded:
            self._load(reserve_entries=n)   # one open for the mapping and the reservation
            return
        self._allocate_through(min(self._length, (self._entries + n) * self.entry_size))

    def trim_to_valid_size(self) -> None:
        """The file cut to its entries; an index never mapped is cut by name, not mapped."""
        if self._loaded:
            self.resize(self._entries * self.entry_size)
            return
        self._probe()
        self._pending_length = None
        valid = self._entries * self.entry_size
        if self._length != valid or not self._present:
            self._set_file_length(valid)

    def reset(self) -> None:
        """Drop every entry and re-extend to the maximum size (an active segment's index); an
        index not mapped is emptied by name and extended when next mapped."""
        if self._loaded:
            self._truncate_to_entries(0)
            self.resize(self.max_index_size)
            return
        # The file is left as it is (its old entries past the new ones are cut by the trim
        # that ends a recovery): on ext4, cutting a file that has blocks costs ~0.3 ms, and a
        # recovery mostly writes the same entries again (10,000 logs recovered after a crash
        # spent 4 s here).
        try:
            self._length = os.stat(self._fspath).st_size
            self._present = True
        except FileNotFoundError:
            self._length = 0
            self._present = False
        self._stale_tail = self._length > 0
        self._entries = 0
        self._probed = True
        self._probed_last = self._probed_first = None
        self._pending_length = round_down_to_entry(self.max_index_size, self.entry_size)

    def create_empty(self) -> None:
        """The file of a new segment's index, made with the segment as Kafka does, but empty:
        extended to ``max_index_size`` when an entry is first written. Closing thousands of new
        logs then creates no files."""
        self._release()
        self._set_file_length(0)
        self._entries = 0
        self._probed = True
        self._probed_last = self._probed_first = None
        self._pending_length = round_down_to_entry(self.max_index_size, self.entry_size)

    def _set_file_length(self, length: int) -> None:
        """Truncate (or create) the file of an index that is not mapped."""
        fd = os.open(self._fspath, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self._present = True
        self._stale_tail = False

    def flush(self) -> None:
        """Make the entries durable. An fsync of the file by name, not an msync of the mapping:
        flushes run in the flush pool while the loop may trim, remap or unmap the index (a roll);
        the page cache is shared, so pages written through any mapping of the file are synced."""
        try:
            fd = os.open(self._fspath, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return      # deleted or renamed since (retention, truncation, a cleaner swap)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trim and unmap (Kafka's AbstractIndex.close). An index never mapped is left as its
        file is: trimmed by its last close or roll (or emptied by a reset), never extended."""
        if self._loaded:
            # unmapped first, then cut by name: trimming the mapped index (resize) would map the
            # cut file again only for the release to unmap it (~20 % of a 10,000-partition
            # shutdown's closes, py-spy)
            valid = self._entries * self.entry_size
            cut = self._length != valid
            self._unmap()
            if cut:
                fd = os.open(self._fspath, os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.ftruncate(fd, valid)
                finally:
                    os.close(fd)
            self._release()
        elif self._stale_tail:
            self.trim_to_valid_size()
            self._release()
        elif not self._present and not os.path.exists(self._fspath):
            # made lazily: a closed segment has its index files, as one Kafka made (their
            # absence at the next load means "rebuild")
            self._set_file_length(0)
        self._pending_length = None

    def close_handler(self) -> None:
        """Unmap without trimming (the files are going away)."""
        self._release()

    def _release(self) -> None:
        self._unmap()
        self._loaded = False
        self._probed = False
        self._present = None

    def delete(self) -> None:
        self._release()
        try:
            os.unlink(self._fspath)
        except FileNotFoundError:
            pass

    def rename_to(self, path: Path) -> None:
        if os.path.exists(self._fspath):
            os.replace(self._fspath, path)
        self._set_file_name(path)

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
        if not self._loaded:    # asked before every append: answered without a mapping
            self._probe()
            return self._entries >= self._known_length() // self.entry_size
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
        start = self._entries * self.entry_size
        self._allocate_through(start + self.entry_size)
        self.ENTRY.pack_into(self._mmap, start, a, b)
        self._entries += 1

    def _append_unmapped(self, a: int, b: int) -> bool:
        """Append one entry with a pwrite at the end of a trimmed file that is not mapped (a
        full disk fails with ENOSPC, as a write does). False when the file is not exactly its
        entries (preallocated): the caller maps it."""
        self._probe()
        end = self._entries * self.entry_size
        if not self._present or (self._length != end and not (self._stale_tail and self._length > end)):
            return False
        try:
            fd = os.open(self._fspath, os.O_WRONLY | os.O_CLOEXEC)
            try:
                data = self.ENTRY.pack(a, b)
                if os.pwrite(fd, data, end) != len(data):
                    raise OSError(f"short write to {self.path}")
            finally:
                os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"Error while appending to index {self.path}: {e}") from e
        self._entries += 1
        self._length = max(self._length, end + self.entry_size)
        self._stale_tail = self._length != end + self.entry_size
        self._probed_last = (a, b)
        if self._entries == 1:
            self._probed_first = (a, b)
        return True

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
