"""The cleaner's key → last offset map in a fixed block of memory (Kafka's SkimpyOffsetMap).

Each key is reduced to its 128-bit MurmurHash3 digest (``mmh3.hash64``: the x64 128-bit variant
as two signed 64-bit halves) and stored with its offset in three preallocated arrays of
``slots`` entries — 24 bytes per slot, as Kafka's 16-byte MD5 digest plus an 8-byte offset — so
memory is fixed by ``log.cleaner.dedupe.buffer.size``, whatever the number of keys. Collisions of
two keys' full digests are treated as the same key, exactly as in Kafka (the odds are ~n²/2¹²⁹).

Open addressing with double hashing over a prime number of slots: the first half of the digest
picks the slot, the second the probe step, so probe sequences stay short up to the cleaner's
load factor (0.9 by default) without Kafka's byte-sliding probe.
"""
from __future__ import annotations

from array import array
from typing import Final

import mmh3

BYTES_PER_ENTRY: Final = 24      # two 64-bit digest halves + a 64-bit offset
_EMPTY: Final = -1               # offsets are >= 0; -1 marks a free slot


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def prev_prime(n: int) -> int:
    """The largest prime <= ``n`` (n >= 2)."""
    if n < 2:
        raise ValueError(f"no prime <= {n}")
    while not _is_prime(n):
        n -= 1
    return n


def slots_for_memory(memory: int) -> int:
    """How many slots ``memory`` bytes hold (a prime, at least 2)."""
    return prev_prime(max(2, memory // BYTES_PER_ENTRY))


class SkimpyOffsetMap:
    """A bounded map from key digest to the key's last offset.

    ``put`` overwrites the offset of a key already present; ``get`` returns -1 for an absent key.
    The caller stops adding keys at ``slots * load factor`` (the cleaner does, as Kafka's does):
    the map itself accepts keys until every slot is taken.
    """

    __slots__ = ("slots", "_h1", "_h2", "_offsets", "_size", "latest_offset", "lookups", "probes")

    def __init__(self, memory: int) -> None:
        self.slots: int = slots_for_memory(memory)
        n = self.slots
        self._h1 = array("q", bytes(8 * n))
        self._h2 = array("q", bytes(8 * n))
        self._offsets = array("q", [_EMPTY]) * n
        self._size = 0
        self.latest_offset = -1     # the largest offset put or noted, -1 for none
        self.lookups = 0            # for the collision rate (Kafka's "Hash collision rate")
        self.probes = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def memory(self) -> int:
        return self.slots * BYTES_PER_ENTRY

    @property
    def utilization(self) -> float:
        return self._size / self.slots

    @property
    def collision_rate(self) -> float:
        return (self.probes - self.lookups) / self.lookups if self.lookups else 0.0

    def clear(self) -> None:
        n = self.slots
        self._offsets[:] = array("q", [_EMPTY]) * n
        self._size = 0
        self.latest_offset = -1
        self.lookups = self.probes = 0

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put(self, key: bytes, offset: int) -> None:
        h1, h2 = mmh3.hash64(key)
        n = self.slots
        offsets = self._offsets
        i = h1 % n
        step = 0
        probes = 1
        while True:
            cur = offsets[i]
            if cur == _EMPTY:
                self._h1[i] = h1
                self._h2[i] = h2
                offsets[i] = offset
                self._size += 1
                break
            if self._h1[i] == h1 and self._h2[i] == h2:
                offsets[i] = offset
                break
            if probes >= n:
                # Every slot visited (n is prime, so the step cycles through all of them).
                raise OverflowError("offset map is full")
            if step == 0:
                step = 1 + h2 % (n - 1)
            i += step
            if i >= n:
                i -= n
            probes += 1
        self.lookups += 1
        self.probes += probes
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset put for ``key``, or -1."""
        h1, h2 = mmh3.hash64(key)
        n = self.slots
        offsets = self._offsets
        i = h1 % n
        step = 0
        for _ in range(n):
            cur = offsets[i]
            if cur == _EMPTY:
                return -1
            if self._h1[i] == h1 and self._h2[i] == h2:
                return cur
            if step == 0:
                step = 1 + h2 % (n - 1)
            i += step
            if i >= n:
                i -= n
        return -1
