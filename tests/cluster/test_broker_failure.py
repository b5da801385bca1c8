"""A broker that leads partitions dies (SIGKILL) and comes back.

Kafka's controller on the broker's death (onBrokerFailure): partitions it led get the first live
replica in assignment order that is in the ISR as leader, with the dead broker out of the ISR and
the leader epoch +1; partitions it followed lose it from the ISR (leader epoch +1, as
ReplicaStateMachine's OfflineReplica transition writes it); a replication-factor-1 partition it
held keeps its ISR [dead broker] with leader -1 (Metadata: LEADER_NOT_AVAILABLE) until it returns.
On its return the broker fetches from the leaders of its replicas, and once caught up each leader
puts it back in the ISR with AlterPartition; then ElectLeaders or the automatic rebalance gives it
back the partitions it prefers."""
from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from tests.cluster.util import (ELECTION_NOT_NEEDED, FAST_EXPIRY, LEADER_NOT_AVAILABLE, NONE, assignment, consume_all,
                                controller_epoch, partition_state, partitions, unique, wait_metadata, wait_until,
                                zookeeper)

pytestmark = pytest.mark.cluster

NOT_NEEDED = "Leader election not needed for topic partition."   # Kafka's ApiError(ELECTION_NOT_NEEDED)


def _expected_after_death(before: dict[int, tuple], dead: int) -> dict[int, tuple]:
    """Kafka's outcome, per partition, of `dead` dying (see the module doc)."""
    out = {}
    for p, (err, leader, epoch, replicas, isr, offline) in before.items():
        if dead not in replicas:
            out[p] = (err, leader, epoch, replicas, isr, offline)
        elif len(isr) == 1 and isr == [dead]:
            out[p] = (LEADER_NOT_AVAILABLE, -1, epoch + 1, replicas, isr, [dead])
        else:
            new_isr = [r for r in isr if r != dead]
            new_leader = leader if leader != dead else next(r for r in replicas if r in new_isr)
            out[p] = (NONE, new_leader, epoch + 1, replicas, new_isr, [dead])
    return out


def _victim(cluster: Any, topic: str, controller: int) -> int:
    """A broker other than the controller that leads some of `topic`'s partitions."""
    led = {leader for _, leader, *_ in partitions(cluster.broker(controller), topic).values()}
    return min(b for b in led if b != controller)


class _Producer(threading.Thread):
    """Sends to the given partitions until stopped, one at a time, recording every outcome."""

    def __init__(self, bootstrap: str, topic: str, parts: list[int]) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=5, linger_ms=0,
                                      request_timeout_ms=10000, max_block_ms=20000)
        self.topic, self.parts = topic, parts
        self.sent: dict[int, list[bytes]] = {p: [] for p in parts}
        self.failures: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            p = self.parts[i % len(self.parts)]
            value = f"live-{p}-{i}".encode()
            try:
                md = self.producer.send(self.topic, value=value, partition=p).get(timeout=20)
                assert (md.partition, md.offset) == (p, 5 + len(self.sent[p])), md
                self.sent[p].append(value)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.failures.append(e)
            i += 1
            time.sleep(0.02)

    def finish(self) -> None:
        self.stop.set()
        self.join(30)
        self.producer.close()


def test_broker_death_and_return(make_cluster: Any) -> None:
    cluster = make_cluster(3, FAST_EXPIRY)
    ids = [0, 1, 2]
    rf3, rf1 = unique("rf3"), unique("rf1")
    cluster.create_topic(rf3, partitions=6, replication_factor=3)
    cluster.create_topic(rf1, partitions=3, replication_factor=1)
    wait_until(lambda: all(len(partitions(cluster.broker(b), t)) == n for b in ids for t, n in ((rf3, 6), (rf1, 3))),
               15, "every broker knows both topics")
    controller = cluster.controller_id()
    victim = _victim(cluster, rf3, controller)
    survivors = [b for b in ids if b != victim]

    with zookeeper(cluster) as zk:
        epoch = controller_epoch(zk)
        rf1_owner = {p: r[0] for p, r in assignment(zk, rf1)[0].items()}
        victim_rf1 = next(p for p, b in rf1_owner.items() if b == victim)
        live_rf1 = sorted(p for p, b in rf1_owner.items() if b != victim)

        # five records in each RF=1 partition before anything happens
        before_kill: dict[int, list[bytes]] = {p: [f"before-{p}-{i}".encode() for i in range(5)] for p in range(3)}
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
        for p, values in before_kill.items():
            for i, v in enumerate(values):
                md = producer.send(rf1, value=v, partition=p).get(timeout=20)
                assert (md.partition, md.offset) == (p, i)
        producer.close()

        before = {t: partitions(cluster.broker(controller), t) for t in (rf3, rf1)}
        led_by_victim = sorted(p for p, s in before[rf3].items() if s[1] == victim)
        assert len(led_by_victim) == 2   # round-robin assignment: each broker leads two of six

        live_producer = _Producer(",".join(cluster.broker(b).bootstrap_servers for b in survivors), rf1, live_rf1)
        live_producer.start()
        try:
            time.sleep(0.5)
            cluster.broker(victim).kill()
            expected = {t: _expected_after_death(before[t], victim) for t in (rf3, rf1)}
            wait_metadata(cluster, survivors, expected, 15, f"survivors' metadata after broker {victim} died")
            # the state znodes say the same, written by the same controller epoch
            for t in (rf3, rf1):
                for p, (_, leader, leader_epoch, _, isr, _) in expected[t].items():
                    state, _ = partition_state(zk, t, p)
                    assert (state["leader"], state["leader_epoch"], state["isr"]) == (leader, leader_epoch, isr)
            assert controller_epoch(zk) == epoch
            time.sleep(0.5)
        finally:
            live_producer.finish()
        assert live_producer.failures == []
        assert all(len(v) > 0 for v in live_producer.sent.values()), live_producer.sent

        # the broker returns: its RF=1 partition is led by it again (one more epoch), its RF=3
        # replicas catch up by fetching and their leaders put it back in the ISR (AlterPartition:
        # appended last, as Kafka's leader proposes); leaders stay where they are
        cluster.broker(victim).start()
        back = {rf1: {p: (NONE, victim if s[4] == [victim] else s[1], s[2] + (1 if s[4] == [victim] else 0),
                          s[3], s[4], []) for p, s in expected[rf1].items()},
                rf3: {p: (NONE, s[1], s[2], s[3], s[4] + [victim], []) for p, s in expected[rf3].items()}}
        wait_metadata(cluster, ids, back, 20, f"every broker's metadata after broker {victim} returned")
        for p in range(6):
            state, _ = partition_state(zk, rf3, p)
            assert (state["leader"], state["isr"]) == (back[rf3][p][1], back[rf3][p][4])
        assert consume_all(cluster.bootstrap_servers, rf1, victim_rf1, 5) == before_kill[victim_rf1]
        for p in live_rf1:
            got = consume_all(cluster.bootstrap_servers, rf1, p, 5 + len(live_producer.sent[p]))
            assert got == before_kill[p] + live_producer.sent[p]

        # preferred election: back in the ISR, the returned broker leads its preferred partitions again
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
        try:
            resp = admin.elect_leaders(0, {rf3: list(range(6))}, timeout_ms=10000, raise_errors=False)
            results = {(t.topic, p.partition_id): (p.error_code, p.error_message)
                       for t in resp.replica_election_results for p in t.partition_result}
            assert results == {(rf3, p): (NONE, None) if p in led_by_victim else (ELECTION_NOT_NEEDED, NOT_NEEDED)
                               for p in range(6)}
        finally:
            admin.close()
        final = {p: (NONE, s[3][0], s[2] + (1 if p in led_by_victim else 0), s[3], s[4], [])
                 for p, s in back[rf3].items()}
        assert all(final[p][1] == before[rf3][p][1] for p in range(6))   # every preferred leader is back
        wait_metadata(cluster, ids, {rf3: final}, 10, "preferred leaders back")


def test_auto_leader_rebalance_after_return(make_cluster: Any) -> None:
    cluster = make_cluster(3, {**FAST_EXPIRY, "auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 2})
    ids = [0, 1, 2]
    rf3 = unique("rebalance")
    cluster.create_topic(rf3, partitions=6, replication_factor=3)
    wait_until(lambda: all(len(partitions(cluster.broker(b), rf3)) == 6 for b in ids), 15, "topic everywhere")
    controller = cluster.controller_id()
    victim = _victim(cluster, rf3, controller)
    survivors = [b for b in ids if b != victim]
    before = partitions(cluster.broker(controller), rf3)
    led_by_victim = sorted(p for p, s in before.items() if s[1] == victim)

    cluster.broker(victim).kill()
    expected = _expected_after_death(before, victim)
    wait_metadata(cluster, survivors, {rf3: expected}, 15, f"survivors' metadata after broker {victim} died")
    cluster.broker(victim).start()
    # it catches up, rejoins the ISR through its leaders' AlterPartition, and the next rebalance
    # check gives it its preferred leaderships back
    final = {p: (NONE, victim, s[2] + 1, s[3], s[4] + [victim], []) if p in led_by_victim
             else (NONE, s[1], s[2], s[3], s[4] + [victim], []) for p, s in expected.items()}
    took = wait_metadata(cluster, ids, {rf3: final}, 15,
                         f"the rebalance gives broker {victim} its preferred leaderships back")
    assert took <= 2 + 5   # catching up, one check interval (2 s) and the metadata's propagation
