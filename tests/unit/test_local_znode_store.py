"""LocalZNodeStore: ZooKeeper's semantics in process (versions, cversion, zxids, ephemeral and
sequential nodes, atomic multi, persistent watches on the loop), persistence with group commit,
reload, and the one-time migration from kafkalite-metadata.json. KafkaZkClient over it."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Awaitable, TypeVar

import pytest

from kafkalite.controller.zk import local_store as local_store_module
from kafkalite.controller.zk import znodes as z
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from kafkalite.controller.zk.local_store import FILE_NAME, LocalZNodeStore
from kafkalite.controller.zk.znode_store import (BadVersionError, CheckOp, CreateOp, DeleteOp,
                                                 MultiError, NoChildrenForEphemeralsError,
                                                 NodeExistsError, NoNodeError, NotEmptyError,
                                                 SessionExpiredError, SetDataOp, StoreError,
                                                 ZkState)

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 30)
    return asyncio.run(bounded())


def test_versions_zxids_and_errors(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        states: list[ZkState] = []
        s.add_state_listener(states.append)
        await s.start()
        await asyncio.sleep(0)
        assert states == [ZkState.CONNECTED] and s.session_id > 0
        assert await s.create("/a", b"1") == "/a"
        data, st = await s.get("/a")
        assert data == b"1" and st.version == 0 and st.czxid == st.mzxid and st.data_length == 1
        st2 = await s.set("/a", b"22", 0)
        assert st2.version == 1 and st2.mzxid == st.czxid + 1 and st2.czxid == st.czxid
        with pytest.raises(BadVersionError):
            await s.set("/a", b"x", 0)
        assert (await s.get("/a"))[0] == b"22"
        with pytest.raises(NodeExistsError):
            await s.create("/a")
        with pytest.raises(NoNodeError):
            await s.create("/x/y")
        with pytest.raises(NoNodeError):
            await s.get("/x")
        with pytest.raises(NoNodeError):
            await s.set("/x", b"")
        with pytest.raises(NoNodeError):
            await s.children("/x")
        with pytest.raises(StoreError):
            await s.get("bad")
        assert await s.exists("/x") is None
        assert await s.create("/p/q/r", b"d", make_parents=True) == "/p/q/r"
        assert await s.children("/p") == ["q"] and (await s.get("/p"))[0] == b""
        root = await s.exists("/")
        assert root is not None and root.num_children == 2 and root.cversion == 2
        with pytest.raises(NotEmptyError):
            await s.delete("/p")
        with pytest.raises(BadVersionError):
            await s.delete("/a", 0)
        # batched reads: in order, None where there is no node, the stat of each
        reads = await s.get_many(["/p/q/r", "/nope", "/a", "/p/q/nope"])
        assert [r if r is None else r[0] for r in reads] == [b"d", None, b"22", None]
        assert reads[2] is not None and reads[2][1] == await s.exists("/a")
        await s.delete("/a", 1)
        await s.delete("/p", recursive=True)
        assert await s.children("/") == []
        assert (await s.exists("/")).cversion == 4
        with pytest.raises(NoNodeError):
            await s.delete("/p")
        await s.close()
        with pytest.raises(SessionExpiredError):
            await s.get("/")
    run(main())


def test_sequential_and_ephemeral_nodes(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        await s.create("/c")
        await s.create("/c/other")                  # counts in the parent's cversion
        names = [await s.create("/c/config_change_", b"n", sequential=True) for _ in range(3)]
        assert names == ["/c/config_change_0000000001", "/c/config_change_0000000002",
                         "/c/config_change_0000000003"]
        await s.delete(names[0])
        assert await s.create("/c/config_change_", sequential=True) == "/c/config_change_0000000005"
        await s.create("/e", b"x", ephemeral=True)
        assert (await s.exists("/e")).ephemeral_owner == s.session_id
        with pytest.raises(NoChildrenForEphemeralsError):
            await s.create("/e/child")
        await s.close()
        s2 = LocalZNodeStore(tmp_path)
        await s2.start()
        assert await s2.exists("/e") is None                    # never persisted
        assert sorted(await s2.children("/c")) == ["config_change_0000000002", "config_change_0000000003",
                                                    "config_change_0000000005", "other"]
        assert await s2.create("/c/config_change_", sequential=True) == "/c/config_change_0000000006"
        await s2.close()
    run(main())


def test_multi_is_all_or_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        await s.create("/m", b"0")
        before_zxid = (await s.exists("/m")).czxid
        results = await s.multi([CheckOp("/m", 0), SetDataOp("/m", b"1", 0), CreateOp("/m/a", b"a"),
                                 CreateOp("/m/s_", sequential=True), DeleteOp("/m/a")])
        assert results[0] is True and results[1].version == 1
        assert results[2:] == ["/m/a", "/m/s_0000000001", None]
        # one transaction: one zxid for every op
        st = await s.exists("/m/s_0000000001")
        assert st.czxid == (await s.exists("/m")).mzxid == before_zxid + 1
        snapshot = (await s.get("/m"), await s.children("/m"), await s.exists("/m"))
        for ops, error, index in [
            ([SetDataOp("/m", b"2"), CreateOp("/m/b"), CheckOp("/m", 1)], BadVersionError, 2),
            ([CreateOp("/m/c"), CreateOp("/m/c")], NodeExistsError, 1),
            ([DeleteOp("/m/s_0000000001"), SetDataOp("/nope", b"")], NoNodeError, 1),
            ([CreateOp("/m/x"), DeleteOp("/m")], NotEmptyError, 1),
        ]:
            with pytest.raises(error) as info:
                await s.multi(ops)
            assert isinstance(info.value, MultiError) and info.value.failed_index == index
            assert info.value.failed_op is ops[index]
            assert (await s.get("/m"), await s.children("/m"), await s.exists("/m")) == snapshot
        await s.close()
    run(main())


def test_persistent_watches_fire_on_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        events: list[str] = []
        s.watch_data("/w", lambda: events.append("data"))
        s.watch_children("/w", lambda: events.append("children"))
        s.watch_data("/other", lambda: events.append("other"))
        await s.create("/w")
        await asyncio.sleep(0)
        assert sorted(events) == ["children", "data"]
        events.clear()
        await s.set("/w", b"1")
        await s.set("/w", b"2")
        await asyncio.sleep(0)
        assert events == ["data", "data"]
        events.clear()
        await s.create("/w/c")
        await asyncio.sleep(0)
        assert events == ["children"]
        events.clear()
        await s.multi([CreateOp("/w/d"), SetDataOp("/w", b"3")])   # one call per callback per write
        await asyncio.sleep(0)
        assert sorted(events) == ["children", "data"]
        events.clear()
        await s.delete("/w", recursive=True)
        await asyncio.sleep(0)
        assert sorted(events) == ["children", "data"]
        s.unwatch("/w")
        events.clear()
        await s.create("/w")
        await asyncio.sleep(0)
        assert events == []
        await s.close()
    run(main())


def test_persistence_file_reload_and_zxid_growth(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        await s.create("/t", b"\xff\x00binary")
        await s.create("/j", b'{"version":1}')
        await s.set("/j", b'{"version":2}')
        await s.create("/brokers", b"")
        await s.create("/brokers/0", b"reg", ephemeral=True)
        epoch1 = (await s.exists("/brokers/0")).czxid
        await s.close()
        doc = json.loads((tmp_path / FILE_NAME).read_text())
        assert doc["nodes"]["/j"]["data"] == '{"version":2}' and doc["nodes"]["/j"]["version"] == 1
        assert "/brokers/0" not in doc["nodes"]
        assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
        s2 = LocalZNodeStore(tmp_path)
        await s2.start()
        assert (await s2.get("/t"))[0] == b"\xff\x00binary"
        data, st = await s2.get("/j")
        assert data == b'{"version":2}' and st.version == 1
        await s2.create("/brokers/0", b"reg", ephemeral=True)
        # a re-registered broker gets a larger epoch than before the restart
        assert (await s2.exists("/brokers/0")).czxid > epoch1
        await s2.close()
    run(main())


def test_group_commit_shares_persists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    writes: list[int] = []
    writing = threading.Event()
    release = threading.Event()
    original = local_store_module.atomic_write

    def slow_counting(path: Path, data: bytes) -> None:
        writes.append(len(json.loads(data)["nodes"]))
        writing.set()
        release.wait(10)
        original(path, data)

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        monkeypatch.setattr(local_store_module, "atomic_write", slow_counting)
        # writes issued together share one persist
        release.set()
        await asyncio.gather(*(s.create(f"/a{i}") for i in range(10)))
        assert writes == [11]
        release.clear()
        writing.clear()
        writes.clear()
        first = asyncio.create_task(s.create("/first"))
        await asyncio.to_thread(writing.wait, 10)          # its persist is running
        later = [asyncio.create_task(s.create(f"/n{i}")) for i in range(49)]
        await asyncio.sleep(0.05)
        assert not first.done() and not any(t.done() for t in later)
        release.set()
        await asyncio.gather(first, *later)
        # the first persist ran alone, the 49 writes made meanwhile shared the next one
        assert writes == [12, 61]
        await s.close()
        s2 = LocalZNodeStore(tmp_path)
        await s2.start()
        assert len(await s2.children("/")) == 60
        await s2.close()
    run(main())


def test_failed_persist_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()

        def failing(path: Path, data: bytes) -> None:
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(local_store_module, "atomic_write", failing)
        with pytest.raises(StoreError, match="No space left on device"):
            await s.create("/x")
    run(main())


def old_metadata(tmp_path: Path) -> dict:
    tid = uuid.uuid4()
    doc = {
        "version": 1, "cluster_id": "abcdefghijklmnopqrstuv", "next_producer_id": 3000,
        "topics": [{"name": "orders", "topic_id": str(tid),
                    "assignment": {"0": [0], "1": [0]},
                    "configs": {"retention.ms": "1000"},
                    "states": {"0": {"leader": 0, "leader_epoch": 2, "isr": [0],
                                     "controller_epoch": 1, "version": 3},
                               "1": {"leader": 0, "leader_epoch": 0, "isr": [0],
                                     "controller_epoch": 1, "version": 0}}},
                   {"name": "plain", "topic_id": str(uuid.uuid4()), "assignment": {"0": [0]},
                    "configs": {}, "states": {}}],
        "config": {"brokers": {"<default>": {"version": 1, "config": {"log.cleaner.threads": "2"}},
                               "0": {"version": 1, "config": {}}}},
    }
    (tmp_path / "kafkalite-metadata.json").write_text(json.dumps(doc, indent=1))
    return doc


def test_migration_from_the_old_metadata_file(tmp_path: Path) -> None:
    doc = old_metadata(tmp_path)
    old_bytes = (tmp_path / "kafkalite-metadata.json").read_bytes()

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        zk = KafkaZkClient(s)
        assert await zk.get_cluster_id() == "abcdefghijklmnopqrstuv"
        assert await zk.get_all_topics() == {"orders", "plain"}
        a = (await zk.get_topic_assignments(["orders"]))["orders"]
        assert a.topic_id == uuid.UUID(doc["topics"][0]["topic_id"])
        assert a.partitions == {0: z.ReplicaAssignment((0,)), 1: z.ReplicaAssignment((0,))}
        states = await zk.get_partition_states([z.TopicPartition("orders", 0), z.TopicPartition("orders", 1),
                                                z.TopicPartition("plain", 0)])
        assert states == {
            z.TopicPartition("orders", 0): z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(0, 2, (0,), 0, 3), 1),
            z.TopicPartition("orders", 1): z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(0, 0, (0,), 0, 0), 1)}
        assert await zk.get_entity_configs("topics", "orders") == {"retention.ms": "1000"}
        assert await zk.get_entity_configs("topics", "plain") == {}
        assert await zk.path_exists("/config/topics/plain")
        assert await zk.get_entity_configs("brokers", "<default>") == {"log.cleaner.threads": "2"}
        assert sorted(await zk.get_all_entities_with_config("brokers")) == ["0", "<default>"]
        for p in z.PERSISTENT_ZK_PATHS:
            assert await zk.path_exists(p), p
        # producer ids continue after the last one handed out
        block = await zk.allocate_producer_id_block(0)
        assert (block.first_producer_id, block.size) == (3000, 1000)
        await s.close()
        # a second start reads the new file; the old one is untouched
        s2 = LocalZNodeStore(tmp_path)
        await s2.start()
        assert (await KafkaZkClient(s2).allocate_producer_id_block(0)).first_producer_id == 4000
        await s2.close()
    run(main())
    assert (tmp_path / "kafkalite-metadata.json").read_bytes() == old_bytes
    assert (tmp_path / FILE_NAME).exists()


def test_fresh_directory_starts_empty(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path / "new")
        await s.start()
        assert await s.children("/") == []
        zk = KafkaZkClient(s)
        assert (await zk.allocate_producer_id_block(5)) == z.ProducerIdsBlock(5, 0, 1000)
        cid = await zk.get_or_create_cluster_id()
        assert await zk.get_or_create_cluster_id("other") == cid and len(cid) == 22
        await s.close()
    run(main())
    assert os.path.exists(tmp_path / "new" / FILE_NAME)


def test_load_links_each_node_to_its_parent_by_path(tmp_path: Path) -> None:
    """The file lists nodes by full path in any order; each is linked under its parent (children
    in file order), and a node whose parent is not in the file stops the load with its path."""
    def entry(zxid: int, data: str = "") -> dict:
        return {"version": 0, "cversion": 0, "czxid": zxid, "mzxid": zxid, "pzxid": zxid,
                "ctime": 0, "mtime": 0, "data": data}
    nodes = {"/a/b/c": entry(4, "deep"), "/a": entry(1), "/a/b": entry(2), "/a/x": entry(3, "x"),
             "/": entry(0)}
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "zxid": 4, "nodes": nodes}))

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        assert await s.children("/") == ["a"]
        assert await s.children("/a") == ["b", "x"]
        assert (await s.get("/a/b/c"))[0] == b"deep" and (await s.get("/a/b/c"))[1].czxid == 4
        assert (await s.get("/a/x"))[0] == b"x"
        await s.close()

        del nodes["/a/b"]
        (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "zxid": 4, "nodes": nodes}))
        with pytest.raises(StoreError, match="node /a/b/c has no parent in the file"):
            await LocalZNodeStore(tmp_path).start()
    run(main())


def test_kafka_zk_client_controller_and_partition_state_semantics(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        zk = KafkaZkClient(s)
        await zk.create_top_level_paths()
        assert await zk.get_controller_epoch() is None
        assert await zk.register_controller_and_increment_epoch(0) == (1, 1)
        assert (await s.get("/controller_epoch"))[0] == b"1"
        assert await zk.get_controller_id() == 0
        with pytest.raises(ControllerMovedError):
            await zk.register_controller_and_increment_epoch(1)
        await zk.delete_controller(1)
        assert await zk.register_controller_and_increment_epoch(1) == (2, 2)
        epoch, zk_version = 2, 2
        await zk.create_topic_assignment("t", None, {0: [1], 1: [1]})
        tps = [z.TopicPartition("t", 0), z.TopicPartition("t", 1)]
        init = {tp: z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(1, 0, (1,)), epoch) for tp in tps}
        assert await zk.create_partition_states(init, zk_version) == {tp: None for tp in tps}
        again = await zk.create_partition_states(init, zk_version)
        assert all(isinstance(e, NodeExistsError) for e in again.values())
        with pytest.raises(ControllerMovedError):
            await zk.create_partition_states({z.TopicPartition("t", 2): init[tps[0]]}, 1)
        assert await s.exists("/brokers/topics/t/partitions/2") is None
        current = await zk.get_partition_states(tps)
        assert current == init
        # partition 1 changed meanwhile (its zkVersion moved on): retried, partition 0 written
        await s.set("/brokers/topics/t/partitions/1/state", z.encode_partition_state(init[tps[1]]))
        # the same bytes in both znodes, each read with its own zkVersion as partition epoch
        assert await zk.get_partition_states(tps) == {
            tps[0]: init[tps[0]], tps[1]: z.LeaderIsrAndControllerEpoch(z.LeaderAndIsr(1, 0, (1,), 0, 1), epoch)}
        result = await zk.update_leader_and_isr(
            {tp: current[tp].leader_and_isr.new_leader_and_isr(1, [1]) for tp in tps}, epoch, zk_version)
        assert result.finished == {tps[0]: z.LeaderAndIsr(1, 1, (1,), 0, 1)}
        assert result.partitions_to_retry == [tps[1]]
        with pytest.raises(ControllerMovedError):
            await zk.update_leader_and_isr({tps[0]: result.finished[tps[0]]}, epoch, 1)  # type: ignore[dict-item]
        # broker epochs, registrations
        reg = z.BrokerRegistration(1, (z.EndPoint("h", 1, "PLAINTEXT", "PLAINTEXT"),), timestamp=9)
        broker_epoch = await zk.register_broker(reg)
        assert await zk.get_all_brokers() == {1: (reg, broker_epoch)}
        assert (await s.exists("/brokers/ids/1")).version == 1
        assert await zk.generate_broker_sequence_id() == 1
        assert await zk.generate_broker_sequence_id() == 2
        # topic deletion and config notifications
        await zk.create_delete_topic_path("t")
        assert await zk.get_topic_deletions() == ["t"] and await zk.is_topic_marked_for_deletion("t")
        await zk.set_or_create_entity_configs("topics", "t", {"a": "1"})
        await zk.set_or_create_entity_configs("topics", "t", {"b": "2"})
        assert await zk.get_entity_configs("topics", "t") == {"b": "2"}
        name = (await zk.create_config_change_notification("topics/t")).rsplit("/", 1)[1]
        assert await zk.get_config_change_notifications() == [name]
        assert (await zk.get_config_change_notification(name))[0] == "topics/t"
        await zk.delete_topic_znode("t", zk_version)
        await zk.delete_topic_configs(["t"], zk_version)
        await zk.delete_topic_deletions(["t"], zk_version)
        assert await zk.get_all_topics() == set() and await zk.get_topic_deletions() == []
        # reassignment, preferred election, isr notifications
        tp = z.TopicPartition("u", 0)
        await zk.create_partition_reassignment({tp: [1, 2]})
        assert await zk.get_partition_reassignment() == {tp: (1, 2)}
        await zk.set_or_create_partition_reassignment({tp: [2]}, zk_version)
        assert await zk.get_partition_reassignment() == {tp: (2,)}
        await zk.delete_partition_reassignment(zk_version)
        assert not await zk.reassign_partitions_in_progress()
        await zk.create_preferred_replica_election([tp])
        assert await zk.get_preferred_replica_election() == {tp}
        await zk.delete_preferred_replica_election(zk_version)
        await zk.propagate_isr_changes([tp])
        seqs = await zk.get_all_isr_change_notifications()
        assert seqs == ["0000000000"]
        assert await zk.get_partitions_from_isr_change_notifications(seqs) == {tp}
        await zk.delete_isr_change_notifications(None, zk_version)
        assert await zk.get_all_isr_change_notifications() == []
        await zk.create_feature_znode(z.FeatureZNode(2, 1, {}))
        assert await zk.get_feature() == (z.FeatureZNode(2, 1, {}), 0)
        assert await zk.update_feature_znode(z.FeatureZNode(2, 1, {"f": 1})) == 1
        await s.close()
    run(main())


def test_broker_registration_conflicts_with_another_session(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        zk = KafkaZkClient(s)
        await zk.create_top_level_paths()
        reg = z.BrokerRegistration(4, (z.EndPoint("h", 1, "PLAINTEXT", "PLAINTEXT"),))
        # a node left by some other session
        await s.create("/brokers/ids/4", b"x", ephemeral=True)
        node = s._find("/brokers/ids/4")
        assert node is not None
        node.ephemeral_owner = 0x1234
        with pytest.raises(NodeExistsError) as info:
            await zk.register_broker(reg)
        assert str(info.value) == (
            "Error while creating ephemeral at /brokers/ids/4, node already exists and owner "
            f"'0x1234' does not match current session '0x{s.session_id:x}'")
        await s.close()
    run(main())


# ---- property: whatever the writes, a reload gives back the same persistent tree -------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

node_paths = st.sampled_from(["/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/deep"])
write_ops = st.one_of(
    st.tuples(st.just("create"), node_paths, st.binary(max_size=8), st.booleans(), st.booleans()),
    st.tuples(st.just("set"), node_paths, st.binary(max_size=8), st.sampled_from([-1, 0, 1, 2])),
    st.tuples(st.just("delete"), node_paths, st.sampled_from([-1, 0, 1])),
    st.tuples(st.just("multi"), st.lists(st.tuples(st.sampled_from(["c", "s", "d", "k"]), node_paths),
                                         min_size=1, max_size=4)),
)


async def tree(store: LocalZNodeStore, path: str = "/") -> dict:
    """Every non-ephemeral node's data and stat below `path`."""
    out = {}
    data, stat = await store.get(path)
    if not stat.ephemeral_owner:
        out[path] = (data, stat.version, stat.cversion, stat.czxid, stat.mzxid)
    for child in sorted(await store.children(path)):
        out.update(await tree(store, f"{path.rstrip('/')}/{child}"))
    return out


async def paths_of(store: LocalZNodeStore, path: str = "/") -> list[str]:
    """Every node's path below `path`, sorted."""
    out = [] if path == "/" else [path]
    for child in await store.children(path):
        out += await paths_of(store, f"{path.rstrip('/')}/{child}")
    return sorted(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(write_ops, max_size=25))
def test_reload_reproduces_the_persistent_tree(tmp_path: Path, ops: list) -> None:
    directory = tmp_path / uuid.uuid4().hex

    async def main() -> None:
        s = LocalZNodeStore(directory)
        await s.start()
        for op in ops:
            try:
                if op[0] == "create":
                    await s.create(op[1], op[2], ephemeral=op[3], sequential=op[4])
                elif op[0] == "set":
                    await s.set(op[1], op[2], op[3])
                elif op[0] == "delete":
                    await s.delete(op[1], op[2])
                else:
                    multi_ops = [{"c": lambda p: CreateOp(p, b"m"), "s": lambda p: SetDataOp(p, b"s"),
                                  "d": lambda p: DeleteOp(p), "k": lambda p: CheckOp(p, 0)}[kind](p)
                                 for kind, p in op[1]]
                    before = await tree(s)
                    try:
                        await s.multi(multi_ops)
                    except StoreError:
                        assert await tree(s) == before     # a failed multi changed nothing
            except StoreError:
                pass
        expected = await tree(s)
        # the ephemerals the close deletes are kept with each write (no walk of the tree at close)
        assert sorted(s._ephemerals) == [p for p in await paths_of(s) if (await s.exists(p)).ephemeral_owner]
        await s.close()
        assert not s._ephemerals
        s2 = LocalZNodeStore(directory)
        await s2.start()
        reloaded = await tree(s2)
        await s2.close()
        assert reloaded.keys() == expected.keys()
        for path, (data, version, cversion, czxid, mzxid) in expected.items():
            r = reloaded[path]
            assert (r[0], r[1], r[3], r[4]) == (data, version, czxid, mzxid), path
            # closing the session deleted its ephemerals: their parents' cversion moved on
            assert r[2] >= cversion, path
    run(main())


def test_the_store_and_meta_properties_import_without_the_log_layer() -> None:
    """Their atomic writes come from the leaf module kafkalite.fileio: importing them must not
    pull in kafkalite.log (its package import loads the whole log layer and its metrics)."""
    code = ("import json, sys; import kafkalite.controller.zk.local_store, kafkalite.server.meta_properties; "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'kafkalite.log' or m.startswith('kafkalite.log.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=6).map(lambda s: "/" + s.replace("/", "_")),
                          st.lists(st.integers(0, 2**63 - 1), min_size=7, max_size=7),
                          st.one_of(st.binary(max_size=8), st.text(max_size=8).map(str.encode))),
                unique_by=lambda r: r[0], max_size=8),
       st.integers(0, 2**40))
def test_snapshot_text_is_the_json_of_the_document(rows: list, zxid: int) -> None:
    """The file's text, formatted entry by entry, is what json.dumps makes of the whole document
    (text data as a string, anything else in base64)."""
    flat = [(p, *numbers, data) for p, numbers, data in rows]
    doc_nodes = {}
    for p, numbers, data in sorted(rows, key=lambda r: r[0]):
        entry = dict(zip(["version", "cversion", "czxid", "mzxid", "pzxid", "ctime", "mtime"], numbers))
        try:
            entry["data"] = data.decode("utf-8")
        except UnicodeDecodeError:
            entry["data_b64"] = base64.b64encode(data).decode()
        doc_nodes[p] = entry
    text = local_store_module._snapshot_text(flat, zxid)
    assert text == json.dumps({"version": 1, "zxid": zxid, "nodes": doc_nodes}, separators=(",", ":"))
