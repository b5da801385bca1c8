"""The classic group state machine and member bookkeeping (group_metadata.py), without a broker:
transitions, membership counters, leader election, protocol selection, static member
replacement, generations, summaries, the consumer-protocol parser and offset expiration."""
from __future__ import annotations

import struct

import pytest

from kafkalite.coordinator.group.group_metadata import (CONSUMER_PROTOCOL_TYPE, DEAD_GROUP_SUMMARY,
                                                        VALID_PREVIOUS_STATES, GroupMetadata, GroupState,
                                                        JoinGroupResult, MemberMetadata, SyncGroupResult,
                                                        expired_offsets, generate_member_id, group_from_snapshot,
                                                        is_valid_transition, java_string_length,
                                                        offsets_only_group, parse_state, parse_subscribed_topics)
from kafkalite.coordinator.group.types import GroupSnapshot, MemberSnapshot, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode

E, PR, CR, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                   GroupState.STABLE, GroupState.DEAD)


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription (v0 prefix, then v1's owned partitions: empty)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)  # user data: null
    if version >= 1:
        out += struct.pack(">i", 0)  # owned partitions
    return out


def member(member_id: str, protocols: list[tuple[str, bytes]] | None = None, instance: str | None = None,
           rebalance_timeout_ms: int = 1000, session_timeout_ms: int = 500) -> MemberMetadata:
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", rebalance_timeout_ms, session_timeout_ms,
                          CONSUMER_PROTOCOL_TYPE,
                          protocols if protocols is not None else [("range", subscription("t"))])


class Recorder:
    def __init__(self) -> None:
        self.results: list[object] = []

    def __call__(self, result: object) -> None:
        self.results.append(result)


# -- transitions --------------------------------------------------------------------------------

ALL_PAIRS = [(a, b) for a in GroupState for b in GroupState]
# Kafka's GroupState.validPreviousStates, written out: (from, to)
EXPECTED_VALID = {
    (S, PR), (CR, PR), (E, PR),
    (PR, CR),
    (CR, S),
    (PR, E),
    (E, D), (PR, D), (CR, D), (S, D), (D, D),
}


@pytest.mark.parametrize("source,target", ALL_PAIRS)
def test_transition_table_is_kafkas(source: GroupState, target: GroupState) -> None:
    assert is_valid_transition(source, target) == ((source, target) in EXPECTED_VALID)
    g = GroupMetadata("g", source, now_ms=1)
    if (source, target) in EXPECTED_VALID:
        g.transition_to(target, now_ms=42)
        assert g.state is target and g.current_state_timestamp == 42
    else:
        with pytest.raises(RuntimeError):
            g.transition_to(target, now_ms=42)
        assert g.state is source and g.current_state_timestamp == 1


def test_every_state_has_a_rule_and_names_are_kafkas() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(GroupState)
    assert [str(s) for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert parse_state("stable") is S and parse_state("PREPARINGREBALANCE") is PR and parse_state("x") is None


def test_can_rebalance_only_from_empty_stable_completing() -> None:
    for state in GroupState:
        assert GroupMetadata("g", state, 0).can_rebalance() == (state in (E, S, CR))


# -- membership -------------------------------------------------------------------------------

def test_first_member_leads_and_sets_protocol_type() -> None:
    g = GroupMetadata("g", E, 0)
    cb = Recorder()
    g.add(member("a"), cb)
    g.add(member("b"))
    assert g.leader_id == "a" and g.protocol_type == CONSUMER_PROTOCOL_TYPE
    assert g.size == 2 and g.num_awaiting == 1
    assert not g.has_all_members_joined()
    assert [m.member_id for m in g.not_yet_rejoined_members()] == ["b"]


def test_remove_leader_elects_next_and_counts_awaiting() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a"), Recorder())
    g.add(member("b"), Recorder())
    assert g.num_awaiting == 2 and g.has_all_members_joined()
    g.remove("a")
    assert g.leader_id == "b" and g.num_awaiting == 1 and g.size == 1
    g.remove("b")
    assert g.leader_id is None and g.num_awaiting == 0 and g.size == 0
    g.remove("nobody")  # no-op


def test_pending_members_block_join_completion() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a"), Recorder())
    g.add_pending_member("p")
    assert g.is_pending_member("p") and not g.has_all_members_joined()
    with pytest.raises(RuntimeError):
        g.add_pending_member("a")
    g.add(member("p"), Recorder())  # joining with the handed-out id
    assert not g.is_pending_member("p") and g.has_all_members_joined()


def test_join_callback_invoked_once_and_counter_follows() -> None:
    g = GroupMetadata("g", E, 0)
    m = member("a")
    cb = Recorder()
    g.add(m, cb)
    r = JoinGroupResult("a", ErrorCode.NONE)
    g.maybe_invoke_join_callback(m, r)
    g.maybe_invoke_join_callback(m, JoinGroupResult("a", ErrorCode.UNKNOWN_MEMBER_ID))
    assert cb.results == [r] and g.num_awaiting == 0 and not m.is_awaiting_join


def test_sync_callback_reports_whether_it_ran() -> None:
    g = GroupMetadata("g", E, 0)
    m = member("a")
    g.add(m)
    assert g.maybe_invoke_sync_callback(m, SyncGroupResult(ErrorCode.NONE)) is False
    cb = Recorder()
    m.awaiting_sync_callback = cb
    assert g.maybe_invoke_sync_callback(m, SyncGroupResult(ErrorCode.NONE, assignment=b"x")) is True
    assert cb.results == [SyncGroupResult(ErrorCode.NONE, assignment=b"x")] and not m.is_awaiting_sync


def test_update_member_adjusts_awaiting_count_and_protocols() -> None:
    g = GroupMetadata("g", E, 0)
    m = member("a", [("range", b"1"), ("roundrobin", b"2")])
    g.add(m)
    assert g.num_awaiting == 0
    g.update_member(m, [("roundrobin", b"3")], 2000, 700, Recorder())
    assert g.num_awaiting == 1 and m.rebalance_timeout_ms == 2000 and m.session_timeout_ms == 700
    assert g.candidate_protocols() == {"roundrobin"}
    g.update_member(m, [("roundrobin", b"3")], 2000, 700, None)
    assert g.num_awaiting == 0


def test_maybe_elect_new_joined_leader() -> None:
    g = GroupMetadata("g", E, 0)
    assert g.maybe_elect_new_joined_leader() is False  # no leader at all
    g.add(member("a"))
    g.add(member("b"), Recorder())
    assert g.maybe_elect_new_joined_leader() is True and g.leader_id == "b"
    g2 = GroupMetadata("g2", E, 0)
    g2.add(member("a"))
    g2.add(member("b"))
    assert g2.maybe_elect_new_joined_leader() is False and g2.leader_id == "a"


def test_static_member_replacement_fences_the_old_requests() -> None:
    g = GroupMetadata("g", E, 0)
    old = member("old", instance="i1")
    join_cb, sync_cb = Recorder(), Recorder()
    g.add(old, join_cb)
    old.awaiting_sync_callback = sync_cb
    assert g.current_static_member_id("i1") == "old" and g.leader_id == "old"
    replaced = g.replace_static_member("i1", "old", "new")
    assert replaced is old and old.member_id == "new"
    assert join_cb.results == [JoinGroupResult("old", ErrorCode.FENCED_INSTANCE_ID)]
    assert sync_cb.results == [SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID)]
    assert g.current_static_member_id("i1") == "new" and g.leader_id == "new"
    assert not g.has("old") and g.has("new")
    with pytest.raises(RuntimeError):
        g.replace_static_member("i1", "old", "x")
    with pytest.raises(RuntimeError):
        g.add(member("dup", instance="i1"))
    g.remove("new")
    assert g.current_static_member_id("i1") is None


def test_has_satisfied_heartbeat_rules() -> None:
    m = member("a")
    assert not m.has_satisfied_heartbeat()
    m.awaiting_join_callback = Recorder()
    assert m.has_satisfied_heartbeat()  # parked in a rebalance: alive
    m.is_new = True
    assert not m.has_satisfied_heartbeat()  # new members can time out while parked
    m.heartbeat_satisfied = True
    assert m.has_satisfied_heartbeat()


def test_member_id_format() -> None:
    mid = generate_member_id("client-1", None)
    assert mid.startswith("client-1-") and len(mid) == len("client-1-") + 36
    assert generate_member_id("client-1", "inst").startswith("inst-")


# -- protocols ---------------------------------------------------------------------------------

def test_supports_protocols_empty_vs_nonempty() -> None:
    g = GroupMetadata("g", E, 0)
    assert g.supports_protocols("consumer", {"range"})
    assert not g.supports_protocols("", {"range"})
    assert not g.supports_protocols("consumer", set())
    g.add(member("a", [("range", b""), ("roundrobin", b"")]))
    g.transition_to(PR, 0)
    assert g.supports_protocols("consumer", {"roundrobin", "sticky"})
    assert not g.supports_protocols("consumer", {"sticky"})
    assert not g.supports_protocols("connect", {"range"})


def test_select_protocol_by_votes_among_common_ones() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a", [("roundrobin", b""), ("range", b""), ("sticky", b"")]))
    g.add(member("b", [("range", b""), ("roundrobin", b"")]))
    g.add(member("c", [("range", b""), ("roundrobin", b"")]))
    assert g.candidate_protocols() == {"range", "roundrobin"}
    assert g.select_protocol() == "range"  # 2 votes to 1
    with pytest.raises(RuntimeError):
        GroupMetadata("e", E, 0).select_protocol()


def test_member_matches_is_ordered_and_bytewise() -> None:
    m = member("a", [("range", b"1"), ("rr", b"2")])
    assert m.matches([("range", b"1"), ("rr", b"2")])
    assert not m.matches([("rr", b"2"), ("range", b"1")])
    assert not m.matches([("range", b"1"), ("rr", b"3")])
    assert not m.matches([("range", b"1")])
    assert m.vote({"rr"}) == "rr"
    with pytest.raises(ValueError):
        m.vote({"x"})
    with pytest.raises(ValueError):
        m.metadata("x")


# -- generations and summaries ------------------------------------------------------------------

def test_init_next_generation_with_members() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a", [("range", subscription("t1", "t2"))]), Recorder())
    g.add(member("b", [("range", subscription("t3"))]), Recorder())
    g.transition_to(PR, 1)
    g.add_pending_sync_member("a")
    g.init_next_generation(now_ms=5)
    assert g.generation_id == 1 and g.state is CR and g.protocol_name == "range"
    assert g.subscribed_topics == {"t1", "t2", "t3"} and not g.pending_sync_members
    assert g.current_state_timestamp == 5
    members = g.current_member_metadata()
    assert [(m.member_id, m.metadata) for m in members] == [("a", subscription("t1", "t2")),
                                                            ("b", subscription("t3"))]


def test_init_next_generation_without_members_is_empty() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a"), Recorder())
    g.transition_to(PR, 1)
    g.remove("a")
    g.init_next_generation(now_ms=9)
    assert g.generation_id == 1 and g.state is E and g.protocol_name is None
    assert g.subscribed_topics == set()  # a consumer group with no members subscribes to nothing
    with pytest.raises(RuntimeError):
        GroupMetadata("x", PR, 0).current_member_metadata()


def test_summary_has_metadata_only_when_stable() -> None:
    g = GroupMetadata("g", E, 0)
    m = member("a", [("range", b"meta")])
    g.add(m, Recorder())
    g.transition_to(PR, 0)
    g.init_next_generation(0)
    m.assignment = b"asg"
    s = g.summary()
    assert (s.state, s.protocol_type, s.protocol) == ("CompletingRebalance", "consumer", "")
    assert [(x.member_id, x.metadata, x.assignment, x.client_host) for x in s.members] == [("a", b"", b"", "/127.0.0.1")]
    g.transition_to(S, 0)
    s = g.summary()
    assert (s.state, s.protocol) == ("Stable", "range")
    assert [(x.metadata, x.assignment) for x in s.members] == [(b"meta", b"asg")]
    assert DEAD_GROUP_SUMMARY.state == "Dead" and DEAD_GROUP_SUMMARY.members == ()
    assert g.overview().group_type == "classic" and g.overview().state == "Stable"


def test_snapshot_and_reload_roundtrip() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a", [("range", subscription("t"))], instance="i"), Recorder())
    g.add(member("b", [("range", subscription("u"))]), Recorder())
    g.transition_to(PR, 0)
    g.init_next_generation(100)
    snap = g.snapshot({"a": b"A", "b": b"B"})
    assert snap.generation == 1 and snap.protocol_name == "range" and snap.leader == "a"
    assert snap.current_state_timestamp == 100
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in snap.members] == [("a", "i", b"A"),
                                                                                         ("b", None, b"B")]
    offsets = {("t", 0): OffsetAndMetadata(5, 1, "m", 10)}
    loaded = group_from_snapshot(snap, offsets, now_ms=200)
    assert loaded.state is S and loaded.generation_id == 1 and loaded.leader_id == "a"
    assert loaded.current_static_member_id("i") == "a"
    assert loaded.get("b").assignment == b"B" and loaded.subscribed_topics == {"t", "u"}
    assert loaded.offset(("t", 0)) == offsets[("t", 0)]
    empty = group_from_snapshot(GroupSnapshot("e", "consumer", 3, None, None, -1), {}, now_ms=7)
    assert empty.state is E and empty.current_state_timestamp is None and empty.protocol_type == "consumer"
    simple = offsets_only_group("s", offsets, now_ms=7)
    assert simple.state is E and simple.protocol_type is None and simple.has_offsets()


def test_group_from_snapshot_keeps_stored_leader() -> None:
    snap = GroupSnapshot("g", "consumer", 4, "range", "b", 1, (
        MemberSnapshot("a", None, "c", "/h", 1000, 500, subscription("t"), b""),
        MemberSnapshot("b", None, "c", "/h", 1000, 500, subscription("t"), b"")))
    assert group_from_snapshot(snap, {}, 0).leader_id == "b"


# -- consumer protocol and offsets -----------------------------------------------------------

def test_parse_subscribed_topics_any_version() -> None:
    assert parse_subscribed_topics(subscription("a", "b", version=0)) == {"a", "b"}
    assert parse_subscribed_topics(subscription("a", version=3)) == {"a"}
    for bad in (b"", b"\x00", b"\x00\x01\x00\x00\x00\x05", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"):
        with pytest.raises(ValueError):
            parse_subscribed_topics(bad)


def test_unparsable_subscription_means_unknown_topics() -> None:
    g = GroupMetadata("g", E, 0)
    g.add(member("a", [("range", b"garbage")]), Recorder())
    g.transition_to(PR, 0)
    g.init_next_generation(0)
    assert g.subscribed_topics is None and g.is_subscribed_to_topic("anything")
    other = GroupMetadata("c", E, 0)
    m = member("a")
    m.protocol_type = "connect"
    other.add(m, Recorder())
    other.transition_to(PR, 0)
    other.init_next_generation(0)
    assert other.subscribed_topics is None  # only "consumer" groups are parsed


def test_java_string_length_counts_utf16_units() -> None:
    assert java_string_length("abc") == 3 and java_string_length("é") == 1 and java_string_length("😀") == 2


def om(offset: int, commit_ts: int, expire_ts: int = -1) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", commit_ts, expire_ts)


def test_expiration_empty_group_counts_from_state_change() -> None:
    g = GroupMetadata("g", E, now_ms=1000)
    g.protocol_type = "consumer"
    g.offsets = {("t", 0): _rec(om(1, 0)), ("t", 1): _rec(om(2, 900))}
    assert expired_offsets(g, now_ms=1000 + 99, retention_ms=100) == {}
    assert set(expired_offsets(g, now_ms=1100, retention_ms=100)) == {("t", 0), ("t", 1)}
    g.pending_offset_commits[("t", 1)] = om(3, 1100)
    assert set(g.remove_expired_offsets(now_ms=1100, retention_ms=100)) == {("t", 0)}
    assert list(g.offsets) == [("t", 1)]


def test_expiration_empty_group_without_state_timestamp_uses_commit_time() -> None:
    g = GroupMetadata("g", E, now_ms=0)
    g.protocol_type = "consumer"
    g.current_state_timestamp = None
    g.offsets = {("t", 0): _rec(om(1, 50)), ("t", 1): _rec(om(2, 10))}
    assert set(expired_offsets(g, now_ms=110, retention_ms=100)) == {("t", 1)}


def test_expiration_stable_consumer_group_keeps_subscribed_topics() -> None:
    g = GroupMetadata("g", S, now_ms=0)
    g.protocol_type = "consumer"
    g.subscribed_topics = {"kept"}
    g.offsets = {("kept", 0): _rec(om(1, 0)), ("gone", 0): _rec(om(1, 0)), ("gone", 1): _rec(om(1, 95))}
    assert set(expired_offsets(g, now_ms=100, retention_ms=100)) == {("gone", 0)}
    g.subscribed_topics = None  # unknown subscription: nothing expires
    assert expired_offsets(g, now_ms=10_000, retention_ms=100) == {}
    g.state = PR  # rebalancing: nothing expires
    g.subscribed_topics = {"kept"}
    assert expired_offsets(g, now_ms=10_000, retention_ms=100) == {}


def test_expiration_simple_group_and_explicit_expire_timestamp() -> None:
    g = offsets_only_group("s", {}, now_ms=0)
    g.offsets = {("t", 0): _rec(om(1, 0)), ("t", 1): _rec(om(1, 0, expire_ts=5_000)), ("t", 2): _rec(om(1, 60))}
    assert set(expired_offsets(g, now_ms=100, retention_ms=100)) == {("t", 0)}
    assert set(expired_offsets(g, now_ms=5_000, retention_ms=100_000)) == {("t", 1)}


def test_offset_commit_pending_then_materialised_or_failed() -> None:
    g = GroupMetadata("g", E, 0)
    a, b = om(1, 0), om(2, 0)
    g.prepare_offset_commit({("t", 0): a, ("t", 1): b})
    assert g.has_offsets() and g.has_pending_offset_commits_for(("t", 0)) and g.offset(("t", 0)) is None
    g.on_offset_commit_append(("t", 0), a)
    g.fail_pending_offset_write(("t", 1), b)
    assert g.offset(("t", 0)) == a and g.offset(("t", 1)) is None and not g.pending_offset_commits
    # a commit removed (OffsetDelete) while in flight is not materialised
    g.prepare_offset_commit({("t", 2): a})
    assert g.remove_offsets([("t", 2)]) == {}
    g.on_offset_commit_append(("t", 2), a)
    assert g.offset(("t", 2)) is None
    assert g.remove_all_offsets() == {("t", 0): a} and not g.has_offsets()


def _rec(o: OffsetAndMetadata):
    from kafkalite.coordinator.group.group_metadata import CommitRecord
    return CommitRecord(o)
