#!/usr/bin/env python3
"""Fetch path benchmark: consumer throughput and per-request fetch latency, for several broker
variants side by side in one run (the machine is small and noisy: compare only within a run).

A variant is LABEL=CODE_DIR[:SENDFILE_MIN_BYTES]: the broker runs `python -m kafkalite` with
PYTHONPATH=CODE_DIR and KAFKALITE_SENDFILE_MIN_BYTES set when given (-1: always copy).

  consume  -- MIB MiB of 10 KiB values in one partition, read from the beginning by a
              confluent-kafka consumer (fetch.* defaults: 1 MiB per partition per fetch); MB/s and
              the broker's CPU seconds per GiB.
  fetchlat -- one raw Fetch v12 of SIZE bytes (whole batches of 1 KiB records) repeated: p50 / p99
              of the round trip, for each SIZE (the copy-or-sendfile threshold).
  produce  -- MIB MiB of 1 KiB values into 3 partitions (linger.ms=5, acks=1): MB/s and the
              broker's CPU seconds per GiB.

Usage: python scripts/bench_fetch.py --variant new=. --variant copy=.:-1 [--mib 200] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.harness import BrokerProcess  # noqa: E402


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(code: str, min_bytes: str | None) -> BrokerProcess:
    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = str(Path(code).resolve())
    if min_bytes is not None:
        os.environ["KAFKALITE_SENDFILE_MIN_BYTES"] = min_bytes
    else:
        os.environ.pop("KAFKALITE_SENDFILE_MIN_BYTES", None)
    try:
        b = BrokerProcess(overrides={"log.segment.bytes": str(256 << 20)})
        b.start(60)
        return b
    finally:
        os.environ.clear()
        os.environ.update(env_before)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})   # held until the futures resolve
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, mib: int, value_size: int, batch_size: int = 1 << 20) -> float:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                     "queue.buffering.max.kbytes": 1 << 20, "batch.size": batch_size})
    value = b"v" * value_size
    n = mib * (1 << 20) // value_size
    t0 = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return n * value_size / (time.monotonic() - t0) / 1e6


def consume(bootstrap: str, topic: str, partitions: int, total_bytes: int, group: str) -> float:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.list_topics(topic, timeout=10)        # connected, metadata known: the clock starts at assign
    t0 = time.monotonic()
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    while got < total_bytes:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error() is None:
                got += len(m.value())
    elapsed = time.monotonic() - t0
    c.close()
    return got / elapsed / 1e6


def fetch_latency(port: int, topic: str, size: int, rounds: int) -> tuple[float, float]:
    T = FetchRequest.FetchTopic
    req = FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=size, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=size)])], forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=1, client_id="bench")
    data = bytes(req.encode(header=True, framed=True))
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(64 << 20)
    mv = memoryview(buf)
    samples = []
    for i in range(rounds):
        t0 = time.perf_counter()
        s.sendall(data)
        have = 0
        need = 4
        while have < need:
            n = s.recv_into(mv[have:], len(buf) - have)
            if n == 0:
                raise RuntimeError("closed")
            have += n
            if need == 4 and have >= 4:
                need = 4 + struct.unpack_from(">i", buf)[0]
        samples.append(time.perf_counter() - t0)
        if i == 0:
            frame_size = need
    s.close()
    samples.sort()
    return samples[len(samples) // 2] * 1e3, samples[int(len(samples) * 0.99)] * 1e3, frame_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="consume,fetchlat,produce")
    ap.add_argument("--sizes", default="4096,16384,65536,262144,1048576")
    args = ap.parse_args()
    phases = set(args.only.split(","))
    variants = []
    for v in args.variant:
        label, rest = v.split("=", 1)
        code, _, mb = rest.partition(":")
        variants.append((label, code, mb or None))
    results: dict[str, dict[str, list]] = {label: {} for label, _c, _m in variants}
    for r in range(args.repeat):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for label, code, mb in order:
            b = start(code, mb)
            try:
                res = results[label]
                if "consume" in phases:
                    create(b.bootstrap_servers, "c", 1)
                    produce(b.bootstrap_servers, "c", args.mib, 10240)
                    total = args.mib * (1 << 20) // 10240 * 10240
                    cpu0 = cpu_seconds(b.proc.pid)
                    mbs = consume(b.bootstrap_servers, "c", 1, total, f"g{r}")
                    cpu = cpu_seconds(b.proc.pid) - cpu0
                    res.setdefault("consume MB/s", []).append(mbs)
                    res.setdefault("consume broker cpu s/GiB", []).append(cpu / (total / (1 << 30)))
                if "fetchlat" in phases:
                    create(b.bootstrap_servers, "s", 1)
                    produce(b.bootstrap_servers, "s", 4, 1024, batch_size=4096)   # ~4 KiB batches
                    for size in [int(x) for x in args.sizes.split(",")]:
                        p50, p99, frame = fetch_latency(b.port, "s", size, 1000 if size <= 65536 else 300)
                        res.setdefault(f"fetch {size >> 10} KiB p50 ms", []).append(p50)
                        res.setdefault(f"fetch {size >> 10} KiB p99 ms", []).append(p99)
                if "produce" in phases:
                    create(b.bootstrap_servers, "p", 3)
                    cpu0 = cpu_seconds(b.proc.pid)
                    mbs = produce(b.bootstrap_servers, "p", args.mib, 1024)
                    cpu = cpu_seconds(b.proc.pid) - cpu0
                    res.setdefault("produce MB/s", []).append(mbs)
                    res.setdefault("produce broker cpu s/GiB", []).append(cpu / (args.mib / 1024))
            finally:
                b.close()
            print(f"round {r} {label}: " + ", ".join(f"{k}={v[-1]:.3f}" for k, v in res.items()), flush=True)
    print("\nmedians:")
    keys = list(next(iter(results.values())).keys())
    print("metric".ljust(34) + "".join(label.rjust(12) for label, _c, _m in variants))
    for k in keys:
        print(k.ljust(34) + "".join(f"{statistics.median(results[label][k]):12.3f}" for label, _c, _m in variants))


if __name__ == "__main__":
    main()
