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
from typing import Sequence
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


def test_group_commit_shares_appends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    appends: list[list[int]] = []       # the zxids in each appended record
    writing = threading.Event()
    release = threading.Event()
    original = local_store_module._log_append

    def slow_counting(fd: int, data: bytes) -> None:
        records, valid = local_store_module.decode_log(data)
        assert valid == len(data) and len(records) == 1
        appends.append([txn[0] for txn in records[0][1]])
        writing.set()
        release.wait(10)
        original(fd, data)

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        monkeypatch.setattr(local_store_module, "_log_append", slow_counting)
        # writes issued together share one append: one record, ten transactions
        release.set()
        await asyncio.gather(*(s.create(f"/a{i}") for i in range(10)))
        assert appends == [list(range(1, 11))]
        release.clear()
        writing.clear()
        appends.clear()
        first = asyncio.create_task(s.create("/first"))
        await asyncio.to_thread(writing.wait, 10)          # its append is running
        later = [asyncio.create_task(s.create(f"/n{i}")) for i in range(49)]
        await asyncio.sleep(0.05)
        assert not first.done() and not any(t.done() for t in later)
        release.set()
        await asyncio.gather(first, *later)
        # the first append ran alone, the 49 writes made meanwhile shared the next one
        assert appends == [[11], list(range(12, 61))]
        # the snapshot was not rewritten by any of them (the log is below the bound)
        assert json.loads((tmp_path / FILE_NAME).read_text())["zxid"] == 0
        await s.close()
        s2 = LocalZNodeStore(tmp_path)
        await s2.start()
        assert len(await s2.children("/")) == 60
        await s2.close()
    run(main())


def test_failed_append_is_reported_and_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = local_store_module._log_append

    def failing(fd: int, data: bytes) -> None:
        os.write(fd, data[:7])            # part of the record reached the file
        raise OSError(28, "No space left on device")

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        await s.create("/before", b"b")
        monkeypatch.setattr(local_store_module, "_log_append", failing)
        with pytest.raises(StoreError, match="kafkalite-zk.log: .*No space left on device"):
            await s.create("/x", b"x")
        monkeypatch.setattr(local_store_module, "_log_append", original)
        # the next write's append cuts the partial record off and writes both transactions
        await s.create("/y", b"y")
        expected = dump_tree(s)
        s2 = LocalZNodeStore(tmp_path)
        s2._load()
        s2._close_log()
        assert dump_tree(s2) == expected and s2._zxid == s._zxid == 3
        await s.close()
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
    st.tuples(st.just("multi"), st.lists(st.tuples(st.sampled_from(["c", "e", "s", "d", "k"]), node_paths),
                                         min_size=1, max_size=4)),
)


def dump_tree(store: LocalZNodeStore) -> tuple[int, dict]:
    """The store's zxid and every node (ephemerals included) with its data, every stat field and
    its children, read from the tree itself (also after close)."""
    out = {}
    stack = [("/", store._root)]
    while stack:
        path, node = stack.pop()
        out[path] = (node.data, node.version, node.cversion, node.czxid, node.mzxid, node.pzxid,
                     node.ctime, node.mtime, node.ephemeral_owner, sorted(node.children))
        stack += [(f"{path.rstrip('/')}/{name}", child) for name, child in node.children.items()]
    return store._zxid, out


def loaded_tree(directory: Path) -> tuple[int, dict]:
    """What a start would load from `directory` (snapshot + log), before the start expires the
    ephemerals of a session that did not close."""
    s = LocalZNodeStore(directory)
    try:
        s._load()
    finally:
        s._close_log()
    return dump_tree(s)


async def apply_op(s: LocalZNodeStore, op: tuple) -> None:
    try:
        if op[0] == "create":
            await s.create(op[1], op[2], ephemeral=op[3], sequential=op[4])
        elif op[0] == "set":
            await s.set(op[1], op[2], op[3])
        elif op[0] == "delete":
            await s.delete(op[1], op[2])
        else:
            multi_ops = [{"c": lambda p: CreateOp(p, b"m"), "e": lambda p: CreateOp(p, b"e", ephemeral=True),
                          "s": lambda p: SetDataOp(p, b"s"),
                          "d": lambda p: DeleteOp(p), "k": lambda p: CheckOp(p, 0)}[kind](p)
                         for kind, p in op[1]]
            before = dump_tree(s)
            try:
                await s.multi(multi_ops)
            except StoreError:
                assert dump_tree(s) == before     # a failed multi changed nothing
    except StoreError:
        pass


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(write_ops, st.sampled_from([("crash",), ("reopen",)])), max_size=30),
       st.sampled_from([0, 400, 1 << 20]))
def test_reload_reproduces_the_tree(tmp_path: Path, ops: list, compact_min: int) -> None:
    """Snapshot + log give back exactly the tree in memory (data, every stat, children, zxid):
    after a crash (no close: the ephemerals come back with their session's owner, and the start
    then expires them in a logged transaction), after a close, and whatever the compaction bound
    (0: the snapshot is rewritten as soon as the log outgrows it)."""
    directory = tmp_path / uuid.uuid4().hex
    saved = local_store_module.COMPACT_MIN_BYTES
    local_store_module.COMPACT_MIN_BYTES = compact_min

    async def main() -> None:
        s = LocalZNodeStore(directory)
        await s.start()
        for op in ops + [("reopen",)]:
            if op[0] in ("crash", "reopen"):
                if op[0] == "crash":
                    if s._compact_task is not None:
                        await s._compact_task      # a real crash stops the thread too
                    s._close_log()                 # the session never closes
                else:
                    await s.close()
                    assert not s._ephemerals
                assert loaded_tree(directory) == dump_tree(s)
                s = LocalZNodeStore(directory)
                await s.start()
                assert not [p for p, n in dump_tree(s)[1].items() if n[8]]
                assert loaded_tree(directory) == dump_tree(s)
                continue
            await apply_op(s, op)
            # the ephemerals the close deletes are kept with each write (no walk of the tree at close)
            assert sorted(s._ephemerals) == sorted(p for p, n in dump_tree(s)[1].items() if n[8])
            # the entries kept (the loaded file's lines, each node's entry of the last snapshot)
            # never go stale: a snapshot made with them is the one made by formatting every node
            assert (local_store_module._snapshot_parts_text(s._snapshot_parts(), s._zxid, keep=False)
                    == local_store_module._snapshot_parts_text(s._snapshot_parts(reuse=False), s._zxid,
                                                               keep=False))
        await s.close()
    try:
        run(main())
    finally:
        local_store_module.COMPACT_MIN_BYTES = saved


def _log_bytes(directory: Path) -> bytes:
    return (directory / local_store_module.LOG_FILE_NAME).read_bytes()


def test_a_torn_final_record_loads_to_the_state_before_it(tmp_path: Path) -> None:
    """The log cut at every byte of its last record (a crash mid-append), or that record's bytes
    zeroed from any byte on: the load gives the tree before the record, the whole record the
    tree after it, never anything else; the torn bytes are cut off and appends continue."""
    directory = tmp_path / "d"

    async def main() -> tuple[tuple, tuple, int]:
        s = LocalZNodeStore(directory)
        await s.start()
        await s.create("/a", b"1")
        await s.create("/a/e", b"eph", ephemeral=True)
        await s.set("/a", b"2")
        before = dump_tree(s)
        start = len(_log_bytes(directory))
        # one group commit: a multi, a sequential create, a delete, a set of binary data
        await asyncio.gather(s.multi([CreateOp("/b", b"x"), SetDataOp("/a", b"3", 1)]),
                             s.create("/a/s_", b"q", sequential=True), s.delete("/a/e"),
                             s.create("/c", b"\xff\x00"))
        after = dump_tree(s)
        s._close_log()
        return before, after, start
    before, after, start = run(main())
    full = _log_bytes(directory)
    records, valid = local_store_module.decode_log(full)
    assert valid == len(full) and records[-1][0] == start and len(records[-1][1]) == 4
    assert loaded_tree(directory) == after
    assert before != after
    for cut in range(start, len(full)):
        (directory / local_store_module.LOG_FILE_NAME).write_bytes(full[:cut])
        assert loaded_tree(directory) == before, cut
        zeroed = full[:cut] + bytes(len(full) - cut)
        (directory / local_store_module.LOG_FILE_NAME).write_bytes(zeroed)
        assert loaded_tree(directory) == before, cut
    # a reader beside a live broker sees the same and changes nothing
    (directory / local_store_module.LOG_FILE_NAME).write_bytes(full[:len(full) - 3])
    assert local_store_module.read_znodes(directory) == {p: n[0] for p, n in before[1].items()}
    assert _log_bytes(directory) == full[:len(full) - 3]
    # a start cuts the torn bytes off; what it appends then follows the last whole record

    async def restart() -> None:
        (directory / local_store_module.LOG_FILE_NAME).write_bytes(full[:len(full) - 3])
        s = LocalZNodeStore(directory)
        await s.start()          # expires /a/e, logged after the whole records
        await s.create("/d")
        expected = dump_tree(s)
        assert expected[1]["/a"][0] == b"2" and "/a/e" not in expected[1]
        s._close_log()
        assert loaded_tree(directory) == expected
    run(restart())


def test_damage_before_the_end_of_the_log_stops_the_load(tmp_path: Path) -> None:
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        await s.create("/a", b"first")
        await s.create("/b", b"second")
        s._close_log()
        full = bytearray(_log_bytes(tmp_path))
        full[full.index(b"first")] ^= 0x01
        (tmp_path / local_store_module.LOG_FILE_NAME).write_bytes(bytes(full))
        with pytest.raises(StoreError, match=r"kafkalite-zk.log: record at byte 0 fails its CRC check and "
                                             r"\d+ bytes follow it: the log is damaged before its end"):
            await LocalZNodeStore(tmp_path).start()
        # a log whose transactions do not follow the snapshot's zxid
        (tmp_path / local_store_module.LOG_FILE_NAME).write_bytes(
            local_store_module.encode_log_record([(5, 0, [("c", "/z", b"", 0)])]))
        with pytest.raises(StoreError, match="has zxid 0x5, the tree is at 0x0: transactions are missing"):
            await LocalZNodeStore(tmp_path).start()
    run(main())



def test_a_damaged_length_with_whole_records_after_it_stops_the_load(tmp_path: Path) -> None:
    """A record whose length field runs past the end of the file reads like a torn final record;
    when whole records follow it, it is damage (they were acknowledged): the load stops instead
    of dropping them. A torn final record (a prefix of one record) still loads as before."""
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        for name in ("/a", "/b", "/c"):
            await s.create(name, name.encode())
        s._close_log()
    run(main())
    full = _log_bytes(tmp_path)
    records, valid = local_store_module.decode_log(full)
    assert valid == len(full) and len(records) == 3
    for record in range(2):
        damaged = bytearray(full)
        damaged[records[record][0]] ^= 0x40            # the record's length, + 1 GiB
        with pytest.raises(ValueError, match=rf"record at byte {records[record][0]} declares \d+ bytes, past "
                                             rf"the end of the file, and a whole record follows at byte "
                                             rf"{records[record + 1][0]}: the log is damaged before its end"):
            local_store_module.decode_log(bytes(damaged))
        (tmp_path / local_store_module.LOG_FILE_NAME).write_bytes(bytes(damaged))
        with pytest.raises(StoreError, match="the log is damaged before its end"):
            run(LocalZNodeStore(tmp_path).start())
    # the last record's length damaged the same way cannot be told from a torn tail
    damaged = bytearray(full)
    damaged[records[2][0]] ^= 0x40
    assert local_store_module.decode_log(bytes(damaged)) == (records[:2], records[2][0])


def test_read_znodes_reads_again_when_a_compaction_ran_between_its_two_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader beside a live store reads the snapshot, then the log; a compaction in between
    (a new snapshot, the log emptied, then more appends) leaves a log whose first transaction
    does not follow the snapshot it read. It reads both again and sees the live tree."""
    async def write(s: LocalZNodeStore, names: Sequence[str]) -> None:
        for name in names:
            await s.create(name, name.encode())

    live = LocalZNodeStore(tmp_path)
    run(live.start())
    run(write(live, ["/a", "/b"]))
    real_load_snapshot = LocalZNodeStore._load_snapshot
    compactions = []

    def load_snapshot_then_compact(self: LocalZNodeStore) -> bool:
        migrated = real_load_snapshot(self)
        if not compactions:
            compactions.append(self._zxid)
            run(live._compact())
            run(write(live, ["/c"]))
        return migrated
    monkeypatch.setattr(LocalZNodeStore, "_load_snapshot", load_snapshot_then_compact)
    znodes_seen = local_store_module.read_znodes(tmp_path)
    assert len(compactions) == 1
    assert {"/a", "/b", "/c"} <= set(znodes_seen) and znodes_seen["/c"] == b"/c"
    assert znodes_seen == {p: n[0] for p, n in dump_tree(live)[1].items()}
    live._close_log()

def test_compaction_rewrites_the_snapshot_and_empties_the_log(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_store_module, "COMPACT_MIN_BYTES", 2000)

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        for i in range(40):
            await s.create(f"/n{i}", b"x" * 40)
            if s._compact_task is not None:
                await s._compact_task
        # the snapshot was rewritten when the log passed 2,000 bytes, and the log emptied
        snap = json.loads((tmp_path / FILE_NAME).read_text())
        assert 0 < snap["zxid"] < 40
        assert len(_log_bytes(tmp_path)) <= 2000 + 200
        records, _ = local_store_module.decode_log(_log_bytes(tmp_path))
        assert [t[0] for _, txns in records for t in txns] == list(range(snap["zxid"] + 1, 41))
        expected = dump_tree(s)
        assert loaded_tree(tmp_path) == expected
        await s.close()
        # a clean close leaves the snapshot alone, at the last zxid
        assert _log_bytes(tmp_path) == b""
        assert json.loads((tmp_path / FILE_NAME).read_text())["zxid"] == 40
    run(main())


def test_a_snapshot_without_a_log_loads_as_before(tmp_path: Path) -> None:
    """A directory of the format before the log (kafkalite-zk.json only) loads as a snapshot with
    an empty log, and the first write starts the log."""
    nodes = {"/": {"version": 0, "cversion": 1, "czxid": 0, "mzxid": 0, "pzxid": 7, "ctime": 0, "mtime": 0,
                   "data": ""},
             "/a": {"version": 3, "cversion": 0, "czxid": 7, "mzxid": 9, "pzxid": 7, "ctime": 5, "mtime": 6,
                    "data": "v"}}
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "zxid": 9, "nodes": nodes}))

    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        data, stat = await s.get("/a")
        assert data == b"v" and (stat.version, stat.czxid, stat.mzxid, stat.ctime, stat.mtime) == (3, 7, 9, 5, 6)
        assert (await s.set("/a", b"w")).mzxid == 10
        assert [t[0] for _, txns in local_store_module.decode_log(_log_bytes(tmp_path))[0] for t in txns] == [10]
        s._close_log()
    run(main())


KILL_CHILD = """
import asyncio, sys
from pathlib import Path
from kafkalite.controller.zk import local_store
local_store.COMPACT_MIN_BYTES = 4096      # compactions during the burst too
async def main():
    s = local_store.LocalZNodeStore(Path(sys.argv[1]))
    await s.start()
    await s.create("/w")
    await s.create("/w/eph", b"e", ephemeral=True)
    print("ready", flush=True)
    async def writer(j):
        path = await s.create(f"/w/t{j}", b"0")
        print("create", path, flush=True)
        v = 0
        while True:
            v += 1
            await s.set(path, str(v).encode())
            print("set", path, v, flush=True)
            if v % 7 == 0:
                seq = await s.create(f"/w/t{j}-s", str(v).encode(), sequential=True)
                print("create", seq, flush=True)
    await asyncio.gather(*(writer(j) for j in range(8)))
asyncio.run(main())
"""


def test_sigkill_mid_burst_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    import signal
    directory = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(directory)], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    acked_sets: dict[str, int] = {}
    created: list[str] = []
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        for _ in range(1500):
            words = proc.stdout.readline().split()
            if words[0] == "create":
                created.append(words[1])
            else:
                acked_sets[words[1]] = int(words[2])
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert len(created) > 8 and len(acked_sets) == 8

    async def main() -> None:
        s = LocalZNodeStore(directory)
        await s.start()
        for path in created:
            assert await s.exists(path) is not None, path
        for path, version in acked_sets.items():
            data, stat = await s.get(path)
            # this write or a later one (an unacknowledged write may have reached the log too)
            assert stat.version >= version and data == str(stat.version).encode(), path
        assert await s.exists("/w/eph") is None          # the killed session's ephemeral expired
        expected = dump_tree(s)
        await s.close()
        assert loaded_tree(directory) == expected
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
                          st.lists(st.integers(0, 2**63 - 1), min_size=8, max_size=8),
                          st.one_of(st.binary(max_size=8), st.text(max_size=8).map(str.encode))),
                unique_by=lambda r: r[0], max_size=8),
       st.integers(0, 2**40))
def test_snapshot_text_is_the_json_of_the_document(rows: list, zxid: int) -> None:
    """The file's text, formatted entry by entry, is what json.dumps makes of the whole document
    (text data as a string, anything else in base64; an ephemeral owner only where not 0)."""
    flat = [(p, *numbers, data) for p, numbers, data in rows]
    doc_nodes = {}
    for p, numbers, data in sorted(rows, key=lambda r: r[0]):
        entry = dict(zip(["version", "cversion", "czxid", "mzxid", "pzxid", "ctime", "mtime"], numbers))
        if numbers[7]:
            entry["ephemeral_owner"] = numbers[7]
        try:
            entry["data"] = data.decode("utf-8")
        except UnicodeDecodeError:
            entry["data_b64"] = base64.b64encode(data).decode()
        doc_nodes[p] = entry
    text = local_store_module._document_text(
        [local_store_module._entry_text(r) for r in sorted(flat, key=lambda r: r[0])], zxid)
    # one entry per line: JSON's newlines between the entries, none inside them
    assert text.count("\n") == max(len(rows), 1) + 1     # (a tree always has its root)
    assert text.replace("\n", "") == json.dumps({"version": 1, "zxid": zxid, "nodes": doc_nodes},
                                                separators=(",", ":"))


def test_a_failed_fsync_after_the_log_is_emptied_leaves_a_loadable_log(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction empties the log after the snapshot is durable; when the log's fsync then
    fails, later appends go to the emptied log (not after zeros up to its old size)."""
    async def main() -> None:
        s = LocalZNodeStore(tmp_path)
        await s.start()
        for i in range(5):
            await s.create(f"/n{i}", b"x")
        real_fsync = os.fsync

        def failing_fsync(fd: int) -> None:
            if fd == s._log_fd:
                raise OSError(5, "Input/output error")
            real_fsync(fd)
        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError):
            await s._compact()
        monkeypatch.setattr(os, "fsync", real_fsync)
        await s.create("/after", b"y")
        await s.set("/n0", b"z")
        expected = dump_tree(s)
        s._close_log()             # a crash: no compaction at close
        assert loaded_tree(tmp_path) == expected
    run(main())
