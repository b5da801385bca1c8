"""Replication under real faults (issue 12): brokers as processes on a real ZooKeeper, followers
stopped (SIGSTOP), killed (SIGKILL) and cut off by network partitions (tests/support/netfaults.py).

What every test checks at the end: each acknowledged message is in the partition exactly once (and
in order), and the replicas' logs are identical batch by batch: the same base and last offsets,
partition leader epochs and CRCs, read from each broker's segment files after a clean stop.

- ISR: a SIGSTOPped follower leaves the ISR after replica.lag.time.max.ms (its ZooKeeper session
  still alive: the leader shrank it, not the controller), and an acks=all write waiting for it is
  answered then; acks=all goes on with min.insync.replicas = 2 until a second follower goes: then
  the high watermark stops (Kafka 3.9, KAFKA-15583), a waiting write times out and new ones are
  NOT_ENOUGH_REPLICAS; both come back into the ISR.
- Partition of the leader: the writes acknowledged before and after the cut all survive; one sent
  to the isolated old leader is never acknowledged (REQUEST_TIMED_OUT) and is truncated away.
- Leader epochs (KIP-101; the seeds' "关于高水位和Leader Epoch"): a follower restarted before it
  learned the high watermark keeps its log (no truncation to the HW), becomes leader when the old
  leader dies, and the old leader comes back and follows it by leader epoch: nothing acknowledged lost.
- Chaos: an idempotent confluent-kafka producer (acks=all) while the broker leading most partitions,
  then the controller, is SIGKILLed and restarted; every acknowledged message exactly once, in order.
  A three-round version runs by default; the minute-long one is marked `chaos` (pytest -m chaos).
"""
from __future__ import annotations

import os
import signal
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tests.cluster.util import (FAST_EXPIRY, FAST_EXPIRY_MS, NONE, controller_znode, partition_state, partitions, unique, wait_until, zookeeper)
from tests.integration.util import RawClient, Rec, build_batch
from tests.support.netfaults import make_net_cluster  # noqa: F401 - the fixture

pytestmark = pytest.mark.cluster

NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
SESSION_TIMEOUT_S = FAST_EXPIRY_MS / 1000   # the session of the tests that wait for an expiry


# -- helpers ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    values: tuple[bytes, ...]

    def identity(self) -> tuple[int, int, int, int]:
        return self.base_offset, self.last_offset, self.leader_epoch, self.crc


# base offset, length, partition leader epoch, magic, crc (Kafka's DefaultRecordBatch header)
_HEADER = struct.Struct(">qiibI")


def segment_batches(log_dir: Path, topic: str, partition: int) -> list[SegmentBatch]:
    """The batches of a partition's segment files, in order (read after the broker stopped)."""
    out: list[SegmentBatch] = []
    d = Path(log_dir) / f"{topic}-{partition}"
    for seg in sorted(d.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + _HEADER.size <= len(data):
            base, length, epoch, magic, crc = _HEADER.unpack_from(data, pos)
            end = pos + 12 + length
            assert magic == 2 and end <= len(data), f"{seg}: bad batch at byte {pos}"
            batch = DefaultRecordBatch(data[pos:end])
            assert batch.validate_crc(), f"{seg}: CRC mismatch at offset {base}"
            out.append(SegmentBatch(base, batch.last_offset, epoch, crc,
                                    tuple(bytes(r.value) for r in batch)))
            pos = end
        assert pos == len(data), f"{seg}: {len(data) - pos} trailing bytes"
    return out


def assert_replicas_identical(cluster: Any, topic: str, partition: int, replicas: list[int]) -> list[SegmentBatch]:
    """Every replica's log, batch by batch, equals the first's; returns it. Brokers stopped first."""
    logs = {b: segment_batches(cluster.broker(b).log_dir, topic, partition) for b in replicas}
    first = logs[replicas[0]]
    for b in replicas[1:]:
        assert [x.identity() for x in logs[b]] == [x.identity() for x in first], (
            f"{topic}-{partition}: broker {b}'s log differs from broker {replicas[0]}'s:\n"
            f" {replicas[0]}: {[x.identity() for x in first]}\n {b}: {[x.identity() for x in logs[b]]}")
    offsets = [o for x in first for o in range(x.base_offset, x.last_offset + 1)]
    assert offsets == list(range(offsets[0] if offsets else 0, (offsets[0] if offsets else 0) + len(offsets)))
    return first


def values_of(batches: list[SegmentBatch]) -> list[bytes]:
    return [v for b in batches for v in b.values]


def produce(broker: Any, topic: str, partition: int, value: bytes, acks: int = -1,
            timeout_ms: int = 10000) -> tuple[int, int]:
    """(error code, base offset) of one single-record Produce to `broker`."""
    with RawClient(broker.bootstrap_servers, timeout=timeout_ms / 1000 + 10) as c:
        r = c.produce(topic, partition, build_batch([Rec(key=None, value=value)]), acks=acks, timeout_ms=timeout_ms)
        return int(r.error_code), int(r.base_offset)


def committed_values(broker: Any, topic: str, partition: int) -> list[bytes]:
    """Everything below the high watermark, read from `broker` (the leader)."""
    with RawClient(broker.bootstrap_servers) as c:
        parsed, _hw = c.fetch_all(topic, partition, 0)
        return [r.value for r in parsed.records if r.value is not None]


def _high_watermark(broker: Any, topic: str, partition: int = 0) -> int:
    with RawClient(broker.bootstrap_servers) as c:
        return int(c.fetch(topic, partition, 0, max_bytes=1).high_watermark)


def zk_isr(zk: Any, topic: str, partition: int) -> list[int]:
    return sorted(partition_state(zk, topic, partition)[0]["isr"])


def zk_leader(zk: Any, topic: str, partition: int) -> int:
    return int(partition_state(zk, topic, partition)[0]["leader"])


def md_isr(broker: Any, topic: str, partition: int) -> tuple[int, list[int]]:
    err, leader, _epoch, _replicas, isr, _offline = partitions(broker, topic)[partition]
    assert err == NONE
    return leader, sorted(isr)


def stop_all(cluster: Any) -> None:
    """A clean stop of every broker (logs flushed), ZooKeeper left running."""
    for b in cluster.brokers.values():
        if b.running:
            b.stop(30)


# -- ISR shrink and expand ---------------------------------------------------------------------------

def test_isr_shrinks_and_expands_with_stopped_followers(make_cluster: Any) -> None:
    # a long ZooKeeper session: the stopped followers stay registered, so only the leader's lag
    # check (replica.lag.time.max.ms) can take them out of the ISR
    cluster = make_cluster(3, {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "30000"})
    topic = unique("isr")
    leader = cluster.controller_id()     # the controller leads: stopping the followers leaves it working
    f1, f2 = [b for b in sorted(cluster.brokers) if b != leader]
    cluster.create_topic(topic, assignments={0: [leader, f1, f2]}, config={"min.insync.replicas": 2})
    lb = cluster.broker(leader)
    acked: list[bytes] = []
    log: list[bytes] = []     # what the partition holds: acknowledged, and appended but not acknowledged

    def write(value: bytes) -> None:
        err, offset = produce(lb, topic, 0, value)
        assert (err, offset) == (NONE, len(log)), (value, err, offset)
        acked.append(value)
        log.append(value)

    with zookeeper(cluster) as zk:
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted([leader, f1, f2]), 20, "full ISR")
        for i in range(5):
            write(b"a%d" % i)
        stopped: list[int] = []
        try:
            for follower, expected_isr in ((f1, sorted([leader, f2])), (f2, [leader])):
                os.kill(cluster.broker(follower).pid, signal.SIGSTOP)
                stopped.append(follower)
                # an acks=all write waits for the stopped follower until the leader takes it out
                # of the ISR (a caught-up follower never lags: this write is what it lags behind).
                # With 2 left in sync it is then acknowledged; with 1 left (under min.insync.replicas)
                # the high watermark no longer moves (Kafka 3.9, KAFKA-15583): it stays appended but
                # unacknowledged, REQUEST_TIMED_OUT at its timeout
                t0 = time.monotonic()
                value = b"waits-for-%d" % follower
                last = len(expected_isr) == 1
                err, offset = produce(lb, topic, 0, value, timeout_ms=6000 if last else 30000)
                waited = time.monotonic() - t0
                # (Kafka's DelayedProduce keeps the append's base offset in its timed-out answer)
                assert (err, offset) == ((REQUEST_TIMED_OUT if last else NONE), len(log)), (err, offset)
                log.append(value)
                if not last:
                    acked.append(value)
                    assert zk_isr(zk, topic, 0) == expected_isr   # answered once the controller took the shrink
                    assert waited < 15, f"the write waited {waited:.1f} s: for its timeout, not for the ISR change"
                else:
                    assert waited >= 6
                wait_until(lambda: zk_isr(zk, topic, 0) == expected_isr, 15, f"broker {follower} out of the ISR")
                print(f"broker {follower} stopped: the acks=all write waiting for it answered after {waited:.1f} s")
                assert zk.exists(f"/brokers/ids/{follower}") is not None, "the leader shrank it, not a session expiry"
                wait_until(lambda: md_isr(lb, topic, 0) == (leader, expected_isr), 10, "the leader's metadata")
                if expected_isr == [leader]:
                    assert produce(lb, topic, 0, b"refused") == (NOT_ENOUGH_REPLICAS, -1)
                    assert produce(lb, topic, 0, b"refused-too", timeout_ms=2000) == (NOT_ENOUGH_REPLICAS, -1)
                    err, offset = produce(lb, topic, 0, b"acks-1", acks=1)   # acks=1 is not refused
                    assert (err, offset) == (NONE, len(log))
                    assert _high_watermark(lb, topic) == log.index(b"waits-for-%d" % f2), "the HW moved under min ISR"
                    acked.append(b"acks-1")
                    log.append(b"acks-1")
                else:
                    write(b"with-%d-stopped" % follower)
        finally:
            for follower in stopped:
                os.kill(cluster.broker(follower).pid, signal.SIGCONT)
        took = wait_until(lambda: zk_isr(zk, topic, 0) == sorted([leader, f1, f2]), 30, "both back in the ISR")
        print(f"both followers back in the ISR {took:.1f} s after SIGCONT")
        wait_until(lambda: md_isr(lb, topic, 0) == (leader, sorted([leader, f1, f2])), 10, "the leader's metadata")
        for i in range(3):
            write(b"b%d" % i)
        assert committed_values(lb, topic, 0) == log
    stop_all(cluster)
    on_disk = values_of(assert_replicas_identical(cluster, topic, 0, [leader, f1, f2]))
    assert on_disk == log and all(on_disk.count(v) == 1 for v in acked)


def test_write_waiting_for_a_killed_follower_is_answered_when_the_controller_shrinks_the_isr(
        make_cluster: Any) -> None:
    # a lag limit longer than the test: only the controller, on the follower's session expiry, can
    # take it out of the ISR; the leader then gets a LeaderAndIsr with the smaller ISR, its high
    # watermark moves and the waiting acks=all write is acknowledged (Kafka's makeLeader ->
    # maybeIncrementLeaderHW -> tryCompleteDelayedRequests), long before the write's own timeout
    cluster = make_cluster(3, {**FAST_EXPIRY, "replica.lag.time.max.ms": "60000"})
    topic = unique("killed")
    leader = cluster.controller_id()
    f1, f2 = [b for b in sorted(cluster.brokers) if b != leader]
    cluster.create_topic(topic, assignments={0: [leader, f1, f2]}, config={"min.insync.replicas": 2})
    lb = cluster.broker(leader)
    with zookeeper(cluster) as zk:
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted([leader, f1, f2]), 20, "full ISR")
        assert produce(lb, topic, 0, b"first") == (NONE, 0)
        cluster.broker(f1).kill()
        t0 = time.monotonic()
        assert produce(lb, topic, 0, b"waits", timeout_ms=60000) == (NONE, 1)
        waited = time.monotonic() - t0
        print(f"the acks=all write waiting for the killed follower answered after {waited:.1f} s")
        assert zk_isr(zk, topic, 0) == sorted([leader, f2])
        assert waited < SESSION_TIMEOUT_S + 10, f"answered after {waited:.1f} s"
        assert produce(lb, topic, 0, b"after") == (NONE, 2)
        assert committed_values(lb, topic, 0) == [b"first", b"waits", b"after"]


# -- network partition of the leader ------------------------------------------------------------------

def test_isolated_leader_is_fenced_and_truncated(make_net_cluster: Any) -> None:
    nc = make_net_cluster(3, {**FAST_EXPIRY, "replica.lag.time.max.ms": "2000"})
    cluster = nc.cluster
    topic = unique("cut")
    controller = cluster.controller_id()
    old, f1 = [b for b in sorted(cluster.brokers) if b != controller]   # the leader is not the controller
    replicas = [old, f1, controller]
    cluster.create_topic(topic, assignments={0: replicas}, config={"min.insync.replicas": 2})
    acked: list[bytes] = []
    with zookeeper(cluster) as zk:
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted(replicas), 20, "full ISR")
        epoch = partition_state(zk, topic, 0)[0]["leader_epoch"]
        for i in range(5):
            err, offset = produce(cluster.broker(old), topic, 0, b"before-%d" % i)
            assert (err, offset) == (NONE, i)
            acked.append(b"before-%d" % i)
        with nc.isolate(old):
            # the old leader still takes the write from a client on the host, but nobody can fetch it
            err, offset = produce(cluster.broker(old), topic, 0, b"never-acknowledged", timeout_ms=4000)
            assert err == REQUEST_TIMED_OUT, err
            # appended there all the same (at offset 5), beyond its high watermark
            assert values_of(segment_batches(cluster.broker(old).log_dir, topic, 0))[5:] == [b"never-acknowledged"]
            # its session expires; the controller elects a follower from the ISR, the leader epoch + 1
            wait_until(lambda: zk_leader(zk, topic, 0) in (f1, controller), SESSION_TIMEOUT_S + 15, "a new leader")
            state = partition_state(zk, topic, 0)[0]
            new = state["leader"]
            assert state["leader_epoch"] == epoch + 1 and sorted(state["isr"]) == sorted([f1, controller])
            wait_until(lambda: md_isr(cluster.broker(new), topic, 0) == (new, sorted([f1, controller])), 15,
                       "the new leader's metadata")
            for i in range(5):
                err, offset = produce(cluster.broker(new), topic, 0, b"after-%d" % i)
                assert (err, offset) == (NONE, 5 + i)
                acked.append(b"after-%d" % i)
        # healed: the old leader learns it lost its session and its leadership, is fenced ...
        wait_until(lambda: produce(cluster.broker(old), topic, 0, b"fenced", timeout_ms=2000)[0]
                   == NOT_LEADER_OR_FOLLOWER, 30, "the old leader refuses writes")
        # ... truncates its unacknowledged write away and comes back into the ISR
        took = wait_until(lambda: zk_isr(zk, topic, 0) == sorted(replicas), 30, "the old leader back in the ISR")
        print(f"old leader back in the ISR {took:.1f} s after the heal")
        for i in range(3):
            err, offset = produce(cluster.broker(new), topic, 0, b"healed-%d" % i)
            assert (err, offset) == (NONE, 10 + i)
            acked.append(b"healed-%d" % i)
        assert committed_values(cluster.broker(new), topic, 0) == acked
    stop_all(cluster)
    log = assert_replicas_identical(cluster, topic, 0, replicas)
    assert values_of(log) == acked
    assert {b.leader_epoch for b in log} == {epoch, epoch + 1}


# -- leader epochs, not high watermarks -------------------------------------------------------------

def _read_hw_checkpoint(log_dir: Path, topic: str, partition: int) -> Optional[int]:
    path = Path(log_dir) / "replication-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and int(parts[1]) == partition:
            return int(parts[2])
    return None


def test_restarted_follower_keeps_its_log_and_the_old_leader_follows_by_epoch(make_net_cluster: Any) -> None:
    # the high-watermark checkpoint is written only at a clean shutdown: after a SIGKILL a broker
    # knows no more of the HW than it had at its start (here, none)
    nc = make_net_cluster(3, {**FAST_EXPIRY, "replica.high.watermark.checkpoint.interval.ms": "3600000"})
    cluster = nc.cluster
    topic = unique("epoch")
    controller = cluster.controller_id()
    a, b = [x for x in sorted(cluster.brokers) if x != controller]
    cluster.create_topic(topic, assignments={0: [a, b]}, config={"min.insync.replicas": 1})
    with zookeeper(cluster) as zk:
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted([a, b]), 20, "ISR [A, B]")
        for i, m in enumerate([b"m0", b"m1"]):
            assert produce(cluster.broker(a), topic, 0, m) == (NONE, i)
        # B holds both messages (acks=all), then dies before it wrote down any high watermark
        wait_until(lambda: _replica_log_end(cluster, b, topic) == 2, 10, "B has m0 and m1")
        cluster.broker(b).kill()
        assert _read_hw_checkpoint(cluster.broker(b).log_dir, topic, 0) in (None, 0)
        wait_until(lambda: zk.exists(f"/brokers/ids/{b}") is None, SESSION_TIMEOUT_S + 10, "B's session gone")
        wait_until(lambda: zk_isr(zk, topic, 0) == [a], 15, "B out of the ISR")
        # B comes back while it cannot reach A: as a follower it must not truncate to its HW (0)
        with nc.net.partition(b, brokers=[a]):
            cluster.broker(b).start()
            wait_until(lambda: partitions(cluster.broker(b), topic)[0][1] == a, 20, "B knows A leads")
            time.sleep(2)
            assert _replica_log_end(cluster, b, topic) == 2, "B truncated its log to its high watermark"
        # healed: B fetches from A, offsets for its leader epoch say keep everything, back in the ISR
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted([a, b]), 30, "B back in the ISR")
        # A dies; B, in the ISR, becomes leader and takes m2 with acks=all (min.insync.replicas=1)
        epoch = partition_state(zk, topic, 0)[0]["leader_epoch"]
        cluster.broker(a).kill()
        wait_until(lambda: zk_leader(zk, topic, 0) == b, SESSION_TIMEOUT_S + 15, "B leads")
        assert partition_state(zk, topic, 0)[0]["leader_epoch"] == epoch + 1
        wait_until(lambda: md_isr(cluster.broker(b), topic, 0) == (b, [b]), 15, "B's metadata")
        assert produce(cluster.broker(b), topic, 0, b"m2") == (NONE, 2)
        # A returns, follows B by leader epoch: keeps m0 and m1, fetches m2, back in the ISR
        cluster.broker(a).start()
        wait_until(lambda: zk_isr(zk, topic, 0) == sorted([a, b]), 30, "A back in the ISR")
        assert produce(cluster.broker(b), topic, 0, b"m3") == (NONE, 3)
        assert committed_values(cluster.broker(b), topic, 0) == [b"m0", b"m1", b"m2", b"m3"]
    stop_all(cluster)
    log = assert_replicas_identical(cluster, topic, 0, [a, b])
    assert values_of(log) == [b"m0", b"m1", b"m2", b"m3"]


def _replica_log_end(cluster: Any, broker_id: int, topic: str) -> int:
    """The log end offset of partition 0 in `broker_id`'s segment files, read while it runs."""
    batches = segment_batches(cluster.broker(broker_id).log_dir, topic, 0)
    return batches[-1].last_offset + 1 if batches else 0


# -- chaos ---------------------------------------------------------------------------------------------

@dataclass
class ChaosResult:
    acked: dict[int, list[tuple[int, int]]]     # partition -> (offset, seq) acknowledged, in callback order
    sent: list[int]                             # partition -> messages handed to the producer
    failed: int
    longest_ack_gap: tuple[float, float]        # (seconds, when it began, seconds after the start)
    isr_return_s: list[float]
    timeline: list[str]


def _leader_counts(cluster: Any, topic: str) -> dict[int, int]:
    for b in cluster.running_broker_ids():
        try:
            counts: dict[int, int] = {}
            for _err, leader, *_ in partitions(cluster.broker(b), topic).values():
                if leader >= 0:
                    counts[leader] = counts.get(leader, 0) + 1
            return counts
        except Exception:  # noqa: BLE001 - a broker just killed
            continue
    return {}


def _run_chaos(cluster: Any, topic: str, n_partitions: int, duration_s: float, rate: float,
               max_messages: int, min_rounds: int) -> ChaosResult:
    from confluent_kafka import Producer

    acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(n_partitions)}
    sent = [0] * n_partitions
    failed = [0]
    ack_times: list[float] = []
    lock = threading.Lock()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                         "request.timeout.ms": 10000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000, "log_level": 3})

    def on_delivery(err: Any, msg: Any) -> None:
        with lock:
            if err is not None:
                failed[0] += 1
                return
            seq = int(msg.value().split(b":")[1])
            offset = msg.offset()
            acked[msg.partition()].append((-1 if offset is None else offset, seq))
            ack_times.append(time.monotonic())

    stop = threading.Event()
    started = time.monotonic()
    timeline: list[str] = []

    def event(what: str) -> None:
        timeline.append(f"{time.monotonic() - started:6.1f} s  {what}")

    def produce_loop() -> None:
        # bounded: at most max_messages, at `rate` per second, until stopped
        total = 0
        while not stop.is_set() and total < max_messages:
            if total >= rate * (time.monotonic() - started):
                producer.poll(0.01)
                continue
            p = total % n_partitions
            try:
                producer.produce(topic, value=b"%d:%d" % (p, sent[p]), partition=p, on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
                continue
            sent[p] += 1
            total += 1
            producer.poll(0)

    isr_return: list[float] = []
    t = threading.Thread(target=produce_loop, name="chaos-producer", daemon=True)
    t.start()
    try:
        with zookeeper(cluster) as zk:
            def in_isr(broker_id: int) -> list[bool]:
                return [broker_id in partition_state(zk, topic, p)[0]["isr"] for p in range(n_partitions)]

            rounds = 0
            # at least min_rounds kills and restarts (the third one the controller's), more while
            # time is left
            while rounds < 50 and (len(isr_return) < min_rounds or time.monotonic() - started < duration_s):
                rounds += 1
                time.sleep(2.0)
                counts = _leader_counts(cluster, topic)
                # the broker leading most partitions, every third round the controller
                victim = controller_znode(zk) if rounds % 3 == 0 else \
                    (max(counts, key=lambda b: counts[b]) if counts else None)
                if victim is None:
                    continue
                role = "controller" if rounds % 3 == 0 else "leader of most partitions"
                cluster.broker(victim).kill()
                event(f"round {rounds}: SIGKILL broker {victim} ({role}; led {counts.get(victim, 0)} partitions)")
                wait_until(lambda: zk.exists(f"/brokers/ids/{victim}") is None, 15, f"broker {victim}'s session gone")
                wait_until(lambda: not any(in_isr(victim)), 15, f"broker {victim} out of every ISR")
                event(f"broker {victim} out of every ISR")
                restarted = time.monotonic()
                cluster.broker(victim).start()
                event(f"broker {victim} restarted (ready)")
                wait_until(lambda: all(in_isr(victim)), 60, f"broker {victim} back in every ISR")
                isr_return.append(time.monotonic() - restarted)
                event(f"broker {victim} back in every ISR, {isr_return[-1]:.1f} s after its restart began")
    finally:
        stop.set()
        t.join(30)
        remaining = producer.flush(120)
        event(f"producer flushed, {remaining} left")
        assert remaining == 0, f"{remaining} messages neither delivered nor failed"
    points = [started] + sorted(ack_times)
    gap = max(((b - a, a - started) for a, b in zip(points, points[1:])), default=(float("inf"), 0.0))
    return ChaosResult(acked, sent, failed[0], gap, isr_return, timeline)


def _chaos(make_cluster: Any, duration_s: float, rate: float, max_messages: int, min_rounds: int = 3) -> None:
    n = 6
    cluster = make_cluster(3, {"zookeeper.session.timeout.ms": "2000", "replica.lag.time.max.ms": "3000",
                               "min.insync.replicas": "2"})
    topic = unique("chaos")
    cluster.create_topic(topic, partitions=n, replication_factor=3)
    result = _run_chaos(cluster, topic, n, duration_s, rate, max_messages, min_rounds)
    total = sum(len(v) for v in result.acked.values())
    print("\n" + "\n".join(result.timeline))
    print(f"chaos: {sum(result.sent)} sent, {total} acknowledged, {result.failed} failed; longest gap between "
          f"acks {result.longest_ack_gap[0]:.2f} s (from {result.longest_ack_gap[1]:.1f} s); back in every ISR "
          f"{[round(x, 1) for x in result.isr_return_s]} s after the restarts")
    assert total > 0 and len(result.isr_return_s) >= min_rounds
    stop_all(cluster)
    for p in range(n):
        log = assert_replicas_identical(cluster, topic, p, [0, 1, 2])
        values = values_of(log)
        assert all(v.split(b":")[0] == b"%d" % p for v in values)
        seqs = [int(v.split(b":")[1]) for v in values]
        # idempotence: each sequence number once, in order; with nothing failed, every one of them
        assert seqs == sorted(set(seqs)), f"partition {p}: duplicates or reordering"
        if result.failed == 0:
            assert seqs == list(range(result.sent[p])), f"partition {p}: {len(seqs)} of {result.sent[p]}"
        at = {o: seq for b in log for o, seq in zip(range(b.base_offset, b.last_offset + 1),
                                                   (int(v.split(b":")[1]) for v in b.values))}
        unknown = [seq for offset, seq in result.acked[p] if offset < 0]
        if unknown:
            print(f"partition {p}: {len(unknown)} acknowledged without an offset: seqs {unknown[:20]}")
        for offset, seq in result.acked[p]:
            if offset >= 0:
                assert at.get(offset) == seq, f"partition {p}: acknowledged seq {seq} at offset {offset} lost"
            else:
                assert seq in seqs, f"partition {p}: acknowledged seq {seq} lost"


@pytest.mark.serial   # three brokers under a fault schedule with timing windows: alone, not beside a worker
def test_chaos_short(make_cluster: Any) -> None:
    # three rounds (two leaders, then the controller), whatever the machine's speed
    _chaos(make_cluster, duration_s=0, rate=300, max_messages=20000)


@pytest.mark.chaos
@pytest.mark.timeout(900)
def test_chaos_long(make_cluster: Any) -> None:
    _chaos(make_cluster, duration_s=60, rate=500, max_messages=100000)

