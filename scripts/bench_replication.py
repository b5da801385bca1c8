#!/usr/bin/env python3
"""Replication benchmark (issue 12): a 3-broker kafkalite cluster and a 3-broker Apache Kafka 3.9.1
cluster in ZooKeeper mode, in the same run, on one ZooKeeper (a chroot each), with the same
zookeeper.session.timeout.ms; the target that goes first alternates from round to round.

Measurements, each round on a fresh cluster per target (see docs/benchmarks.md, "Replication"):
  throughput -- confluent-kafka producer, bounded message counts, into a 3-partition topic with
                replication factor 3 and acks=all (min.insync.replicas=2), and into one with
                replication factor 1 and acks=1: MB/s of 1 KiB values pipelined (linger.ms=5,
                scripts/bench.py's measure_produce), then p50/p99 of synchronous sends of small
                records (produce + flush each, scripts/bench.py's measure_latency).
  chaos      -- 6 partitions, RF 3, min.insync.replicas=2; an idempotent producer writes
                sequence-numbered messages (message i to partition i mod 6) at a steady pace
                while the broker leading most partitions is SIGKILLed, and restarted once
                ZooKeeper has expired its session, --kills times. Figures: the longest gap
                between acknowledgements (any partition, and the worst single partition), the
                time from the restart until the broker is back in the ISR of every partition,
                and the zero-loss check: every acknowledged message present exactly once, at the
                offset its acknowledgement gave (if it gave one), in sequence order per partition.

Usage:
  python scripts/bench_replication.py [--repeat 3] [--only throughput,chaos] [--quick]
                                      [--targets kafkalite,kafka] [--json out.json]
  python scripts/bench_replication.py --combine a.json b.json ...   # one table from several runs
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  -- scripts/bench.py: measure_produce, measure_latency, percentile
from cluster_targets import (  # noqa: E402  -- scripts/cluster_targets.py, shared with bench_cluster.py
    BROKER_IDS, KAFKA, KAFKA_JVM_FLAGS, KAFKALITE, LABELS, TARGETS, BenchError, Client,
    ClusterUnderTest, KafkaCluster, KafkaliteCluster, MetadataView, Results, ZnodeGone,
    common_overrides, environment, log)

import confluent_kafka as ck  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from tests.support.zookeeper import ZooKeeperServer  # noqa: E402

QUICK = {"repeat": 1, "messages": 2000, "latency_sends": 100, "kills": 1}
PHASES = ("throughput", "chaos")
CHAOS_PARTITIONS = 6
MIN_INSYNC = "2"


def replication_overrides(session_timeout_ms: int) -> dict[str, str]:
    """bench_cluster's common settings (same session timeout, no automatic leader rebalance) and
    Kafka's replication defaults spelled out, so that both brokers are told the same thing."""
    return {
        **common_overrides(session_timeout_ms),
        "replica.lag.time.max.ms": "30000",
        "unclean.leader.election.enable": "false",
        "num.replica.fetchers": "1",
    }


# --------------------------------------------------------------------------------------------
# One fresh cluster per target and phase
# --------------------------------------------------------------------------------------------

class Run:
    """A fresh cluster: started, topics created and in sync, measured, killed."""

    def __init__(self, cluster: ClusterUnderTest, zk: KazooClient, results: Results,
                 args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.zk = zk
        self.results = results
        self.args = args
        self.client = Client(cluster.address)
        self.counts: dict[str, int] = {}

    def record(self, metric: str, value: float, unit: str = "") -> None:
        self.results.add(metric, self.cluster.name, round(value, 3))
        log(f"  {self.cluster.name} {metric}: {value:,.2f}{unit}")

    def metadata(self, topics: list[str], avoid: Optional[int] = None) -> Optional[MetadataView]:
        """Metadata from the first running broker (other than `avoid`) that answers."""
        for b in self.cluster.running():
            if b == avoid:
                continue
            try:
                return self.client.metadata(b, topics)
            except (OSError, ConnectionError, struct.error):
                continue
        return None

    def wait_until(self, cond: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll every --poll-ms until cond(); the perf_counter time it first held."""
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise BenchError(f"{self.cluster.name}: not {what} after {timeout:.0f} s")
            time.sleep(self.args.poll_ms / 1000)
        return time.perf_counter()

    def in_sync(self) -> bool:
        """Every running broker's Metadata lists the 3 brokers and every partition of every
        topic created here led by a live broker with all its replicas in the ISR."""
        running = set(self.cluster.running())
        for b in running:
            try:
                md = self.client.metadata(b, list(self.counts))
            except (OSError, ConnectionError, struct.error):
                return False
            if md.brokers != running:
                return False
            for t, n in self.counts.items():
                parts = md.partitions.get(t)
                if parts is None or len(parts) != n or any(
                        v.leader not in running or set(v.isr) != set(v.replicas) for v in parts.values()):
                    return False
        return True

    def start(self) -> None:
        t0 = time.perf_counter()
        self.cluster.start(self.args.ready_timeout)
        self.wait_until(self.in_sync, 60, "listing all 3 brokers")
        log(f"  {self.cluster.name}: cluster up in {time.perf_counter() - t0:.1f} s")

    def create(self, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        md = self.metadata([])
        if md is None:
            raise BenchError(f"{self.cluster.name}: no broker answers Metadata")
        code = self.client.create_topic(md.controller_id, topic, partitions, rf,
                                        timeout_ms=30000, configs=configs)
        if code != 0:
            raise BenchError(f"{self.cluster.name}: CreateTopics {topic} ({partitions} x RF {rf}): "
                             f"error code {code}")
        self.counts[topic] = partitions
        self.wait_until(self.in_sync, self.args.timeout,
                        f"showing all {partitions} partitions of {topic} led and in sync")

    # -- throughput and latency --------------------------------------------------------------
    def throughput(self, rnd: int) -> None:
        configs = {
            "rf3": (3, "all", {"min.insync.replicas": MIN_INSYNC}),
            "rf1": (1, "1", {}),
        }
        for name, (rf, _acks, cfg) in configs.items():
            self.create(f"tp-{name}", bench.PARTITIONS, rf, cfg)
            self.create(f"lat-{name}", 1, rf, cfg)
        bootstrap = self.cluster.bootstrap_servers()
        value = bytes(range(256)) * (self.args.value_size // 256) + b"x" * (self.args.value_size % 256)
        order = list(configs) if rnd % 2 == 0 else list(configs)[::-1]
        for name in order:
            rf, acks, _cfg = configs[name]
            # Unmeasured warm-up: connections, metadata, the JVM's hot paths, the fetchers.
            bench.measure_produce(bootstrap, f"tp-{name}", max(100, self.args.messages // 10), value,
                                  self.args.timeout, acks=acks)
            r = bench.measure_produce(bootstrap, f"tp-{name}", self.args.messages, value,
                                      self.args.timeout, acks=acks)
            wms = bench.high_watermarks(bootstrap, f"tp-{name}")
            expected = self.args.messages + max(100, self.args.messages // 10)
            if sum(hi for _lo, hi in wms) != expected:
                raise BenchError(f"{self.cluster.name} tp-{name}: high watermarks {wms}, "
                                 f"expected {expected} messages in all")
            self.record(f"{name}_mb_s", r.mb_s, " MB/s")
            self.record(f"{name}_msgs_s", r.msgs_s, " msgs/s")
            lat = bench.measure_latency(bootstrap, f"lat-{name}", self.args.latency_sends,
                                        self.args.latency_value_size, self.args.timeout,
                                        warmup=50, acks=acks)
            self.record(f"{name}_p50_ms", lat.p50, " ms")
            self.record(f"{name}_p99_ms", lat.p99, " ms")

    # -- chaos -------------------------------------------------------------------------------
    def leaders(self, topic: str) -> dict[int, int]:
        md = self.metadata([topic])
        if md is None or topic not in md.partitions:
            raise BenchError(f"{self.cluster.name}: no Metadata for {topic}")
        return {p: v.leader for p, v in md.partitions[topic].items()}

    def back_in_isr(self, topic: str, broker: int) -> bool:
        md = self.metadata([topic], avoid=broker)
        if md is None or topic not in md.partitions:
            return False
        return all(broker in v.isr for v in md.partitions[topic].values() if broker in v.replicas)

    def chaos(self) -> None:
        topic = "chaos"
        self.create(topic, CHAOS_PARTITIONS, 3, {"min.insync.replicas": MIN_INSYNC})
        producer = SequenceProducer(self.cluster.bootstrap_servers(), topic, self.args.pace_ms)
        producer.start()
        kills: list[float] = []
        try:
            # The first acknowledgement waits for a producer id (InitProducerId), then the
            # producer runs unharmed for settle_s before the first kill.
            self.wait_until(lambda: producer.acked() > 0, self.args.timeout,
                            "acknowledging the chaos producer's first message")
            time.sleep(self.args.settle_s)
            chaos_from = time.perf_counter()
            for k in range(self.args.kills):
                led = self.leaders(topic)
                counts = {b: sum(1 for v in led.values() if v == b) for b in BROKER_IDS}
                victim = max(BROKER_IDS, key=lambda b: (counts[b], -b))
                gone = ZnodeGone(self.zk, f"{self.cluster.chroot}/brokers/ids/{victim}")
                t_kill = time.perf_counter()
                kills.append(t_kill)
                self.cluster.kill(victim)
                self.client.drop(victim)
                log(f"  {self.cluster.name}: kill {k + 1}: broker {victim} (leading {counts[victim]} "
                    f"of {CHAOS_PARTITIONS})")
                # A restarted broker cannot register while its dead session's ephemeral
                # /brokers/ids/<id> still exists (Kafka exits on it): restart after the expiry.
                expired = gone.wait(self.args.timeout)
                if expired is None:
                    raise BenchError(f"{self.cluster.name}: session of broker {victim} not expired "
                                     f"after {self.args.timeout:.0f} s")
                t_restart = time.perf_counter()
                self.cluster.restart(victim, self.args.ready_timeout)
                t_ready = time.perf_counter()
                t_isr = self.wait_until(lambda: self.back_in_isr(topic, victim), self.args.timeout,
                                        f"showing broker {victim} back in every ISR")
                self.record("chaos_session_expired_s", expired - t_kill, " s")
                self.record("chaos_restart_ready_s", t_ready - t_restart, " s")
                self.record("chaos_isr_rejoin_s", t_isr - t_restart, " s")
                self.record("chaos_kill_to_isr_s", t_isr - t_kill, " s")
                time.sleep(self.args.settle_s)
            chaos_to = time.perf_counter()
        finally:
            t_stop = time.perf_counter()
            producer.stop(self.args.timeout)
        log(f"  {self.cluster.name}: producer stopped and flushed in {time.perf_counter() - t_stop:.1f} s")
        self.wait_until(self.in_sync, self.args.timeout, "back in sync after the kills")
        check = verify(self.cluster.bootstrap_servers(), topic, producer, self.args.timeout)
        # The window runs to the last acknowledgement: a stall that outlasts the produce loop
        # ends only when the flush has it acknowledged.
        end = max([chaos_to] + [a.at for acks in producer.acks.values() for a in acks])
        self.record("chaos_ack_gap_s", producer.longest_gap(chaos_from, end), " s")
        self.record("chaos_partition_ack_gap_s",
                    max(producer.longest_gap(chaos_from, end, p) for p in range(CHAOS_PARTITIONS)),
                    " s")
        for t_kill in kills:
            at = producer.recovered(t_kill)
            if at is None:
                raise BenchError(f"{self.cluster.name}: a partition acknowledged nothing sent after "
                                 "a kill")
            self.record("chaos_kill_to_acks_s", at - t_kill, " s")
        for key, n in check.items():
            self.results.add(f"chaos_{key}", self.cluster.name, n)
        log(f"  {self.cluster.name}: check {check}")


@dataclass
class Ack:
    seq: int
    offset: Optional[int]   # None: the produce answer gave no offset (librdkafka's OFFSET_INVALID)
    at: float


class SequenceProducer:
    """An idempotent producer (acks=all, librdkafka's retries) on a thread of its own, one message
    every pace_ms, message i (value b"<i>") to partition i mod 6. Every delivery report is kept."""

    def __init__(self, bootstrap: str, topic: str, pace_ms: float) -> None:
        self.topic = topic
        self.pace_s = pace_ms / 1000
        self.producer = ck.Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            # Nothing may fail while a leader moves: retry until the cluster has coped.
            "message.timeout.ms": 300000,
            "request.timeout.ms": 30000,
        })
        self.acks: dict[int, list[Ack]] = {p: [] for p in range(CHAOS_PARTITIONS)}
        self.failed: list[tuple[int, str]] = []
        self.sent = 0
        self.sent_at: list[float] = []   # perf_counter of each produce(), by sequence number
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)
        self.error: Optional[BaseException] = None

    def _on_delivery(self, err: Optional[ck.KafkaError], msg: Any) -> None:
        seq = int(msg.value())
        if err is not None:
            self.failed.append((seq, str(err)))
        else:
            self.acks[msg.partition()].append(Ack(seq, msg.offset(), time.perf_counter()))

    def _run(self) -> None:
        try:
            next_at = time.perf_counter()
            while not self._stop.is_set():
                seq = self.sent
                self.sent_at.append(time.perf_counter())
                self.producer.produce(self.topic, str(seq).encode(), partition=seq % CHAOS_PARTITIONS,
                                      on_delivery=self._on_delivery)
                self.sent += 1
                next_at += self.pace_s
                while True:
                    left = next_at - time.perf_counter()
                    self.producer.poll(max(0.0, min(left, 0.05)))
                    if left <= 0:
                        break
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def start(self) -> None:
        self._thread.start()

    def acked(self) -> int:
        return sum(len(a) for a in self.acks.values())

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._thread.join(timeout)
        left = self.producer.flush(timeout)
        if self.error is not None:
            raise BenchError(f"chaos producer: {self.error}")
        if left:
            raise BenchError(f"chaos producer: {left} messages not delivered in {timeout:.0f} s")

    def recovered(self, t_kill: float) -> Optional[float]:
        """When every partition had acknowledged a message produced after t_kill (None: one
        never did)."""
        firsts = []
        for acks in self.acks.values():
            after = [a.at for a in acks if self.sent_at[a.seq] > t_kill]
            if not after:
                return None
            firsts.append(min(after))
        return max(firsts)

    def longest_gap(self, t0: float, t1: float, partition: Optional[int] = None) -> float:
        """The longest time without an acknowledgement between t0 and t1 (the chaos window), for
        one partition or for any."""
        parts = [partition] if partition is not None else list(self.acks)
        times = sorted([t0, t1] + [a.at for p in parts for a in self.acks[p] if t0 <= a.at <= t1])
        return max(b - a for a, b in zip(times, times[1:]))


def verify(bootstrap: str, topic: str, producer: SequenceProducer, timeout: float) -> dict[str, int]:
    """Read every partition up to its high watermark and hold it against the acknowledgements:
    each acknowledged sequence number at its acknowledged offset, none twice, in order."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-replication-check",
                            "enable.auto.commit": False, "enable.partition.eof": True})
    logs: dict[int, dict[int, int]] = {p: {} for p in range(CHAOS_PARTITIONS)}
    try:
        ends = {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
                for p in range(CHAOS_PARTITIONS)}
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(CHAOS_PARTITIONS)])
        deadline = time.monotonic() + timeout
        while any(len(logs[p]) < ends[p] for p in logs):
            if time.monotonic() > deadline:
                raise BenchError(f"check: read {[len(v) for v in logs.values()]} of {ends} in "
                                 f"{timeout:.0f} s")
            for m in consumer.consume(1000, 0.2):
                if m.error():
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        continue
                    raise BenchError(f"check: {m.error()}")
                logs[m.partition()][m.offset()] = int(m.value())
    finally:
        consumer.close()
    seen: dict[int, int] = {}
    out_of_order = 0
    for p, log_ in logs.items():
        prev = -1
        for _off, seq in sorted(log_.items()):
            seen[seq] = seen.get(seq, 0) + 1
            if seq <= prev:
                out_of_order += 1
            prev = seq
    acked = [(p, a) for p, v in producer.acks.items() for a in v]
    in_partition = {(p, seq) for p, log_ in logs.items() for seq in log_.values()}
    missing = sum(1 for p, a in acked if (p, a.seq) not in in_partition)
    no_offset = sum(1 for _p, a in acked if a.offset is None)
    wrong = [(p, a) for p, a in acked if a.offset is not None and logs[p].get(a.offset) != a.seq]
    if wrong:
        where = {(p, seq): off for p, log_ in logs.items() for off, seq in log_.items()}
        log("  check: acknowledged messages not at their acknowledged offset (partition, seq, "
            "acknowledged offset -> offset in the log): " + ", ".join(
                f"({p}, {a.seq}, {a.offset} -> {where.get((p, a.seq))})" for p, a in wrong[:10]))
    if no_offset:
        log(f"  check: {no_offset} acknowledgement(s) without an offset, sequence numbers "
            f"{[a.seq for _p, a in acked if a.offset is None][:10]}")
    return {
        "acknowledged": len(acked),
        "failed": len(producer.failed),
        "in_log": sum(len(v) for v in logs.values()),
        "lost": missing,
        "misplaced": len(wrong),
        "no_offset": no_offset,
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "out_of_order": out_of_order,
    }


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    label: str
    metric: str
    fmt: str = "{:,.1f}"
    ratio: bool = True
    total: bool = False   # a count: summed over the runs, not a median


ROWS = [
    Row("produce throughput, RF 1, acks=1 (MB/s, 1 KiB values)", "rf1_mb_s"),
    Row("produce throughput, RF 3, acks=all (MB/s, 1 KiB values)", "rf3_mb_s"),
    Row("sync produce latency p50, RF 1, acks=1 (ms)", "rf1_p50_ms", "{:,.2f}"),
    Row("sync produce latency p99, RF 1, acks=1 (ms)", "rf1_p99_ms", "{:,.2f}"),
    Row("sync produce latency p50, RF 3, acks=all (ms)", "rf3_p50_ms", "{:,.2f}"),
    Row("sync produce latency p99, RF 3, acks=all (ms)", "rf3_p99_ms", "{:,.2f}"),
    Row("chaos: longest gap between acknowledgements, any partition (s)", "chaos_ack_gap_s", "{:,.2f}"),
    Row("chaos: longest gap between acknowledgements, worst partition (s)",
        "chaos_partition_ack_gap_s", "{:,.2f}"),
    Row("chaos: SIGKILL -> every partition acknowledges a message sent after it (s)",
        "chaos_kill_to_acks_s", "{:,.2f}"),
    Row("chaos: SIGKILL -> session expired (s)", "chaos_session_expired_s", "{:,.2f}"),
    Row("chaos: restart -> broker serving (s)", "chaos_restart_ready_s", "{:,.2f}"),
    Row("chaos: restart -> back in the ISR of every partition (s)", "chaos_isr_rejoin_s", "{:,.2f}"),
    Row("chaos: SIGKILL -> back in the ISR of every partition (s)", "chaos_kill_to_isr_s", "{:,.2f}"),
    Row("chaos: messages acknowledged (all runs)", "chaos_acknowledged", "{:,.0f}", False, True),
    Row("chaos: deliveries failed (all runs)", "chaos_failed", "{:,.0f}", False, True),
    Row("chaos: acknowledged but lost (all runs)", "chaos_lost", "{:,.0f}", False, True),
    Row("chaos: acknowledged at another offset (all runs)", "chaos_misplaced", "{:,.0f}", False, True),
    # librdkafka acknowledges a message implicitly, with no offset, when a later batch of the
    # partition succeeds after the message's own request failed (e.g. REQUEST_TIMED_OUT).
    Row("chaos: acknowledged without an offset (all runs; present once, in order)", "chaos_no_offset",
        "{:,.0f}", False, True),
    Row("chaos: duplicated (all runs)", "chaos_duplicated", "{:,.0f}", False, True),
    Row("chaos: out of order in a partition (all runs)", "chaos_out_of_order", "{:,.0f}", False, True),
]


def markdown_table(results: Results, targets: list[str]) -> str:
    head = ["measurement"] + [LABELS[t] for t in targets]
    both = KAFKALITE in targets and KAFKA in targets
    if both:
        head.append("kafkalite/Kafka")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def value(row: Row, t: str) -> Optional[float]:
        v = results.values.get(row.metric, {}).get(t)
        if not v:
            return None
        return sum(v) if row.total else statistics.median(v)

    for row in ROWS:
        if not any(value(row, t) is not None for t in targets):
            continue
        cells = [row.label]
        for t in targets:
            v = value(row, t)
            n = len(results.values.get(row.metric, {}).get(t, []))
            cells.append("n/a" if v is None else row.fmt.format(v) + ("" if row.total else f" ({n})"))
        if both:
            a, b = value(row, KAFKALITE), value(row, KAFKA)
            cells.append(f"{a / b:.2f}" if row.ratio and a is not None and b else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def zero_loss(results: Results, targets: list[str]) -> dict[str, Optional[bool]]:
    out: dict[str, Optional[bool]] = {}
    for t in targets:
        runs = results.values.get("chaos_acknowledged", {}).get(t)
        if not runs:
            out[t] = None
            continue
        bad = sum(sum(results.values.get(f"chaos_{k}", {}).get(t, []))
                  for k in ("lost", "misplaced", "duplicated", "out_of_order"))
        out[t] = bad == 0
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (medians over them)")
    ap.add_argument("--only", default=",".join(PHASES), help="comma list of: " + ",".join(PHASES))
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma list of: kafkalite,kafka")
    ap.add_argument("--messages", type=int, default=100000,
                    help="1 KiB values per throughput measurement (default 100000; a tenth more "
                         "unmeasured before)")
    ap.add_argument("--value-size", type=int, default=1024, help="throughput value size (bytes)")
    ap.add_argument("--latency-sends", type=int, default=1000,
                    help="synchronous sends per latency measurement (after 50 unmeasured)")
    ap.add_argument("--latency-value-size", type=int, default=100,
                    help="value size of the synchronous sends (bytes, default 100)")
    ap.add_argument("--kills", type=int, default=2, help="SIGKILL + restart cycles per chaos run")
    ap.add_argument("--pace-ms", type=float, default=2.0,
                    help="one chaos message every PACE ms (default 2: ~500 msgs/s)")
    ap.add_argument("--settle-s", type=float, default=2.0,
                    help="producing before the first kill and after each rejoin (s)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of every broker (default 6000)")
    ap.add_argument("--poll-ms", type=float, default=50.0, help="Metadata poll interval (ms)")
    ap.add_argument("--timeout", type=float, default=90.0, help="limit per wait (s)")
    ap.add_argument("--ready-timeout", type=float, default=90.0, help="limit per broker start (s)")
    ap.add_argument("--kafka-jvm-flags", default=" ".join(KAFKA_JVM_FLAGS),
                    help="JVM flags of each Kafka broker (default: Kafka's own start scripts')")
    ap.add_argument("--json", metavar="OUT", help="also write every run and the medians as JSON")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="run nothing: one table from the runs of several --json files")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
                         + " (explicit options win)")
    args = ap.parse_args(argv)
    if args.quick:
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    args.only = [m.strip() for m in args.only.split(",") if m.strip()]
    args.kafka_jvm_flags = tuple(shlex.split(args.kafka_jvm_flags))
    if not args.targets or any(t not in TARGETS for t in args.targets):
        ap.error("--targets: kafkalite and/or kafka")
    if not args.only or any(m not in PHASES for m in args.only):
        ap.error("--only: " + ",".join(PHASES))
    if args.repeat < 1 or args.kills < 1 or args.messages < 1 or args.latency_sends < 1:
        ap.error("--repeat, --kills, --messages, --latency-sends: at least 1")
    return args


def settings_line(args: argparse.Namespace) -> str:
    o = replication_overrides(args.session_timeout_ms)
    keys = ("zookeeper.session.timeout.ms", "replica.lag.time.max.ms", "unclean.leader.election.enable",
            "num.replica.fetchers", "auto.leader.rebalance.enable", "controlled.shutdown.enable")
    return ("settings on every broker of both clusters: " + ", ".join(f"{k}={o[k]}" for k in keys)
            + f"; topics: min.insync.replicas={MIN_INSYNC} where RF 3")


def run_one(name: str, phase: str, rnd: int, zk_server: ZooKeeperServer, zk: KazooClient,
            results: Results, args: argparse.Namespace) -> None:
    chroot = f"/bench-repl-{name}-{phase}-r{rnd}-{uuid.uuid4().hex[:6]}"
    overrides = replication_overrides(args.session_timeout_ms)
    cluster: ClusterUnderTest
    if name == KAFKALITE:
        cluster = KafkaliteCluster(zk_server.connect_string, chroot, overrides)
    else:
        cluster = KafkaCluster(zk_server.connect_string, chroot, overrides, args.kafka_jvm_flags)
    run = Run(cluster, zk, results, args)
    log(f"round {rnd + 1}, {phase}: {LABELS[name]} on {zk_server.connect_string}{chroot}")
    t0 = time.monotonic()
    try:
        run.start()
        if phase == "throughput":
            run.throughput(rnd)
        else:
            run.chaos()
    except Exception as e:  # noqa: BLE001 - reported in the failure list; the run goes on
        results.errors.append(f"{name} {phase} round {rnd + 1}: {type(e).__name__}: {e}"[:600])
        log(f"  FAILED: {e}")
    finally:
        run.client.close()
        cluster.close()
        log(f"  {name} {phase}: {time.monotonic() - t0:.0f} s")


def report(results: Results, targets: list[str], env: dict[str, Any], args: argparse.Namespace,
           header: str) -> None:
    print(header)
    print(settings_line(args))
    if KAFKA in targets:
        print(f"Apache Kafka: {env.get('java', '')}, JVM flags {' '.join(args.kafka_jvm_flags)}")
    print("(n) after a median: the number of values it is the median of")
    print()
    print(markdown_table(results, targets))
    verdict = {True: "zero loss", False: "LOSS OR DUPLICATES", None: "not measured"}
    if "chaos_acknowledged" in results.values:
        print()
        print("zero-loss check (every acknowledged message once, at its offset, in order): "
              + "; ".join(f"{LABELS[t]}: {verdict[v]}" for t, v in zero_loss(results, targets).items()))
    if results.errors:
        print("\nfailures:")
        for e in results.errors:
            print(f"- {' | '.join(x.strip() for x in e.splitlines() if x.strip())}")


def combine(paths: list[str], args: argparse.Namespace) -> int:
    results = Results()
    envs = []
    targets: list[str] = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        envs.append(data["environment"])
        for metric, per_target in data["runs"].items():
            for t, vs in per_target.items():
                results.values.setdefault(metric, {}).setdefault(t, []).extend(vs)
                if t not in targets:
                    targets.append(t)
        results.errors.extend(data["errors"])
    targets = [t for t in TARGETS if t in targets]
    commits = sorted({e["git_commit"] + (" (kafkalite/ modified)" if e["kafkalite_tree_modified"] else "")
                      for e in envs})
    header = (f"combined from {len(paths)} runs, {envs[0]['date']} to {envs[-1]['date']}, commit(s) "
              f"{', '.join(commits)}\ncommands:\n" + "\n".join(f"  {e['command']}" for e in envs))
    report(results, targets, envs[0], args, header)
    return 1 if results.errors else 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.combine:
        return combine(args.combine, args)
    env = environment("bench_replication.py", argv)
    results = Results()
    t0 = time.monotonic()
    with ZooKeeperServer() as zk_server:
        zk = KazooClient(hosts=zk_server.connect_string)
        zk.start(30)
        try:
            for rnd in range(args.repeat):
                for i, phase in enumerate(p for p in PHASES if p in args.only):
                    order = list(args.targets) if (rnd + i) % 2 == 0 else args.targets[::-1]
                    for name in order:
                        run_one(name, phase, rnd, zk_server, zk, results, args)
        finally:
            zk.stop()
            zk.close()
    env["wall_seconds"] = round(time.monotonic() - t0, 1)
    env["loadavg_at_end"] = list(os.getloadavg())
    modified = " (kafkalite/ modified)" if env["kafkalite_tree_modified"] else ""
    header = (f"\nreplication, 3-broker clusters: {' vs '.join(LABELS[t] for t in args.targets)} — "
              f"{env['date']}, commit {env['git_commit']}{modified}, {env['cpus']} CPUs, load "
              f"average {env['loadavg_at_start'][0]:.2f} at start, {env['loadavg_at_end'][0]:.2f} "
              f"at end, {env['wall_seconds']:.0f} s\ncommand: {env['command']}\n"
              f"{args.repeat} round(s), a fresh cluster per target and phase, target order "
              f"alternating; throughput: {args.messages} x {args.value_size} B, latency: "
              f"{args.latency_sends} sync sends of {args.latency_value_size} B; chaos: "
              f"{args.kills} kill(s) per run, a message every {args.pace_ms:g} ms")
    report(results, args.targets, env, args, header)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env,
            "settings": replication_overrides(args.session_timeout_ms),
            "runs": results.values,
            "medians": {m: {t: results.median(m, t) for t in v} for m, v in results.values.items()},
            "errors": results.errors,
            "table_markdown": markdown_table(results, args.targets),
        }, indent=2) + "\n")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
