#!/usr/bin/env python3
"""Broker CPU per append while many fetches wait in the purgatory (issue 13, DelayedFetch by
position).

One kafkalite broker, one topic of --partitions partitions. Parked long-polls (max_wait 60 s,
min_bytes 1 GiB: they never complete during the run, so every append only checks them) in one of
three layouts:
  none -- no waiting fetch (the baseline)
  one  -- one connection per partition, each fetch waiting on its own partition
  all  -- --consumers connections, each fetch waiting on every partition (a consumer owning all)
Then one producer sends --appends single-batch produces (acks=1, 100-byte value) round-robin
over the partitions, one at a time. Figure: the broker process's CPU time (utime + stime from
/proc) per append, and the wall time per append.

--in-process: the same in one Python process, no broker or sockets (LogManager + ReplicaManager,
fetches parked with fetch_messages, appends with append_records): the replica layer's CPU
(time.process_time) per append, light enough to run beside other work.

Usage: PYTHONPATH=<tree> python scripts/bench_delayed_fetch.py [--partitions 200] [--consumers 20]
           [--appends 4000] [--layouts none,one,all] [--repeat 3] [--in-process]
Run it from the tree measured, with PYTHONPATH on it: the broker runs `python -m kafkalite`, which
imports from its working directory first.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

from kafka.protocol.consumer import FetchRequest

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, create_topic

PRODUCE_VERSION = 12
FETCH_VERSION = 12


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parked_fetch(topic: str, partitions: list[int]) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest[FETCH_VERSION](
        replica_id=-1, max_wait_ms=60_000, min_bytes=1 << 30, max_bytes=1 << 30, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[T(topic=topic, partitions=[T.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0,
                                                            last_fetched_epoch=-1, log_start_offset=-1,
                                                            partition_max_bytes=1 << 20) for p in partitions])],
        forgotten_topics_data=[], rack_id="")


def run(layout: str, partitions: int, consumers: int, appends: int) -> tuple[float, float]:
    with BrokerProcess() as broker:
        assert broker.proc is not None
        topic = "bench-" + uuid.uuid4().hex[:8]
        create_topic(broker.bootstrap_servers, topic, partitions)
        parked: list[RawClient] = []
        try:
            if layout == "one":
                groups = [[p] for p in range(partitions)]
            elif layout == "all":
                groups = [list(range(partitions))] * consumers
            else:
                groups = []
            for g in groups:
                c = RawClient(broker.bootstrap_servers)
                c.send(parked_fetch(topic, g))
                parked.append(c)
            time.sleep(1.0)     # let every fetch reach the purgatory
            value = b"x" * 100
            with RawClient(broker.bootstrap_servers) as prod:
                batch = build_batch([Rec(b"k", value)])
                # warm up the code paths outside the measurement
                for p in range(min(partitions, 50)):
                    assert prod.produce(topic, p, batch, acks=1, version=PRODUCE_VERSION).error_code == 0
                cpu0, t0 = cpu_seconds(broker.proc.pid), time.perf_counter()
                for i in range(appends):
                    assert prod.produce(topic, i % partitions, batch, acks=1, version=PRODUCE_VERSION).error_code == 0
                wall = time.perf_counter() - t0
                cpu = cpu_seconds(broker.proc.pid) - cpu0
            return cpu / appends * 1e6, wall / appends * 1e6
        finally:
            for c in parked:
                c.close()


def run_in_process(layout: str, partitions: int, consumers: int, appends: int) -> tuple[float, float]:
    import asyncio
    import tempfile
    from pathlib import Path

    from kafkalite.config.log_config import LogConfig
    from kafkalite.log.log_manager import LogManager
    from kafkalite.replica.partition import TopicPartition
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.replica.results import FetchPartitionRequest

    async def bench(dir: Path) -> tuple[float, float]:
        config = LogConfig(segment_index_bytes=64 * 1024)
        lm = LogManager([dir], config)
        lm.startup()
        rm = ReplicaManager(0, lm)
        tps = [TopicPartition("bench", p) for p in range(partitions)]
        topic_id = uuid.uuid4()
        for tp in tps:
            rm.become_leader(tp, topic_id, 0, [0], [0], config)
        groups = [[tp] for tp in tps] if layout == "one" else [tps] * consumers if layout == "all" else []
        waiting = [asyncio.ensure_future(rm.fetch_messages(60_000, 1 << 30, 1 << 30, 0,
                                                           [(tp, FetchPartitionRequest(0, 1 << 20)) for tp in g]))
                   for g in groups]
        await asyncio.sleep(0)
        batch = build_batch([Rec(b"k", b"x" * 100)])
        for tp in tps[:50]:
            await rm.append_records(5000, 1, {tp: batch})
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(appends):
            await rm.append_records(5000, 1, {tps[i % partitions]: batch})
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        assert not any(f.done() for f in waiting)
        for f in waiting:
            f.cancel()
        rm.shutdown()
        lm.shutdown()
        return cpu / appends * 1e6, wall / appends * 1e6

    with tempfile.TemporaryDirectory(prefix="bench-dfetch-") as d:
        return asyncio.run(bench(Path(d)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--consumers", type=int, default=20)
    ap.add_argument("--appends", type=int, default=4000)
    ap.add_argument("--layouts", default="none,one,all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--in-process", action="store_true")
    args = ap.parse_args()
    measure = run_in_process if args.in_process else run
    import kafkalite
    print(f"kafkalite from {os.path.dirname(kafkalite.__file__)}; {args.partitions} partitions, "
          f"{args.appends} appends, 'all' = {args.consumers} fetches over every partition")
    for layout in args.layouts.split(","):
        cpus, walls = [], []
        for _ in range(args.repeat):
            cpu, wall = measure(layout, args.partitions, args.consumers, args.appends)
            cpus.append(cpu)
            walls.append(wall)
        print(f"{layout:5s} {'replica layer' if args.in_process else 'broker'} CPU/append median {statistics.median(cpus):7.1f} us "
              f"(runs {', '.join(f'{c:.1f}' for c in cpus)}); wall/append median {statistics.median(walls):7.1f} us",
              flush=True)


if __name__ == "__main__":
    main()
