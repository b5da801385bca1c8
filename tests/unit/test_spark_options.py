"""Pure functions of the kafkalite PySpark data source: option parsing and validation (Spark's
KafkaSourceProvider rules), offset JSON, range splitting (KafkaOffsetRangeCalculator), rate
limiting (KafkaMicroBatchStream.rateLimit), micro-batch planning and the sink schema check."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark.sql.datasource")

from kafkalite.spark.datasource import (  # noqa: E402
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetRange,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    WriteColumns,
    divide_range,
    kafka_python_config,
    offsets_from_json,
    offsets_to_json,
    parse_assign,
    parse_partition_offsets,
    parse_sink_options,
    parse_source_options,
    plan_streaming_ranges,
    rate_limit,
    should_delay_batch,
    source_schema_ddl,
    split_offset_ranges,
    time_string_as_ms,
    validate_write_schema,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def opts(**kw: str) -> dict[str, str]:
    return {**BS, **kw}


# ---- strategies --------------------------------------------------------------------------

def test_subscribe_list_is_trimmed_and_empty_entries_dropped() -> None:
    o = parse_source_options(opts(subscribe=" a, b ,,c "), streaming=False)
    assert o.strategy == Subscribe(("a", "b", "c"))
    assert o.bootstrap_servers == "127.0.0.1:9092"


def test_option_names_are_case_insensitive() -> None:
    o = parse_source_options({"Kafka.Bootstrap.Servers": "h:1", "SUBSCRIBEPATTERN": "t-.*",
                              "StartingOffsets": "earliest", "includeHeaders": "TRUE"}, False)
    assert o.strategy == SubscribePattern("t-.*")
    assert o.include_headers is True
    assert o.kafka_params == {"bootstrap.servers": "h:1"}


def test_assign_json() -> None:
    o = parse_source_options(opts(assign='{"a":[0,2],"b":[1]}'), streaming=True)
    assert o.strategy == Assign((("a", 0), ("a", 2), ("b", 1)))
    assert parse_assign('{"x":[]}') == ()


@pytest.mark.parametrize("bad", ['{"a":[0,"1"]}', '{"a":0}', "[1]", "{not json"])
def test_assign_malformed(bad: str) -> None:
    with pytest.raises(ValueError, match="Expected e.g."):
        parse_assign(bad)


def test_assign_must_be_json_object() -> None:
    with pytest.raises(ValueError, match="No topicpartitions to assign as specified value for option 'assign' is 'a:0'"):
        parse_source_options(opts(assign="a:0"), streaming=False)


def test_exactly_one_strategy() -> None:
    with pytest.raises(ValueError, match="One of the following options must be specified for Kafka source"):
        parse_source_options(opts(), streaming=False)
    with pytest.raises(ValueError, match="Only one of the following options can be specified"):
        parse_source_options(opts(subscribe="a", assign='{"a":[0]}'), streaming=False)


def test_empty_subscribe_and_pattern() -> None:
    with pytest.raises(ValueError, match="No topics to subscribe to as specified value for option 'subscribe' is ' , '"):
        parse_source_options(opts(subscribe=" , "), streaming=False)
    with pytest.raises(ValueError, match="Pattern to subscribe is empty"):
        parse_source_options(opts(subscribePattern="  "), streaming=False)
    with pytest.raises(ValueError, match="Invalid subscribePattern"):
        parse_source_options(opts(subscribePattern="a("), streaming=False)


# ---- kafka.* options ---------------------------------------------------------------------

def test_bootstrap_servers_required() -> None:
    with pytest.raises(ValueError, match="Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(ValueError, match="Kafka producer"):
        parse_sink_options({"topic": "a"})


@pytest.mark.parametrize("key, message", [
    ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported"),
    ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported"),
    ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported"),
    ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
    ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
])
def test_unsupported_consumer_options(key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_source_options(opts(subscribe="a", **{key: "x"}), streaming=True)


def test_unsupported_serializers_for_sink() -> None:
    with pytest.raises(ValueError, match="Kafka option 'key.serializer' is not supported"):
        parse_sink_options({**BS, "kafka.key.serializer": "x"})
    with pytest.raises(ValueError, match="Kafka option 'value.serializer' is not supported"):
        parse_sink_options({**BS, "kafka.value.serializer": "x"})
    s = parse_sink_options({**BS, "topic": " out ", "kafka.acks": "1"})
    assert s.topic == "out" and s.kafka_params == {"bootstrap.servers": "127.0.0.1:9092", "acks": "1"}


def test_kafka_python_config_translates_and_types() -> None:
    defaults = {"bootstrap_servers": "localhost", "request_timeout_ms": 30000, "check_crcs": True,
                "client_id": "x", "acks": -1, "compression_type": None, "security_protocol": "PLAINTEXT"}
    cfg = kafka_python_config({"bootstrap.servers": "a:1, b:2", "request.timeout.ms": "500",
                               "check.crcs": "false", "client.id": "me", "acks": "all",
                               "compression.type": "none", "sasl.jaas.config": "x",
                               "group.id": "g"}, defaults, {"group.id"})
    assert cfg == {"bootstrap_servers": ["a:1", "b:2"], "request_timeout_ms": 500,
                   "check_crcs": False, "client_id": "me", "acks": "all", "compression_type": None}
    assert kafka_python_config({"acks": "1"}, defaults) == {"acks": 1}


# ---- starting / ending offsets -----------------------------------------------------------

def test_defaults_batch_earliest_to_latest_stream_latest() -> None:
    b = parse_source_options(opts(subscribe="a"), streaming=False)
    assert (b.starting, b.ending) == (EarliestOffsets(), LatestOffsets())
    assert b.fail_on_data_loss is True and b.include_headers is False
    assert b.poll_timeout_ms == 120_000 and b.fetch_offset_num_retries == 3
    s = parse_source_options(opts(subscribe="a"), streaming=True)
    assert (s.starting, s.ending) == (LatestOffsets(), None)


def test_partition_offsets_json() -> None:
    assert parse_partition_offsets('{"a":{"0":23,"1":-1},"b":{"0":-2}}') == {
        ("a", 0): 23, ("a", 1): -1, ("b", 0): -2}
    for bad in ('{"a":{"x":1}}', '{"a":{"0":"1"}}', '{"a":1}', "earliest-ish"):
        with pytest.raises(ValueError, match="Expected e.g."):
            parse_partition_offsets(bad)


def test_offsets_json_round_trip_is_the_checkpoint_form() -> None:
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 0}
    j = offsets_to_json(offsets)
    assert j == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert offsets_from_json(j) == offsets


def test_batch_rejects_latest_start_and_earliest_end() -> None:
    with pytest.raises(ValueError, match="starting offset can't be latest for batch queries on Kafka"):
        parse_source_options(opts(subscribe="a", startingOffsets="LATEST"), streaming=False)
    with pytest.raises(ValueError, match="startingOffsets for a-1 can't be latest for batch queries"):
        parse_source_options(opts(subscribe="a", startingOffsets='{"a":{"0":1,"1":-1}}'), False)
    with pytest.raises(ValueError, match="ending offset can't be earliest for batch queries on Kafka"):
        parse_source_options(opts(subscribe="a", endingOffsets="earliest"), streaming=False)
    with pytest.raises(ValueError, match="ending offset for a-0 can't be earliest"):
        parse_source_options(opts(subscribe="a", endingOffsets='{"a":{"0":-2}}'), False)


def test_streaming_rejects_ending_options() -> None:
    with pytest.raises(ValueError, match="ending offset not valid in streaming queries"):
        parse_source_options(opts(subscribe="a", endingOffsets="latest"), streaming=True)
    with pytest.raises(ValueError, match="ending timestamp not valid in streaming queries"):
        parse_source_options(opts(subscribe="a", endingOffsetsByTimestamp='{"a":{"0":1}}'), True)


def test_specific_start_and_end_must_match_and_be_ordered() -> None:
    o = parse_source_options(opts(subscribe="a", startingOffsets='{"a":{"0":1,"1":-2}}',
                                  endingOffsets='{"a":{"0":5,"1":-1}}'), streaming=False)
    assert o.starting == SpecificOffsets({("a", 0): 1, ("a", 1): -2})
    assert o.ending == SpecificOffsets({("a", 0): 5, ("a", 1): -1})
    with pytest.raises(ValueError, match=r"different topic partitions: start \[a-0, a-1\], end \[a-0\]"):
        parse_source_options(opts(subscribe="a", startingOffsets='{"a":{"0":1,"1":1}}',
                                  endingOffsets='{"a":{"0":5}}'), streaming=False)
    with pytest.raises(ValueError, match=r"The start offset \(6\) for a-0 is greater than the end offset \(5\)"):
        parse_source_options(opts(subscribe="a", startingOffsets='{"a":{"0":6}}',
                                  endingOffsets='{"a":{"0":5}}'), streaming=False)


def test_timestamp_options_take_precedence() -> None:
    o = parse_source_options(opts(subscribe="a", startingTimestamp="1000",
                                  startingOffsetsByTimestamp='{"a":{"0":5}}',
                                  startingOffsets="earliest"), streaming=True)
    assert o.starting == GlobalTimestamp(1000, no_match_latest=False)
    o = parse_source_options(opts(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":5}}',
                                  startingOffsetsByTimestampStrategy="LATEST",
                                  startingOffsets="earliest"), streaming=True)
    assert o.starting == SpecificTimestamps({("a", 0): 5}, no_match_latest=True)
    o = parse_source_options(opts(subscribe="a", endingTimestamp="99"), streaming=False)
    assert o.ending == GlobalTimestamp(99, no_match_latest=False)
    with pytest.raises(ValueError, match="Expected a single long value, got 12x"):
        parse_source_options(opts(subscribe="a", startingTimestamp="12x"), streaming=True)
    with pytest.raises(ValueError, match="startingOffsetsByTimestampStrategy must be"):
        parse_source_options(opts(subscribe="a", startingOffsetsByTimestampStrategy="x"), True)


# ---- numeric options ---------------------------------------------------------------------

def test_numeric_options() -> None:
    o = parse_source_options(opts(subscribe="a", maxOffsetsPerTrigger="100", minPartitions="4",
                                  maxRecordsPerPartition="1000", failOnDataLoss="false",
                                  **{"kafkaConsumer.pollTimeoutMs": "5000",
                                     "fetchOffset.numRetries": "5",
                                     "fetchOffset.retryIntervalMs": "10"},
                                  minOffsetsPerTrigger="10", maxTriggerDelay="30s"), streaming=True)
    assert (o.max_offsets_per_trigger, o.min_partitions, o.max_records_per_partition) == (100, 4, 1000)
    assert (o.fail_on_data_loss, o.poll_timeout_ms) == (False, 5000)
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (5, 10)
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (10, 30_000)
    assert parse_source_options(opts(subscribe="a"), True).max_trigger_delay_ms == 15 * 60 * 1000


@pytest.mark.parametrize("kw, message", [
    ({"minPartitions": "0"}, "minPartitions must be positive"),
    ({"maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition must be positive"),
    ({"maxOffsetsPerTrigger": "ten"}, "Option 'maxOffsetsPerTrigger' must be an integer"),
    ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"},
     r"The value of minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(10\)"),
    ({"failOnDataLoss": "yes"}, "Option 'failOnDataLoss' must be 'true' or 'false'"),
])
def test_numeric_option_errors(kw: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_source_options(opts(subscribe="a", **kw), streaming=True)


def test_time_strings() -> None:
    assert [time_string_as_ms(s) for s in ("15m", "10s", "250ms", "250", "1h", "2min", "1d")] == \
        [900_000, 10_000, 250, 250, 3_600_000, 120_000, 86_400_000]
    with pytest.raises(ValueError, match="Invalid time string"):
        time_string_as_ms("5 parsecs")


# ---- range splitting ---------------------------------------------------------------------

def R(p: int, a: int, b: int, t: str = "t") -> OffsetRange:
    return OffsetRange(t, p, a, b)


def test_divide_range_puts_the_remainder_last() -> None:
    assert divide_range(R(0, 0, 10), 3) == [R(0, 0, 3), R(0, 3, 6), R(0, 6, 10)]
    assert divide_range(R(0, 5, 7), 1) == [R(0, 5, 7)]


def test_split_without_options_is_one_per_partition_dropping_empty() -> None:
    ranges = [R(0, 0, 10), R(1, 5, 5), R(2, 3, 4)]
    assert split_offset_ranges(ranges, None, None) == [R(0, 0, 10), R(2, 3, 4)]
    assert split_offset_ranges(ranges, 2, None) == [R(0, 0, 10), R(2, 3, 4)]


def test_split_min_partitions_splits_large_ranges_proportionally() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite case: 1 small, 2 large partitions, minPartitions 4
    ranges = [R(1, 1, 5), R(2, 1, 21), R(3, 1, 21)]
    assert split_offset_ranges(ranges, 4, None) == [
        R(1, 1, 5), R(2, 1, 11), R(2, 11, 21), R(3, 1, 11), R(3, 11, 21)]
    assert split_offset_ranges([R(0, 0, 100)], 3, None) == [R(0, 0, 33), R(0, 33, 66), R(0, 66, 100)]


def test_split_max_records_per_partition() -> None:
    assert split_offset_ranges([R(0, 0, 25), R(1, 0, 10)], None, 10) == [
        R(0, 0, 8), R(0, 8, 16), R(0, 16, 25), R(1, 0, 10)]
    # then minPartitions on top
    assert split_offset_ranges([R(0, 0, 20)], 4, 10) == [R(0, 0, 5), R(0, 5, 10), R(0, 10, 15), R(0, 15, 20)]


# ---- rate limiting and micro-batch planning ----------------------------------------------

def test_rate_limit_prorates_by_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 100, ("t", 1): 100, ("t", 2): 105}
    assert rate_limit(50, start, latest, {}) == {("t", 0): 25, ("t", 1): 100, ("t", 2): 30}
    # a partition with a little lag still gets one offset (ceil below 1)
    assert rate_limit(10, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, {}) == \
        {("t", 0): 9, ("t", 1): 1}
    # nothing new: the latest offsets as they are
    assert rate_limit(10, latest, latest, {}) == latest
    # a new partition starts from its earliest offset
    assert rate_limit(10, {("t", 0): 0}, {("t", 0): 10, ("t", 1): 30}, {("t", 1): 20}) == \
        {("t", 0): 5, ("t", 1): 25}


def test_should_delay_batch() -> None:
    latest, cur = {("t", 0): 15}, {("t", 0): 10}
    assert should_delay_batch(10, latest, cur, now_ms=1000, last_trigger_ms=900, max_trigger_delay_ms=500)
    assert not should_delay_batch(5, latest, cur, now_ms=1000, last_trigger_ms=900, max_trigger_delay_ms=500)
    assert not should_delay_batch(10, latest, cur, now_ms=1400, last_trigger_ms=900, max_trigger_delay_ms=500)


def test_plan_streaming_ranges_new_deleted_and_truncated_partitions() -> None:
    plan = plan_streaming_ranges({("t", 0): 5, ("t", 1): 9, ("gone", 0): 3},
                                 {("t", 0): 8, ("t", 1): 4, ("t", 2): 6, ("t", 3): 2},
                                 {("t", 2): 0, ("t", 3): 1}, None, None)
    assert plan.ranges == [R(0, 5, 8), R(2, 0, 6), R(3, 1, 2)]
    assert plan.data_loss == [
        "Added partition t-3 starts from 1 instead of 0. Some data may have been missed",
        "[gone-0] are gone. Some data may have been missed.",
        "Partition t-1's offset was changed from 9 to 4, some data may have been missed",
    ]
    plan = plan_streaming_ranges({}, {("t", 0): 4}, {}, None, None)
    assert plan.ranges == [] and plan.data_loss == [
        "Cannot find earliest offsets of [t-0]. Some data may have been missed"]
    assert plan_streaming_ranges({("t", 0): 0}, {("t", 0): 10}, {}, 2, None).ranges == \
        [R(0, 0, 5), R(0, 5, 10)]


# ---- schemas -----------------------------------------------------------------------------

def test_source_schema_is_sparks_kafka_schema() -> None:
    assert source_schema_ddl(False) == ("key binary, value binary, topic string, partition int, "
                                        "offset bigint, timestamp timestamp, timestampType int")
    assert source_schema_ddl(True).endswith(", headers array<struct<key:string,value:binary>>")


def test_write_schema_columns() -> None:
    fields = [("extra", "double"), ("key", "string"), ("value", "binary"), ("topic", "string"),
              ("partition", "int"), ("headers", "array<struct<key:string,value:binary>>")]
    assert validate_write_schema(fields, None) == WriteColumns(value=2, key=1, topic=3, partition=4, headers=5)
    assert validate_write_schema([("value", "string")], "out") == WriteColumns(value=0)


@pytest.mark.parametrize("fields, topic, message", [
    ([("value", "string")], None, "topic option required when no 'topic' attribute is present"),
    ([("key", "string"), ("topic", "string")], None, "Required attribute 'value' not found"),
    ([("value", "int")], "o", "value attribute type must be a StringType or BinaryType"),
    ([("value", "string"), ("key", "bigint")], "o", "key attribute type must be a StringType or BinaryType"),
    ([("value", "string"), ("topic", "binary")], None, "topic attribute type must be a StringType"),
    ([("value", "string"), ("partition", "bigint")], "o", "partition attribute type must be a IntegerType"),
    ([("value", "string"), ("headers", "array<string>")], "o", "headers attribute type must be a ArrayType"),
])
def test_write_schema_errors(fields: list[tuple[str, str]], topic: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_write_schema(fields, topic)
