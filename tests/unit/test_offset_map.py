"""SkimpyOffsetMap: fixed memory, last offset per key digest, double-hashing probes."""
from __future__ import annotations

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.log.offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap, prev_prime, slots_for_memory


def test_slots_are_the_largest_prime_that_fits():
    assert prev_prime(2) == 2
    assert prev_prime(10) == 7
    assert prev_prime(97) == 97
    assert prev_prime(100) == 97
    assert slots_for_memory(24 * 100) == 97
    assert slots_for_memory(0) == 2          # never fewer than two slots
    m = SkimpyOffsetMap(1024 * 1024)
    assert m.slots == prev_prime(1024 * 1024 // 24) == 43669
    assert m.memory == m.slots * BYTES_PER_ENTRY <= 1024 * 1024


def test_put_get_overwrite_and_absent():
    m = SkimpyOffsetMap(24 * 101)
    assert m.get(b"a") == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (5, 7, -1)
    m.put(b"a", 9)                       # the same key: overwritten, not added
    assert m.get(b"a") == 9
    assert m.size == 2
    assert m.latest_offset == 9
    m.update_latest_offset(3)            # never goes back
    assert m.latest_offset == 9
    m.update_latest_offset(20)
    assert m.latest_offset == 20
    assert m.utilization == pytest.approx(2 / 101)


def test_empty_key_and_offset_zero_are_ordinary_entries():
    m = SkimpyOffsetMap(24 * 11)
    m.put(b"", 0)
    assert m.get(b"") == 0
    assert m.size == 1


def test_clear_forgets_everything():
    m = SkimpyOffsetMap(24 * 53)
    for i in range(40):
        m.put(f"k{i}".encode(), i)
    m.clear()
    assert m.size == 0 and m.latest_offset == -1
    assert all(m.get(f"k{i}".encode()) == -1 for i in range(40))
    m.put(b"k1", 100)
    assert m.get(b"k1") == 100 and m.size == 1


def test_full_to_the_last_slot_then_overflow():
    m = SkimpyOffsetMap(24 * 13)          # 13 slots
    assert m.slots == 13
    for i in range(13):
        m.put(f"key-{i}".encode(), i)
    assert m.size == 13
    assert [m.get(f"key-{i}".encode()) for i in range(13)] == list(range(13))
    m.put(b"key-3", 99)                  # updating a present key still works when full
    assert m.get(b"key-3") == 99
    with pytest.raises(OverflowError):
        m.put(b"one-too-many", 1)
    assert m.get(b"not-there") == -1     # a full map answers absent keys without spinning


def test_memory_is_fixed_whatever_the_number_of_keys():
    m = SkimpyOffsetMap(24 * 20011)
    arrays = (m._h1, m._h2, m._offsets)
    before = [len(a) * a.itemsize for a in arrays]
    for i in range(18000):               # 90% load factor
        m.put(i.to_bytes(8, "big"), i)
    assert [len(a) * a.itemsize for a in arrays] == before == [8 * 20011] * 3
    assert all(m.get(i.to_bytes(8, "big")) == i for i in range(0, 18000, 7))
    # double hashing keeps probe sequences short even at 90%
    assert m.probes / m.lookups < 3.0


def test_keys_are_told_apart_by_the_full_128_bit_digest():
    # Two keys whose first digest halves pick the same slot still get their own entries.
    m = SkimpyOffsetMap(24 * 5)
    slots = {}
    for i in range(1000):
        k = f"x{i}".encode()
        slots.setdefault(mmh3.hash64(k)[0] % m.slots, []).append(k)
    same = next(ks for ks in slots.values() if len(ks) >= 2)[:2]
    m.put(same[0], 1)
    m.put(same[1], 2)
    assert (m.get(same[0]), m.get(same[1])) == (1, 2)
    assert m.size == 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.integers(0, 2**40)), max_size=300))
def test_matches_a_dict(ops):
    m = SkimpyOffsetMap(24 * 331)
    model: dict[bytes, int] = {}
    for key, offset in ops:
        m.put(key, offset)
        model[key] = offset
    assert m.size == len(model)
    for key, offset in model.items():
        assert m.get(key) == offset
    assert m.latest_offset == max((o for _k, o in ops), default=-1)
