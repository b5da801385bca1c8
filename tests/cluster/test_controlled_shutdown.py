"""SIGTERM of a broker that leads partitions: Kafka's controlled shutdown. The broker asks the
controller (ControlledShutdown) to move leadership away before it stops serving: partitions it
led get the first replica in assignment order that is live, in the ISR and not shutting down as
leader, with the shutting-down broker out of the ISR (leader epoch +1); partitions it followed
drop it from the ISR (OfflineReplica, leader epoch +1). A replication-factor-1 partition cannot
move: the controller keeps answering it as remaining, the broker retries
controlled.shutdown.max.retries times with controlled.shutdown.retry.backoff.ms between attempts,
then shuts down anyway. A producer writing to partitions on the other brokers never fails."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from kafka import KafkaProducer

from tests.cluster.util import (LEADER_NOT_AVAILABLE, NONE, assignment, consume_all, create_topic_with_assignment,
                                partitions, unique, wait_metadata, wait_until, zookeeper)

pytestmark = pytest.mark.cluster

BACKOFF_S = 0.5     # controlled.shutdown.retry.backoff.ms of the test clusters
MAX_RETRIES = 3     # controlled.shutdown.max.retries (Kafka's default)
EXIT_BOUND_S = 10.0


def _after_controlled_shutdown(before: dict[int, tuple], gone: int) -> dict[int, tuple]:
    """Each RF=3 partition once `gone` shut down cleanly and its registration went (see the doc)."""
    out = {}
    for p, (err, leader, epoch, replicas, isr, offline) in before.items():
        new_isr = [r for r in isr if r != gone]
        new_leader = leader if leader != gone else next(r for r in replicas if r in new_isr)
        out[p] = (NONE, new_leader, epoch + 1, replicas, new_isr, [gone])
    return out


def _sigterm_and_watch(cluster: Any, victim: int, observer: int, topic: str) -> tuple[float, float, int]:
    """SIGTERM `victim`; poll `observer`'s Metadata until no partition of `topic` is led by it
    while the process still runs. Returns (seconds to that, seconds to exit, exit code)."""
    broker = cluster.broker(victim)
    start = time.monotonic()
    os.kill(broker.pid, signal.SIGTERM)
    moved_at = None
    while moved_at is None:
        leaders = {s[1] for s in partitions(cluster.broker(observer), topic).values()}
        if victim not in leaders:
            # seen moved, and only now is the process checked: it moved while the broker ran
            assert broker.running, "the broker exited before its leadership moved"
            moved_at = time.monotonic() - start
        assert broker.running or moved_at is not None, "the broker exited before its leadership moved"
        assert time.monotonic() - start < EXIT_BOUND_S, "leadership did not move"
        time.sleep(0.01)
    while broker.running:
        assert time.monotonic() - start < EXIT_BOUND_S, f"broker {victim} still running {EXIT_BOUND_S} s after SIGTERM"
        time.sleep(0.02)
    exited_at = time.monotonic() - start
    return moved_at, exited_at, broker.stop()


class _Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, parts: list[int]) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=10, linger_ms=0,
                                      retry_backoff_ms=100, request_timeout_ms=10000, max_block_ms=20000)
        self.topic, self.parts = topic, parts
        self.futures: list[tuple[int, bytes, Any]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            p = self.parts[i % len(self.parts)]
            value = f"m-{i}".encode()
            self.futures.append((p, value, self.producer.send(self.topic, value=value, partition=p)))
            i += 1
            time.sleep(0.01)

    def finish(self) -> tuple[list[BaseException], dict[int, list[bytes]]]:
        self.stop.set()
        self.join(10)
        failures: list[BaseException] = []
        sent: dict[int, list[bytes]] = {p: [] for p in self.parts}
        for p, value, f in self.futures:
            try:
                md = f.get(timeout=20)
                assert md.partition == p and md.offset == len(sent[p]), (md, len(sent[p]))
                sent[p].append(value)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                failures.append(e)
        self.producer.close()
        return failures, sent


def _setup(make_cluster: Any) -> tuple[Any, str, int, list[int]]:
    cluster = make_cluster(3, {"controlled.shutdown.max.retries": MAX_RETRIES,
                               "controlled.shutdown.retry.backoff.ms": int(BACKOFF_S * 1000)})
    rf3 = unique("cs-rf3")
    cluster.create_topic(rf3, partitions=6, replication_factor=3)
    controller = cluster.controller_id()
    victim = min(b for b in cluster.brokers if b != controller)   # not the controller: it stays put
    others = [b for b in cluster.brokers if b != victim]
    return cluster, rf3, victim, others


def test_controlled_shutdown_moves_leadership_first(make_cluster: Any) -> None:
    cluster, rf3, victim, others = _setup(make_cluster)
    rf1 = unique("cs-rf1")
    # four RF=1 partitions, none on the broker that will shut down
    assert create_topic_with_assignment(cluster.broker(others[0]), rf1,
                                        {0: [others[0]], 1: [others[1]], 2: [others[0]], 3: [others[1]]}) == NONE
    wait_until(lambda: all(len(partitions(cluster.broker(b), t)) == n for b in cluster.brokers
                           for t, n in ((rf3, 6), (rf1, 4))), 15, "both topics everywhere")
    before = partitions(cluster.broker(others[0]), rf3)
    assert sorted(p for p, s in before.items() if s[1] == victim) != []

    producer = _Producer(",".join(cluster.broker(b).bootstrap_servers for b in others), rf1, [0, 1, 2, 3])
    producer.start()
    try:
        time.sleep(0.5)
        moved, exited, code = _sigterm_and_watch(cluster, victim, others[0], rf3)
        time.sleep(0.5)
    finally:
        failures, sent = producer.finish()
    assert code == 0
    assert moved < exited <= EXIT_BOUND_S
    log = cluster.broker(victim).output()
    assert "Controlled shutdown request returned successfully after 1 attempt(s)" in log
    assert "Proceeding to do an unclean shutdown" not in log
    assert failures == []
    assert all(len(v) >= 10 for v in sent.values()), {p: len(v) for p, v in sent.items()}
    for p, values in sent.items():
        assert consume_all(cluster.bootstrap_servers, rf1, p, len(values)) == values

    expected = _after_controlled_shutdown(before, victim)
    wait_metadata(cluster, others, {rf3: expected}, 10, "metadata after the shutdown")
    with zookeeper(cluster) as zk:
        assert zk.exists(f"/brokers/ids/{victim}") is None


def test_controlled_shutdown_does_not_wait_for_rf1_partitions(make_cluster: Any) -> None:
    """A partition with one replica has nowhere to go: Kafka's controller leaves it out of the
    partitions a shutting-down broker still leads (partitionLeadersOnBroker), so the first attempt
    succeeds and the partition goes offline with its broker."""
    cluster, rf3, victim, others = _setup(make_cluster)
    rf1 = unique("cs-rf1")
    cluster.create_topic(rf1, partitions=3, replication_factor=1)
    wait_until(lambda: all(len(partitions(cluster.broker(b), t)) == n for b in cluster.brokers
                           for t, n in ((rf3, 6), (rf1, 3))), 15, "both topics everywhere")
    with zookeeper(cluster) as zk:
        stuck = next(p for p, r in assignment(zk, rf1)[0].items() if r == [victim])
    before = partitions(cluster.broker(others[0]), rf3)
    before_rf1 = partitions(cluster.broker(others[0]), rf1)

    moved, exited, code = _sigterm_and_watch(cluster, victim, others[0], rf3)
    assert code == 0
    assert exited <= EXIT_BOUND_S, exited
    log = cluster.broker(victim).output()
    assert "Controlled shutdown request returned successfully after 1 attempt(s)" in log
    assert "Remaining partitions to move" not in log
    assert "Proceeding to do an unclean shutdown" not in log

    expected = _after_controlled_shutdown(before, victim)
    wait_metadata(cluster, others, {rf3: expected}, 10, "RF=3 metadata after the shutdown")
    # the RF=1 partition goes offline with its broker: leader -1, ISR kept, one leader epoch more
    expected_rf1 = {p: (s if p != stuck else (LEADER_NOT_AVAILABLE, -1, s[2] + 1, s[3], s[4], [victim]))
                    for p, s in before_rf1.items()}
    wait_metadata(cluster, others, {rf1: expected_rf1}, 10, "RF=1 metadata after the shutdown")
