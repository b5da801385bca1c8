"""Incremental fetch sessions (KIP-227) against the rules of Kafka's FetchSession / FetchManager /
FetchSessionCacheShard; several cases are ports of Kafka's FetchSessionTest."""
from __future__ import annotations

import uuid

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.fetch_session import (FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition,
                                            FetchSessionCache, FetchSessionError, PartitionKey,
                                            RequestedPartition, next_epoch, partition_identity)

ZERO = uuid.UUID(int=0)
FOO_ID = uuid.UUID("11111111-1111-1111-1111-111111111111")
BAR_ID = uuid.UUID("22222222-2222-2222-2222-222222222222")


def key(topic: str, partition: int, topic_ids: bool = False) -> PartitionKey:
    if not topic_ids:
        return (ZERO, topic, partition)
    return ({"foo": FOO_ID, "bar": BAR_ID}[topic], topic, partition)


def req(k: PartitionKey, fetch_offset: int, max_bytes: int = 100, leader_epoch: int = -1,
        log_start: int = -1) -> RequestedPartition:
    return RequestedPartition(k, fetch_offset, max_bytes, leader_epoch, log_start)


def respond(cp: CachedPartition, hw: int, log_start: int = 0, lso: int | None = None,
            error: ErrorCode = ErrorCode.NONE, records: bool = False) -> bool:
    return cp.maybe_update_response(error, hw, hw if lso is None else lso, log_start, records)


def open_session(cache: FetchSessionCache, parts: list[RequestedPartition], now: int = 0,
                 topic_ids: bool = False, hws: dict[PartitionKey, int] | None = None) -> int:
    """A full fetch (epoch 0), answered with the given high watermarks, creating a session."""
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, parts, [], topic_ids, now)
    assert ctx.kind == "full" and ctx.session is None
    for cp in ctx.partitions:
        assert respond(cp, (hws or {}).get(cp.key, 10)) is True  # everything is new to the client
    sid = cache.maybe_create(ctx.partitions, topic_ids, now)
    assert sid != INVALID_SESSION_ID
    return sid


def fetch_error(cache: FetchSessionCache, sid: int, epoch: int, topic_ids: bool = False) -> ErrorCode:
    with pytest.raises(FetchSessionError) as exc:
        cache.new_context(sid, epoch, [], [], topic_ids, 0)
    return exc.value.code


# --- contexts -------------------------------------------------------------------------------------

def test_sessionless_fetch_creates_nothing() -> None:
    cache = FetchSessionCache(10, 1000)
    parts = [req(key("foo", 0), 0), req(key("foo", 1), 10)]
    ctx = cache.new_context(INVALID_SESSION_ID, FINAL_EPOCH, parts, [], False, 0)
    assert ctx.kind == "sessionless" and ctx.session is None
    assert [(p.key, p.fetch_offset, p.max_bytes) for p in ctx.partitions] == \
        [(key("foo", 0), 0, 100), (key("foo", 1), 10, 100)]
    assert len(cache) == 0


def test_full_fetch_creates_a_session_at_epoch_1() -> None:
    cache = FetchSessionCache(10, 1000)
    parts = [req(key("foo", 0), 0, leader_epoch=3, log_start=7), req(key("foo", 1), 10)]
    sid = open_session(cache, parts, now=50)
    assert 0 < sid < 2**31 - 1
    s = cache.get(sid)
    assert s is not None and s.session_id == sid and s.epoch == 1
    assert (s.created_ms, s.last_used_ms, s.uses_topic_ids, s.privileged) == (50, 50, False, False)
    assert list(s.partitions) == [key("foo", 0), key("foo", 1)]
    foo0 = s.partitions[key("foo", 0)]
    assert (foo0.fetch_offset, foo0.max_bytes, foo0.current_leader_epoch, foo0.log_start_offset,
            foo0.high_watermark) == (0, 100, 3, 7, 10)


def test_full_fetch_with_zero_partitions_still_creates_a_session_like_kafka() -> None:
    cache = FetchSessionCache(10, 1000)
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, [], [], False, 0)
    sid = cache.maybe_create(ctx.partitions, False, 0)
    assert sid != INVALID_SESSION_ID and len(cache) == 1
    # ... and the next incremental fetch finds it empty, closes it and answers sessionless
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert ctx.kind == "sessionless" and ctx.partitions == [] and len(cache) == 0


def test_full_fetch_naming_a_session_closes_it() -> None:
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0)])
    ctx = cache.new_context(sid, INITIAL_EPOCH, [req(key("bar", 0), 5)], [], False, 1)
    assert ctx.kind == "full" and cache.get(sid) is None and len(cache) == 0
    sid2 = cache.maybe_create(ctx.partitions, False, 1)
    assert sid2 != sid and list(cache.get(sid2).partitions) == [key("bar", 0)]


def test_final_epoch_closes_the_session_and_is_sessionless() -> None:
    # FetchSessionTest.testFetchRequests, "Close the incremental fetch session"
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0), req(key("foo", 1), 10)])
    parts = [req(key("bar", 0), 0), req(key("bar", 1), 10)]
    ctx = cache.new_context(sid, FINAL_EPOCH, parts, [], False, 5)
    assert ctx.kind == "sessionless" and ctx.session is None
    assert [p.key for p in ctx.partitions] == [key("bar", 0), key("bar", 1)]
    assert len(cache) == 0
    assert fetch_error(cache, sid, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_session_errors() -> None:
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0)])
    assert fetch_error(cache, sid + 1, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch_error(cache, 12345 if sid != 12345 else 54321, 7) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fetch_error(cache, sid, 5) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert fetch_error(cache, sid, 2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert fetch_error(cache, sid, 1, topic_ids=True) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # Kafka checks the epoch before the topic-id usage
    assert fetch_error(cache, sid, 3, topic_ids=True) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # errors leave the session untouched
    s = cache.get(sid)
    assert s.epoch == 1 and s.last_used_ms == 0 and list(s.partitions) == [key("foo", 0)]
    assert cache.new_context(sid, 1, [], [], False, 10).kind == "incremental"
    assert s.epoch == 2


def test_topic_id_session_refuses_requests_without_ids() -> None:
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0, True), 0)], topic_ids=True)
    assert cache.get(sid).uses_topic_ids is True
    assert fetch_error(cache, sid, 1, topic_ids=False) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.new_context(sid, 1, [], [], True, 1).kind == "incremental"


@pytest.mark.parametrize("topic_ids", [False, True])
def test_incremental_fetch_session(topic_ids: bool) -> None:
    # FetchSessionTest.testIncrementalFetchSession
    cache = FetchSessionCache(10, 1000)
    foo0, foo1, bar0 = key("foo", 0, topic_ids), key("foo", 1, topic_ids), key("bar", 0, topic_ids)
    sid = open_session(cache, [req(foo0, 0), req(foo1, 10)], topic_ids=topic_ids,
                       hws={foo0: 100, foo1: 10})
    # remove foo-0, add bar-0
    ctx = cache.new_context(sid, 1, [req(bar0, 15, max_bytes=0)], [foo0], topic_ids, 5)
    assert ctx.kind == "incremental" and ctx.session is cache.get(sid)
    assert [p.key for p in ctx.partitions] == [foo1, bar0]
    assert [p.fetch_offset for p in ctx.partitions] == [10, 15]
    assert ctx.session.epoch == 2 and ctx.session.last_used_ms == 5
    # foo-1 unchanged (hw 10 as before), bar-0 new: only bar-0 is reported
    included = [cp.key for cp in ctx.partitions if respond(cp, 10, log_start=0)]
    assert included == [bar0]
    # next round, nothing changed: nothing reported
    ctx = cache.new_context(sid, 2, [], [], topic_ids, 6)
    assert [cp.key for cp in ctx.partitions if respond(cp, 10, log_start=0)] == []
    assert ctx.session.epoch == 3


def test_incremental_updates_cached_request_parameters() -> None:
    # FetchSessionTest.testCachedLeaderEpoch: omitted partitions keep their values, named ones change
    cache = FetchSessionCache(10, 1000)
    foo0, foo1, bar1 = key("foo", 0), key("foo", 1), key("bar", 1)
    sid = open_session(cache, [req(foo0, 0, leader_epoch=-1), req(foo1, 10, leader_epoch=1),
                               req(bar1, 10, leader_epoch=2)])
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert [(p.key, p.current_leader_epoch) for p in ctx.partitions] == [(foo0, -1), (foo1, 1), (bar1, 2)]
    ctx = cache.new_context(sid, 2, [req(foo0, 0, leader_epoch=6), req(foo1, 10, leader_epoch=-1),
                                     req(bar1, 33, max_bytes=7, leader_epoch=3, log_start=4)], [], False, 2)
    assert [(p.key, p.current_leader_epoch) for p in ctx.partitions] == [(foo0, 6), (foo1, -1), (bar1, 3)]
    bar = ctx.session.partitions[bar1]
    assert (bar.fetch_offset, bar.max_bytes, bar.log_start_offset) == (33, 7, 4)
    assert len(ctx.session.partitions) == 3  # updated in place, not duplicated


def test_forgetting_every_partition_closes_the_session() -> None:
    # FetchManager.newContext: an incremental fetch that leaves the session empty removes it
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0), req(key("foo", 1), 10)])
    ctx = cache.new_context(sid, 1, [], [key("foo", 0), key("foo", 1)], False, 5)
    assert ctx.kind == "sessionless" and ctx.session is None and ctx.partitions == []
    assert len(cache) == 0 and cache.get(sid) is None


def test_adding_and_forgetting_the_same_partition_in_one_request() -> None:
    # update() adds first, then forgets: the session empties; the request's data is still served
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0)])
    ctx = cache.new_context(sid, 1, [req(key("bar", 0), 3)], [key("foo", 0), key("bar", 0)], False, 5)
    assert ctx.kind == "sessionless" and [(p.key, p.fetch_offset) for p in ctx.partitions] == [(key("bar", 0), 3)]
    assert len(cache) == 0


def test_forgetting_unknown_partitions_is_harmless() -> None:
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0)])
    ctx = cache.new_context(sid, 1, [], [key("foo", 9), key("nope", 0)], False, 5)
    assert ctx.kind == "incremental" and [p.key for p in ctx.partitions] == [key("foo", 0)]


def test_topic_id_partitions_match_by_id_whatever_the_name() -> None:
    # CachedPartition.equals: with a topic id, the name does not take part
    cache = FetchSessionCache(10, 1000)
    named = (FOO_ID, "foo", 0)
    sid = open_session(cache, [req(named, 0), req((BAR_ID, "bar", 0), 0)], topic_ids=True)
    ctx = cache.new_context(sid, 1, [req((FOO_ID, "", 0), 42)], [], True, 1)
    assert [(p.key, p.fetch_offset) for p in ctx.partitions] == [(named, 42), ((BAR_ID, "bar", 0), 0)]
    ctx = cache.new_context(sid, 2, [], [(FOO_ID, "", 0)], True, 2)
    assert [p.key for p in ctx.partitions] == [(BAR_ID, "bar", 0)]


def test_unknown_topic_name_is_filled_in_later_keeping_its_place() -> None:
    # CachedPartition.maybeResolveUnknownName
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req((FOO_ID, "", 0), 0), req((BAR_ID, "bar", 0), 0)], topic_ids=True)
    ctx = cache.new_context(sid, 1, [req((FOO_ID, "foo", 0), 5)], [], True, 1)
    assert [(p.key, p.fetch_offset) for p in ctx.partitions] == [((FOO_ID, "foo", 0), 5), ((BAR_ID, "bar", 0), 0)]
    assert list(ctx.session.partitions) == [(FOO_ID, "foo", 0), (BAR_ID, "bar", 0)]
    assert ctx.session.partitions[(FOO_ID, "foo", 0)].key == (FOO_ID, "foo", 0)


def test_name_based_partitions_match_by_name() -> None:
    assert partition_identity((ZERO, "a", 1)) != partition_identity((ZERO, "b", 1))
    assert partition_identity((FOO_ID, "a", 1)) == partition_identity((FOO_ID, "", 1))
    assert partition_identity((FOO_ID, "a", 1)) != partition_identity((FOO_ID, "a", 2))


def test_epoch_wraps_to_1_after_int_max() -> None:
    cache = FetchSessionCache(10, 1000)
    sid = open_session(cache, [req(key("foo", 0), 0)])
    cache.get(sid).epoch = 2**31 - 1
    cache.new_context(sid, 2**31 - 1, [], [], False, 1)
    assert cache.get(sid).epoch == 1
    assert fetch_error(cache, sid, 2**31 - 1) == ErrorCode.INVALID_FETCH_SESSION_EPOCH


@pytest.mark.parametrize("prev,nxt", [(-1, -1), (-5, -1), (0, 1), (1, 2), (2**31 - 2, 2**31 - 1), (2**31 - 1, 1)])
def test_next_epoch(prev: int, nxt: int) -> None:
    assert next_epoch(prev) == nxt


def test_remove_topic_drops_its_partitions_from_every_session() -> None:
    cache = FetchSessionCache(10, 1000)
    s1 = open_session(cache, [req(key("foo", 0), 0), req(key("bar", 0), 0)])
    s2 = open_session(cache, [req((FOO_ID, "foo", 1), 0), req((BAR_ID, "bar", 1), 0)], topic_ids=True)
    cache.remove_topic(FOO_ID, "foo")
    assert list(cache.get(s1).partitions) == [key("bar", 0)]
    assert list(cache.get(s2).partitions) == [(BAR_ID, "bar", 1)]


# --- which partitions an incremental response carries ---------------------------------------------

def test_maybe_update_response() -> None:
    cp = CachedPartition(key("foo", 0), fetch_offset=0, max_bytes=100)
    assert respond(cp, hw=10, log_start=0) is True            # first answer: HW unknown to client
    assert (cp.high_watermark, cp.leader_log_start_offset) == (10, 0)
    assert respond(cp, hw=10, log_start=0) is False           # nothing changed
    assert respond(cp, hw=10, log_start=0, records=True) is True  # new data always goes
    assert respond(cp, hw=11, log_start=0) is True            # HW moved
    assert respond(cp, hw=11, log_start=0) is False
    assert respond(cp, hw=11, log_start=3) is True            # log start offset moved
    assert respond(cp, hw=11, log_start=3) is False
    # the last stable offset alone does not count (Kafka compares HW and log start only)
    assert respond(cp, hw=11, log_start=3, lso=5) is False
    assert cp.last_stable_offset == 5


def test_errors_are_always_reported_and_reset_the_cached_high_watermark() -> None:
    cp = CachedPartition(key("foo", 0), fetch_offset=0, max_bytes=100)
    assert respond(cp, hw=10) is True and respond(cp, hw=10) is False
    assert respond(cp, hw=10, error=ErrorCode.NOT_LEADER_OR_FOLLOWER) is True
    assert cp.high_watermark == -1
    assert respond(cp, hw=-1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER) is True
    assert respond(cp, hw=10) is True                         # error gone: resent
    assert respond(cp, hw=10) is False


def test_preferred_replica_and_diverging_epoch_are_always_reported() -> None:
    cp = CachedPartition(key("foo", 0), fetch_offset=0, max_bytes=100)
    respond(cp, hw=10)
    assert cp.maybe_update_response(ErrorCode.NONE, 10, 10, 0, False, preferred_read_replica=2) is True
    assert cp.maybe_update_response(ErrorCode.NONE, 10, 10, 0, False, diverging_epoch=True) is True
    assert cp.maybe_update_response(ErrorCode.NONE, 10, 10, 0, False, preferred_read_replica=-1) is False


# --- the cache: capacity and eviction (FetchSessionCacheShard) -------------------------------------

def dummy(size: int) -> list[CachedPartition]:
    return [CachedPartition((uuid.uuid4(), "test", i), 0, 100) for i in range(size)]


def contains(cache: FetchSessionCache, *ids: int) -> None:
    for sid in ids:
        assert cache.get(sid) is not None, sid
    assert len(cache) == len(ids)


def test_session_cache_eviction_like_kafka() -> None:
    # FetchSessionTest.testSessionCache
    cache = FetchSessionCache(3, 100)
    assert len(cache) == 0
    id1 = cache.maybe_create(dummy(10), True, 0)
    id2 = cache.maybe_create(dummy(20), True, 10)
    id3 = cache.maybe_create(dummy(30), True, 20)
    assert cache.maybe_create(dummy(40), True, 30) == INVALID_SESSION_ID
    assert cache.maybe_create(dummy(5), True, 40) == INVALID_SESSION_ID
    contains(cache, id1, id2, id3)
    cache.touch(cache.get(id1), 200)
    id4 = cache.maybe_create(dummy(11), True, 210)   # id2 is stale (unused for > 100 ms)
    contains(cache, id1, id3, id4)
    cache.touch(cache.get(id1), 400)
    cache.touch(cache.get(id3), 390)
    cache.touch(cache.get(id4), 400)
    id5 = cache.maybe_create(dummy(50), True, 410)   # none stale: the smallest old one (id1) goes
    contains(cache, id3, id4, id5)
    assert cache.maybe_create(dummy(5), True, 410) == INVALID_SESSION_ID  # smaller than all
    id6 = cache.maybe_create(dummy(5), True, 410, privileged=True)       # followers win
    contains(cache, id3, id5, id6)
    assert cache.get(id6).privileged is True


def test_resize_cached_sessions() -> None:
    # FetchSessionTest.testResizeCachedSessions (the eviction part)
    cache = FetchSessionCache(2, 100)
    id1 = cache.maybe_create(dummy(2), True, 0)
    id2 = cache.maybe_create(dummy(4), True, 0)
    contains(cache, id1, id2)
    assert cache.get(id1).cached_size == 2 and cache.get(id2).cached_size == 4
    cache.touch(cache.get(id1), 200)
    cache.touch(cache.get(id2), 200)
    id3 = cache.maybe_create(dummy(5), True, 200)
    contains(cache, id2, id3)
    s2 = cache.get(id2)
    s2.partitions.popitem(last=False)
    assert (len(s2.partitions), s2.cached_size) == (3, 4)  # cached size follows touches only
    cache.touch(s2, s2.last_used_ms)
    assert s2.cached_size == 3


def test_stale_means_idle_strictly_longer_than_eviction_ms() -> None:
    cache = FetchSessionCache(1, 100)
    old = cache.maybe_create(dummy(3), False, 0)
    assert cache.maybe_create(dummy(30), False, 100) == INVALID_SESSION_ID  # idle exactly 100 ms
    contains(cache, old)
    new = cache.maybe_create(dummy(1), False, 101)
    contains(cache, new)


def test_least_recently_used_stale_session_goes_first() -> None:
    cache = FetchSessionCache(3, 1000)
    a = cache.maybe_create(dummy(1), False, 0)
    b = cache.maybe_create(dummy(1), False, 0)
    c = cache.maybe_create(dummy(1), False, 0)
    # incremental fetches touch sessions: b is used last, c is the least recently used
    ia = cache.new_context(a, 1, [], [], False, 500)
    ib = cache.new_context(b, 1, [], [], False, 800)
    assert ia.kind == ib.kind == "incremental"
    d = cache.maybe_create(dummy(1), False, 1001)
    contains(cache, a, b, d)
    e = cache.maybe_create(dummy(1), False, 1501)   # a idle 1001 ms > 1000
    contains(cache, b, d, e)
    assert cache.maybe_create(dummy(1), False, 1700) == INVALID_SESSION_ID
    contains(cache, b, d, e)


def test_young_sessions_are_safe_from_bigger_newcomers() -> None:
    # a session is evictable by size only if it was older than eviction_ms when last touched
    cache = FetchSessionCache(1, 100)
    small = cache.maybe_create(dummy(1), False, 0)
    assert cache.maybe_create(dummy(50), False, 50) == INVALID_SESSION_ID
    cache.new_context(small, 1, [], [], False, 99)   # touched at 99: age 99, still young
    assert cache.maybe_create(dummy(50), False, 150) == INVALID_SESSION_ID
    cache.new_context(small, 2, [], [], False, 160)  # touched at 160: age 160 > 100
    big = cache.maybe_create(dummy(50), False, 170)  # not stale (idle 10) but smaller and old
    contains(cache, big)


def test_privileged_sessions_resist_unprivileged_newcomers() -> None:
    cache = FetchSessionCache(1, 100)
    follower = cache.maybe_create(dummy(1), False, 0, privileged=True)
    cache.touch(cache.get(follower), 150)  # old now, but privileged ranks above any consumer
    assert cache.maybe_create(dummy(1000), False, 160) == INVALID_SESSION_ID
    # same rank: only a strictly bigger session wins (the newcomer's key uses id 0, which sorts first)
    assert cache.maybe_create(dummy(1), False, 170, privileged=True) == INVALID_SESSION_ID
    other = cache.maybe_create(dummy(2), False, 170, privileged=True)
    contains(cache, other)


def test_session_ids_are_positive_and_unique() -> None:
    cache = FetchSessionCache(2000, 1000)
    ids = {cache.maybe_create(dummy(1), False, 0) for _ in range(2000)}
    assert len(ids) == 2000
    assert all(0 < i < 2**31 - 1 for i in ids)
    assert cache.maybe_create(dummy(1), False, 1) == INVALID_SESSION_ID
