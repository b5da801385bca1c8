"""LeaderEpochCache against Kafka's LeaderEpochFileCache rules, and a model for property tests."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from kafkalite.log.leader_epoch_cache import (LeaderEpochCache, format_epoch_checkpoint,
                                              parse_epoch_checkpoint)


def test_end_offset_for_follows_kafka() -> None:
    c = LeaderEpochCache(None, [(0, 0), (2, 10), (5, 20)])
    assert c.end_offset_for(-1, 30) == (-1, -1)      # undefined epoch
    assert c.end_offset_for(5, 30) == (5, 30)        # latest epoch: the log end
    assert c.end_offset_for(0, 30) == (0, 10)
    assert c.end_offset_for(1, 30) == (0, 10)        # unknown epoch between: the floor epoch's end
    assert c.end_offset_for(3, 30) == (2, 20)
    assert c.end_offset_for(6, 30) == (-1, -1)       # newer than any known
    assert LeaderEpochCache(None, [(3, 7)]).end_offset_for(1, 9) == (1, 7)   # older than any known
    assert LeaderEpochCache(None).end_offset_for(0, 9) == (-1, -1)


def test_assign_only_moves_forward_and_persists(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert c.assign(0, 0)
    assert not c.assign(0, 5)          # same epoch again: no change
    assert c.assign(1, 5)
    assert not c.assign(0, 9)          # an older epoch never comes back
    assert c.entries == [(0, 0), (1, 5)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 5\n"
    assert LeaderEpochCache.load(tmp_path).entries == [(0, 0), (1, 5)]


def test_assign_at_an_offset_not_after_the_last_replaces_it() -> None:
    # a new epoch starting where the previous one started: the previous one had no records
    c = LeaderEpochCache(None, [(0, 0), (1, 5)])
    c.assign(2, 5)
    assert c.entries == [(0, 0), (2, 5)]


def test_truncation() -> None:
    c = LeaderEpochCache(None, [(0, 0), (2, 10), (5, 20)])
    c.truncate_from_start(12)
    assert c.entries == [(2, 12), (5, 20)]
    c.truncate_from_start(5)           # below the start: nothing to do
    assert c.entries == [(2, 12), (5, 20)]
    c.truncate_from_end(20)
    assert c.entries == [(2, 12)]
    c.truncate_from_end(12)
    assert c.entries == []


def test_unreadable_checkpoint_loads_as_none(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")
    assert LeaderEpochCache.load(tmp_path) is None
    assert LeaderEpochCache.load(tmp_path / "missing") is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=20),
       st.integers(-1, 60), st.integers(0, 2000))
def test_end_offset_for_matches_a_model(assigns, requested, leo_extra) -> None:
    c = LeaderEpochCache(None)
    for e, o in sorted(assigns, key=lambda x: (x[1], x[0])):
        c.assign(e, o)
    entries = c.entries
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:]))
    assert parse_epoch_checkpoint(format_epoch_checkpoint(entries).decode()) == entries
    leo = (entries[-1][1] if entries else 0) + leo_extra
    got = c.end_offset_for(requested, leo)
    if requested < 0 or not entries:
        assert got == (-1, -1)
    elif requested == entries[-1][0]:
        assert got == (requested, leo)
    elif requested > entries[-1][0]:
        assert got == (-1, -1)
    else:
        later = [(e, o) for e, o in entries if e > requested]
        earlier = [(e, o) for e, o in entries if e <= requested]
        assert got == ((earlier[-1][0] if earlier else requested), later[0][1])


def test_checkpoint_rewrites_growing_in_place_and_shrinking_whole(tmp_path: Path) -> None:
    # a new epoch (the restart path) is written over the old file; shorter content replaces the
    # file by a rename, so no crash can leave old lines after the new ones
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    inode = path.stat().st_ino
    cache.assign(1, 5)
    cache.assign(2, 9)
    assert path.read_bytes() == format_epoch_checkpoint([(0, 0), (1, 5), (2, 9)])
    assert path.stat().st_ino == inode                       # rewritten in place
    cache.truncate_from_end(6)
    assert path.read_bytes() == format_epoch_checkpoint([(0, 0), (1, 5)])
    assert path.stat().st_ino != inode                       # a new file
    assert LeaderEpochCache.load(tmp_path).entries == [(0, 0), (1, 5)]


def test_checkpoint_emptied_or_first_written_in_place(tmp_path: Path) -> None:
    # An empty log's cache loses its only entry at start-up (Kafka's truncateFromEnd at load) and
    # a new cache writes its first file: neither goes through a temp file and a rename (a
    # 10,000-partition restart paid ~0.6 ms a partition for them). What a crash can leave of
    # either fails to parse, and the Partition rebuilds the cache from the batches.
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.flush()
    inode = path.stat().st_ino
    assert path.read_bytes() == b"0\n0\n"
    assert list(tmp_path.iterdir()) == [path]                # no temp file left
    cache.assign(0, 0)
    assert path.read_bytes() == b"0\n1\n0 0\n"
    cache.truncate_from_end(0)
    assert path.read_bytes() == b"0\n0\n"
    assert path.stat().st_ino == inode
    assert LeaderEpochCache.load(tmp_path).entries == []
    cache.assign(3, 0)
    assert path.read_bytes() == b"0\n1\n3 0\n" and path.stat().st_ino == inode
    # the states a crash inside those writes can leave: unreadable, so rebuilt from the batches
    for torn in (b"", b"0\n", b"0\n0\n0 0\n", b"0\n1\n"):
        path.write_bytes(torn)
        assert LeaderEpochCache.load(tmp_path) is None, torn
