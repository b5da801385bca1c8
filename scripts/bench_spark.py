#!/usr/bin/env python3
"""Rows per second of a Spark batch read through the `kafkalite` PySpark data source.

Starts a fresh `python -m kafkalite serve` (port 0, temporary log dir), produces N records
(8-byte keys, `--value-size` random bytes, round-robin over `--partitions`), starts a local
SparkSession (`local[--cores]`, bound to 127.0.0.1), reads the whole topic once to warm up the
Python workers, then `--repeat` times runs

    spark.read.format("kafkalite").option("subscribe", topic).load()
         .agg(count(*), sum(length(value)), max(offset)).collect()

timing it from building the DataFrame (so offset planning is included) to the collected row,
and checks the count and the value bytes. The Python data source cannot prune columns: every
row of every column crosses from the Python worker to the JVM, so this is the full read cost.

For reference it also times one kafka-python consumer reading the whole topic in this process
(what each Spark task does for its range, without Spark).

    python scripts/bench_spark.py                      # 1M records, 4 partitions, 3 rounds
    python scripts/bench_spark.py --records 200000 --repeat 1 --min-partitions 8
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_RE = re.compile(r"kafkalite ready: broker \d+ listening on PLAINTEXT://(\S+):(\d+)")


class Broker:
    def __init__(self, log_dir: str, ready_timeout: float = 60.0) -> None:
        self.log_dir = log_dir
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen[str]] = None
        self.bootstrap = ""

    def __enter__(self) -> "Broker":
        cmd = [sys.executable, "-m", "kafkalite", "serve",
               "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={self.log_dir}"]
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        found = threading.Event()

        def watch() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                m = READY_RE.search(line)
                if m and not found.is_set():
                    self.bootstrap = f"{m.group(1)}:{m.group(2)}"
                    found.set()

        threading.Thread(target=watch, daemon=True).start()
        if not found.wait(self.ready_timeout):
            self.__exit__()
            raise RuntimeError("kafkalite serve did not become ready")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def produce(bootstrap: str, topic: str, records: int, partitions: int, value_size: int) -> int:
    """Create the topic and fill it; returns the total value bytes."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    values = [os.urandom(value_size) for _ in range(64)]
    try:  # librdkafka produces ~10x faster than kafka-python; either gives the same data
        import confluent_kafka as ck

        p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
        for i in range(records):
            while True:
                try:
                    p.produce(topic, key=b"%08d" % i, value=values[i % 64], partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
        if p.flush(120) != 0:
            raise RuntimeError("records left unsent")
    except ImportError:
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024)
        for i in range(records):
            kp.send(topic, key=b"%08d" % i, value=values[i % 64], partition=i % partitions)
        kp.flush(120)
        kp.close()
    return records * value_size


def kafka_python_baseline(bootstrap: str, topic: str, records: int) -> float:
    """Seconds for one kafka-python consumer (assign + seek, no group) to read every record."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      auto_offset_reset="none", metrics_enabled=False)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    n = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while n < records and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=500, max_records=10_000).values():
            n += len(recs)
    elapsed = time.perf_counter() - started
    c.close()
    if n != records:
        raise RuntimeError(f"kafka-python read {n} of {records} records")
    return elapsed


def spark_read(spark: Any, bootstrap: str, topic: str, min_partitions: Optional[int]) -> tuple[float, Any, int]:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    reader = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    df = reader.load()
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("bytes"),
                 F.max("offset").alias("max_offset")).collect()[0]
    elapsed = time.perf_counter() - started
    return elapsed, row, df.rdd.getNumPartitions()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--cores", type=int, default=2, help="local[N]")
    ap.add_argument("--min-partitions", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    sys.path.insert(0, str(REPO_ROOT))
    from kafkalite.spark import register

    result: dict[str, Any] = {"records": args.records, "partitions": args.partitions,
                              "value_size": args.value_size, "cores": args.cores,
                              "min_partitions": args.min_partitions}
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-spark-") as tmp, \
            Broker(os.path.join(tmp, "logs")) as broker:
        topic = "bench-spark"
        t = time.perf_counter()
        value_bytes = produce(broker.bootstrap, topic, args.records, args.partitions, args.value_size)
        print(f"produced {args.records} records in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        if not args.no_baseline:
            s = kafka_python_baseline(broker.bootstrap, topic, args.records)
            result["kafka_python_rows_per_s"] = args.records / s
            print(f"kafka-python consumer: {args.records / s:,.0f} rows/s", file=sys.stderr)
        spark = (SparkSession.builder.master(f"local[{args.cores}]").appName("bench-spark")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        result["spark_version"] = spark.version
        try:
            warm, _, _ = spark_read(spark, broker.bootstrap, topic, args.min_partitions)
            print(f"warm-up read: {warm:.1f} s", file=sys.stderr)
            runs = []
            tasks = 0
            for i in range(args.repeat):
                elapsed, row, tasks = spark_read(spark, broker.bootstrap, topic, args.min_partitions)
                if row["n"] != args.records or row["bytes"] != value_bytes \
                        or row["max_offset"] != -(-args.records // args.partitions) - 1:
                    raise RuntimeError(f"wrong result: {row}")
                runs.append(elapsed)
                print(f"run {i + 1}: {elapsed:.2f} s, {args.records / elapsed:,.0f} rows/s",
                      file=sys.stderr)
        finally:
            spark.stop()
    median = statistics.median(runs)
    result.update(spark_tasks=tasks, runs_s=runs, median_s=median,
                  rows_per_s=args.records / median)
    print("| records | topic partitions | Spark tasks | local[N] | median s | rows/s |"
          + (" kafka-python consumer rows/s |" if "kafka_python_rows_per_s" in result else ""))
    print("|---|---|---|---|---|---|" + ("---|" if "kafka_python_rows_per_s" in result else ""))
    print(f"| {args.records:,} | {args.partitions} | {tasks} | {args.cores} | {median:.2f} | "
          f"{result['rows_per_s']:,.0f} |"
          + (f" {result['kafka_python_rows_per_s']:,.0f} |" if "kafka_python_rows_per_s" in result else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
