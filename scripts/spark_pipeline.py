#!/usr/bin/env python3
"""Example Spark Structured Streaming pipeline on kafkalite: read JSON events from a topic,
count and sum them per user in event-time windows, write the results to another topic.

One command against a running broker (`kafkalite serve`), feeding it as well:

    python scripts/spark_pipeline.py --bootstrap-servers 127.0.0.1:9092 --feed 2000 --duration 40

`--feed N` starts scripts/spark_feed_events.py in the background (N events at `--feed-rate`
per second). Without it, feed the input topic yourself. The query runs with a processing-time
trigger for `--duration` seconds (or, with `--available-now`, processes what is there and
stops), then the script prints the latest result per (user, window) read back from the output
topic with kafka-python.

Input:  topic `events`, value {"user": str, "amount": float, "event_time_ms": long}
Output: topic `events-per-user`, key = user, value
        {"user", "window_start", "window_end", "events", "amount"}, one record per user and
        window, written once the watermark (latest event time seen - `--watermark`) has passed
        the window's end: append mode, final results. (Spark 4's Python data sources take
        append and complete mode only, not update.) The windows still open when the query stops
        are emitted by a later run, once newer events move the watermark past them.

Stop and run it again with the same `--checkpoint`: the query resumes where it left off.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
EVENT_SCHEMA = "user string, amount double, event_time_ms long"


def spark_session(app_name: str = "kafkalite-pipeline", cores: int = 2) -> Any:
    """A local SparkSession bound to 127.0.0.1 with the kafkalite format registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkalite.spark import register

    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def windowed_totals(spark: Any, bootstrap_servers: str, input_topic: str, window: str,
                    watermark: str, starting_offsets: str = "earliest",
                    max_offsets_per_trigger: Optional[int] = None) -> Any:
    """The streaming DataFrame of (key, value) records to write: per user and window, the
    number of events and the sum of their amounts, as JSON."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("kafkalite")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", input_topic)
              .option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.user", "e.amount",
                      F.timestamp_millis(F.col("e.event_time_ms")).alias("event_time"))
              .where(F.col("user").isNotNull()))
    totals = (events.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window), F.col("user"))
              .agg(F.count(F.lit(1)).alias("events"),
                   F.round(F.sum("amount"), 2).alias("amount")))
    return totals.select(
        F.col("user").alias("key"),
        F.to_json(F.struct(
            F.col("user"),
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            F.col("events"), F.col("amount"))).alias("value"))


def start_query(df: Any, bootstrap_servers: str, output_topic: str, checkpoint: str,
                available_now: bool = False, trigger_interval: str = "2 seconds") -> Any:
    writer = (df.writeStream.format("kafkalite")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("topic", output_topic)
              .option("checkpointLocation", checkpoint)
              .outputMode("append"))
    writer = writer.trigger(availableNow=True) if available_now \
        else writer.trigger(processingTime=trigger_interval)
    return writer.start()


def read_results(bootstrap_servers: str, topic: str, timeout_s: float = 10.0) -> dict[tuple[str, str], dict]:
    """The value per (user, window_start) in the output topic (the last one, should a batch have
    been written twice: the sink is at-least-once)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            return {}
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        latest: dict[tuple[str, str], dict] = {}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for rec in records:
                    v = json.loads(rec.value)
                    latest[(v["user"], v["window_start"])] = v
        return latest
    finally:
        consumer.close()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    ap.add_argument("--input", default="events")
    ap.add_argument("--output", default="events-per-user")
    ap.add_argument("--window", default="10 seconds")
    ap.add_argument("--watermark", default="5 seconds")
    ap.add_argument("--checkpoint", default=None,
                    help="checkpoint directory (default: a new temporary one)")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--trigger", default="2 seconds", help="processing-time trigger interval")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds to run the query")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is in the topic now, then stop")
    ap.add_argument("--feed", type=int, default=0, help="also start a feeder sending N events")
    ap.add_argument("--feed-rate", type=float, default=100.0)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(HERE))
    from spark_feed_events import ensure_topic

    ensure_topic(args.bootstrap_servers, args.input)
    ensure_topic(args.bootstrap_servers, args.output)
    feeder = None
    if args.feed:
        feeder = subprocess.Popen([sys.executable, str(HERE / "spark_feed_events.py"),
                                   "--bootstrap-servers", args.bootstrap_servers,
                                   "--topic", args.input, "--count", str(args.feed),
                                   "--rate", str(args.feed_rate)])
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="kafkalite-pipeline-")
    spark = spark_session()
    try:
        df = windowed_totals(spark, args.bootstrap_servers, args.input, args.window,
                             args.watermark, args.starting_offsets, args.max_offsets_per_trigger)
        query = start_query(df, args.bootstrap_servers, args.output, checkpoint,
                            args.available_now, args.trigger)
        print(f"query {query.id} running; checkpoint {checkpoint}", file=sys.stderr)
        if args.available_now:
            query.awaitTermination()
        else:
            query.awaitTermination(args.duration)
            if feeder is not None and feeder.poll() is None:
                print("feeder still running; stopping the query anyway", file=sys.stderr)
            query.stop()
        progress = query.recentProgress
        print(f"{len(progress)} micro-batches, {sum(p['numInputRows'] for p in progress)} input "
              "rows in the recent progress", file=sys.stderr)
    finally:
        spark.stop()
        if feeder is not None:
            try:
                feeder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                feeder.terminate()
                feeder.wait()
    results = read_results(args.bootstrap_servers, args.output)
    for (user, start), v in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{start}  {user:<10} events={v['events']:<5} amount={v['amount']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
