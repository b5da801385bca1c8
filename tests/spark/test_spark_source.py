"""The `kafkalite` PySpark data source against a real broker and a real local SparkSession:
batch reads (every partition, offset ranges, timestamps, splitting, headers, data loss),
streaming reads (availableNow with maxOffsetsPerTrigger; a processing-time query stopped and
restarted from its checkpoint), batch and streaming writes read back with kafka-python, and
the example pipeline in scripts/."""
from __future__ import annotations

import json
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
# Record timestamps an hour back: within the broker's retention.ms (7 days), or the retention
# check would delete the records as Kafka does.
BASE_TS = (int(time.time()) - 3600) * 1000
KAFKA_SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                "timestamp:timestamp,timestampType:int>")


def unique(prefix: str = "sp") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bs: str, name: str, partitions: int, configs: Optional[dict[str, str]] = None) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()
    return name


def produce(bs: str, records: Iterable[tuple]) -> None:
    """records: (topic, partition, key, value, timestamp_ms, headers)."""
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=2)
    try:
        futures = [p.send(t, key=k, value=v, partition=part, timestamp_ms=ts, headers=h)
                   for t, part, k, v, ts, h in records]
        p.flush(30)
        for f in futures:
            f.get(10)
    finally:
        p.close()


def fill(bs: str, topic: str, partitions: int, per_partition: int, first: int = 0) -> list[tuple]:
    """`per_partition` records per partition: key k<p>-<i>, value v<p>-<i>, timestamp
    BASE_TS + 10 * i (so offset i has timestamp BASE_TS + 10 * i). Returns the rows Spark must
    read: (key, value, topic, partition, offset, timestamp ms, timestampType)."""
    recs = [(topic, p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), BASE_TS + 10 * i, None)
            for p in range(partitions) for i in range(first, first + per_partition)]
    produce(bs, recs)
    return [(k, v, t, p, (ts - BASE_TS) // 10, ts, 0) for t, p, k, v, ts, _ in recs]


def kread(spark: Any, bs: str, **options: str) -> Any:
    r = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def rows_of(df: Any) -> list[tuple]:
    """Rows with the timestamp as epoch milliseconds (independent of time zones)."""
    out = df.selectExpr("key", "value", "topic", "partition", "offset",
                        "unix_millis(timestamp) AS ts", "timestampType").collect()
    return by_position([(bytes(r.key) if r.key is not None else None, bytes(r.value), r.topic,
                         r.partition, r.offset, r.ts, r.timestampType) for r in out])


def by_position(rows: Iterable[tuple]) -> list[tuple]:
    """Sorted by (topic, partition, offset)."""
    return sorted(rows, key=lambda t: (t[2], t[3], t[4]))


def kafka_python_read(bs: str, topic: str, expected: int, timeout: float = 20.0) -> list[Any]:
    """Every record of `topic`, read with kafka-python until `expected` have arrived."""
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None)
    try:
        deadline = time.monotonic() + timeout
        parts: set[int] = set()
        while not parts and time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic) or set()
            if not parts:
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[Any] = []
        while len(out) < expected and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                out.extend(recs)
        # nothing beyond what was expected
        out.extend(r for recs in c.poll(timeout_ms=300).values() for r in recs)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


# ---- batch reads -------------------------------------------------------------------------

def test_batch_read_every_partition_exact_rows(spark: Any, broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique(), 3)
    expected = fill(bs, topic, 3, 5)
    produce(bs, [(topic, 1, None, b"keyless", BASE_TS + 50, None)])
    expected.append((None, b"keyless", topic, 1, 5, BASE_TS + 50, 0))
    df = kread(spark, bs, subscribe=topic)
    assert df.schema.simpleString() == KAFKA_SCHEMA
    assert df.rdd.getNumPartitions() == 3  # one Spark partition per topic partition
    assert rows_of(df) == by_position(expected)


def test_batch_offset_ranges_assign_pattern_and_timestamps(spark: Any, broker: Any) -> None:
    bs = broker.bootstrap_servers
    prefix = unique("rng")
    topic = create_topic(bs, prefix + "-a", 3)
    other = create_topic(bs, prefix + "-b", 2)
    rows = fill(bs, topic, 3, 10)
    other_rows = fill(bs, other, 2, 4)

    def offsets(df: Any) -> list[tuple[str, int, int]]:
        return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())

    df = kread(spark, bs, subscribe=topic,
               startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 5}}),
               endingOffsets=json.dumps({topic: {"0": 7, "1": 3, "2": -1}}))
    assert offsets(df) == [(topic, 0, o) for o in range(2, 7)] + [(topic, 1, o) for o in range(0, 3)] \
        + [(topic, 2, o) for o in range(5, 10)]

    df = kread(spark, bs, assign=json.dumps({topic: [1]}), startingOffsets=json.dumps({topic: {"1": 4}}))
    assert offsets(df) == [(topic, 1, o) for o in range(4, 10)]

    df = kread(spark, bs, subscribePattern=prefix + "-.*")
    assert rows_of(df) == by_position(rows + other_rows)

    # offset i has timestamp BASE_TS + 10 i: start at the first offset with ts >= +35 (4), end
    # (exclusive) at the first with ts >= +75 (8)
    df = kread(spark, bs, subscribe=topic, startingTimestamp=str(BASE_TS + 35),
               endingTimestamp=str(BASE_TS + 75))
    assert offsets(df) == [(topic, p, o) for p in range(3) for o in range(4, 8)]
    df = kread(spark, bs, subscribe=topic,
               startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 85, "1": BASE_TS, "2": BASE_TS + 10**6}}),
               startingOffsetsByTimestampStrategy="latest")
    assert offsets(df) == [(topic, 0, 9)] + [(topic, 1, o) for o in range(10)]

    # split large partitions: minPartitions and maxRecordsPerPartition
    df = kread(spark, bs, subscribe=topic, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert rows_of(df) == by_position(rows)
    df = kread(spark, bs, subscribe=topic, maxRecordsPerPartition="4")
    assert df.rdd.getNumPartitions() == 9
    assert rows_of(df) == by_position(rows)

    with pytest.raises(Exception, match="you must specify all TopicPartitions"):
        kread(spark, bs, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 1}})).collect()
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        kread(spark, bs, subscribe=topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        kread(spark, bs, subscribe=topic, startingTimestamp=str(BASE_TS + 10**6)).collect()


def test_batch_headers(spark: Any, broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique(), 1)
    produce(bs, [(topic, 0, b"a", b"1", BASE_TS, [("h", b"x"), ("h", b"y"), ("e", b"")]),
                 (topic, 0, b"b", b"2", BASE_TS, None)])
    df = kread(spark, bs, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == KAFKA_SCHEMA[:-1] + ",headers:array<struct<key:string,value:binary>>>"
    got = [(r.offset, None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers])
           for r in df.orderBy("offset").collect()]
    assert got == [(0, [("h", b"x"), ("h", b"y"), ("e", b"")]), (1, None)]
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("kafkalite").schema("value binary").option("kafka.bootstrap.servers", bs) \
            .option("subscribe", topic).load().collect()


def test_batch_fail_on_data_loss(spark: Any, broker_factory: Any) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "100"})
    bs = b.bootstrap_servers
    topic = create_topic(bs, unique(), 1, {"segment.bytes": "400", "retention.bytes": "400"})
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0)
    for i in range(40):
        p.send(topic, value=b"%03d" % i + b"x" * 100, partition=0).get(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bs)
    tp = TopicPartition(topic, 0)
    deadline = time.monotonic() + 20
    start = 0
    while time.monotonic() < deadline:  # retention deletes the oldest segments
        start = c.beginning_offsets([tp])[tp]
        if start > 0 and c.beginning_offsets([tp])[tp] == start:
            time.sleep(0.5)  # settled: one more check interval changes nothing
            if c.beginning_offsets([tp])[tp] == start:
                break
        time.sleep(0.1)
    c.close()
    assert 0 < start < 40
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="Some data may have been lost"):
        kread(spark, bs, subscribe=topic, startingOffsets=from_zero).collect()
    df = kread(spark, bs, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    got = sorted((r.offset, bytes(r.value)[:3]) for r in df.collect())
    assert got == [(o, b"%03d" % o) for o in range(start, 40)]


# ---- streaming reads ---------------------------------------------------------------------

def _stream(spark: Any, bs: str, **options: str) -> Any:
    r = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _parquet_rows(spark: Any, path: Path) -> list[tuple]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in
                  spark.read.parquet(str(path)).select("partition", "offset", "value").collect())


def test_streaming_available_now_rate_limited_and_resumed(spark: Any, broker: Any, tmp_path: Path) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique(), 3)
    fill(bs, topic, 3, 10)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run() -> list[dict]:
        q = (_stream(spark, bs, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="7")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert q.awaitTermination(120), "availableNow query did not finish"
        assert q.exception() is None
        return [p for p in q.recentProgress if p["numInputRows"] > 0]

    progress = run()
    # 7 per trigger prorated over three equally lagging partitions: 2 each per batch
    assert [json.loads(p["sources"][0]["endOffset"]) for p in progress] == \
        [{topic: {"0": n, "1": n, "2": n}} for n in (2, 4, 6, 8, 10)]
    assert [p["numInputRows"] for p in progress] == [6] * 5
    assert _parquet_rows(spark, out) == [(p, o, f"v{p}-{o}".encode()) for p in range(3) for o in range(10)]

    # more data; the same checkpoint continues after offset 10, nothing read twice
    fill(bs, topic, 3, 2, first=10)
    progress = run()
    assert sum(p["numInputRows"] for p in progress) == 6
    assert json.loads(progress[0]["sources"][0]["startOffset"]) == {topic: {"0": 10, "1": 10, "2": 10}}
    assert _parquet_rows(spark, out) == [(p, o, f"v{p}-{o}".encode()) for p in range(3) for o in range(12)]


def test_streaming_processing_time_stop_and_restart(spark: Any, broker: Any, tmp_path: Path) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique(), 2)
    fill(bs, topic, 2, 5)  # before the query: startingOffsets=latest skips these
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start() -> Any:
        return (_stream(spark, bs, subscribe=topic)  # startingOffsets defaults to latest
                .writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(ckpt))
                .trigger(processingTime="200 milliseconds").start())

    q = start()
    try:
        q.processAllAvailable()  # the initial (latest) offsets are resolved and checkpointed
        fill(bs, topic, 2, 5, first=5)  # A
        q.processAllAvailable()
    finally:
        q.stop()
    fill(bs, topic, 2, 5, first=10)  # B, while the query is down
    q = start()
    try:
        q.processAllAvailable()
        fill(bs, topic, 2, 5, first=15)  # C, while it runs again
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    # A, B and C exactly once each; nothing from before the first start
    assert _parquet_rows(spark, out) == [(p, o, f"v{p}-{o}".encode()) for p in range(2) for o in range(5, 20)]


# ---- writes ------------------------------------------------------------------------------

def test_batch_write_read_back_by_kafka_python(spark: Any, broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique(), 3)
    rows = [("a", b"1", topic, 0, [("h", b"x")]),
            (None, b"2", topic, 1, None),
            ("c", None, topic, 2, [("h", b"y"), ("i", b"")]),
            ("d", b"4", topic, 2, [])]
    df = spark.createDataFrame(rows, "key string, value binary, topic string, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    df.write.format("kafkalite").option("kafka.bootstrap.servers", bs).mode("append").save()
    got = kafka_python_read(bs, topic, 4)
    assert sorted((r.partition, r.key, r.value, list(r.headers or [])) for r in got) == [
        (0, b"a", b"1", [("h", b"x")]), (1, None, b"2", []),
        (2, b"c", None, [("h", b"y"), ("i", b"")]), (2, b"d", b"4", [])]

    # the topic option overrides the topic column
    other = create_topic(bs, unique(), 1)
    spark.createDataFrame([("x", "ignored-topic")], "value string, topic string").write \
        .format("kafkalite").option("kafka.bootstrap.servers", bs).option("topic", other) \
        .mode("append").save()
    assert [(r.key, r.value) for r in kafka_python_read(bs, other, 1)] == [(None, b"x")]

    w = spark.createDataFrame([("x", None)], "value string, topic string").write \
        .format("kafkalite").option("kafka.bootstrap.servers", bs)
    with pytest.raises(Exception, match="null topic present in the data"):
        w.mode("append").save()
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        w.mode("overwrite").save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        spark.createDataFrame([("k",)], "key string").write.format("kafkalite") \
            .option("kafka.bootstrap.servers", bs).option("topic", other).mode("append").save()


def test_streaming_write_read_back_by_kafka_python(spark: Any, broker: Any, tmp_path: Path) -> None:
    bs = broker.bootstrap_servers
    src = create_topic(bs, unique(), 2)
    dst = create_topic(bs, unique(), 2)
    fill(bs, src, 2, 6)
    q = (_stream(spark, bs, subscribe=src, startingOffsets="earliest")
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
         .writeStream.format("kafkalite").option("kafka.bootstrap.servers", bs)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    got = kafka_python_read(bs, dst, 12)
    assert sorted((r.partition, r.key, r.value) for r in got) == \
        sorted((p, f"k{p}-{i}".encode(), f"V{p}-{i}".encode()) for p in range(2) for i in range(6))
    # within a partition the sink keeps the source's order
    for p in range(2):
        assert [r.key for r in got if r.partition == p] == [f"k{p}-{i}".encode() for i in range(6)]


# ---- the example pipeline ----------------------------------------------------------------

def test_example_pipeline_windowed_totals(spark: Any, broker: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import spark_feed_events
        import spark_pipeline
    finally:
        sys.path.remove(str(SCRIPTS))
    bs = broker.bootstrap_servers
    src, dst = unique("events"), unique("totals")
    spark_feed_events.ensure_topic(bs, src)
    spark_feed_events.ensure_topic(bs, dst)
    start = (int(time.time()) - 3600) // 10 * 10_000  # a window boundary an hour ago
    events = list(spark_feed_events.make_events(300, users=3, seed=7, start_ms=start, step_ms=100))
    # a last event two minutes later moves the watermark past every window of the others
    late = {"user": "user-0", "amount": 1.0, "event_time_ms": start + 120_000}
    assert spark_feed_events.feed(bs, src, iter(events + [late])) == 301

    df = spark_pipeline.windowed_totals(spark, bs, src, "10 seconds", "5 seconds")
    q = spark_pipeline.start_query(df, bs, dst, str(tmp_path / "ckpt"), available_now=True)
    assert q.awaitTermination(120)
    assert q.exception() is None

    expected: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0.0])
    for e in events:
        w = e["event_time_ms"] // 10_000 * 10_000
        window_start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w / 1000))
        expected[(e["user"], window_start)][0] += 1
        expected[(e["user"], window_start)][1] += e["amount"]
    got = spark_pipeline.read_results(bs, dst)
    assert {k: (v["events"], v["amount"]) for k, v in got.items()} == \
        {k: (n, round(total, 2)) for k, (n, total) in expected.items()}
    assert len(got) == 9  # 3 users x 3 windows of 10 s
