"""A broker's ZooKeeper session really expires: the broker process is SIGSTOPped past the session
timeout (it sends no heartbeats, so ZooKeeper ends its session and deletes its ephemeral
/brokers/ids/<id>, and /controller if it held it), then SIGCONTinued. As Kafka's broker does, it
learns the session expired, opens a new one, registers again (a new czxid: a new broker epoch) and
competes for the controller again; there is never a second controller: one /controller znode,
/controller_epoch bumped once per election, and every broker's Metadata names the same
controller and agrees with the partition state znodes."""
from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from tests.cluster.util import (FAST_EXPIRY, FAST_EXPIRY_MS, LEADER_NOT_AVAILABLE, NONE, assignment, broker_czxid, broker_ids, consume_all,
                                controller_epoch, controller_seen_by, controller_znode, partition_state,
                                partitions, unique, wait_equal, wait_metadata, wait_until, zookeeper)

pytestmark = pytest.mark.cluster

SESSION_TIMEOUT_S = FAST_EXPIRY_MS / 1000   # zookeeper.session.timeout.ms of the test's cluster


def _zk_view(zk: Any, topic: str, n: int) -> dict[int, tuple[int, int, list[int]]]:
    out = {}
    for p in range(n):
        state, _ = partition_state(zk, topic, p)
        out[p] = (state["leader"], state["leader_epoch"], state["isr"])
    return out


@pytest.mark.parametrize("expire", ["controller", "other"])
def test_session_expiry(make_cluster: Any, expire: str) -> None:
    cluster = make_cluster(3, FAST_EXPIRY)
    ids = [0, 1, 2]
    rf1 = unique("expiry")
    cluster.create_topic(rf1, partitions=3, replication_factor=1)
    wait_until(lambda: all(len(partitions(cluster.broker(b), rf1)) == 3 for b in ids), 15, "topic everywhere")

    with zookeeper(cluster) as zk:
        controller = cluster.controller_id()
        victim = controller if expire == "controller" else min(b for b in ids if b != controller)
        others = [b for b in ids if b != victim]
        epoch, epoch_zk_version = controller_epoch(zk)
        old_czxid = broker_czxid(zk, victim)
        victim_partition = next(p for p, r in assignment(zk, rf1)[0].items() if r == [victim])
        before = _zk_view(zk, rf1, 3)
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=cluster.broker(victim).bootstrap_servers, acks=1)
        for i in range(3):
            assert producer.send(rf1, value=b"v%d" % i, partition=victim_partition).get(timeout=20).offset == i
        producer.close()

        pid = cluster.broker(victim).pid
        os.kill(pid, signal.SIGSTOP)
        try:
            # ZooKeeper ends the silent session: the registration (and /controller) go
            wait_until(lambda: zk.exists(f"/brokers/ids/{victim}") is None, SESSION_TIMEOUT_S + 6,
                       f"/brokers/ids/{victim} deleted by the session expiry")
            if expire == "controller":
                wait_until(lambda: controller_znode(zk) in others, 10, "a live broker holds /controller")
                acting = controller_znode(zk)
                assert controller_epoch(zk) == (epoch + 1, epoch_zk_version + 1)
            else:
                acting = controller
                assert controller_epoch(zk) == (epoch, epoch_zk_version)
            # the controller takes the stopped broker's RF=1 partition offline
            wait_equal(lambda: partitions(cluster.broker(acting), rf1)[victim_partition][:3],
                       (LEADER_NOT_AVAILABLE, -1, before[victim_partition][1] + 1), 10,
                       "the stopped broker's partition is offline")
        finally:
            os.kill(pid, signal.SIGCONT)

        # the broker notices, registers again with a new session (a new broker epoch) ...
        wait_until(lambda: (broker_czxid(zk, victim) or 0) > old_czxid, 20, f"broker {victim} registered again")
        assert zk.get(f"/brokers/ids/{victim}")[1].ephemeralOwner != 0
        # ... everyone lists it and names one controller, which did not change again
        wait_until(lambda: all(broker_ids(cluster.broker(b)) == ids and controller_seen_by(cluster.broker(b)) == acting
                               for b in ids), 20, f"every broker lists all three and names controller {acting}")
        assert controller_znode(zk) == acting
        assert controller_epoch(zk) == ((epoch + 1, epoch_zk_version + 1) if expire == "controller"
                                        else (epoch, epoch_zk_version))
        # its partition is back under it, one more leader epoch; the others never moved
        expected_zk = dict(before)
        leader, leader_epoch, isr = before[victim_partition]
        expected_zk[victim_partition] = (victim, leader_epoch + 2, [victim])
        wait_equal(lambda: _zk_view(zk, rf1, 3), expected_zk, 15, "partition state znodes")
        expected_md = {p: (NONE, lead, le, [lead], isr_, []) for p, (lead, le, isr_) in expected_zk.items()}
        wait_metadata(cluster, ids, {rf1: expected_md}, 15, "every broker's metadata agrees with ZooKeeper")
        # no split brain: for a while every broker keeps naming the one controller in /controller
        for _ in range(10):
            assert [controller_seen_by(cluster.broker(b)) for b in ids] == [acting] * 3
            assert controller_znode(zk) == acting
            time.sleep(0.1)
        # and the broker serves its partition with the data it had
        assert consume_all(cluster.bootstrap_servers, rf1, victim_partition, 3) == [b"v0", b"v1", b"v2"]
