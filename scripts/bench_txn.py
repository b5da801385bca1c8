#!/usr/bin/env python3
"""Produce throughput: plain vs idempotent vs transactional (100-message transactions), on
kafkalite and on librdkafka's in-process mock cluster, in the same run (issue 5).

The targets (a fresh `kafkalite serve` per round, the mock hosted through librdkafka's mock C
API) and their topic creation are those of scripts/bench.py, imported from it. All three modes use
the same client (confluent-kafka / librdkafka), message count, value size (random bytes, no
compression), `linger.ms=5`, `acks=all` (what idempotence requires, so the plain row differs only
in idempotence), a 3-partition topic with message i to partition i mod 3:

  plain          -- Producer, enable.idempotence=false
  idempotent     -- Producer, enable.idempotence=true
  transactional  -- Producer with a transactional.id; begin_transaction, 100 produce() calls,
                    commit_transaction (which flushes), repeated; each transaction spans all 3
                    partitions.

Timed from the first produce() to the final flush()/commit_transaction() return; metadata,
init_transactions() and a warm-up of one delivered message per partition (in a transaction of
its own for the transactional producer) come before the clock starts. Success is checked from
the high watermarks afterwards: N + 3 for plain/idempotent, N + 3 + 3 x (N/100 + 1) for
transactional (one COMMIT marker per partition per transaction; the mock writes markers too).
The order of the two targets alternates every round; medians over the rounds are reported.

Usage:
  python scripts/bench_txn.py [--messages 100000] [--value-size 1024] [--repeat 5]
                              [--txn-size 100] [--json out.json] [--targets kafkalite,mock]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import confluent_kafka as ck

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  -- scripts/bench.py: targets, topic creation, environment

PARTITIONS = bench.PARTITIONS
MODES = ("plain", "idempotent", "transactional")
MIB = bench.MIB


def _producer(bootstrap: str, mode: str, errors: list[str], rnd: int) -> ck.Producer:
    def on_error_report(err: Optional[ck.KafkaError], _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                            "delivery.report.only.error": True, "on_delivery": on_error_report}
    if mode == "idempotent":
        conf["enable.idempotence"] = True
    elif mode == "transactional":
        conf["transactional.id"] = f"bench-txn-r{rnd}-{os.getpid()}"
    return ck.Producer(conf)


def measure(bootstrap: str, topic: str, mode: str, messages: int, value: bytes, txn_size: int,
            timeout: float, rnd: int) -> float:
    """Seconds from first produce to last flush/commit."""
    errors: list[str] = []
    p = _producer(bootstrap, mode, errors, rnd)
    p.list_topics(topic, timeout=10)
    if mode == "transactional":
        p.init_transactions(30)
    deadline = time.monotonic() + timeout
    produce = p.produce

    def send(i: int) -> None:
        while True:
            try:
                produce(topic, value, partition=i % PARTITIONS)
                return
            except BufferError:
                p.poll(0.001)
                if time.monotonic() > deadline:
                    raise bench.BenchError(f"{mode}: produce timed out at message {i}")

    # Warm-up outside the clock: one message per partition, delivered (for the idempotent
    # producer this also waits out its asynchronous InitProducerId; for the transactional one
    # the first AddPartitionsToTxn / EndTxn round trips).
    if mode == "transactional":
        p.begin_transaction()
    for q in range(PARTITIONS):
        produce(topic, value, partition=q)
    if mode == "transactional":
        p.commit_transaction(30)
    elif p.flush(30):
        raise bench.BenchError(f"{mode}: warm-up messages undelivered")
    t0 = time.perf_counter()
    if mode == "transactional":
        for start in range(0, messages, txn_size):
            p.begin_transaction()
            for i in range(start, min(messages, start + txn_size)):
                send(i)
            p.commit_transaction(max(1.0, deadline - time.monotonic()))
    else:
        for i in range(messages):
            send(i)
        remaining = p.flush(max(0.0, deadline - time.monotonic()))
        if remaining:
            raise bench.BenchError(f"{mode}: {remaining} messages undelivered at the limit")
    t1 = time.perf_counter()
    p.poll(0)
    if errors:
        raise bench.BenchError(f"{mode} delivery errors: " + "; ".join(errors))
    return t1 - t0


def expected_hw(mode: str, messages: int, txn_size: int) -> int:
    """Messages + the warm-up's one per partition (+ a COMMIT marker per partition per
    transaction, warm-up included)."""
    if mode == "transactional":
        txns = -(-messages // txn_size) + 1
        return messages + PARTITIONS + PARTITIONS * txns
    return messages + PARTITIONS


class Results:
    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, list[float]]] = {}  # mode -> target -> per round
        self.errors: list[str] = []
        self.notes: list[str] = []

    def add(self, mode: str, target: str, s: float) -> None:
        self.seconds.setdefault(mode, {}).setdefault(target, []).append(s)

    def msgs_s(self, mode: str, target: str, messages: int) -> Optional[float]:
        v = self.seconds.get(mode, {}).get(target)
        return messages / statistics.median(v) if v else None


def run_round(results: Results, rnd: int, args: argparse.Namespace, order: list[str]) -> None:
    value = os.urandom(args.value_size)
    targets: dict[str, Any] = {}
    try:
        for name in order:
            t = bench.KafkaliteBroker(ready_timeout=60) if name == bench.KAFKALITE \
                else bench.MockCluster()
            try:
                t.start()
            except (bench.BenchError, ck.KafkaException, OSError) as e:
                results.errors.append(f"round {rnd + 1} {name} start: {e}")
                continue
            targets[name] = t
            if name == bench.MOCK and t.method not in results.notes:
                results.notes.append(t.method)
        for mode in MODES:
            for name in order:
                if name not in targets:
                    continue
                t = targets[name]
                topic = f"bench-{mode}-r{rnd}"
                try:
                    t.create_topic(topic, PARTITIONS)
                    s = measure(t.bootstrap, topic, mode, args.messages, value, args.txn_size,
                                args.timeout, rnd)
                    hw = sum(h for _lo, h in bench.high_watermarks(t.bootstrap, topic))
                    want = expected_hw(mode, args.messages, args.txn_size)
                    if hw != want:
                        raise bench.BenchError(f"high watermarks sum to {hw}, expected {want}")
                except (bench.BenchError, ck.KafkaException, RuntimeError, OSError) as e:
                    results.errors.append(f"round {rnd + 1} {name} {mode}: {e}")
                    print(f"[bench_txn] {name} {mode} FAILED: {e}", file=sys.stderr)
                    continue
                results.add(mode, name, s)
                print(f"[bench_txn] round {rnd + 1} {name:9s} {mode:13s} {s:6.2f} s "
                      f"{args.messages / s:9.0f} msgs/s", file=sys.stderr)
    finally:
        for t in targets.values():
            try:
                t.stop()
            except Exception as e:  # noqa: BLE001 -- stopping must never hide the results
                print(f"[bench_txn] stopping {t.name}: {e}", file=sys.stderr)


def table(results: Results, args: argparse.Namespace) -> str:
    lines = ["| produce mode | kafkalite msgs/s (MB/s) | librdkafka mock msgs/s (MB/s) "
             "| kafkalite/mock | kafkalite vs its plain |", "|---|---:|---:|---:|---:|"]
    mb = args.value_size / MIB
    k_plain = results.msgs_s("plain", bench.KAFKALITE, args.messages)
    for mode in MODES:
        k = results.msgs_s(mode, bench.KAFKALITE, args.messages)
        m = results.msgs_s(mode, bench.MOCK, args.messages)
        cell: Callable[[Optional[float]], str] = (
            lambda x: f"{x:,.0f} ({x * mb:.1f})" if x else "FAILED")
        ratio = f"{k / m:.2f}" if k and m else "—"
        rel = f"{k / k_plain:.2f}" if k and k_plain else "—"
        label = f"transactional, {args.txn_size}-message transactions" \
            if mode == "transactional" else mode
        lines.append(f"| {label} | {cell(k)} | {cell(m)} | {ratio} | {rel} |")
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--txn-size", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--targets", default=f"{bench.KAFKALITE},{bench.MOCK}")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if any(t not in (bench.KAFKALITE, bench.MOCK) for t in args.targets):
        ap.error("--targets: kafkalite, mock")
    if args.messages < PARTITIONS or args.repeat < 1 or args.txn_size < 1:
        ap.error("--messages >= 3, --repeat >= 1, --txn-size >= 1")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    results = Results()
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    for rnd in range(args.repeat):
        order = [bench.KAFKALITE, bench.MOCK] if rnd % 2 == 0 else [bench.MOCK, bench.KAFKALITE]
        run_round(results, rnd, args, [t for t in order if t in args.targets])
    wall = time.monotonic() - t0
    env_args = argparse.Namespace(messages=args.messages, value_size=args.value_size,
                                  repeat=args.repeat, starts=0, latency_sends=0,
                                  session_timeout_ms=0, heartbeat_ms=0, trickle_ms=0,
                                  commit_seconds=0, async_commits=0)
    env = bench.environment(env_args, argv)
    env["command"] = "python scripts/bench_txn.py " + " ".join(shlex.quote(a) for a in argv)
    out = table(results, args)
    print(f"\n{env['date']}, commit {env['git_commit']}, {env['cpus']} CPUs, confluent-kafka "
          f"{env['confluent_kafka']} / librdkafka {env['librdkafka']}; load average "
          f"{load0:.2f} at start, {os.getloadavg()[0]:.2f} at end; {wall:.0f} s")
    print(f"command: {env['command']}")
    print(f"medians of {args.repeat} rounds; {args.messages} x {args.value_size} B messages, "
          f"3 partitions, linger.ms=5, acks=all; MB = 2^20 bytes of values\n")
    print(out)
    for n in results.notes:
        print(f"\nnote: {n}")
    if results.errors:
        print("\nfailures:")
        for e in results.errors:
            print(f"- {e[:400]}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env, "seconds": results.seconds, "errors": results.errors,
            "msgs_s": {m: {t: results.msgs_s(m, t, args.messages) for t in v}
                       for m, v in results.seconds.items()},
            "table_markdown": out}, indent=2) + "\n")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
