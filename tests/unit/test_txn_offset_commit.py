"""Transactional offset commits in the group coordinator (TxnOffsetCommit, Kafka's
handleTxnCommitOffsets / handleTxnCompletion), on an in-process broker with its real
`__consumer_offsets` log: pending until the transaction ends, COMMIT materialises, ABORT drops,
ordering against plain commits by log position, member/generation checks, producer epoch fencing,
require_stable, reload of unfinished transactions, DeleteGroups and expiration."""
from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any, Optional

from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
from kafkalite.coordinator.group.group_metadata import GroupState
from kafkalite.coordinator.group.types import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from kafkalite.log.log import ORIGIN_COORDINATOR
from kafkalite.log.record_batch import build_batch, split_batches
from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from tests.unit.test_group_coordinator import Broker, commit, run, stable_group

E = ErrorCode
PID, EPOCH = 4000, 3


def om(offset: int, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, metadata, int(time.time() * 1000))


def txn_commit(c: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int], *, pid: int = PID,
               epoch: int = EPOCH, member: str = "", instance: Optional[str] = None, gen: int = -1,
               metadata: str = "") -> Any:
    return c.handle_txn_commit_offsets(group, "txn-id", pid, epoch, member, instance, gen,
                                       {tp: om(o, metadata) for tp, o in offsets.items()})


def fetched(c: GroupCoordinator, group: str, tps: list[tuple[str, int]], stable: bool = False
            ) -> dict[tuple[str, int], tuple[int, ErrorCode]]:
    error, data = c.handle_fetch_offsets(group, stable, tps)
    assert error == E.NONE
    return {tp: (d.offset, d.error) for tp, d in data.items()}


def offsets_log(b: Broker, group: str):
    p = b.coordinator.partition_for(group)
    return b.server.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, p)).log  # type: ignore[union-attr]


def end_marker(pid: int, epoch: int, commit: bool) -> bytes:
    """Kafka's EndTransactionMarker control batch (key: version 0, type; value: version 0, coordinator epoch)."""
    return build_batch([(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0), int(time.time() * 1000))],
                       producer_id=pid, producer_epoch=epoch, transactional=True, control=True)


def append_marker(b: Broker, group: str, pid: int, epoch: int, commit: bool) -> None:
    lg = offsets_log(b, group)
    part = b.server.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME,  # type: ignore[union-attr]
                                                                 b.coordinator.partition_for(group)))
    lg.append_as_leader(end_marker(pid, epoch, commit), part.leader_epoch, int(time.time() * 1000),
                        origin=ORIGIN_COORDINATOR)
    part.maybe_increment_high_watermark()


T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


def test_pending_until_commit_then_visible(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert "g" not in c.groups
            assert await txn_commit(c, "g", {T0: 10, T1: 11}, metadata="m") == {T0: E.NONE, T1: E.NONE}
            # the group is created, Empty, with nothing committed yet
            assert c.groups["g"].state is GroupState.EMPTY and c.groups["g"].generation_id == 0
            assert fetched(c, "g", [T0, T1, T2]) == {T0: (-1, E.NONE), T1: (-1, E.NONE), T2: (-1, E.NONE)}
            assert fetched(c, "g", [T0, T1, T2], stable=True) == {
                T0: (-1, E.UNSTABLE_OFFSET_COMMIT), T1: (-1, E.UNSTABLE_OFFSET_COMMIT), T2: (-1, E.NONE)}
            assert c.handle_fetch_offsets("g", False, None) == (E.NONE, {})
            assert c.open_groups_for_producer == {PID: {"g"}}
            # another __consumer_offsets partition's marker does not complete it
            other = (c.partition_for("g") + 1) % 3
            c.handle_txn_completion(PID, [other], True)
            assert fetched(c, "g", [T0], stable=True) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
            c.handle_txn_completion(PID, [c.partition_for("g")], True)
            assert fetched(c, "g", [T0, T1, T2], stable=True) == {T0: (10, E.NONE), T1: (11, E.NONE),
                                                                   T2: (-1, E.NONE)}
            error, data = c.handle_fetch_offsets("g", True, None)
            assert (error, sorted((tp, d.offset, d.metadata) for tp, d in data.items())) == \
                (E.NONE, [(T0, 10, "m"), (T1, 11, "m")])
            assert c.open_groups_for_producer == {}

            # the batch in __consumer_offsets: transactional, the producer's id and epoch, sequence 0
            lg = offsets_log(b, "g")
            batches, _ = split_batches(lg.read(0, 1 << 20).read_bytes())
            txn = [h for _pos, h in batches if h.producer_id == PID]
            assert [(h.is_transactional, h.is_control, h.producer_epoch, h.base_sequence, h.records_count)
                    for h in txn] == [(True, False, EPOCH, 0, 2)]
    run(main())


def test_abort_drops_the_offsets(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert await commit(c, "g", {T0: 5}) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T0: 50, T1: 51}) == {T0: E.NONE, T1: E.NONE}
            assert fetched(c, "g", [T0, T1]) == {T0: (5, E.NONE), T1: (-1, E.NONE)}
            c.handle_txn_completion(PID, [c.partition_for("g")], False)
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (5, E.NONE), T1: (-1, E.NONE)}
            assert not c.groups["g"].pending_transactional_offset_commits and c.open_groups_for_producer == {}
    run(main())


def test_order_against_plain_commits_is_the_log_order(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            # txn (written first) then a plain commit: the plain one is newer and stays
            assert await txn_commit(c, "g", {T0: 100, T1: 101}) == {T0: E.NONE, T1: E.NONE}
            assert await commit(c, "g", {T0: 7}) == {T0: E.NONE}
            c.handle_txn_completion(PID, [c.partition_for("g")], True)
            assert fetched(c, "g", [T0, T1]) == {T0: (7, E.NONE), T1: (101, E.NONE)}
            # a plain commit then a txn written after it: the txn's wins when it commits
            assert await commit(c, "g", {T2: 1}) == {T2: E.NONE}
            assert await txn_commit(c, "g", {T2: 200}, pid=PID + 1) == {T2: E.NONE}
            c.handle_txn_completion(PID + 1, [c.partition_for("g")], True)
            assert fetched(c, "g", [T2]) == {T2: (200, E.NONE)}
    run(main())


def test_two_producers_complete_independently(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert await txn_commit(c, "g", {T0: 1}, pid=1) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T1: 2}, pid=2) == {T1: E.NONE}
            assert await txn_commit(c, "h", {T0: 3}, pid=1) == {T0: E.NONE}
            assert c.open_groups_for_producer == {1: {"g", "h"}, 2: {"g"}}
            parts = {c.partition_for("g"), c.partition_for("h")}
            c.handle_txn_completion(2, parts, False)
            c.handle_txn_completion(1, parts, True)
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (1, E.NONE), T1: (-1, E.NONE)}
            assert fetched(c, "h", [T0], stable=True) == {T0: (3, E.NONE)}
            assert c.open_groups_for_producer == {}
    run(main())


def test_member_and_generation_checks(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            [leader] = await stable_group(c, "g")
            gen, mid = leader.generation_id, leader.member_id
            assert await txn_commit(c, "g", {T0: 1}, member=mid, gen=gen + 1) == {T0: E.ILLEGAL_GENERATION}
            assert await txn_commit(c, "g", {T0: 1}, member="nobody", gen=gen) == {T0: E.UNKNOWN_MEMBER_ID}
            # v0-2 carry no member: a transactional commit to a group with members is allowed
            assert await txn_commit(c, "g", {T0: 1}) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T1: 2}, member=mid, gen=gen) == {T1: E.NONE}
            [static] = await stable_group(c, "s", instance="inst-1")
            assert await txn_commit(c, "s", {T0: 1}, member="other", instance="inst-1", gen=static.generation_id) \
                == {T0: E.FENCED_INSTANCE_ID}
            assert await txn_commit(c, "s", {T0: 1}, member=static.member_id, instance="inst-2",
                                    gen=static.generation_id) == {T0: E.UNKNOWN_MEMBER_ID}
            assert await txn_commit(c, "s", {T0: 1}, member=static.member_id, instance="inst-1",
                                    gen=static.generation_id) == {T0: E.NONE}
            # group ids: empty is refused for TxnOffsetCommit (unlike OffsetCommit); unknown partition
            # of the coordinator: NOT_COORDINATOR is not possible here (every partition is local)
            assert await txn_commit(c, "", {T0: 1}) == {T0: E.INVALID_GROUP_ID}
            too_long = "x" * 5000
            assert await txn_commit(c, "g", {T2: 1}, metadata=too_long) == {T2: E.OFFSET_METADATA_TOO_LARGE}
    run(main())


def test_stale_producer_epoch_is_fenced_by_the_log(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert await txn_commit(c, "g", {T0: 1}, epoch=5) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T1: 2}, epoch=4) == {T1: E.INVALID_PRODUCER_EPOCH}
            # the failed write left nothing pending for T1
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT), T1: (-1, E.NONE)}
    run(main())


def test_unfinished_transaction_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert await commit(c, "g", {T0: 5}) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T0: 50, T1: 51}) == {T0: E.NONE, T1: E.NONE}
            assert await txn_commit(c, "only-txn", {T0: 9}, pid=PID + 1) == {T0: E.NONE}
            assert await commit(c, "g", {T1: 6}) == {T1: E.NONE}      # after the txn's record
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT),
                                                              T1: (-1, E.UNSTABLE_OFFSET_COMMIT)}
            assert fetched(c, "g", [T0, T1]) == {T0: (5, E.NONE), T1: (6, E.NONE)}
            # a group known only by its pending transactional offsets is loaded too
            assert "only-txn" in c.groups and fetched(c, "only-txn", [T0], stable=True) == \
                {T0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
            assert c.open_groups_for_producer == {PID: {"g"}, PID + 1: {"only-txn"}}
            append_marker(b, "g", PID, EPOCH, commit=True)
            c.handle_txn_completion(PID, [c.partition_for("g")], True)
            # T0: the txn's record (after the plain 5) wins; T1: the plain 6 was written after it
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (50, E.NONE), T1: (6, E.NONE)}
        async with Broker(tmp_path) as b:   # the marker is in the log: the same after a reload
            c = b.coordinator
            assert fetched(c, "g", [T0, T1], stable=True) == {T0: (50, E.NONE), T1: (6, E.NONE)}
            assert c.open_groups_for_producer == {PID + 1: {"only-txn"}}
    run(main())


def test_delete_group_removes_pending_transactional_offsets(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path) as b:
            c = b.coordinator
            assert await commit(c, "g", {T0: 5}) == {T0: E.NONE}
            assert await txn_commit(c, "g", {T1: 51}) == {T1: E.NONE}
            assert await c.handle_delete_groups(["g"]) == {"g": E.NONE}
            assert "g" not in c.groups and c.open_groups_for_producer == {}
            append_marker(b, "g", PID, EPOCH, commit=True)
            c.handle_txn_completion(PID, [c.partition_for("g")], True)
            assert "g" not in c.groups
            assert fetched(c, "g", [T0, T1]) == {T0: (-1, E.NONE), T1: (-1, E.NONE)}
        async with Broker(tmp_path) as b:   # tombstones for both: nothing comes back on a reload
            c = b.coordinator
            assert "g" not in c.groups
    run(main())


def test_expiration_keeps_a_group_with_pending_transactional_offsets(tmp_path: Path) -> None:
    async def main() -> None:
        async with Broker(tmp_path, **{"offsets.retention.minutes": "1"}) as b:
            c = b.coordinator
            assert await commit(c, "g", {T0: 5, T1: 6}) == {T0: E.NONE, T1: E.NONE}
            assert await txn_commit(c, "g", {T1: 60, T2: 70}) == {T1: E.NONE, T2: E.NONE}
            later = c.time_ms() + 120_000
            c.time_ms = lambda: later  # type: ignore[method-assign]
            # T0 expires; T1 has a transactional commit pending and stays; the group stays alive
            assert await c.expire_group_metadata() == 1
            assert c.groups["g"].state is GroupState.EMPTY
            assert fetched(c, "g", [T0, T1, T2]) == {T0: (-1, E.NONE), T1: (6, E.NONE), T2: (-1, E.NONE)}
            c.handle_txn_completion(PID, [c.partition_for("g")], True)
            assert fetched(c, "g", [T0, T1, T2], stable=True) == {T0: (-1, E.NONE), T1: (60, E.NONE),
                                                                   T2: (70, E.NONE)}
    run(main())


# ==== the handler's per-version error mapping ==========================================================

def test_handler_maps_load_in_progress_before_v2() -> None:
    from types import SimpleNamespace

    from kafka.protocol.producer import TxnOffsetCommitRequest

    from kafkalite.server.handlers import txn_offset_commit

    calls: list[tuple[Any, ...]] = []

    class Coordinator:
        async def handle_txn_commit_offsets(self, *args: Any) -> dict[tuple[str, int], ErrorCode]:
            calls.append(args)
            return {tp: E.COORDINATOR_LOAD_IN_PROGRESS for tp in args[-1]}

    class Cache:
        def topic(self, name: str) -> Any:
            return SimpleNamespace(partitions={0: None, 1: None}) if name == "t" else None

    spec = txn_offset_commit.make(SimpleNamespace(group_coordinator=Coordinator(), metadata_cache=Cache()))  # type: ignore[arg-type]
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    for v in range(5):
        req = TxnOffsetCommitRequest[v](
            transactional_id="tx", group_id="g", producer_id=1, producer_epoch=2, generation_id=3, member_id="m",
            group_instance_id="i", topics=[T(name="t", partitions=[P(partition_index=1, committed_offset=5,
                                                                        committed_leader_epoch=7, committed_metadata=None),
                                                                      P(partition_index=9, committed_offset=5,
                                                                        committed_leader_epoch=7, committed_metadata="x")]),
                                           T(name="u", partitions=[P(partition_index=0, committed_offset=1,
                                                                     committed_leader_epoch=-1, committed_metadata="")])])
        ctx = SimpleNamespace(api_version=v)
        resp = run(spec.handler(ctx, req))  # type: ignore[arg-type]
        got = [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]
        loading = E.COORDINATOR_NOT_AVAILABLE if v < 2 else E.COORDINATOR_LOAD_IN_PROGRESS
        assert got == [("t", 1, loading), ("t", 9, E.UNKNOWN_TOPIC_OR_PARTITION), ("u", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
        group, tid, pid, epoch, member, instance, generation, offsets = calls[-1]
        assert (group, tid, pid, epoch) == ("g", "tx", 1, 2)
        assert (member, instance, generation) == (("m", "i", 3) if v >= 3 else ("", None, -1))
        [(tp, o)] = offsets.items()
        assert (tp, o.offset, o.leader_epoch, o.metadata) == (("t", 1), 5, 7 if v >= 2 else -1, "")
