#!/usr/bin/env python3
"""Cluster benchmark (issue 11): a 3-broker kafkalite cluster and a 3-broker Apache Kafka 3.9.1
cluster in ZooKeeper mode, in the same run, on the same ZooKeeper (a chroot each), with the same
zookeeper.session.timeout.ms.

Measurements, each on a fresh cluster (kafkalite.testing.Cluster / three KafkaOracle brokers)
started for it and killed after it (see docs/benchmarks.md, "Cluster mode"):
  failover     -- SIGKILL the controller; until a live broker's Metadata names a new, live
                  controller AND that broker answers a CreateTopics of a fresh topic with no
                  error (its timeout_ms lets it wait for the topic's metadata, as a client's
                  would). On an empty cluster, and with an RF=3 topic of the largest size.
  move-N       -- an RF=3 topic of N partitions (default 100 and 1,000), leaders spread by the
                  controller's own assignment; SIGKILL the broker that is not the controller and
                  leads more; until the Metadata of every live broker shows a live leader for
                  every partition.
  shutdown-N   -- the same topic of the largest size; SIGTERM that broker; until every live
                  broker's Metadata shows no partition led by it, and until its process exits.
Each SIGKILL figure is split where ZooKeeper says the death was noticed: the dead broker's
ephemeral /brokers/ids/<id> disappearing is its session's expiry (ZooKeeper's part, set by
zookeeper.session.timeout.ms); what follows is the controller's and brokers' own work.

The poller is a blocking Kafka-protocol client (kafka-python's codec) asking every live broker
every --poll-ms; ZooKeeper is watched through kazoo (watches, no polling).

Usage:
  python scripts/bench_cluster.py [--repeat 3] [--partitions 100,1000] [--quick]
                                  [--targets kafkalite,kafka] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_targets import (  # noqa: E402  -- scripts/cluster_targets.py, shared with bench_replication.py
    BROKER_IDS, KAFKA, KAFKA_JVM_FLAGS, KAFKALITE, LABELS, TARGETS, BenchError, Client,
    ClusterUnderTest, KafkaCluster, KafkaliteCluster, MetadataView, Results, ZnodeGone,
    common_overrides, environment, log)

from kazoo.client import KazooClient  # noqa: E402

from tests.support.zookeeper import ZooKeeperServer  # noqa: E402

QUICK = {"repeat": 1, "partitions": "100,300"}


class Bench:
    """Measurements on one fresh cluster: start it, create the topic a measurement needs, then
    kill or stop a broker and poll until the cluster has coped."""

    def __init__(self, cluster: ClusterUnderTest, zk: KazooClient, results: Results,
                 args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.zk = zk
        self.results = results
        self.args = args
        self.client = Client(cluster.address)
        self.poll_s = args.poll_ms / 1000
        self.counts: dict[str, int] = {}   # topic -> partitions, every topic created here

    # -- helpers ---------------------------------------------------------------------------
    def record(self, metric: str, value_s: float) -> None:
        self.results.add(metric, self.cluster.name, round(value_s * 1000, 1))
        log(f"  {self.cluster.name} {metric}: {value_s * 1000:.0f} ms")

    def try_metadata(self, broker_id: int, topics: Optional[list[str]]) -> Optional[MetadataView]:
        try:
            return self.client.metadata(broker_id, topics)
        except (OSError, ConnectionError, struct.error):
            return None

    def wait_until(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise BenchError(f"{self.cluster.name}: not {what} after {timeout:.0f} s")
            time.sleep(self.poll_s)

    def controller(self) -> int:
        """The controller every running broker names (waiting until they agree)."""
        found: list[int] = []

        def agreed() -> bool:
            ids = set()
            for b in self.cluster.running():
                md = self.try_metadata(b, [])
                if md is None:
                    return False
                ids.add(md.controller_id)
            if len(ids) == 1 and (c := ids.pop()) in self.cluster.running():
                found[:] = [c]
                return True
            return False

        self.wait_until(agreed, 60, "agreed on a live controller")
        return found[0]

    def healthy(self) -> bool:
        """Every running broker's Metadata lists exactly the running brokers, and every partition
        of every topic created here with a live leader and all its replicas in the ISR: the
        state each measurement starts from."""
        running = set(self.cluster.running())
        topics = list(self.counts)
        for b in running:
            md = self.try_metadata(b, topics)
            if md is None or md.brokers != running:
                return False
            for t in topics:
                parts = md.partitions.get(t)
                if parts is None or len(parts) != self.counts[t]:
                    return False
                if any(v.leader not in running or set(v.isr) != set(v.replicas)
                       for v in parts.values()):
                    return False
        return True

    def start(self) -> None:
        """All three brokers spawned at once, until each one's Metadata lists all three."""
        t0 = time.perf_counter()
        self.cluster.start(self.args.ready_timeout)
        self.wait_until(self.healthy, 60, "listing all 3 brokers")
        self.record("cluster_start_ms", time.perf_counter() - t0)

    def create(self, topic: str, partitions: int) -> None:
        """An RF=3 topic, the controller's own replica assignment (leaders spread), until every
        broker shows every partition led and in sync."""
        controller = self.controller()
        t0 = time.perf_counter()
        code = self.client.create_topic(controller, topic, partitions, 3,
                                        timeout_ms=int(self.args.timeout * 1000))
        if code != 0:
            raise BenchError(f"{self.cluster.name}: CreateTopics {topic} ({partitions} x RF 3): "
                             f"error code {code}")
        self.counts[topic] = partitions
        self.wait_until(self.healthy, self.args.timeout,
                        f"showing all {partitions} partitions of {topic} led and in sync")
        self.record(f"create_{partitions}_ms", time.perf_counter() - t0)

    def leaders_by_broker(self) -> dict[int, int]:
        md = self.client.metadata(self.controller(), list(self.counts))
        out = {b: 0 for b in BROKER_IDS}
        for _t, _p, leader in md.leaders():
            out[leader] = out.get(leader, 0) + 1
        return out

    def non_controller_victim(self) -> tuple[int, int]:
        """The broker that is not the controller and leads the most partitions, and that count
        (a third of them, give or take one, with the controller's round-robin assignment)."""
        controller = self.controller()
        led = self.leaders_by_broker()
        victim = max((b for b in BROKER_IDS if b != controller), key=lambda b: (led[b], -b))
        return victim, led[victim]

    def all_led_by_live(self, dead: int, first: list[float]) -> bool:
        """Every live broker's Metadata shows, for every partition, a leader that is a live
        broker; `first` gets the time the first of them showed it."""
        live = [b for b in self.cluster.running() if b != dead]
        topics = list(self.counts)
        done = 0
        for b in live:
            md = self.try_metadata(b, topics)
            if md is None:
                continue
            if all(len(md.partitions.get(t, {})) == self.counts[t] for t in topics) and \
                    all(leader in live for _t, _p, leader in md.leaders()):
                done += 1
                if not first:
                    first.append(time.perf_counter())
        return done == len(live)

    # -- the measurements ------------------------------------------------------------------
    def failover(self, prefix: str) -> None:
        """SIGKILL the controller; until a live broker's Metadata names a live controller and
        that controller answers a CreateTopics of a fresh topic with no error."""
        old = self.controller()
        live = [b for b in self.cluster.running() if b != old]
        led = self.leaders_by_broker()[old] if self.counts else 0
        session_gone = ZnodeGone(self.zk, f"{self.cluster.chroot}/brokers/ids/{old}")
        named_at: Optional[float] = None
        attempts: list[int] = []
        first_moved: list[float] = []
        moved_at: Optional[float] = None
        deadline = time.monotonic() + self.args.timeout
        t0 = time.perf_counter()
        self.cluster.kill(old)
        self.client.drop(old)
        while True:
            if time.monotonic() > deadline:
                raise BenchError(f"{self.cluster.name}: no new controller serving CreateTopics "
                                 f"{self.args.timeout:.0f} s after killing controller {old} "
                                 f"(CreateTopics answers: {attempts[-5:]})")
            if self.counts and moved_at is None and self.all_led_by_live(old, first_moved):
                moved_at = time.perf_counter()
            named = set()
            for b in live:
                md = self.try_metadata(b, [])
                if md is not None and md.controller_id in live:
                    named.add(md.controller_id)
            if len(named) == 1:
                new = named.pop()
                if named_at is None:
                    named_at = time.perf_counter()
                # The probe topic lives on the new controller alone (one replica): a fresh name
                # each time, as an attempt that timed out may have created its topic.
                name = f"probe-{uuid.uuid4().hex[:8]}"
                try:
                    code = self.client.create_topic(new, name, 1, 1, timeout_ms=30000,
                                                    assignment={0: [new]})
                except (OSError, ConnectionError, struct.error):
                    code = -1
                attempts.append(code)
                if code == 0:
                    done = time.perf_counter()
                    break
            time.sleep(self.poll_s)
        if self.counts and moved_at is None:
            self.wait_until(lambda: self.all_led_by_live(old, first_moved), self.args.timeout,
                            "showing live leaders after the controller died")
            moved_at = time.perf_counter()
        self.record(f"{prefix}_ms", done - t0)
        assert named_at is not None
        self.record(f"{prefix}_metadata_names_controller_ms", named_at - t0)
        if (at := session_gone.wait(5)) is not None:
            self.record(f"{prefix}_session_expired_ms", at - t0)
            self.record(f"{prefix}_after_expiry_ms", done - at)
        if moved_at is not None:
            self.record(f"{prefix}_leaders_moved_ms", moved_at - t0)
            self.results.add(f"{prefix}_partitions_moved", self.cluster.name, led)
        log(f"  {self.cluster.name}: controller {old} killed (leading {led}); CreateTopics "
            f"answers {attempts}")

    def move(self, n: int) -> None:
        """SIGKILL a broker that is not the controller; until every live broker's Metadata shows
        a live leader for every partition."""
        victim, led = self.non_controller_victim()
        session_gone = ZnodeGone(self.zk, f"{self.cluster.chroot}/brokers/ids/{victim}")
        first: list[float] = []
        t0 = time.perf_counter()
        self.cluster.kill(victim)
        self.client.drop(victim)
        self.wait_until(lambda: self.all_led_by_live(victim, first), self.args.timeout,
                        f"showing live leaders after broker {victim} died")
        done = time.perf_counter()
        self.record(f"move_{n}_ms", done - t0)
        self.record(f"move_{n}_first_broker_ms", first[0] - t0)
        self.results.add(f"move_{n}_partitions_moved", self.cluster.name, led)
        if (at := session_gone.wait(5)) is not None:
            self.record(f"move_{n}_session_expired_ms", at - t0)
            self.record(f"move_{n}_after_expiry_ms", done - at)
        log(f"  {self.cluster.name}: broker {victim} killed, leading {led}")

    def controlled_shutdown(self, n: int) -> None:
        """SIGTERM a broker that is not the controller; until it exits, and until every live
        broker's Metadata shows no partition led by it."""
        victim, led = self.non_controller_victim()
        live = [b for b in self.cluster.running() if b != victim]
        exited: list[tuple[float, int]] = []
        failed: list[BaseException] = []

        def stop() -> None:
            try:
                code = self.cluster.stop(victim, self.args.timeout)
                exited.append((time.perf_counter(), code))
            except BaseException as e:  # noqa: BLE001 - reported below
                failed.append(e)

        waiter = threading.Thread(target=stop, daemon=True)
        t0 = time.perf_counter()
        waiter.start()

        def none_led_everywhere() -> bool:
            for b in live:
                md = self.try_metadata(b, list(self.counts))
                if md is None or len(md.partitions) != len(self.counts) or \
                        any(leader == victim for _t, _p, leader in md.leaders()):
                    return False
            return True

        self.wait_until(none_led_everywhere, self.args.timeout,
                        f"showing no partition led by {victim} after its SIGTERM")
        moved_at = time.perf_counter()
        waiter.join(self.args.timeout + 5)
        if not exited:
            raise BenchError(f"{self.cluster.name}: broker {victim} did not exit on SIGTERM: "
                             f"{failed[0] if failed else 'still running'}")
        exit_at, code = exited[0]
        self.results.exit_codes.setdefault(self.cluster.name, []).append(code)
        self.record(f"shutdown_{n}_leaders_moved_ms", moved_at - t0)
        self.record(f"shutdown_{n}_exit_ms", exit_at - t0)
        self.results.add(f"shutdown_{n}_partitions_led", self.cluster.name, led)
        log(f"  {self.cluster.name}: broker {victim} SIGTERM, leading {led}, exit code {code}")

    def run(self, measurement: str) -> None:
        self.start()
        kind, _, size = measurement.partition("-")
        if kind == "failover":
            if size:
                self.create(f"topic-{size}", int(size))
            self.failover(f"failover_{size}" if size else "failover")
        elif kind == "move":
            self.create(f"topic-{size}", int(size))
            self.move(int(size))
        elif kind == "shutdown":
            self.create(f"topic-{size}", int(size))
            self.controlled_shutdown(int(size))
        else:
            raise ValueError(measurement)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def measurements(args: argparse.Namespace) -> list[str]:
    """The measurements of one round, each on a fresh cluster: failover on an empty cluster and
    with the largest topic, leader moves for every size, controlled shutdown with the largest."""
    big = args.partitions[-1]
    out: list[str] = []
    if "failover" in args.only:
        out += ["failover", f"failover-{big}"]
    if "move" in args.only:
        out += [f"move-{n}" for n in args.partitions]
    if "shutdown" in args.only:
        out.append(f"shutdown-{big}")
    return out


@dataclass(frozen=True)
class Row:
    label: str
    metric: str
    ratio: bool = True


def rows(partitions: list[int]) -> list[Row]:
    big = partitions[-1]
    out = [
        Row("controller failover, no topics: SIGKILL -> new controller answers CreateTopics",
            "failover_ms"),
        Row("  of which: SIGKILL -> its session expired (/brokers/ids/<id> deleted)",
            "failover_session_expired_ms"),
        Row("  of which: session expired -> CreateTopics answered", "failover_after_expiry_ms"),
        Row("  SIGKILL -> live brokers' Metadata name the new controller",
            "failover_metadata_names_controller_ms"),
        Row(f"controller failover, {big} partitions x RF 3: SIGKILL -> new controller answers "
            "CreateTopics", f"failover_{big}_ms"),
        Row("  of which: SIGKILL -> its session expired", f"failover_{big}_session_expired_ms"),
        Row("  of which: session expired -> CreateTopics answered",
            f"failover_{big}_after_expiry_ms"),
        Row("  SIGKILL -> every live broker's Metadata shows live leaders",
            f"failover_{big}_leaders_moved_ms"),
        Row("  partitions the dead controller led (count)", f"failover_{big}_partitions_moved",
            False),
    ]
    for n in partitions:
        out += [
            Row(f"broker death, {n} partitions x RF 3: SIGKILL -> every live broker's Metadata "
                "shows live leaders", f"move_{n}_ms"),
            Row("  of which: SIGKILL -> its session expired", f"move_{n}_session_expired_ms"),
            Row("  of which: session expired -> moved everywhere", f"move_{n}_after_expiry_ms"),
            Row("  SIGKILL -> the first live broker's Metadata shows it",
                f"move_{n}_first_broker_ms"),
            Row("  partitions the dead broker led (count)", f"move_{n}_partitions_moved", False),
        ]
    out += [
        Row(f"controlled shutdown, {big} partitions x RF 3: SIGTERM -> no partition led by it in "
            "live brokers' Metadata", f"shutdown_{big}_leaders_moved_ms"),
        Row("  SIGTERM -> process exit", f"shutdown_{big}_exit_ms"),
        Row("  partitions it led (count)", f"shutdown_{big}_partitions_led", False),
    ]
    for n in partitions:
        out.append(Row(f"CreateTopics {n} partitions x RF 3 -> every broker shows all led and in "
                       "sync", f"create_{n}_ms"))
    out.append(Row("cluster start: 3 brokers spawned at once -> each one's Metadata lists all 3",
                   "cluster_start_ms"))
    return out


def markdown_table(results: Results, targets: list[str], partitions: list[int]) -> str:
    head = ["measurement (ms unless a count)"] + [LABELS[t] for t in targets]
    both = KAFKALITE in targets and KAFKA in targets
    if both:
        head.append("kafkalite/Kafka")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows(partitions):
        if not any(results.median(row.metric, t) is not None for t in targets):
            continue
        cells = [row.label]
        for t in targets:
            m = results.median(row.metric, t)
            cells.append("n/a" if m is None else f"{m:,.0f}")
        if both:
            a, b = results.median(row.metric, KAFKALITE), results.median(row.metric, KAFKA)
            cells.append(f"{a / b:.2f}" if row.ratio and a is not None and b else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


MEASUREMENT_KINDS = ("failover", "move", "shutdown")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds; every measurement on a fresh cluster each round; medians")
    ap.add_argument("--partitions", default="100,1000",
                    help="partition counts of the broker-death topics (RF 3), ascending; the "
                         "last is also that of the failover and controlled-shutdown topic")
    ap.add_argument("--only", default=",".join(MEASUREMENT_KINDS),
                    help="comma list of: " + ",".join(MEASUREMENT_KINDS))
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma list of: kafkalite,kafka")
    ap.add_argument("--session-timeout-ms", type=int, default=6000,
                    help="zookeeper.session.timeout.ms of every broker (default 6000)")
    ap.add_argument("--poll-ms", type=float, default=50.0,
                    help="interval of the Metadata polls (default 50 ms)")
    ap.add_argument("--timeout", type=float, default=120.0, help="limit per measurement (s)")
    ap.add_argument("--ready-timeout", type=float, default=90.0, help="limit per broker start (s)")
    ap.add_argument("--kafka-jvm-flags", default=" ".join(KAFKA_JVM_FLAGS),
                    help="JVM flags of each Kafka broker (default: Kafka's own start scripts')")
    ap.add_argument("--json", metavar="OUT", help="also write every run and the medians as JSON")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: " + " ".join(f"--{k} {v}" for k, v in QUICK.items())
                         + " (explicit options win)")
    args = ap.parse_args(argv)
    if args.quick:
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    args.partitions = [int(x) for x in str(args.partitions).split(",") if x.strip()]
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    args.only = [m.strip() for m in args.only.split(",") if m.strip()]
    args.kafka_jvm_flags = tuple(shlex.split(args.kafka_jvm_flags))
    if not args.targets or any(t not in TARGETS for t in args.targets):
        ap.error("--targets: kafkalite and/or kafka")
    if not args.only or any(m not in MEASUREMENT_KINDS for m in args.only):
        ap.error("--only: " + ",".join(MEASUREMENT_KINDS))
    if args.repeat < 1 or not args.partitions or min(args.partitions) < 3 or \
            args.partitions != sorted(set(args.partitions)):
        ap.error("--repeat >= 1; --partitions ascending, distinct, each >= 3")
    return args


def run_one(name: str, measurement: str, rnd: int, zk_server: ZooKeeperServer,
            zk: KazooClient, results: Results, args: argparse.Namespace) -> None:
    chroot = f"/bench-{name}-{measurement}-r{rnd}-{uuid.uuid4().hex[:6]}"
    overrides = common_overrides(args.session_timeout_ms)
    cluster: ClusterUnderTest
    if name == KAFKALITE:
        cluster = KafkaliteCluster(zk_server.connect_string, chroot, overrides)
    else:
        cluster = KafkaCluster(zk_server.connect_string, chroot, overrides, args.kafka_jvm_flags)
    bench = Bench(cluster, zk, results, args)
    log(f"round {rnd + 1}, {measurement}: {LABELS[name]} on {zk_server.connect_string}{chroot}")
    try:
        bench.run(measurement)
    except Exception as e:  # noqa: BLE001 - reported in the failure list; the run goes on
        results.errors.append(f"{name} {measurement} round {rnd + 1}: {type(e).__name__}: {e}"[:600])
        log(f"  FAILED: {e}")
    finally:
        bench.client.close()
        cluster.close()


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    env = environment("bench_cluster.py", argv)
    results = Results()
    t0 = time.monotonic()
    with ZooKeeperServer() as zk_server:
        zk = KazooClient(hosts=zk_server.connect_string)
        zk.start(30)
        try:
            for rnd in range(args.repeat):
                for i, measurement in enumerate(measurements(args)):
                    # each target goes first equally often
                    order = list(args.targets) if (rnd + i) % 2 == 0 else args.targets[::-1]
                    for name in order:
                        run_one(name, measurement, rnd, zk_server, zk, results, args)
        finally:
            zk.stop()
            zk.close()
    env["wall_seconds"] = round(time.monotonic() - t0, 1)
    env["loadavg_at_end"] = os.getloadavg()
    table = markdown_table(results, args.targets, args.partitions)
    modified = " (kafkalite/ modified)" if env["kafkalite_tree_modified"] else ""
    print(f"\n3-broker clusters: {' vs '.join(LABELS[t] for t in args.targets)} — {env['date']}, "
          f"commit {env['git_commit']}{modified}, {env['cpus']} CPUs, load average "
          f"{env['loadavg_at_start'][0]:.2f} at start, {env['loadavg_at_end'][0]:.2f} at end, "
          f"{env['wall_seconds']:.0f} s")
    print(f"command: {env['command']}")
    print(f"medians of {args.repeat} round(s), a fresh cluster for every measurement, target "
          f"order alternating; zookeeper.session.timeout.ms={args.session_timeout_ms} on every "
          f"broker (one ZooKeeper, tickTime 500 ms, a chroot per cluster); Metadata polled every "
          f"{args.poll_ms:g} ms")
    if KAFKA in args.targets:
        print(f"Apache Kafka: {env['java']}, JVM flags {' '.join(args.kafka_jvm_flags)}")
    print()
    print(table)
    for t in args.targets:
        if results.exit_codes.get(t):
            print(f"\n{LABELS[t]} exit codes after SIGTERM: {results.exit_codes[t]}")
    if results.errors:
        print("\nfailures:")
        for e in results.errors:
            print(f"- {' | '.join(x.strip() for x in e.splitlines() if x.strip())}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env,
            "runs": results.values,
            "medians": {m: {t: results.median(m, t) for t in v} for m, v in results.values.items()},
            "exit_codes": results.exit_codes,
            "errors": results.errors,
            "table_markdown": table,
        }, indent=2) + "\n")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
