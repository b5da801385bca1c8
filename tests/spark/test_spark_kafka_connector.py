"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 4.2.0 with the Java
client it ships, kafka-clients 3.9) against a kafkalite broker process, in the one SparkSession
of tests/spark/conftest.py: batch reads of every column, offset ranges by JSON and by timestamp,
read_committed over committed, aborted and open transactions (batch and streaming), data loss,
batch and streaming writes, streaming queries resumed from their checkpoint (new partitions
included), and one checkpoint shared by `format("kafka")` and `format("kafkalite")` in both
directions. The read tests run against Apache Kafka 3.9 too, with the same exact expectations.
Where both formats can read the same thing, the kafkalite source must give exactly the
connector's rows."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.partitioner.default import murmur2

from tests.spark.test_spark_source import (BASE_TS, KAFKA_SCHEMA, by_position, create_topic, fill,
                                           kafka_python_read, produce, rows_of, unique)
from tests.support.spark_kafka import artifact_name, missing_from

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


@pytest.fixture(params=["kafkalite", "apache-kafka-3.9"])
def target(request: Any) -> str:
    """Bootstrap servers of a kafkalite broker process, then of Apache Kafka 3.9 (the oracle): the
    read tests assert the same exact results against both, so the expectations are Kafka's."""
    if request.param == "kafkalite":
        return request.getfixturevalue("broker").bootstrap_servers
    return request.getfixturevalue("kafka_oracle").bootstrap_servers


def read(spark: Any, fmt: str, bs: str, **options: str) -> Any:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def stream(spark: Any, fmt: str, bs: str, **options: str) -> Any:
    r = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def offsets_of(df: Any) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())


def headers_of(df: Any) -> list[tuple[int, int, Optional[list[tuple[str, Optional[bytes]]]]]]:
    return sorted((r.partition, r.offset,
                   None if r.headers is None else
                   [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers])
                  for r in df.select("partition", "offset", "headers").collect())


def same_in_both(spark: Any, bs: str, **options: str) -> list[tuple[str, int, int]]:
    """The (topic, partition, offset) the connector reads with `options`, after checking the
    kafkalite source reads exactly the same records."""
    got = offsets_of(read(spark, "kafka", bs, **options))
    assert offsets_of(read(spark, "kafkalite", bs, **options)) == got
    return got


def confluent_produce(bs: str, records: Sequence[tuple[str, int, bytes, list]]) -> None:
    """(topic, partition, value, headers): librdkafka, which can write a header with a null
    value (kafka-python cannot)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    errors: list[Any] = []
    for topic, partition, value, headers in records:
        p.produce(topic, value=value, partition=partition, headers=headers,
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


# ---- the jars -----------------------------------------------------------------------------

def test_connector_jars_are_only_what_pyspark_lacks(spark_kafka_jars: tuple[list[Path], Optional[str]]) -> None:
    jars, missing = spark_kafka_jars
    assert missing is None
    # no second scala-library, hadoop-client, lz4, snappy or slf4j next to PySpark's own
    assert sorted(artifact_name(j.name) for j in jars) == [
        "commons-pool2", "kafka-clients", "spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13"]
    assert [artifact_name(n) for n in ("zstd-jni-1.5.7-7.jar", "hive-exec-2.3.10-core.jar",
                                       "scala-parallel-collections_2.13-1.2.0.jar")] == \
        ["zstd-jni", "hive-exec", "scala-parallel-collections_2.13"]
    assert [j.name for j in missing_from([Path("/c/kafka-clients-3.9.2.jar"), Path("/c/lz4-java-1.10.1.jar")],
                                         ["lz4-java-1.11.0.jar"])] == ["kafka-clients-3.9.2.jar"]


# ---- batch reads -------------------------------------------------------------------------

def test_connector_batch_read_every_partition_exact_rows(spark_kafka: Any, target: str) -> None:
    spark, bs = spark_kafka, target
    topic = create_topic(bs, unique("kc"), 3)
    expected = fill(bs, topic, 3, 4)
    produce(bs, [(topic, 2, None, b"keyless", BASE_TS + 40, None)])  # a null key
    expected.append((None, b"keyless", topic, 2, 4, BASE_TS + 40, 0))
    confluent_produce(bs, [(topic, 0, b"with-headers", [("h", b"x"), ("h", b"y"), ("null", None), ("e", b"")])])

    df = read(spark, "kafka", bs, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == KAFKA_SCHEMA[:-1] + f",headers:{HEADERS_TYPE}>"
    assert df.rdd.getNumPartitions() == 3  # one Spark partition per topic partition
    rows = rows_of(df)
    # the header record's timestamp is librdkafka's clock: take it from what kafka-python reads
    header_ts = {r.offset: r.timestamp for r in kafka_python_read(bs, topic, 14) if r.partition == 0}[4]
    assert rows == by_position(expected + [(None, b"with-headers", topic, 0, 4, header_ts, 0)])
    assert headers_of(df) == sorted([(p, o, None) for p in range(3) for o in range(4)]
                                    + [(0, 4, [("h", b"x"), ("h", b"y"), ("null", None), ("e", b"")]),
                                       (2, 4, None)])
    assert headers_of(read(spark, "kafkalite", bs, subscribe=topic, includeHeaders="true")) == headers_of(df)
    assert rows_of(read(spark, "kafkalite", bs, subscribe=topic)) == rows


def test_connector_log_append_time(spark_kafka: Any, target: str) -> None:
    spark, bs = spark_kafka, target
    topic = create_topic(bs, unique("kc-lat"), 2, {"message.timestamp.type": "LogAppendTime"})
    fill(bs, topic, 2, 3)  # CreateTime BASE_TS + 10 i, replaced by the broker's clock
    broker_ts = {(r.partition, r.offset): r.timestamp for r in kafka_python_read(bs, topic, 6)}
    rows = rows_of(read(spark, "kafka", bs, subscribe=topic))
    assert [(r[3], r[4], r[5], r[6]) for r in rows] == \
        [(p, o, broker_ts[(p, o)], 1) for p in range(2) for o in range(3)]
    assert all(ts > BASE_TS + 3_000_000 for ts in broker_ts.values())  # not the producer's
    assert rows_of(read(spark, "kafkalite", bs, subscribe=topic)) == rows


def test_connector_offset_ranges_by_json_and_timestamp(spark_kafka: Any, target: str) -> None:
    spark, bs = spark_kafka, target
    topic = create_topic(bs, unique("kc-rng"), 3)
    fill(bs, topic, 3, 10)  # offset i has timestamp BASE_TS + 10 i

    def at(partition_ranges: dict[int, range]) -> list[tuple[str, int, int]]:
        return [(topic, p, o) for p, r in sorted(partition_ranges.items()) for o in r]

    assert same_in_both(spark, bs, subscribe=topic,
                        startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 5}}),
                        endingOffsets=json.dumps({topic: {"0": 7, "1": 3, "2": -1}})) == \
        at({0: range(2, 7), 1: range(0, 3), 2: range(5, 10)})
    assert same_in_both(spark, bs, assign=json.dumps({topic: [1]}),
                        startingOffsets=json.dumps({topic: {"1": 4}})) == at({1: range(4, 10)})
    # the first offset with timestamp >= +35 is 4; the end is exclusive: >= +75 is 8
    assert same_in_both(spark, bs, subscribe=topic, startingTimestamp=str(BASE_TS + 35),
                        endingTimestamp=str(BASE_TS + 75)) == at({p: range(4, 8) for p in range(3)})
    by_ts = {topic: {"0": BASE_TS + 85, "1": BASE_TS, "2": BASE_TS + 31}}
    end_by_ts = {topic: {"0": BASE_TS + 10**6, "1": BASE_TS + 20, "2": BASE_TS + 60}}
    # no offset at or after the ending timestamp (partition 0) means latest
    assert same_in_both(spark, bs, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts),
                        endingOffsetsByTimestamp=json.dumps(end_by_ts)) == \
        at({0: range(9, 10), 1: range(0, 2), 2: range(4, 6)})
    late = {topic: {"0": BASE_TS + 85, "1": BASE_TS + 10**6, "2": BASE_TS}}
    assert same_in_both(spark, bs, subscribe=topic, startingOffsetsByTimestamp=json.dumps(late),
                        startingOffsetsByTimestampStrategy="latest") == \
        at({0: range(9, 10), 2: range(0, 10)})
    # the connector's own messages, which the kafkalite source repeats
    for fmt in ("kafka", "kafkalite"):
        with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
            read(spark, fmt, bs, subscribe=topic, startingOffsetsByTimestamp=json.dumps(late)).collect()
        with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
            read(spark, fmt, bs, subscribe=topic, startingOffsets="latest").collect()


def settled_log_start(bs: str, topic: str, timeout: float = 20.0) -> int:
    """Partition 0's log start offset once retention has moved it and stopped moving it."""
    c = KafkaConsumer(bootstrap_servers=bs)
    tp = TopicPartition(topic, 0)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            start = c.beginning_offsets([tp])[tp]
            if start > 0:
                time.sleep(0.5)  # more than one retention check interval
                if c.beginning_offsets([tp])[tp] == start:
                    return start
            time.sleep(0.1)
        raise AssertionError(f"retention did not settle on {topic}")
    finally:
        c.close()


def test_connector_fail_on_data_loss(spark_kafka: Any, broker_factory: Any) -> None:
    """Offsets below the log start (retention deleted them): the Java consumer gets
    OFFSET_OUT_OF_RANGE and the connector fails the query, or skips to the log start."""
    spark = spark_kafka
    bs = broker_factory({"log.retention.check.interval.ms": "100"}).bootstrap_servers
    topic = create_topic(bs, unique("kc-loss"), 1, {"segment.bytes": "400", "retention.bytes": "400"})
    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0)
    for i in range(40):
        p.send(topic, value=b"%03d" % i + b"x" * 100, partition=0).get(10)
    p.close()
    start = settled_log_start(bs, topic)
    assert 0 < start < 40
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="Some data may have been lost"):
        read(spark, "kafka", bs, subscribe=topic, startingOffsets=from_zero).collect()
    df = read(spark, "kafka", bs, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert sorted((r.offset, bytes(r.value)[:3]) for r in df.collect()) == \
        [(o, b"%03d" % o) for o in range(start, 40)]


# ---- transactions ------------------------------------------------------------------------

def test_connector_read_committed_vs_read_uncommitted(spark_kafka: Any, target: str) -> None:
    spark, bs = spark_kafka, target
    topic = create_topic(bs, unique("kc-txn"), 2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("txn"), "linger.ms": 0})
    p.init_transactions(30)

    def transaction(tag: str, per_partition: int, commit: Optional[bool]) -> None:
        p.begin_transaction()
        for part in range(2):
            for i in range(per_partition):
                p.produce(topic, value=f"{tag}{part}-{i}".encode(), partition=part)
        assert p.flush(30) == 0
        if commit is True:
            p.commit_transaction(30)
        elif commit is False:
            p.abort_transaction(30)

    # per partition: committed 0-2 + marker 3, aborted 4-5 + marker 6, committed 7-9 + marker
    # 10, then an open transaction 11-12 (it holds the last stable offset at 11)
    transaction("c", 3, True)
    transaction("a", 2, False)
    transaction("d", 3, True)
    transaction("o", 2, None)
    try:
        committed = [(part, o, f"c{part}-{o}") for part in range(2) for o in range(3)] + \
            [(part, o, f"d{part}-{o - 7}") for part in range(2) for o in range(7, 10)]
        aborted = [(part, o, f"a{part}-{o - 4}") for part in range(2) for o in range(4, 6)]
        still_open = [(part, o, f"o{part}-{o - 11}") for part in range(2) for o in range(11, 13)]

        def values(fmt: str, isolation: str) -> list[tuple[int, int, str]]:
            df = read(spark, fmt, bs, subscribe=topic, **{"kafka.isolation.level": isolation})
            return sorted((r.partition, r.offset, bytes(r.value).decode())
                          for r in df.select("partition", "offset", "value").collect())

        assert values("kafka", "read_committed") == sorted(committed)
        assert values("kafka", "read_uncommitted") == sorted(committed + aborted + still_open)
        assert values("kafkalite", "read_committed") == sorted(committed)
        assert values("kafkalite", "read_uncommitted") == sorted(committed + aborted + still_open)
    finally:
        p.abort_transaction(30)
    # aborted now: the records of the open transaction stay invisible, and what was committed
    # before it is all read_committed sees (the end is the last stable offset, now the marker)
    assert sorted((r.partition, r.offset) for r in read(
        spark, "kafka", bs, subscribe=topic, **{"kafka.isolation.level": "read_committed"}).collect()) == \
        sorted((part, o) for part, o, _ in committed)


# ---- writes ------------------------------------------------------------------------------

def test_connector_batch_write(spark_kafka: Any, broker: Any) -> None:
    spark, bs = spark_kafka, broker.bootstrap_servers
    topic = create_topic(bs, unique("kc-w"), 3)
    other = create_topic(bs, unique("kc-w"), 1)
    rows = [("a", b"1", topic, 0, [("h", b"x")]),
            (None, b"2", topic, 1, None),
            ("c", None, topic, 2, [("h", b"y"), ("i", b""), ("n", None)]),
            ("d", b"4", topic, 2, []),
            ("e", b"5", other, None, None)]
    df = spark.createDataFrame(rows, "key string, value binary, topic string, partition int, "
                                     f"headers {HEADERS_TYPE}")
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).save()  # ErrorIfExists: accepted
    got = kafka_python_read(bs, topic, 4)
    assert [(r.partition, r.key, r.value, list(r.headers or [])) for r in got] == [
        (0, b"a", b"1", [("h", b"x")]), (1, None, b"2", []),
        (2, b"c", None, [("h", b"y"), ("i", b""), ("n", None)]), (2, b"d", b"4", [])]
    assert [(r.offset, r.key, r.value) for r in kafka_python_read(bs, other, 1)] == [(0, b"e", b"5")]

    # the topic option wins over the topic column
    third = create_topic(bs, unique("kc-w"), 1)
    spark.createDataFrame([("k", "x", "no-such-topic")], "key string, value string, topic string").write \
        .format("kafka").option("kafka.bootstrap.servers", bs).option("topic", third).mode("append").save()
    assert [(r.offset, r.key, r.value) for r in kafka_python_read(bs, third, 1)] == [(0, b"k", b"x")]
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        df.write.format("kafka").option("kafka.bootstrap.servers", bs).mode("overwrite").save()


def test_connector_streaming_write_topic_column_and_option(spark_kafka: Any, broker: Any, tmp_path: Path) -> None:
    spark, bs = spark_kafka, broker.bootstrap_servers
    src = create_topic(bs, unique("kc-src"), 2)
    even, odd, single = (create_topic(bs, unique("kc-dst"), 2) for _ in range(3))
    fill(bs, src, 2, 4)
    src_df = stream(spark, "kafka", bs, subscribe=src, startingOffsets="earliest", includeHeaders="true")
    # route by the topic column, keep the partition, add a header naming the source offset
    q = (src_df.selectExpr(f"IF(offset % 2 = 0, '{even}', '{odd}') AS topic", "key",
                           "upper(CAST(value AS STRING)) AS value", "partition",
                           "array(named_struct('key', 'src', 'value', CAST(CAST(offset AS STRING) AS BINARY)))"
                           " AS headers")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", bs)
         .option("checkpointLocation", str(tmp_path / "ckpt-column")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    for dst, parity in ((even, 0), (odd, 1)):
        got = kafka_python_read(bs, dst, 4)
        assert [(r.partition, r.key, r.value, list(r.headers)) for r in got] == \
            [(p, f"k{p}-{i}".encode(), f"V{p}-{i}".encode(), [("src", str(i).encode())])
             for p in range(2) for i in range(4) if i % 2 == parity]

    q = (src_df.selectExpr("'ignored' AS topic", "key", "value")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", single)
         .option("checkpointLocation", str(tmp_path / "ckpt-option")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    got = kafka_python_read(bs, single, 8)
    # no partition column: the Java producer's partitioner puts a key at murmur2(key) mod 2
    # (kafka-python's is the same function); every record exactly once
    keys = [f"k{p}-{i}".encode() for p in range(2) for i in range(4)]
    assert sorted((r.partition, r.key, r.value) for r in got) == \
        sorted(((murmur2(k) & 0x7FFFFFFF) % 2, k, b"v" + k[1:]) for k in keys)
    assert sorted((r.partition, r.offset) for r in got) == sorted(
        (part, o) for part in range(2) for o in range(sum(1 for r in got if r.partition == part)))


# ---- streaming reads and checkpoints -----------------------------------------------------

def parquet_rows(spark: Any, path: Path) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in
                  spark.read.parquet(str(path)).select("partition", "offset", "value").collect())


def expected_rows(partitions: int, until: int) -> list[tuple[int, int, bytes]]:
    return [(p, o, f"v{p}-{o}".encode()) for p in range(partitions) for o in range(until)]


def run_available_now(spark: Any, fmt: str, bs: str, topic: str, out: Path, ckpt: Path,
                      **options: str) -> list[dict]:
    """One Trigger.AvailableNow run into a parquet sink; the progress of the batches that read."""
    q = (stream(spark, fmt, bs, subscribe=topic, startingOffsets="earliest", **options)
         .select("partition", "offset", "value")
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    assert q.awaitTermination(120), "availableNow query did not finish"
    assert q.exception() is None
    return [p for p in q.recentProgress if p["numInputRows"] > 0]


def offset_log_lines(ckpt: Path) -> list[str]:
    """The source offsets Spark wrote per batch, as written: the last line of offsets/<batch>."""
    files = sorted((f for f in (ckpt / "offsets").iterdir() if f.name.isdigit()), key=lambda f: int(f.name))
    return [f.read_text().splitlines()[-1] for f in files]


def offset_log(ckpt: Path) -> list[dict]:
    return [json.loads(line) for line in offset_log_lines(ckpt)]


def test_connector_streaming_restart_exactly_once(spark_kafka: Any, broker: Any, tmp_path: Path) -> None:
    spark, bs = spark_kafka, broker.bootstrap_servers
    topic = create_topic(bs, unique("kc-st"), 2)
    fill(bs, topic, 2, 6)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    progress = run_available_now(spark, "kafka", bs, topic, out, ckpt, maxOffsetsPerTrigger="5")
    # 5 per trigger over two equally lagging partitions: 2 each per batch
    assert [json.loads(p["sources"][0]["endOffset"]) for p in progress] == \
        [{topic: {"0": n, "1": n}} for n in (2, 4, 6)]
    assert parquet_rows(spark, out) == expected_rows(2, 6)

    fill(bs, topic, 2, 3, first=6)
    progress = run_available_now(spark, "kafka", bs, topic, out, ckpt)
    assert [(json.loads(p["sources"][0]["startOffset"]), p["numInputRows"]) for p in progress] == \
        [({topic: {"0": 6, "1": 6}}, 6)]
    assert parquet_rows(spark, out) == expected_rows(2, 9)  # every record exactly once
    assert offset_log(ckpt) == [{topic: {"0": n, "1": n}} for n in (2, 4, 6, 9)]


def test_connector_streaming_picks_up_new_partitions(spark_kafka: Any, broker: Any, tmp_path: Path) -> None:
    """Partitions added while a query is down (CreatePartitions) are read from offset 0 on restart."""
    spark, bs = spark_kafka, broker.bootstrap_servers
    topic = create_topic(bs, unique("kc-grow"), 1)
    fill(bs, topic, 1, 3)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    run_available_now(spark, "kafka", bs, topic, out, ckpt)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_partitions({topic: NewPartitions(3)})
    finally:
        admin.close()
    fill(bs, topic, 3, 2, first=3)  # offsets 3-4 of partition 0, 0-1 of the new ones (keys k<p>-3/4)
    progress = run_available_now(spark, "kafka", bs, topic, out, ckpt)
    assert [(json.loads(p["sources"][0]["endOffset"]), p["numInputRows"]) for p in progress] == \
        [({topic: {"0": 5, "1": 2, "2": 2}}, 6)]
    assert parquet_rows(spark, out) == [(0, o, f"v0-{o}".encode()) for o in range(5)] + \
        [(p, o, f"v{p}-{o + 3}".encode()) for p in (1, 2) for o in range(2)]


def test_connector_streaming_read_committed_stops_at_open_transaction(
        spark_kafka: Any, target: str, tmp_path: Path) -> None:
    """A read_committed stream ends each run at the last stable offset: an open transaction
    holds it back until committed; aborted records and markers never reach the sink."""
    spark, bs = spark_kafka, target
    topic = create_topic(bs, unique("kc-stx"), 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("txn"), "linger.ms": 0})
    p.init_transactions(30)

    def send(values: Sequence[str]) -> None:
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=0)
        assert p.flush(30) == 0

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run() -> list[tuple[Any, int]]:
        progress = run_available_now(spark, "kafka", bs, topic, out, ckpt,
                                     **{"kafka.isolation.level": "read_committed"})
        return [(json.loads(p["sources"][0]["endOffset"]), p["numInputRows"]) for p in progress]

    try:
        send(["c0", "c1", "c2"])
        p.commit_transaction(30)  # 0-2, marker 3
        send(["o0", "o1"])  # 4-5, open: the last stable offset is 4
        assert run() == [({topic: {"0": 4}}, 3)]
        p.commit_transaction(30)  # marker 6
        send(["a0"])  # 7
        p.abort_transaction(30)  # marker 8
    finally:
        p.flush(10)
    assert run() == [({topic: {"0": 9}}, 2)]
    assert [(o, v.decode()) for _p, o, v in parquet_rows(spark, out)] == \
        [(0, "c0"), (1, "c1"), (2, "c2"), (4, "o0"), (5, "o1")]


@pytest.mark.parametrize("formats", [("kafka", "kafkalite", "kafka"), ("kafkalite", "kafka", "kafkalite")])
def test_checkpoint_moves_between_connector_and_kafkalite(spark_kafka: Any, broker: Any, tmp_path: Path,
                                                          formats: tuple[str, str, str]) -> None:
    """Both sources checkpoint `{"topic":{"partition":next offset}}` (the kafkalite source's
    has JSON spaces, which the connector's parser ignores), and Spark does not record which
    source wrote an offset: a query can change format on the same checkpoint, either way."""
    spark, bs = spark_kafka, broker.bootstrap_servers
    topic = create_topic(bs, unique("kc-ck"), 2)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    ends = []
    for run, fmt in enumerate(formats):
        fill(bs, topic, 2, 3, first=3 * run)
        progress = run_available_now(spark, fmt, bs, topic, out, ckpt)
        ends.append(3 * run + 3)
        start = None if run == 0 else {topic: {"0": 3 * run, "1": 3 * run}}
        # each run starts where the other format stopped, reads only the new records
        assert [(json.loads(p["sources"][0]["startOffset"]) if p["sources"][0]["startOffset"] else None,
                 p["numInputRows"]) for p in progress] == [(start, 6)]
        assert parquet_rows(spark, out) == expected_rows(2, 3 * run + 3)
    assert offset_log(ckpt) == [{topic: {"0": n, "1": n}} for n in ends]
    # what each wrote: the connector compact JSON, the kafkalite source (through PySpark's
    # json.dumps) the same JSON with spaces
    assert offset_log_lines(ckpt) == [
        json.dumps({topic: {"0": n, "1": n}}, separators=(",", ":") if fmt == "kafka" else (", ", ": "))
        for fmt, n in zip(formats, ends)]
