"""The group coordinator on a real broker: in-process (KafkaServer with its real
`__consumer_offsets` storage in a temporary log dir) for the state machine's flows, timers and
error paths, and over sockets against a broker process for every advertised version of the group
APIs."""
from __future__ import annotations

import asyncio
import struct
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
import uvloop
from kafka.protocol.admin import (DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                     OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from kafkalite.config.server_config import build_config
from kafkalite.coordinator.group.group_coordinator import GroupCoordinator, MemberIdentity, OffsetConfig
from kafkalite.coordinator.group.group_metadata import GroupState, JoinGroupResult, SyncGroupResult
from kafkalite.coordinator.group.types import OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.broker import KafkaServer
from tests.harness import BrokerProcess
from tests.integration.util import RawClient

E = ErrorCode
OFFSETS_PARTITIONS = 3


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v1 with no user data and no owned partitions."""
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">ii", -1, 0)


def run(coro: Any) -> Any:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


async def wait_until(pred: Callable[[], bool], timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.005)


class Broker:
    """An in-process broker whose offsets topic exists and is loaded."""

    def __init__(self, log_dir: Path, **props: str) -> None:
        base = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
                "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "10",
                "num.partitions": "2"}
        base.update(props)
        self.server = KafkaServer(build_config(base).config)

    async def __aenter__(self) -> "Broker":
        await self.server.startup()
        c = self.coordinator
        c.storage.ensure_offsets_topic()  # type: ignore[attr-defined]
        # the controller creates the topic and makes this broker its leader; the coordinator loads
        # each partition when the replica manager reports the leadership
        await wait_until(lambda: not c.loading_partitions and len(c.owned_partitions) == OFFSETS_PARTITIONS)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.shutdown()

    @property
    def coordinator(self) -> GroupCoordinator:
        assert self.server.group_coordinator is not None
        return self.server.group_coordinator


def join(c: GroupCoordinator, group: str, member_id: str = "", *, instance: Optional[str] = None,
         protocols: Optional[list[tuple[str, bytes]]] = None, session_ms: int = 10_000, rebalance_ms: int = 10_000,
         require_known: bool = False, skip: bool = False, protocol_type: str = "consumer",
         client_id: str = "cl") -> "asyncio.Task[JoinGroupResult]":
    """Start a JoinGroup (the answer may be delayed): a task."""
    return asyncio.ensure_future(c.join_group(
        group, member_id, instance, require_known_member_id=require_known, support_skipping_assignment=skip,
        client_id=client_id, client_host="/127.0.0.1", rebalance_timeout_ms=rebalance_ms,
        session_timeout_ms=session_ms, protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", subscription("t"))]))


def sync(c: GroupCoordinator, group: str, gen: int, member_id: str, assignment: Optional[dict[str, bytes]] = None,
         instance: Optional[str] = None) -> "asyncio.Task[SyncGroupResult]":
    return asyncio.ensure_future(c.sync_group(group, gen, member_id, None, None, instance, assignment or {}))


async def stable_group(c: GroupCoordinator, group: str, n: int = 1, **kw: Any) -> list[JoinGroupResult]:
    """n members joined at once and synced; returns the join results, leader first."""
    results = await asyncio.gather(*[join(c, group, **kw) for _ in range(n)])
    leader = next(r for r in results if r.member_id == r.leader_id)
    others = [r for r in results if r is not leader]
    assert all(r.error == E.NONE and r.generation_id == leader.generation_id for r in results)
    tasks = [sync(c, group, r.generation_id, r.member_id) for r in others]
    await sync(c, group, leader.generation_id, leader.member_id,
               {r.member_id: r.member_id.encode() for r in results})
    for t in tasks:
        assert (await t).error == E.NONE
    assert c.groups[group].state is GroupState.STABLE
    return [leader] + others


def commit(c: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int], gen: int = -1, member: str = "",
           metadata: str = "", epoch: int = -1, version: int = 8, instance: Optional[str] = None) -> Any:
    now = int(time.time() * 1000)
    return c.handle_commit_offsets(group, member, instance, gen,
                                   {tp: OffsetAndMetadata(o, epoch, metadata, now) for tp, o in offsets.items()},
                                   version)


# ==== membership flows ==============================================================================

def test_member_id_required_then_join_sync_heartbeat(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            first = await join(c, "g", require_known=True, client_id="app")
            assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("app-")
            assert first.generation_id == -1 and c.groups["g"].is_pending_member(first.member_id)
            r = await join(c, "g", first.member_id, require_known=True)
            assert (r.error, r.member_id, r.generation_id, r.leader_id, r.protocol_type, r.protocol_name) == \
                (E.NONE, first.member_id, 1, first.member_id, "consumer", "range")
            assert [(m.member_id, m.metadata) for m in r.members] == [(first.member_id, subscription("t"))]
            assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
            assert c.handle_heartbeat("g", r.member_id, None, 1) == E.NONE  # allowed between join and sync
            s = await sync(c, "g", 1, r.member_id, {r.member_id: b"A"})
            assert s == SyncGroupResult(E.NONE, "consumer", "range", b"A")
            assert c.groups["g"].state is GroupState.STABLE
            assert c.handle_heartbeat("g", r.member_id, None, 1) == E.NONE
            # a follower's sync in Stable returns the current assignment too
            assert (await sync(c, "g", 1, r.member_id)).assignment == b"A"
    run(main())


def test_new_member_rebalances_group_through_heartbeats(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            (a,) = await stable_group(c, "g")
            late = join(c, "g", client_id="late")
            await wait_until(lambda: c.groups["g"].state is GroupState.PREPARING_REBALANCE)
            assert not late.done()
            assert c.handle_heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
            assert (await sync(c, "g", 1, a.member_id)).error == E.REBALANCE_IN_PROGRESS
            # commits of the old generation are still allowed while preparing
            assert await commit(c, "g", {("t", 0): 3}, gen=1, member=a.member_id) == {("t", 0): E.NONE}
            a2 = await join(c, "g", a.member_id)
            b2 = await late
            assert a2.generation_id == b2.generation_id == 2
            assert a2.leader_id == b2.leader_id == a.member_id
            assert sorted(m.member_id for m in a2.members) == sorted([a.member_id, b2.member_id])
            assert b2.members == ()
            # commit during CompletingRebalance
            assert await commit(c, "g", {("t", 0): 4}, gen=2, member=b2.member_id) == {("t", 0): E.REBALANCE_IN_PROGRESS}
            follower = sync(c, "g", 2, b2.member_id)
            await asyncio.sleep(0.02)
            assert not follower.done()  # waits for the leader
            leader = await sync(c, "g", 2, a.member_id, {a.member_id: b"x", b2.member_id: b"y"})
            assert leader.assignment == b"x" and (await follower).assignment == b"y"
            assert c.handle_heartbeat("g", b2.member_id, None, 2) == E.NONE
    run(main())


def test_leader_left_out_members_get_empty_assignment(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            rs = await asyncio.gather(join(c, "g"), join(c, "g"))
            leader = next(r for r in rs if r.member_id == r.leader_id)
            other = next(r for r in rs if r is not leader)
            f = sync(c, "g", 1, other.member_id)
            await sync(c, "g", 1, leader.member_id, {leader.member_id: b"all"})
            assert (await f) == SyncGroupResult(E.NONE, "consumer", "range", b"")
    run(main())


def test_unknown_member_paths(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert (await join(c, "nope", "m-1")).error == E.UNKNOWN_MEMBER_ID
            assert "nope" not in c.groups  # a member id never creates a group
            assert c.handle_heartbeat("nope", "m-1", None, 1) == E.UNKNOWN_MEMBER_ID
            assert (await sync(c, "nope", 1, "m-1")).error == E.UNKNOWN_MEMBER_ID
            left = c.handle_leave_group("nope", [MemberIdentity("m-1")])
            assert left.error == E.NONE and [m.error for m in left.members] == [E.UNKNOWN_MEMBER_ID]
            (a,) = await stable_group(c, "g")
            assert (await join(c, "g", "ghost")).error == E.UNKNOWN_MEMBER_ID
            assert c.handle_heartbeat("g", "ghost", None, 1) == E.UNKNOWN_MEMBER_ID
            assert (await sync(c, "g", 1, "ghost")).error == E.UNKNOWN_MEMBER_ID
            assert await commit(c, "g", {("t", 0): 1}, gen=1, member="ghost") == {("t", 0): E.UNKNOWN_MEMBER_ID}
            # generation -1 without member id while the group has members
            assert await commit(c, "g", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
            # the member leaves; the group becomes Empty and a heartbeat of the old id is unknown
            left = c.handle_leave_group("g", [MemberIdentity(a.member_id)])
            assert [m.error for m in left.members] == [E.NONE]
            assert c.groups["g"].state is GroupState.EMPTY and c.groups["g"].generation_id == 2
            assert c.handle_heartbeat("g", a.member_id, None, 2) == E.UNKNOWN_MEMBER_ID
            assert (await sync(c, "g", 2, a.member_id)).error == E.UNKNOWN_MEMBER_ID
    run(main())


def test_illegal_generation_paths(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            (a,) = await stable_group(c, "g")
            assert c.handle_heartbeat("g", a.member_id, None, 0) == E.ILLEGAL_GENERATION
            assert c.handle_heartbeat("g", a.member_id, None, 2) == E.ILLEGAL_GENERATION
            assert (await sync(c, "g", 7, a.member_id)).error == E.ILLEGAL_GENERATION
            assert await commit(c, "g", {("t", 0): 1}, gen=5, member=a.member_id) == {("t", 0): E.ILLEGAL_GENERATION}
            # a generation for a group that does not exist: ILLEGAL_GENERATION up to v9 (Kafka 3.9),
            # GROUP_ID_NOT_FOUND at v10 (Kafka 4 only)
            assert await commit(c, "none", {("t", 0): 1}, gen=1, member="m", version=9) == \
                {("t", 0): E.ILLEGAL_GENERATION}
            assert await commit(c, "none", {("t", 0): 1}, gen=1, member="m", version=10) == \
                {("t", 0): E.GROUP_ID_NOT_FOUND}
            assert "none" not in c.groups
    run(main())


def test_invalid_group_id_session_timeout_and_protocol(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path, **{"group.min.session.timeout.ms": "100",
                                       "group.max.session.timeout.ms": "1000"}) as b:
            c = b.coordinator
            assert (await join(c, "")).error == E.INVALID_GROUP_ID
            assert (await sync(c, "", 1, "m")).error == E.INVALID_GROUP_ID
            assert c.handle_heartbeat("", "m", None, 1) == E.INVALID_GROUP_ID
            assert c.handle_leave_group("", [MemberIdentity("m")]).error == E.INVALID_GROUP_ID
            assert await c.handle_delete_offsets("", []) == (E.INVALID_GROUP_ID, {})
            # the empty group id is valid for offsets, describe and delete (Kafka's compatibility)
            assert await commit(c, "", {("t", 0): 9}) == {("t", 0): E.NONE}
            assert c.handle_fetch_offsets("", False, [("t", 0)])[1][("t", 0)].offset == 9
            assert c.handle_describe_group("")[0] == E.NONE
            assert await c.handle_delete_groups([""]) == {"": E.NONE}
            assert (await join(c, "g", session_ms=99)).error == E.INVALID_SESSION_TIMEOUT
            assert (await join(c, "g", session_ms=1001)).error == E.INVALID_SESSION_TIMEOUT
            assert (await join(c, "g", protocols=[], session_ms=1000)).error == E.INCONSISTENT_GROUP_PROTOCOL
            assert (await join(c, "g", protocol_type="", session_ms=1000)).error == E.INCONSISTENT_GROUP_PROTOCOL
            (a,) = await stable_group(c, "g", session_ms=1000)
            assert (await join(c, "g", protocols=[("roundrobin", b"")], session_ms=1000)).error == \
                E.INCONSISTENT_GROUP_PROTOCOL
            assert (await join(c, "g", protocol_type="connect", session_ms=1000)).error == \
                E.INCONSISTENT_GROUP_PROTOCOL
            assert (await c.sync_group("g", 1, a.member_id, "connect", None, None, {})).error == \
                E.INCONSISTENT_GROUP_PROTOCOL
            assert (await c.sync_group("g", 1, a.member_id, "consumer", "roundrobin", None, {})).error == \
                E.INCONSISTENT_GROUP_PROTOCOL
            assert (await c.sync_group("g", 1, a.member_id, "consumer", "range", None, {})).error == E.NONE
    run(main())


def test_coordinator_loading_not_coordinator_and_not_available(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            await commit(c, "g", {("t", 0): 1})
            p = c.partition_for("g")
            # the state of a partition still loading
            c.owned_partitions.discard(p)
            c.loading_partitions.add(p)
            assert (await join(c, "g")).error == E.COORDINATOR_LOAD_IN_PROGRESS
            assert c.handle_heartbeat("g", "m", None, 1) == E.NONE  # answered blindly
            assert (await sync(c, "g", 1, "m")).error == E.REBALANCE_IN_PROGRESS  # rejoin, not retry
            assert await commit(c, "g", {("t", 0): 2}) == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
            assert c.handle_fetch_offsets("g", False, [("t", 0)]) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
            assert c.handle_leave_group("g", [MemberIdentity("m")]).error == E.COORDINATOR_LOAD_IN_PROGRESS
            assert c.handle_describe_group("g")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            assert c.handle_list_groups()[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            assert await c.handle_delete_groups(["g"]) == {"g": E.COORDINATOR_LOAD_IN_PROGRESS}
            # not the leader of the partition at all
            c.loading_partitions.discard(p)
            assert (await join(c, "g")).error == E.NOT_COORDINATOR
            assert c.handle_fetch_offsets("g", False, None) == (E.NOT_COORDINATOR, {})
            assert c.handle_list_groups()[0] == E.NONE
            c.owned_partitions.add(p)
            assert c.handle_fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == 1
        # shut down: not available
        assert c.handle_heartbeat("g", "m", None, 1) == E.COORDINATOR_NOT_AVAILABLE
        assert c.handle_list_groups() == (E.COORDINATOR_NOT_AVAILABLE, [])
    run(main())


def test_group_max_size(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path, **{"group.max.size": "2"}) as b:
            c = b.coordinator
            await stable_group(c, "g", n=2)
            third = await join(c, "g")
            assert (third.error, third.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
            assert c.groups["g"].size == 2
    run(main())


# ==== timers ========================================================================================

def test_session_timeout_removes_silent_member(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            a, silent = await stable_group(c, "g", n=2, session_ms=300)
            started = time.monotonic()
            error = E.NONE
            while error == E.NONE:  # only `a` heartbeats
                assert time.monotonic() - started < 3
                await asyncio.sleep(0.05)
                error = c.handle_heartbeat("g", a.member_id, None, 1)
            assert error == E.REBALANCE_IN_PROGRESS
            elapsed = time.monotonic() - started
            assert 0.25 <= elapsed < 1.5, elapsed  # not before the session timeout
            assert not c.groups["g"].has(silent.member_id)
            r = await join(c, "g", a.member_id, session_ms=300)
            assert r.generation_id == 2 and [m.member_id for m in r.members] == [a.member_id]
    run(main())


def test_last_member_timing_out_empties_group_and_persists_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            await stable_group(c, "g", session_ms=150)
            await wait_until(lambda: c.groups["g"].state is GroupState.EMPTY, 3)
            assert c.groups["g"].generation_id == 2
            await asyncio.sleep(0.05)
            loaded = c.storage.load_partition(c.partition_for("g"))
            assert loaded.groups["g"].generation == 2 and loaded.groups["g"].members == ()
    run(main())


def test_rebalance_timeout_drops_members_that_do_not_rejoin(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            leader, other = await stable_group(c, "g", n=2, rebalance_ms=300)
            started = time.monotonic()
            rejoin = join(c, "g", leader.member_id, rebalance_ms=300)  # the leader rejoins: rebalance
            await asyncio.sleep(0.1)
            assert not rejoin.done()
            # `other` keeps its session alive but never rejoins
            assert c.handle_heartbeat("g", other.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
            r = await rejoin
            assert 0.28 <= time.monotonic() - started < 2
            assert r.generation_id == 2 and [m.member_id for m in r.members] == [leader.member_id]
            assert c.handle_heartbeat("g", other.member_id, None, 1) == E.UNKNOWN_MEMBER_ID
    run(main())


def test_initial_rebalance_delay_gathers_members(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path, **{"group.initial.rebalance.delay.ms": "200"}) as b:
            c = b.coordinator
            started = time.monotonic()
            first = join(c, "g", rebalance_ms=5000)
            await asyncio.sleep(0.15)
            second = join(c, "g", rebalance_ms=5000)  # extends the wait by another delay
            await asyncio.sleep(0.1)
            assert not first.done()
            r1, r2 = await first, await second
            elapsed = time.monotonic() - started
            assert 0.33 <= elapsed < 2, elapsed
            assert r1.generation_id == r2.generation_id == 1 and len(r1.members) == 2
    run(main())


def test_sync_timeout_removes_members_that_never_sync(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            rs = await asyncio.gather(join(c, "g", rebalance_ms=200), join(c, "g", rebalance_ms=200))
            leader = next(r for r in rs if r.member_id == r.leader_id)
            lazy = next(r for r in rs if r is not leader)
            await sync(c, "g", 1, leader.member_id, {leader.member_id: b"a", lazy.member_id: b"b"})
            await wait_until(lambda: c.groups["g"].state is GroupState.PREPARING_REBALANCE, 3)
            assert not c.groups["g"].has(lazy.member_id)
    run(main())


def test_pending_member_expires_after_session_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            r = await join(c, "g", require_known=True, session_ms=100)
            assert r.error == E.MEMBER_ID_REQUIRED and c.groups["g"].is_pending_member(r.member_id)
            await wait_until(lambda: not c.groups["g"].is_pending_member(r.member_id), 2)
            assert (await join(c, "g", r.member_id, require_known=True, session_ms=100)).error == E.UNKNOWN_MEMBER_ID
    run(main())


# ==== static membership ==============================================================================

def test_static_member_rejoins_without_rebalance_and_fences_old_id(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            # static members never get MEMBER_ID_REQUIRED
            rs = await asyncio.gather(join(c, "g", instance="i1", require_known=False),
                                      join(c, "g", instance="i2"))
            by_instance = {"i1": rs[0], "i2": rs[1]}
            assert all(r.error == E.NONE for r in rs) and rs[0].member_id.startswith("i1-")
            leader = next(r for r in rs if r.member_id == r.leader_id)
            follower = next(r for r in rs if r is not leader)
            f = sync(c, "g", 1, follower.member_id)
            await sync(c, "g", 1, leader.member_id, {leader.member_id: b"L", follower.member_id: b"F"})
            await f
            # the follower restarts: unknown member id, same instance id -> new id, same generation
            inst = "i1" if by_instance["i1"] is follower else "i2"
            again = await join(c, "g", instance=inst)
            assert again.error == E.NONE and again.generation_id == 1 and again.member_id != follower.member_id
            assert again.leader_id == leader.member_id and again.members == ()
            assert c.groups["g"].state is GroupState.STABLE
            assert (await sync(c, "g", 1, again.member_id, instance=inst)).assignment == b"F"
            assert c.handle_heartbeat("g", follower.member_id, inst, 1) == E.FENCED_INSTANCE_ID
            assert (await sync(c, "g", 1, follower.member_id, instance=inst)).error == E.FENCED_INSTANCE_ID
            assert await commit(c, "g", {("t", 0): 1}, gen=1, member=follower.member_id, instance=inst) == \
                {("t", 0): E.FENCED_INSTANCE_ID}
            assert (await join(c, "g", follower.member_id, instance=inst)).error == E.FENCED_INSTANCE_ID
            assert c.handle_heartbeat("g", again.member_id, "unknown-instance", 1) == E.UNKNOWN_MEMBER_ID
            # the leader restarts with JoinGroup v9: told it leads, but to skip the assignment
            linst = "i1" if inst == "i2" else "i2"
            lagain = await join(c, "g", instance=linst, skip=True)
            assert lagain.skip_assignment and lagain.leader_id == lagain.member_id
            assert sorted(m.member_id for m in lagain.members) == sorted([lagain.member_id, again.member_id])
            assert c.groups["g"].state is GroupState.STABLE and c.groups["g"].generation_id == 1
            # the persisted group names the new member ids
            await asyncio.sleep(0.05)
            loaded = c.storage.load_partition(c.partition_for("g"))
            assert sorted(m.member_id for m in loaded.groups["g"].members) == \
                sorted([lagain.member_id, again.member_id])
            # admin removal by instance id (LeaveGroup v3+ with an empty member id)
            left = c.handle_leave_group("g", [MemberIdentity("", inst), MemberIdentity("", "nobody")])
            assert [m.error for m in left.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
            assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    run(main())


def test_leave_group_batch_and_pending_member(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            a, other = await stable_group(c, "g", n=2)
            pending = await join(c, "g", require_known=True)
            assert pending.error == E.MEMBER_ID_REQUIRED
            left = c.handle_leave_group("g", [MemberIdentity(pending.member_id), MemberIdentity(other.member_id),
                                             MemberIdentity("ghost")])
            assert [(m.member_id, m.error) for m in left.members] == [
                (pending.member_id, E.NONE), (other.member_id, E.NONE), ("ghost", E.UNKNOWN_MEMBER_ID)]
            g = c.groups["g"]
            assert not g.is_pending_member(pending.member_id) and not g.has(other.member_id)
            assert g.state is GroupState.PREPARING_REBALANCE
            r = await join(c, "g", a.member_id)
            assert r.generation_id == 2 and len(r.members) == 1
    run(main())


# ==== offsets =======================================================================================

def test_commit_fetch_survive_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            (a,) = await stable_group(c, "g")
            assert await commit(c, "g", {("t", 0): 42, ("t", 1): 7}, gen=1, member=a.member_id,
                                metadata="meta-ü", epoch=3) == {("t", 0): E.NONE, ("t", 1): E.NONE}
            assert await commit(c, "simple", {("u", 0): 5}) == {("u", 0): E.NONE}
            err, data = c.handle_fetch_offsets("g", False, [("t", 0), ("t", 9)])
            assert err == E.NONE
            assert (data[("t", 0)].offset, data[("t", 0)].leader_epoch, data[("t", 0)].metadata) == (42, 3, "meta-ü")
            assert (data[("t", 9)].offset, data[("t", 9)].metadata, data[("t", 9)].error) == (-1, "", E.NONE)
            assert set(c.handle_fetch_offsets("g", False, None)[1]) == {("t", 0), ("t", 1)}
            committed_ts = c.groups["g"].offset(("t", 0)).commit_timestamp
        async with Broker(tmp_path) as b:
            c = b.coordinator
            g = c.groups["g"]
            assert g.state is GroupState.STABLE and g.generation_id == 1 and g.has(a.member_id)
            om = g.offset(("t", 0))
            assert (om.offset, om.leader_epoch, om.metadata, om.commit_timestamp) == (42, 3, "meta-ü", committed_ts)
            assert c.handle_fetch_offsets("simple", False, [("u", 0)])[1][("u", 0)].offset == 5
            assert c.groups["simple"].protocol_type is None
            # the reloaded member is still expected to heartbeat
            assert c.handle_heartbeat("g", a.member_id, None, 1) == E.NONE
    run(main())


def test_offset_metadata_too_large(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path, **{"offset.metadata.max.bytes": "4"}) as b:
            c = b.coordinator
            now = int(time.time() * 1000)
            result = await c.handle_commit_offsets("g", "", None, -1, {
                ("t", 0): OffsetAndMetadata(1, -1, "abcd", now), ("t", 1): OffsetAndMetadata(1, -1, "abcde", now)})
            assert result == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
            assert await commit(c, "g", {("t", 1): 1}, metadata="toolong") == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}
            assert c.handle_fetch_offsets("g", False, [("t", 1)])[1][("t", 1)].offset == -1
    run(main())


def test_offsets_retention_expires_empty_group(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            (a,) = await stable_group(c, "g")
            await commit(c, "g", {("t", 0): 1}, gen=1, member=a.member_id)
            await commit(c, "simple", {("t", 0): 1})
            c.offset_config = OffsetConfig(retention_ms=150)
            assert await c.expire_group_metadata() == 0  # stable, subscribed to t: kept
            c.handle_leave_group("g", [MemberIdentity(a.member_id)])
            assert c.groups["g"].state is GroupState.EMPTY
            assert await c.expire_group_metadata() == 0  # retention counts from becoming empty
            await asyncio.sleep(0.2)
            assert await c.expire_group_metadata() == 2
            assert "g" not in c.groups and "simple" not in c.groups
            assert c.handle_fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == -1
        async with Broker(tmp_path) as b:  # tombstones: gone after a reload too
            assert "g" not in b.coordinator.groups and "simple" not in b.coordinator.groups
    run(main())


def test_delete_groups(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            await stable_group(c, "busy")
            await commit(c, "idle", {("t", 0): 1})
            result = await c.handle_delete_groups(["busy", "idle", "missing"])
            assert result == {"busy": E.NON_EMPTY_GROUP, "idle": E.NONE, "missing": E.GROUP_ID_NOT_FOUND}
            assert "idle" not in c.groups
            assert await c.handle_delete_groups(["idle"]) == {"idle": E.GROUP_ID_NOT_FOUND}
        async with Broker(tmp_path) as b:
            assert "idle" not in b.coordinator.groups and "busy" in b.coordinator.groups
    run(main())


def test_offset_delete(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            (a,) = await stable_group(c, "g", protocols=[("range", subscription("sub"))])
            await commit(c, "g", {("sub", 0): 1, ("other", 0): 2}, gen=1, member=a.member_id)
            err, parts = await c.handle_delete_offsets("g", [("sub", 0), ("other", 0)])
            assert err == E.NONE and parts == {("sub", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
            assert set(c.handle_fetch_offsets("g", False, None)[1]) == {("sub", 0)}
            assert await c.handle_delete_offsets("missing", [("sub", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
            # a non-consumer group with members
            await stable_group(c, "connect", protocol_type="connect", protocols=[("v1", b"")])
            assert await c.handle_delete_offsets("connect", [("x", 0)]) == (E.NON_EMPTY_GROUP, {})
            # an empty group loses the offsets, and dies with the last one
            await commit(c, "simple", {("x", 0): 1})
            assert await c.handle_delete_offsets("simple", [("x", 0)]) == (E.NONE, {("x", 0): E.NONE})
            assert "simple" not in c.groups
    run(main())


def test_list_and_describe(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            await stable_group(c, "stable")
            await commit(c, "empty", {("t", 0): 1})
            err, groups = c.handle_list_groups()
            assert err == E.NONE and sorted((g.group_id, g.protocol_type, g.state) for g in groups) == \
                [("empty", "", "Empty"), ("stable", "consumer", "Stable")]
            assert [g.group_id for g in c.handle_list_groups(["STABLE"])[1]] == ["stable"]
            assert [g.group_id for g in c.handle_list_groups(["empty", "dead"])[1]] == ["empty"]
            assert len(c.handle_list_groups([], ["Classic"])[1]) == 2
            assert c.handle_list_groups([], ["consumer"])[1] == []
            err, msg, summary = c.handle_describe_group("stable")
            assert (err, msg, summary.state, summary.protocol) == (E.NONE, None, "Stable", "range")
            assert c.handle_describe_group("nope", 5) == (E.NONE, None, c.handle_describe_group("nope", 5)[2])
            assert c.handle_describe_group("nope", 5)[2].state == "Dead"
            err, msg, summary = c.handle_describe_group("nope", 6)
            assert (err, msg, summary.state) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.", "Dead")
    run(main())


def test_shutdown_answers_parked_joins(tmp_path: Path) -> None:
    async def main() -> None:
        b = Broker(tmp_path, **{"group.initial.rebalance.delay.ms": "60000"})
        await b.__aenter__()
        parked = join(b.coordinator, "g")
        await asyncio.sleep(0.05)
        assert not parked.done()
        started = time.monotonic()
        await b.__aexit__()
        assert (await parked).error == E.NOT_COORDINATOR and time.monotonic() - started < 2
    run(main())


# ==== the wire: every advertised version ============================================================

@pytest.fixture(scope="module")
def wire_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(log_dir=tmp_path_factory.mktemp("group-wire") / "logs",
                       overrides={"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
                                  "offsets.topic.num.partitions": "5", "num.partitions": "2"}) as b:
        yield b


@pytest.fixture(scope="module")
def wire(wire_broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(wire_broker.bootstrap_servers, client_id="wire") as c:
        # the first FindCoordinator creates the offsets topic and answers COORDINATOR_NOT_AVAILABLE
        first = c.request(FindCoordinatorRequest[1](key="any", key_type=0))
        assert first.error_code in (0, 15)
        deadline = time.monotonic() + 10
        while c.request(FindCoordinatorRequest[1](key="any", key_type=0)).error_code != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield c


def _topic(c: RawClient, name: str) -> uuid.UUID:
    resp = c.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                         allow_auto_topic_creation=True))
    deadline = time.monotonic() + 5
    while resp.topics[0].error_code != 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
        resp = c.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                             allow_auto_topic_creation=True))
    return resp.topics[0].topic_id


@pytest.mark.parametrize("v", range(0, 7))
def test_wire_find_coordinator_each_version(wire_broker: BrokerProcess, wire: RawClient, v: int) -> None:
    if v < 4:
        kwargs = {"key": "grp"} if v == 0 else {"key": "grp", "key_type": 0}
        r = wire.request(FindCoordinatorRequest[v](**kwargs))
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, "127.0.0.1", wire_broker.port)
        if v >= 1:
            assert r.error_message == "NONE"
            # the transaction coordinator: COORDINATOR_NOT_AVAILABLE until __transaction_state exists
            txn = _find_txn_coordinator(wire, lambda: wire.request(FindCoordinatorRequest[v](key="txn", key_type=1)))
            assert (txn.error_code, txn.node_id, txn.host, txn.port) == (0, 0, "127.0.0.1", wire_broker.port)
        return
    r = wire.request(FindCoordinatorRequest[v](key_type=0, coordinator_keys=["a", "b"]))
    assert [(x.key, x.error_code, x.node_id, x.host, x.port, x.error_message) for x in r.coordinators] == \
        [(k, 0, 0, "127.0.0.1", wire_broker.port, "") for k in ("a", "b")]  # Kafka 3.9 sends "" here
    txn = _find_txn_coordinator(
        wire, lambda: wire.request(FindCoordinatorRequest[v](key_type=1, coordinator_keys=["t"])).coordinators[0])
    assert (txn.key, txn.error_code, txn.node_id, txn.host, txn.port) == ("t", 0, 0, "127.0.0.1", wire_broker.port)


def _find_txn_coordinator(c: RawClient, ask: Callable[[], Any]) -> Any:
    """FindCoordinator(TRANSACTION), retried while the broker creates and loads __transaction_state."""
    deadline = time.monotonic() + 10
    while True:
        r = ask()
        if r.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
            return r
        assert (r.node_id, r.host, r.port) == (-1, "", -1)
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _wire_join(c: RawClient, v: int, group: str, member_id: str = "", instance: Optional[str] = None) -> Any:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    kwargs: dict[str, Any] = dict(group_id=group, session_timeout_ms=10_000, member_id=member_id,
                                  protocol_type="consumer", protocols=[P(name="range", metadata=subscription("t"))])
    if v >= 1:
        kwargs["rebalance_timeout_ms"] = 10_000
    if v >= 5:
        kwargs["group_instance_id"] = instance
    if v >= 8:
        kwargs["reason"] = "test"
    return c.request(JoinGroupRequest[v](**kwargs))


@pytest.mark.parametrize("v", range(0, 10))
def test_wire_membership_flow_each_version(wire: RawClient, v: int) -> None:
    """JoinGroup v, with SyncGroup/Heartbeat/LeaveGroup at the nearest version they have."""
    group = f"flow-{v}-{uuid.uuid4().hex[:6]}"
    sv, hv, lv = min(v, 5), min(v, 4), min(v, 5)
    r = _wire_join(wire, v, group)
    if v >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("wire-")
        assert r.generation_id == -1 and r.members == []
        r = _wire_join(wire, v, group, r.member_id)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range"
    if v >= 7:
        assert r.protocol_type == "consumer"
    if v >= 9:
        assert r.skip_assignment is False
    assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, subscription("t"))]
    A = SyncGroupRequest.SyncGroupRequestAssignment
    skw: dict[str, Any] = dict(group_id=group, generation_id=1, member_id=r.member_id,
                               assignments=[A(member_id=r.member_id, assignment=b"asg")])
    if sv >= 5:
        # v5: protocol type and name are required
        bad = wire.request(SyncGroupRequest[sv](**skw))
        assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        skw.update(protocol_type="consumer", protocol_name="range")
    s = wire.request(SyncGroupRequest[sv](**skw))
    assert (s.error_code, s.assignment) == (0, b"asg")
    if sv >= 5:
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
    h = wire.request(HeartbeatRequest[hv](group_id=group, generation_id=1, member_id=r.member_id))
    assert h.error_code == 0
    h = wire.request(HeartbeatRequest[hv](group_id=group, generation_id=2, member_id=r.member_id))
    assert h.error_code == E.ILLEGAL_GENERATION
    d = wire.request(DescribeGroupsRequest[min(v, 6)](groups=[group], include_authorized_operations=True))
    (g,) = d.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    (m,) = g.members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) == \
        (r.member_id, "wire", "/127.0.0.1", subscription("t"), b"asg")
    if lv < 3:
        left = wire.request(LeaveGroupRequest[lv](group_id=group, member_id=r.member_id))
        assert left.error_code == 0
        again = wire.request(LeaveGroupRequest[lv](group_id=group, member_id=r.member_id))
        assert again.error_code == E.UNKNOWN_MEMBER_ID  # the member's error, at the top for old versions
    else:
        M = LeaveGroupRequest.MemberIdentity
        mk = {"reason": "bye"} if lv >= 5 else {}
        left = wire.request(LeaveGroupRequest[lv](group_id=group, members=[
            M(member_id=r.member_id, group_instance_id=None, **mk), M(member_id="ghost", group_instance_id=None, **mk)]))
        assert left.error_code == 0
        assert [(x.member_id, x.group_instance_id, x.error_code) for x in left.members] == \
            [(r.member_id, None, 0), ("ghost", None, E.UNKNOWN_MEMBER_ID)]
    d = wire.request(DescribeGroupsRequest[min(v, 6)](groups=[group], include_authorized_operations=False))
    assert (d.groups[0].group_state, d.groups[0].members) == ("Empty", [])


def test_wire_static_member_v5_and_join_errors(wire: RawClient) -> None:
    group = f"static-{uuid.uuid4().hex[:6]}"
    r = _wire_join(wire, 5, group, instance="inst-1")
    assert r.error_code == 0 and r.member_id.startswith("inst-1-")  # no MEMBER_ID_REQUIRED for static members
    assert _wire_join(wire, 5, "", instance=None).error_code == E.INVALID_GROUP_ID
    unknown = _wire_join(wire, 6, group, "nobody")
    assert (unknown.error_code, unknown.member_id, unknown.protocol_name) == (E.UNKNOWN_MEMBER_ID, "nobody", "")
    unknown7 = _wire_join(wire, 7, group, "nobody")
    assert (unknown7.protocol_name, unknown7.protocol_type) == (None, None)


@pytest.mark.parametrize("v", range(1, 11))
def test_wire_offset_commit_each_version(wire: RawClient, v: int) -> None:
    topic = f"oc-{v}-{uuid.uuid4().hex[:6]}"
    tid = _topic(wire, topic)
    group = f"ocg-{v}"
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    pkw = {"committed_leader_epoch": 4} if v >= 6 else {}
    tkw = {"topic_id": tid} if v >= 10 else {"name": topic}
    kwargs: dict[str, Any] = dict(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        T(partitions=[P(partition_index=0, committed_offset=11, committed_metadata="md", **pkw),
                      P(partition_index=5, committed_offset=1, committed_metadata=None, **pkw)], **tkw)])
    if 2 <= v <= 4:
        kwargs["retention_time_ms"] = -1
    if v >= 7:
        kwargs["group_instance_id"] = None
    r = wire.request(OffsetCommitRequest[v](**kwargs))
    (t,) = r.topics
    assert (t.topic_id if v >= 10 else t.name) == (tid if v >= 10 else topic)
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [(0, 0), (5, E.UNKNOWN_TOPIC_OR_PARTITION)]
    # unknown topics (by name, or by id from v10)
    unknown = dict(kwargs, topics=[T(partitions=[P(partition_index=0, committed_offset=1, committed_metadata="", **pkw)],
                                     **({"topic_id": uuid.uuid4()} if v >= 10 else {"name": "no-such-topic"}))])
    (t,) = wire.request(OffsetCommitRequest[v](**unknown)).topics
    assert [p.error_code for p in t.partitions] == [E.UNKNOWN_TOPIC_ID if v >= 10 else E.UNKNOWN_TOPIC_OR_PARTITION]
    # a generation for a group that does not exist
    gone = dict(kwargs, group_id=f"nogroup-{v}", generation_id_or_member_epoch=1, member_id="m")
    (t,) = wire.request(OffsetCommitRequest[v](**gone)).topics
    assert t.partitions[0].error_code == (E.GROUP_ID_NOT_FOUND if v >= 10 else E.ILLEGAL_GENERATION)
    fetched = wire.request(OffsetFetchRequest[7](group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])], require_stable=True))
    p = fetched.topics[0].partitions[0]
    assert (p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code) == \
        (11, "md", 4 if v >= 6 else -1, 0)


@pytest.mark.parametrize("v", range(1, 11))
def test_wire_offset_fetch_each_version(wire: RawClient, v: int) -> None:
    topic = f"of-{v}-{uuid.uuid4().hex[:6]}"
    tid = _topic(wire, topic)
    group = f"ofg-{v}"
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    wire.request(OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, topics=[T(name=topic, partitions=[
                                            P(partition_index=1, committed_offset=21, committed_leader_epoch=2,
                                              committed_metadata="x")])]))
    expected_epoch = 2 if v >= 5 else None
    if v < 8:
        R = OffsetFetchRequest.OffsetFetchRequestTopic
        kw = {"require_stable": False} if v >= 7 else {}
        r = wire.request(OffsetFetchRequest[v](group_id=group, topics=[R(name=topic, partition_indexes=[1, 0])], **kw))
        (t,) = r.topics
        got = [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions]
        assert sorted(got) == [(0, -1, "", 0), (1, 21, "x", 0)]
        if expected_epoch is not None:
            assert {p.partition_index: p.committed_leader_epoch for p in t.partitions} == {0: -1, 1: 2}
        if v >= 2:
            assert r.error_code == 0
            everything = wire.request(OffsetFetchRequest[v](group_id=group, topics=None, **kw))
            assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                    for t in everything.topics] == [(topic, [(1, 21)])]
        return
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    R = G.OffsetFetchRequestTopics
    tkw = {"topic_id": tid} if v >= 10 else {"name": topic}
    gkw = {"member_id": None, "member_epoch": -1} if v >= 9 else {}
    r = wire.request(OffsetFetchRequest[v](groups=[
        G(group_id=group, topics=[R(partition_indexes=[1], **tkw)], **gkw),
        G(group_id=group, topics=None, **gkw),
        G(group_id="never-seen", topics=[R(partition_indexes=[0], **tkw)], **gkw)], require_stable=True))
    assert [g.group_id for g in r.groups] == [group, group, "never-seen"]
    for g, expected in zip(r.groups, ([(1, 21, "x", 2)], [(1, 21, "x", 2)], [(0, -1, "", -1)])):
        assert g.error_code == 0
        (t,) = g.topics
        assert (t.topic_id if v >= 10 else t.name) == (tid if v >= 10 else topic)
        assert [(p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch) for p in t.partitions] \
            == expected
    if v >= 10:
        (g,) = wire.request(OffsetFetchRequest[v](groups=[
            G(group_id=group, topics=[R(topic_id=uuid.uuid4(), partition_indexes=[3])], **gkw)],
            require_stable=False)).groups
        assert [p.error_code for p in g.topics[0].partitions] == [E.UNKNOWN_TOPIC_ID]


def test_wire_offset_fetch_empty_group_id_is_allowed(wire: RawClient) -> None:
    # OffsetFetch accepts the empty group id (Kafka keeps it for backward compatibility)
    R = OffsetFetchRequest.OffsetFetchRequestTopic
    r = wire.request(OffsetFetchRequest[1](group_id="", topics=[R(name="x", partition_indexes=[0])]))
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in r.topics[0].partitions] == [(0, -1, 0)]


@pytest.mark.parametrize("v", range(0, 7))
def test_wire_describe_groups_each_version(wire: RawClient, v: int) -> None:
    kw = {"include_authorized_operations": True} if v >= 3 else {}
    group = f"dg-{v}-{uuid.uuid4().hex[:6]}"
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    _topic(wire, "dg-topic")
    wire.request(OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, topics=[T(name="dg-topic", partitions=[
                                            P(partition_index=0, committed_offset=1, committed_metadata="")])]))
    r = wire.request(DescribeGroupsRequest[v](groups=[group, "missing-group"], **kw))
    existing, missing = r.groups
    assert (existing.error_code, existing.group_id, existing.group_state, existing.protocol_type,
            existing.protocol_data, existing.members) == (0, group, "Empty", "", "", [])
    if v >= 3:
        assert existing.authorized_operations == {3, 6, 8}
    if v >= 6:
        assert (missing.error_code, missing.error_message, missing.group_state) == \
            (E.GROUP_ID_NOT_FOUND, "Group missing-group not found.", "Dead")
    else:
        assert (missing.error_code, missing.group_state) == (0, "Dead")


@pytest.mark.parametrize("v", range(0, 6))
def test_wire_list_groups_each_version(wire: RawClient, v: int) -> None:
    group = f"lg-{v}-{uuid.uuid4().hex[:6]}"
    r = _wire_join(wire, 3, group)  # v3: no MEMBER_ID_REQUIRED, stays CompletingRebalance
    assert r.error_code == 0
    kw: dict[str, Any] = {}
    if v >= 4:
        kw["states_filter"] = ["completingrebalance"]
    if v >= 5:
        kw["types_filter"] = ["classic"]
    resp = wire.request(ListGroupsRequest[v](**kw))
    assert resp.error_code == 0
    mine = [g for g in resp.groups if g.group_id == group]
    assert [(g.group_id, g.protocol_type) for g in mine] == [(group, "consumer")]
    if v >= 4:
        assert mine[0].group_state == "CompletingRebalance"
        assert all(g.group_state == "CompletingRebalance" for g in resp.groups)
    if v >= 5:
        assert mine[0].group_type == "classic"
        assert wire.request(ListGroupsRequest[v](states_filter=[], types_filter=["consumer"])).groups == []


@pytest.mark.parametrize("v", range(0, 3))
def test_wire_delete_groups_each_version(wire: RawClient, v: int) -> None:
    group = f"del-{v}-{uuid.uuid4().hex[:6]}"
    busy = f"busy-{v}-{uuid.uuid4().hex[:6]}"
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    _topic(wire, "del-topic")
    wire.request(OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, topics=[T(name="del-topic", partitions=[
                                            P(partition_index=0, committed_offset=1, committed_metadata="")])]))
    assert _wire_join(wire, 3, busy).error_code == 0
    r = wire.request(DeleteGroupsRequest[v](groups_names=[group, busy, "nothing-here", group]))
    assert [(x.group_id, x.error_code) for x in r.results] == \
        [(group, 0), (busy, E.NON_EMPTY_GROUP), ("nothing-here", E.GROUP_ID_NOT_FOUND)]


def test_wire_offset_delete(wire: RawClient) -> None:
    group = f"odel-{uuid.uuid4().hex[:6]}"
    topic = f"odel-t-{uuid.uuid4().hex[:6]}"
    _topic(wire, topic)
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    wire.request(OffsetCommitRequest[8](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, topics=[T(name=topic, partitions=[
                                            P(partition_index=0, committed_offset=1, committed_metadata=""),
                                            P(partition_index=1, committed_offset=1, committed_metadata="")])]))
    DT, DP = OffsetDeleteRequest.OffsetDeleteRequestTopic, OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
    r = wire.request(OffsetDeleteRequest[0](group_id=group, topics=[
        DT(name=topic, partitions=[DP(partition_index=0), DP(partition_index=9)]),
        DT(name="no-such", partitions=[DP(partition_index=0)])]))
    assert r.error_code == 0
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == \
        [(topic, [(0, 0), (9, E.UNKNOWN_TOPIC_OR_PARTITION)]), ("no-such", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert wire.request(OffsetDeleteRequest[0](group_id="", topics=[])).error_code == E.INVALID_GROUP_ID
    missing = wire.request(OffsetDeleteRequest[0](group_id="missing-odel", topics=[
        DT(name=topic, partitions=[DP(partition_index=0)])]))
    assert (missing.error_code, missing.topics) == (E.GROUP_ID_NOT_FOUND, [])


def test_wire_offsets_topic_is_internal_and_not_producible(wire: RawClient) -> None:
    md = wire.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")],
                                          allow_auto_topic_creation=False))
    (t,) = md.topics
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 5)
