"""KazooZNodeStore and KafkaZkClient against a real ZooKeeper (Debian's package, one per test
session): every store operation, persistent watches, session expiry (EXPIRED, then a new session
with CONNECTED and every watch fired again), an unreachable ZooKeeper, controller election and
fencing, broker registration, and concurrent producer-id block allocation.

Each test works under a chroot of its own, which the store creates as Kafka does."""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Awaitable, Callable, TypeVar

import pytest
from kazoo.client import KazooClient

from kafkalite.controller.zk import znodes
from kafkalite.controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from kafkalite.controller.zk.kazoo_store import KazooZNodeStore, split_connect_string
from kafkalite.controller.zk.znode_store import (BadVersionError, CheckOp, CreateOp, DeleteOp,
                                                 MultiError, NodeExistsError, NoNodeError,
                                                 NotEmptyError, SetDataOp, StoreError, ZkState)
from tests.support.zookeeper import free_port

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 60) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


@pytest.fixture
def connect(zookeeper_server) -> str:
    return f"{zookeeper_server.connect_string}/kazoo-store-{uuid.uuid4().hex[:10]}"


async def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def test_split_connect_string() -> None:
    assert split_connect_string("a:1,b:2/x/y") == ("a:1,b:2", "/x/y")
    assert split_connect_string("a:1") == ("a:1", "")
    assert split_connect_string("a:1/") == ("a:1", "")


def test_every_operation_under_a_created_chroot(zookeeper_server, connect: str) -> None:
    hosts, chroot = split_connect_string(connect)

    async def main() -> None:
        store = KazooZNodeStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
        await store.start()
        try:
            assert store.session_id != 0
            assert await store.create("/a", b"one") == "/a"
            data, stat = await store.get("/a")
            assert (data, stat.version, stat.num_children, stat.data_length) == (b"one", 0, 0, 3)
            assert stat.czxid == stat.mzxid and stat.ephemeral_owner == 0
            with pytest.raises(NodeExistsError):
                await store.create("/a")
            with pytest.raises(NoNodeError):
                await store.create("/missing/child")
            assert await store.create("/deep/er/node", b"x", make_parents=True) == "/deep/er/node"
            assert await store.children("/deep") == ["er"]
            stat2 = await store.set("/a", b"two", 0)
            assert stat2.version == 1 and stat2.mzxid > stat.mzxid
            with pytest.raises(BadVersionError):
                await store.set("/a", b"three", 0)
            with pytest.raises(NoNodeError):
                await store.set("/nope", b"")
            assert await store.exists("/nope") is None
            assert (await store.exists("/a")).version == 1
            with pytest.raises(NoNodeError):
                await store.get("/nope")
            with pytest.raises(NoNodeError):
                await store.children("/nope")
            # sequential names: the parent's counter, 10 digits
            await store.create("/seq")
            names = [await store.create("/seq/n_", sequential=True) for _ in range(3)]
            assert names == ["/seq/n_0000000000", "/seq/n_0000000001", "/seq/n_0000000002"]
            assert (await store.exists("/seq")).cversion == 3
            # ephemeral nodes carry the session and take no children
            await store.create("/eph", b"e", ephemeral=True)
            assert (await store.exists("/eph")).ephemeral_owner == store.session_id
            with pytest.raises(StoreError):
                await store.create("/eph/child")
            # delete: version check, not-empty, recursive
            with pytest.raises(BadVersionError):
                await store.delete("/a", 0)
            await store.delete("/a", 1)
            with pytest.raises(NotEmptyError):
                await store.delete("/deep")
            await store.delete("/deep", recursive=True)
            assert await store.exists("/deep") is None
            # multi: all or nothing, the failing op's error and index
            await store.create("/m", b"0")
            results = await store.multi([CheckOp("/m", 0), SetDataOp("/m", b"1", 0),
                                         CreateOp("/m/c", b"c"), CreateOp("/m/s_", sequential=True)])
            assert results[0] is True and results[1].version == 1
            assert results[2:] == ["/m/c", "/m/s_0000000001"]
            with pytest.raises(BadVersionError) as info:
                await store.multi([CreateOp("/m/d"), CheckOp("/m", 0), DeleteOp("/m/c")])
            assert isinstance(info.value, MultiError) and info.value.failed_index == 1
            assert await store.exists("/m/d") is None and await store.exists("/m/c") is not None
            with pytest.raises(NodeExistsError):
                await store.multi([DeleteOp("/m/c"), CreateOp("/m/s_0000000001")])
            assert await store.exists("/m/c") is not None
        finally:
            await store.close()
        # the chroot was created; the ephemeral node went away with the session
        zk = KazooClient(hosts)
        zk.start()
        try:
            assert zk.exists(chroot) is not None
            assert zk.exists(chroot + "/eph") is None
            assert zk.get(chroot + "/seq")[1].numChildren == 3
        finally:
            zk.stop()
            zk.close()
    run(main())


def test_persistent_watches_fire_on_the_loop(connect: str) -> None:
    async def main() -> None:
        store = KazooZNodeStore(connect, session_timeout_ms=6000)
        await store.start()
        loop = asyncio.get_running_loop()
        data_events: list[int] = []
        child_events: list[int] = []
        threads_ok: list[bool] = []

        def on_data() -> None:
            threads_ok.append(asyncio.get_running_loop() is loop)
            data_events.append(1)

        def on_children() -> None:
            child_events.append(1)
        try:
            store.watch_data("/w", on_data)
            store.watch_children("/w", on_children)
            await asyncio.sleep(0.2)
            await store.create("/w", b"x")                          # created: both fire
            await wait_for(lambda: len(data_events) >= 1 and len(child_events) >= 1)
            await store.set("/w", b"y")
            await wait_for(lambda: len(data_events) >= 2)
            await store.set("/w", b"z")                             # persistent: fires again
            await wait_for(lambda: len(data_events) >= 3)
            before = len(child_events)
            await store.create("/w/c1")
            await wait_for(lambda: len(child_events) > before)
            before = len(child_events)
            await store.create("/w/c2")
            await wait_for(lambda: len(child_events) > before)
            assert all(threads_ok)
            store.unwatch("/w")
            d, c = len(data_events), len(child_events)
            await store.set("/w", b"after")
            await store.create("/w/c3")
            await asyncio.sleep(0.5)
            assert (len(data_events), len(child_events)) == (d, c)
        finally:
            await store.close()
    run(main())


def test_session_expiry_reports_expired_then_connected_and_refires_watches(zookeeper_server,
                                                                           connect: str) -> None:
    hosts, chroot = split_connect_string(connect)

    async def main() -> None:
        store = KazooZNodeStore(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
        states: list[ZkState] = []
        store.add_state_listener(states.append)
        await store.start()
        watch_calls: list[int] = []
        try:
            await store.create("/reg", b"r", ephemeral=True)
            await store.create("/watched", b"w")
            store.watch_data("/watched", lambda: watch_calls.append(1))
            await asyncio.sleep(0.2)
            old_session = store.session_id
            session_id, password = store.session_credentials

            # close our session from another client that takes it over
            def expire() -> None:
                other = KazooClient(hosts, client_id=(session_id, password))
                other.start(timeout=10)
                other.stop()
                other.close()
            await asyncio.to_thread(expire)
            await wait_for(lambda: ZkState.EXPIRED in states and
                           states[states.index(ZkState.EXPIRED):].count(ZkState.CONNECTED) >= 1,
                           timeout=30)
            expired_at = states.index(ZkState.EXPIRED)
            assert states[0] == ZkState.CONNECTED
            assert ZkState.CONNECTED in states[expired_at:]
            assert store.session_id not in (0, old_session)
            await wait_for(lambda: len(watch_calls) >= 1)           # fired once on the new session
            assert await store.exists("/reg") is None               # ephemerals died with the session
            n = len(watch_calls)
            await store.set("/watched", b"again")                   # and the watch still works
            await wait_for(lambda: len(watch_calls) > n)
            await store.create("/reg", b"r2", ephemeral=True)
            assert (await store.exists("/reg")).ephemeral_owner == store.session_id
        finally:
            await store.close()
    run(main())


def test_unreachable_zookeeper_fails_start_within_the_connection_timeout() -> None:
    port = free_port()     # nothing listens there
    store = KazooZNodeStore(f"127.0.0.1:{port}/kafka", session_timeout_ms=6000,
                            connection_timeout_ms=1500)
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        run(store.start())
    elapsed = time.monotonic() - started
    assert str(info.value) == (f"Timed out waiting for connection to ZooKeeper at "
                               f"127.0.0.1:{port}/kafka after 1500 ms")
    assert "\n" not in str(info.value)
    assert 1.4 <= elapsed < 6, elapsed


def test_controller_election_fencing_and_broker_registration(connect: str) -> None:
    async def main() -> None:
        stores = [KazooZNodeStore(connect, session_timeout_ms=6000) for _ in range(2)]
        for s in stores:
            await s.start()
        a, b = (KafkaZkClient(s) for s in stores)
        try:
            await a.create_top_level_paths()
            outcomes = await asyncio.gather(a.register_controller_and_increment_epoch(1),
                                            b.register_controller_and_increment_epoch(2),
                                            return_exceptions=True)
            winners = [o for o in outcomes if not isinstance(o, BaseException)]
            assert len(winners) == 1 and winners[0] == (1, 1)
            assert sum(isinstance(o, ControllerMovedError) for o in outcomes) == 1
            winner = a if not isinstance(outcomes[0], BaseException) else b
            assert await a.get_controller_id() == (1 if winner is a else 2)
            assert await b.get_controller_epoch() == (1, 1)
            # writes fenced on the epoch zkVersion
            await winner.create_topic_assignment("t", uuid.uuid4(), {0: [1]})
            await winner.set_topic_assignment("t", None, {0: znodes.ReplicaAssignment((1, 2))}, 1)
            with pytest.raises(ControllerMovedError):
                await winner.set_topic_assignment("t", None, {0: znodes.ReplicaAssignment((2,))}, 0)
            assert (await a.get_topic_assignments(["t", "nope"]))["t"].partitions == \
                {0: znodes.ReplicaAssignment((1, 2))}

            reg = znodes.BrokerRegistration(
                7, (znodes.EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT"),), timestamp=5)
            epoch = await a.register_broker(reg)
            data, stat = await stores[0].get("/brokers/ids/7")
            assert epoch == stat.czxid and stat.version == 1
            assert data == znodes.encode_broker_registration(reg)
            assert await a.register_broker(reg) == epoch        # our own session: reused
            with pytest.raises(NodeExistsError) as info:
                await b.register_broker(reg)
            assert str(info.value) == (
                f"Error while creating ephemeral at /brokers/ids/7, node already exists and owner "
                f"'0x{stores[0].session_id:x}' does not match current session "
                f"'0x{stores[1].session_id:x}'")
            assert await b.get_all_brokers() == {7: (reg, epoch)}
        finally:
            for s in stores:
                await s.close()
    run(main())


def test_concurrent_producer_id_allocators_never_overlap(connect: str) -> None:
    async def main() -> None:
        stores = [KazooZNodeStore(connect, session_timeout_ms=6000, max_in_flight=10)
                  for _ in range(2)]
        for s in stores:
            await s.start()
        clients = [KafkaZkClient(s) for s in stores]
        try:
            await clients[0].create_top_level_paths()
            blocks = await asyncio.gather(*(clients[i % 2].allocate_producer_id_block(i % 2)
                                            for i in range(40)))
        finally:
            for s in stores:
                await s.close()
        starts = sorted(b.first_producer_id for b in blocks)
        assert starts == [i * 1000 for i in range(40)]
        assert all(b.size == 1000 for b in blocks)
        assert {b.assigned_broker_id for b in blocks} == {0, 1}
    run(main())


def test_brief_outage_suspends_then_reconnects_the_same_session(zookeeper_server, connect: str) -> None:
    """ZooKeeper paused (SIGSTOP) for less than the session timeout: SUSPENDED, then RECONNECTED
    with the same session and its ephemerals; a request made during the outage completes after."""
    async def main() -> None:
        store = KazooZNodeStore(connect, session_timeout_ms=20000, connection_timeout_ms=10000)
        states: list[ZkState] = []
        store.add_state_listener(states.append)
        await store.start()
        try:
            await store.create("/eph", b"e", ephemeral=True)
            session = store.session_id
            zookeeper_server.pause()
            try:
                await wait_for(lambda: ZkState.SUSPENDED in states, timeout=30)
                pending = asyncio.ensure_future(store.get("/eph"))
                await asyncio.sleep(0.5)
                assert not pending.done()
            finally:
                zookeeper_server.resume()
            data, stat = await asyncio.wait_for(pending, 30)
            assert data == b"e" and stat.ephemeral_owner == session
            await wait_for(lambda: ZkState.RECONNECTED in states)
            assert states == [ZkState.CONNECTED, ZkState.SUSPENDED, ZkState.RECONNECTED]
            assert store.session_id == session
        finally:
            await store.close()
    run(main(), timeout=90)
