"""A PySpark Python Data Source (Spark 4.2+ `pyspark.sql.datasource`) for Kafka topics, format
`kafkalite`, with the schema and options of Spark's own Kafka connector and no JVM Kafka jar.

Driver side (planning) lists partitions and offsets with a kafka-python consumer that never
joins a group; executors read an offset range with a kafka-python consumer assigned to one
partition and seeking to its start, and write with kafka-python's producer.

Semantics follow Spark's `kafka-0-10-sql` connector (KafkaSourceProvider, KafkaMicroBatchStream,
KafkaOffsetReaderAdmin, KafkaOffsetRangeCalculator, KafkaDataConsumer, KafkaWriter): the same
option names and validation messages, offsets checkpointed as `{"topic": {"partition": offset}}`
(the next offset to read, like `KafkaConsumer.position()`), `maxOffsetsPerTrigger` prorated over
partitions by their lag, new partitions read from their earliest offset, `failOnDataLoss`.

The pure functions (option parsing, offset JSON, rate limiting, range splitting, sink schema
checks) come first and are unit-tested without Spark; the classes Spark calls come last.
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

log = logging.getLogger("kafkalite.spark")

FORMAT_NAME = "kafkalite"

# Kafka's sentinel offsets in offset JSON, as Spark's KafkaOffsetRangeLimit uses them.
LATEST = -1
EARLIEST = -2

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

# Spark's default for kafkaConsumer.pollTimeoutMs is spark.network.timeout (120 s).
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY = "15m"

_EXAMPLE_OFFSETS = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_EXAMPLE_TIMESTAMPS = '{"topicA":{"0":1000,"1":1000},"topicB":{"0":2000}}'
_EXAMPLE_ASSIGN = '{"topicA":[0,1],"topicB":[0,1]}'

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the source "
    'option "failOnDataLoss" to "true".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "false".'
)


class KafkaDataLossError(RuntimeError):
    """Offsets that should be read are gone (retention, deleted partitions) and
    `failOnDataLoss` is true: Spark's IllegalStateException for the same case."""


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str  # matched against the whole topic name, as Java's Pattern.matches


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


ConsumerStrategy = Union[Subscribe, SubscribePattern, Assign]


@dataclass(frozen=True)
class EarliestOffsets:
    pass


@dataclass(frozen=True)
class LatestOffsets:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    offsets: Mapping[TopicPartition, int]  # -2 earliest, -1 latest


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: Mapping[TopicPartition, int]
    no_match_latest: bool  # startingOffsetsByTimestampStrategy=latest (else: error)


@dataclass(frozen=True)
class GlobalTimestamp:
    timestamp: int
    no_match_latest: bool


OffsetRangeLimit = Union[EarliestOffsets, LatestOffsets, SpecificOffsets, SpecificTimestamps,
                         GlobalTimestamp]


@dataclass(frozen=True)
class SourceOptions:
    """Everything the source needs, parsed and validated from the DataFrame options."""
    kafka_params: Mapping[str, str]  # the `kafka.*` options without the prefix
    strategy: ConsumerStrategy
    starting: OffsetRangeLimit
    ending: Optional[OffsetRangeLimit]  # batch only
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: Optional[int] = None
    max_records_per_partition: Optional[int] = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_params["bootstrap.servers"]


@dataclass(frozen=True)
class SinkOptions:
    kafka_params: Mapping[str, str]
    topic: Optional[str]  # the `topic` option: overrides the topic column when set

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_params["bootstrap.servers"]


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's options are case-insensitive (CaseInsensitiveDict lower-cases keys)."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def parse_bool(value: str, key: str) -> bool:
    v = value.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise ValueError(f"Option '{key}' must be 'true' or 'false', got '{value}'")


def parse_long(value: str, key: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"Option '{key}' must be an integer, got '{value}'") from None


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}


def time_string_as_ms(value: str) -> int:
    """Spark's Utils.timeStringAsMs: a number with an optional unit (us, ms, s, m, min, h, d);
    no unit means milliseconds."""
    m = re.fullmatch(r"\s*(-?\d+)\s*([a-z]*)\s*", value.lower())
    if not m or m.group(2) not in ("", *_TIME_UNITS_MS):
        raise ValueError(f"Invalid time string: '{value}'")
    unit = _TIME_UNITS_MS[m.group(2)] if m.group(2) else 1
    return int(int(m.group(1)) * unit)


def _load_json_object(text: str, example: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise ValueError(f"Expected e.g. {example}, got {text}")
    return obj


def parse_partition_offsets(text: str) -> PartitionOffsets:
    """`{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}` -> {("topicA", 0): 23, ...}
    (Spark's JsonUtils.partitionOffsets)."""
    return _parse_partition_longs(text, _EXAMPLE_OFFSETS)


def parse_partition_timestamps(text: str) -> PartitionOffsets:
    return _parse_partition_longs(text, _EXAMPLE_TIMESTAMPS)


def _parse_partition_longs(text: str, example: str) -> PartitionOffsets:
    obj = _load_json_object(text, example)
    out: PartitionOffsets = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {example}, got {text}")
        for part, value in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise ValueError(f"Expected e.g. {example}, got {text}") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Expected e.g. {example}, got {text}")
            out[(topic, p)] = value
    return out


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """`{"topicA":[0,1],"topicB":[2,4]}` -> (("topicA", 0), ...) (Spark's JsonUtils.partitions)."""
    obj = _load_json_object(text, _EXAMPLE_ASSIGN)
    out: list[TopicPartition] = []
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                                  for p in parts):
            raise ValueError(f"Expected e.g. {_EXAMPLE_ASSIGN}, got {text}")
        out.extend((topic, p) for p in parts)
    return tuple(out)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpointed form: `{"topic": {"partition": offset}}`, sorted for stable output."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, Any]]) -> PartitionOffsets:
    return {(topic, int(p)): int(off) for topic, parts in obj.items() for p, off in parts.items()}


def _strategy(opts: Mapping[str, str]) -> ConsumerStrategy:
    keys = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    names = "subscribe, subscribepattern, assign"
    if not keys:
        raise ValueError("One of the following options must be specified for Kafka source: "
                         f"{names}. See the docs for more details.")
    if len(keys) > 1:
        raise ValueError("Only one of the following options can be specified for Kafka source: "
                         f"{names}. See the docs for more details.")
    key = keys[0]
    value = opts[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise ValueError("No topicpartitions to assign as specified value for option "
                             f"'assign' is '{value}'")
        return Assign(parse_assign(value))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError("No topics to subscribe to as specified value for option "
                             f"'subscribe' is '{value}'")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError("Pattern to subscribe is empty as specified value for option "
                         f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"Invalid subscribePattern '{pattern}': {e}") from None
    return SubscribePattern(pattern)


def offset_range_limit(opts: Mapping[str, str], global_ts_key: str, by_ts_key: str,
                       offsets_key: str, default: OffsetRangeLimit) -> OffsetRangeLimit:
    """Spark's getKafkaOffsetRangeLimit: a global timestamp wins over per-partition timestamps,
    which win over offsets (`earliest`, `latest` or JSON)."""
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError("startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
                         f"got '{strategy}'")
    no_match_latest = strategy == "latest"
    if global_ts_key in opts:
        ts = opts[global_ts_key].strip()
        try:
            return GlobalTimestamp(int(ts), no_match_latest)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {ts}") from None
    if by_ts_key in opts:
        return SpecificTimestamps(parse_partition_timestamps(opts[by_ts_key].strip()),
                                  no_match_latest)
    if offsets_key in opts:
        value = opts[offsets_key].strip()
        if value.lower() == "latest":
            return LatestOffsets()
        if value.lower() == "earliest":
            return EarliestOffsets()
        return SpecificOffsets(parse_partition_offsets(value))
    return default


def _check_kafka_params(kafka_params: Mapping[str, str]) -> None:
    if "group.id" in kafka_params:
        log.warning("Kafka option 'kafka.group.id' has been set on this query; the kafkalite "
                    "source never joins a consumer group (it assigns partitions), so it is "
                    "ignored.")
    if "auto.offset.reset" in kafka_params:
        raise ValueError(
            "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source option "
            "'startingoffsets' to 'earliest' or 'latest' to specify where to start. Structured "
            "Streaming manages which offsets are consumed internally, rather than relying on the "
            "kafkaConsumer to do it. This will ensure that no data is missed when new "
            "topics/partitions are dynamically subscribed. Note that 'startingoffsets' only "
            "applies when a new Streaming query is started, and that resuming will always pick "
            "up from where the query left off. See the docs for more details.")
    if "key.deserializer" in kafka_params:
        raise ValueError(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the keys.")
    if "value.deserializer" in kafka_params:
        raise ValueError(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as "
            "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the values.")
    for c in ("enable.auto.commit", "interceptor.classes"):
        if c in kafka_params:
            raise ValueError(f"Kafka option '{c}' is not supported")
    if "bootstrap.servers" not in kafka_params:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                         "Kafka consumer")


def kafka_params_of(opts: Mapping[str, str]) -> dict[str, str]:
    return {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate and parse reader options as Spark's KafkaSourceProvider does
    (validateStreamOptions / validateBatchOptions + validateGeneralOptions)."""
    opts = lower_keys(options)
    if streaming:
        if "endingoffsets" in opts:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts:
            raise ValueError("ending timestamp not valid in streaming queries")
    strategy = _strategy(opts)
    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = parse_long(opts["minpartitions"], "minPartitions")
        if min_partitions <= 0:
            raise ValueError("minPartitions must be positive")
    max_records = None
    if "maxrecordsperpartition" in opts:
        max_records = parse_long(opts["maxrecordsperpartition"], "maxRecordsPerPartition")
        if max_records <= 0:
            raise ValueError("maxRecordsPerPartition must be positive")
    kafka_params = kafka_params_of(opts)
    _check_kafka_params(kafka_params)
    max_per_trigger = (parse_long(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger")
                       if "maxoffsetspertrigger" in opts else None)
    min_per_trigger = (parse_long(opts["minoffsetspertrigger"], "minOffsetsPerTrigger")
                       if "minoffsetspertrigger" in opts else None)
    if max_per_trigger is not None and max_per_trigger <= 0:
        raise ValueError("maxOffsetsPerTrigger must be positive")
    if min_per_trigger is not None and min_per_trigger <= 0:
        raise ValueError("minOffsetsPerTrigger must be positive")
    if min_per_trigger is not None and max_per_trigger is not None \
            and min_per_trigger > max_per_trigger:
        raise ValueError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than "
                         f"the maxOffsetsPerTrigger({max_per_trigger}).")
    max_trigger_delay_ms = time_string_as_ms(opts.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY))

    if streaming:
        starting = offset_range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                                      "startingoffsets", LatestOffsets())
        ending = None
    else:
        starting = offset_range_limit(opts, "startingtimestamp", "startingoffsetsbytimestamp",
                                      "startingoffsets", EarliestOffsets())
        if isinstance(starting, LatestOffsets):
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, SpecificOffsets):
            for tp, off in starting.offsets.items():
                if off == LATEST:
                    raise ValueError(f"startingOffsets for {_tp_str(tp)} can't be latest for "
                                     "batch queries on Kafka")
        ending = offset_range_limit(opts, "endingtimestamp", "endingoffsetsbytimestamp",
                                    "endingoffsets", LatestOffsets())
        if isinstance(ending, EarliestOffsets):
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(ending, SpecificOffsets):
            for tp, off in ending.offsets.items():
                if off == EARLIEST:
                    raise ValueError(f"ending offset for {_tp_str(tp)} can't be earliest for "
                                     "batch queries on Kafka")
        check_offset_limit_validity(starting, ending)
        for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if key in opts:
                log.warning("%s option ignored in batch queries", key)

    return SourceOptions(
        kafka_params=kafka_params,
        strategy=strategy,
        starting=starting,
        ending=ending,
        include_headers=parse_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        fail_on_data_loss=parse_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_trigger_delay_ms,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        poll_timeout_ms=parse_long(opts.get("kafkaconsumer.polltimeoutms",
                                            str(DEFAULT_POLL_TIMEOUT_MS)),
                                   "kafkaConsumer.pollTimeoutMs"),
        fetch_offset_num_retries=parse_long(opts.get("fetchoffset.numretries", "3"),
                                            "fetchOffset.numRetries"),
        fetch_offset_retry_interval_ms=parse_long(opts.get("fetchoffset.retryintervalms", "1000"),
                                                  "fetchOffset.retryIntervalMs"),
    )


def check_offset_limit_validity(start: OffsetRangeLimit, end: Optional[OffsetRangeLimit]) -> None:
    """Specific starting and ending offsets (or timestamps) must name the same partitions, and
    a start may not lie after its end (negative sentinels are not compared)."""
    if isinstance(start, SpecificOffsets) and isinstance(end, SpecificOffsets):
        pairs, what = (start.offsets, end.offsets), "offset"
    elif isinstance(start, SpecificTimestamps) and isinstance(end, SpecificTimestamps):
        pairs, what = (start.timestamps, end.timestamps), "timestamp"
    else:
        return
    s, e = pairs
    if set(s) != set(e):
        raise ValueError("Start and end offsets name different topic partitions: start "
                         f"{_tps_str(s)}, end {_tps_str(e)}")
    for tp, so in s.items():
        eo = e[tp]
        if so >= 0 and eo >= 0 and so > eo:
            raise ValueError(f"The start {what} ({so}) for {_tp_str(tp)} is greater than the end "
                             f"{what} ({eo})")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Writer options as Spark's kafkaParamsForProducer + the `topic` option."""
    opts = lower_keys(options)
    kafka_params = kafka_params_of(opts)
    if "key.serializer" in kafka_params:
        raise ValueError("Kafka option 'key.serializer' is not supported as keys are serialized "
                         "with ByteArraySerializer.")
    if "value.serializer" in kafka_params:
        raise ValueError("Kafka option 'value.serializer' is not supported as value are "
                         "serialized with ByteArraySerializer.")
    if "bootstrap.servers" not in kafka_params:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                         "Kafka producer")
    topic = opts.get("topic")
    return SinkOptions(kafka_params=kafka_params, topic=topic.strip() if topic is not None else None)


def _tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tps_str(tps: Any) -> str:
    return "[" + ", ".join(_tp_str(tp) for tp in sorted(tps)) + "]"


# --------------------------------------------------------------------------------------------
# kafka.* options -> kafka-python configuration
# --------------------------------------------------------------------------------------------

# Options that make no sense for the client the source creates itself.
_CONSUMER_IGNORED = {"group.id", "group.instance.id", "client.rack", "partition.assignment.strategy",
                     "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
                     "auto.commit.interval.ms", "max.poll.records"}


def kafka_python_config(kafka_params: Mapping[str, str], defaults: Mapping[str, Any],
                        ignored: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Translate Java client property names (without the `kafka.` prefix) to kafka-python
    keyword arguments, converting each value to the type of kafka-python's default. Properties
    kafka-python does not know are dropped with a warning, as the Java client warns about
    unknown configs."""
    out: dict[str, Any] = {}
    for key, raw in kafka_params.items():
        if key in ignored:
            continue
        name = key.replace(".", "_")
        if key == "bootstrap.servers":
            out["bootstrap_servers"] = [s.strip() for s in raw.split(",") if s.strip()]
            continue
        if name not in defaults:
            log.warning("Kafka option 'kafka.%s' has no kafka-python equivalent and is ignored",
                        key)
            continue
        default = defaults[name]
        value: Any
        if name == "acks":  # "all" stays a string (kafka-python accepts it), numbers are numbers
            value = raw if raw == "all" else int(raw)
        elif name == "compression_type" and raw == "none":
            value = None
        elif isinstance(default, bool):
            value = parse_bool(raw, "kafka." + key)
        elif isinstance(default, int) and not isinstance(default, bool):
            value = int(raw)
        elif isinstance(default, float):
            value = float(raw)
        else:
            value = raw
        out[name] = value
    return out


# --------------------------------------------------------------------------------------------
# Offset ranges
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int  # inclusive
    until_offset: int  # exclusive

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        """An estimate: compaction and transaction markers leave offsets without records."""
        return self.until_offset - self.from_offset


def divide_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Split into `parts` contiguous ranges; each takes remaining // (parts left), so the
    remainder goes to the last ones (as KafkaOffsetRangeCalculator.getDividedPartition)."""
    remaining = r.size
    start = r.from_offset
    out = []
    for i in range(parts):
        n = remaining // (parts - i)
        remaining -= n
        end = min(start + n, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def split_offset_ranges(ranges: Sequence[OffsetRange], min_partitions: Optional[int],
                        max_records_per_partition: Optional[int]) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: drop empty ranges; split ranges larger than
    `maxRecordsPerPartition`; then, when fewer ranges than `minPartitions` remain, split the
    large ones in proportion to their size (small ones stay whole)."""
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records_per_partition is None:
        return ranges
    if max_records_per_partition is not None:
        ranges = [part for r in ranges
                  for part in divide_range(r, math.ceil(r.size / max_records_per_partition))]
        ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, min_parts: int) -> int:
        # Scala's math.round rounds half up
        return max(math.floor(size / total_size * min_parts + 0.5), 1)

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    unsplit_ids = {id(r) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min_parts = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if id(r) in unsplit_ids else part_count(r.size, split_total, split_min_parts)
        out.extend(divide_range(r, parts))
    return [r for r in out if r.size > 0]


def rate_limit(limit: int, from_offsets: Mapping[TopicPartition, int],
               until_offsets: Mapping[TopicPartition, int],
               earliest_of_new: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """Spread `limit` offsets over the partitions in proportion to their lag (Spark's
    KafkaMicroBatchStream.rateLimit). A partition with any lag gets at least one offset;
    partitions new since `from_offsets` start from their earliest offset."""
    sizes: dict[TopicPartition, int] = {}
    for tp, end in until_offsets.items():
        begin = from_offsets.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until_offsets)
    out: PartitionOffsets = {}
    for tp, end in until_offsets.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = from_offsets.get(tp, earliest_of_new.get(tp))
        assert begin is not None
        prorate = limit * (sizes[tp] / total)
        n = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + n)
    return out


def should_delay_batch(min_rows: int, latest: Mapping[TopicPartition, int],
                       current: Mapping[TopicPartition, int], now_ms: int, last_trigger_ms: int,
                       max_trigger_delay_ms: int) -> bool:
    """minOffsetsPerTrigger: skip this trigger while fewer than `min_rows` new offsets are
    available, unless `maxTriggerDelay` has passed since the last batch that ran."""
    if now_ms - last_trigger_ms >= max_trigger_delay_ms:
        return False
    new = sum(off - current.get(tp, 0) for tp, off in latest.items())
    return new < min_rows


@dataclass
class StreamingPlan:
    ranges: list[OffsetRange]
    data_loss: list[str] = field(default_factory=list)  # messages for reportDataLoss


def plan_streaming_ranges(from_offsets: Mapping[TopicPartition, int],
                          until_offsets: Mapping[TopicPartition, int],
                          earliest_of_new: Mapping[TopicPartition, int],
                          min_partitions: Optional[int],
                          max_records_per_partition: Optional[int]) -> StreamingPlan:
    """The ranges of one micro-batch and the data-loss conditions Spark reports for it
    (KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets): partitions new in `until`
    start at their earliest offset (data loss if that is not 0, or if it could not be found),
    partitions missing from `until` are gone, an until offset below its from offset means the
    partition was recreated or truncated."""
    loss: list[str] = []
    new = set(until_offsets) - set(from_offsets)
    missing_new = new - set(earliest_of_new)
    if missing_new:
        loss.append(f"Cannot find earliest offsets of {_tps_str(missing_new)}. Some data may "
                    "have been missed")
    for tp in sorted(new & set(earliest_of_new)):
        if earliest_of_new[tp] != 0:
            loss.append(f"Added partition {_tp_str(tp)} starts from {earliest_of_new[tp]} "
                        "instead of 0. Some data may have been missed")
    deleted = set(from_offsets) - set(until_offsets)
    if deleted:
        loss.append(f"{_tps_str(deleted)} are gone. Some data may have been missed.")
    ranges = []
    for tp in sorted(until_offsets):
        if tp in from_offsets:
            start = from_offsets[tp]
        elif tp in earliest_of_new:
            start = earliest_of_new[tp]
        else:
            continue
        end = until_offsets[tp]
        if end < start:
            loss.append(f"Partition {_tp_str(tp)}'s offset was changed from {start} to {end}, "
                        "some data may have been missed")
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return StreamingPlan(split_offset_ranges(ranges, min_partitions, max_records_per_partition),
                         loss)


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise KafkaDataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def source_schema_ddl(include_headers: bool) -> str:
    """Spark's KafkaRecordToRowConverter.kafkaSchema."""
    ddl = ("key binary, value binary, topic string, partition int, offset bigint, "
           "timestamp timestamp, timestampType int")
    if include_headers:
        ddl += f", headers {HEADERS_TYPE}"
    return ddl


@dataclass(frozen=True)
class WriteColumns:
    """Positions of the sink's columns in the input rows (None: column absent)."""
    value: int
    key: Optional[int] = None
    topic: Optional[int] = None
    partition: Optional[int] = None
    headers: Optional[int] = None


def validate_write_schema(fields: Sequence[tuple[str, str]], topic_option: Optional[str]) -> WriteColumns:
    """Check the input schema against Spark's Kafka sink (KafkaWriter.validateQuery): `value`
    string or binary (required), `key` string or binary, `topic` string (required unless the
    `topic` option is set), `partition` int, `headers` array<struct<key:string,value:binary>>.
    `fields` are (name, Spark simpleString type); other columns are ignored."""
    pos: dict[str, tuple[int, str]] = {}
    for i, (name, typ) in enumerate(fields):
        pos.setdefault(name.lower(), (i, typ.replace(" ", "").lower()))

    def column(name: str, allowed: tuple[str, ...], what: str) -> Optional[int]:
        if name not in pos:
            return None
        i, typ = pos[name]
        if typ not in allowed:
            raise ValueError(f"{name} attribute type must be a {what}")
        return i

    if topic_option is None and "topic" not in pos:
        raise ValueError("topic option required when no 'topic' attribute is present. Use the "
                         "topic option for setting a topic.")
    topic = column("topic", ("string",), "StringType")
    key = column("key", ("string", "binary"), "StringType or BinaryType")
    if "value" not in pos:
        raise ValueError("Required attribute 'value' not found")
    value = column("value", ("string", "binary"), "StringType or BinaryType")
    assert value is not None
    partition = column("partition", ("int",), "IntegerType")
    headers = column("headers", (HEADERS_TYPE,), "ArrayType(StructType(key StringType, value BinaryType))")
    return WriteColumns(value=value, key=key, topic=topic, partition=partition, headers=headers)


# --------------------------------------------------------------------------------------------
# Talking to the cluster
# --------------------------------------------------------------------------------------------

def _consumer_config(kafka_params: Mapping[str, str]) -> dict[str, Any]:
    from kafka import KafkaConsumer

    cfg = kafka_python_config(kafka_params, KafkaConsumer.DEFAULT_CONFIG, _CONSUMER_IGNORED)
    # No group, no commits, never create topics from a reader; the source decides offsets.
    cfg.update(group_id=None, enable_auto_commit=False, auto_offset_reset="none",
               allow_auto_create_topics=False, key_deserializer=None, value_deserializer=None)
    cfg.setdefault("metrics_enabled", False)
    cfg.setdefault("client_id", "kafkalite-spark")
    return cfg


class OffsetReader:
    """Driver-side partition listing and ListOffsets lookups (Spark's KafkaOffsetReaderAdmin),
    through one kafka-python consumer that is never part of a group."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: Any = None

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            self._consumer = KafkaConsumer(**_consumer_config(self.options.kafka_params))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None

    def __enter__(self) -> "OffsetReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _with_retries(self, body: Callable[[], PartitionOffsets]) -> PartitionOffsets:
        attempts = max(1, self.options.fetch_offset_num_retries)
        for attempt in range(1, attempts + 1):
            try:
                return body()
            except Exception as e:  # noqa: BLE001 -- retried, then re-raised
                if attempt == attempts:
                    raise
                log.warning("Error in attempt %d getting Kafka offsets: %s", attempt, e)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
                self.close()
        raise AssertionError("unreachable")

    def assigned_partitions(self) -> set[TopicPartition]:
        """The partitions the consumer strategy names now (fresh metadata every call, so new
        partitions and pattern-matched topics are seen)."""
        strategy = self.options.strategy
        if isinstance(strategy, Assign):
            return set(strategy.partitions)
        c = self.consumer
        topics = c.topics()  # refreshes metadata of all topics; internal topics excluded
        if isinstance(strategy, Subscribe):
            wanted = [t for t in strategy.topics if t in topics]
        else:
            rx = re.compile(strategy.pattern)
            wanted = [t for t in topics if rx.fullmatch(t)]
        return {(t, p) for t in wanted for p in (c.partitions_for_topic(t) or ())}

    def _list(self, tps: Sequence[TopicPartition], latest: bool) -> PartitionOffsets:
        from kafka import TopicPartition as KTP

        if not tps:
            return {}
        ktps = [KTP(t, p) for t, p in tps]
        c = self.consumer
        res = c.end_offsets(ktps) if latest else c.beginning_offsets(ktps)
        return {(k.topic, k.partition): int(v) for k, v in res.items()}

    def earliest(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        return self._with_retries(lambda: self._list(tps, latest=False))

    def latest(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        return self._with_retries(lambda: self._list(tps, latest=True))

    def earliest_all(self) -> PartitionOffsets:
        return self._with_retries(lambda: self._list(sorted(self.assigned_partitions()), False))

    def latest_all(self) -> PartitionOffsets:
        return self._with_retries(lambda: self._list(sorted(self.assigned_partitions()), True))

    def earliest_existing(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        """Earliest offsets of those of `tps` that still exist (a deleted one is left out)."""
        def body() -> PartitionOffsets:
            present = self.assigned_partitions()
            return self._list(sorted(tp for tp in tps if tp in present), latest=False)

        return self._with_retries(body) if tps else {}

    def _for_timestamps(self, timestamps: Mapping[TopicPartition, int], is_start: bool,
                        no_match_latest: bool) -> PartitionOffsets:
        from kafka import TopicPartition as KTP

        def body() -> PartitionOffsets:
            found = self.consumer.offsets_for_times({KTP(t, p): ts
                                                     for (t, p), ts in timestamps.items()})
            out: PartitionOffsets = {}
            for (t, p), ts in timestamps.items():
                hit = found.get(KTP(t, p))
                if hit is not None:
                    out[(t, p)] = int(hit.offset)
                elif is_start and not no_match_latest:
                    raise ValueError(f"No offset matched from request of topic-partition "
                                     f"{t}-{p} and timestamp {ts}.")
                else:
                    out[(t, p)] = LATEST
            return out

        resolved = self._with_retries(body)
        return self._resolve_sentinels(resolved)

    def _resolve_sentinels(self, offsets: Mapping[TopicPartition, int]) -> PartitionOffsets:
        out = dict(offsets)
        latest = [tp for tp, o in offsets.items() if o == LATEST]
        earliest = [tp for tp, o in offsets.items() if o == EARLIEST]
        out.update(self.latest(latest))
        out.update(self.earliest(earliest))
        return out

    def resolve(self, limit: OffsetRangeLimit, is_start: bool) -> PartitionOffsets:
        """Concrete offsets for every assigned partition."""
        if isinstance(limit, EarliestOffsets):
            return self.earliest_all()
        if isinstance(limit, LatestOffsets):
            return self.latest_all()
        assigned = self.assigned_partitions()
        if isinstance(limit, SpecificOffsets):
            if set(limit.offsets) != assigned:
                which = "startingOffsets" if is_start else "endingOffsets"
                raise ValueError(f"If {which} contains specific offsets, you must specify all "
                                 "TopicPartitions.\nUse -1 for latest, -2 for earliest, if you "
                                 f"don't care.\nSpecified: {_tps_str(limit.offsets)} Assigned: "
                                 f"{_tps_str(assigned)}")
            return self._resolve_sentinels(limit.offsets)
        if isinstance(limit, SpecificTimestamps):
            if set(limit.timestamps) != assigned:
                which = "startingOffsetsByTimestamp" if is_start else "endingOffsetsByTimestamp"
                raise ValueError(f"{which} must name exactly the assigned partitions. Specified: "
                                 f"{_tps_str(limit.timestamps)} Assigned: {_tps_str(assigned)}")
            return self._for_timestamps(limit.timestamps, is_start, limit.no_match_latest)
        assert isinstance(limit, GlobalTimestamp)
        return self._for_timestamps({tp: limit.timestamp for tp in assigned}, is_start,
                                    limit.no_match_latest)


# --------------------------------------------------------------------------------------------
# Reading one offset range (executors)
# --------------------------------------------------------------------------------------------

class KafkaInputPartition(InputPartition):
    """One Spark task: [from_offset, until_offset) of one topic partition."""

    def __init__(self, index: int, offset_range: OffsetRange) -> None:
        super().__init__(index)
        self.offset_range = offset_range

    def __repr__(self) -> str:
        r = self.offset_range
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


@dataclass(frozen=True)
class ReadSettings:
    kafka_params: Mapping[str, str]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int


_POLL_RECORDS = 10_000


def read_offset_range(r: OffsetRange, settings: ReadSettings) -> Iterator[tuple[list[Any], ...]]:
    """Yield the records of `r` as column lists (key, value, topic, partition, offset, timestamp
    ms, timestamp type[, headers]), in offset order, one chunk per poll.

    Offsets without a record (compaction, transaction markers) are skipped; offsets that are
    gone (below the log start offset after retention, or above the log end after truncation)
    are data loss: an error with failOnDataLoss, else skipped with a warning -- as Spark's
    KafkaDataConsumer."""
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    if r.size <= 0:
        return
    tp = KTP(r.topic, r.partition)
    consumer = KafkaConsumer(**_consumer_config(settings.kafka_params))
    try:
        consumer.assign([tp])
        cursor = r.from_offset
        consumer.seek(tp, cursor)
        last_progress = time.monotonic()
        poll_ms = max(1, min(500, settings.poll_timeout_ms))

        def available_range() -> tuple[int, int]:
            return (int(consumer.beginning_offsets([tp])[tp]), int(consumer.end_offsets([tp])[tp]))

        def lost(start: int, end: int, why: str) -> None:
            report_data_loss(f"Cannot fetch offsets [{start}, {end}) of {r.topic}-{r.partition}: "
                             f"{why}", settings.fail_on_data_loss)

        while cursor < r.until_offset:
            try:
                polled = consumer.poll(timeout_ms=poll_ms, max_records=_POLL_RECORDS)
            except OffsetOutOfRangeError:
                earliest, latest = available_range()
                if cursor < earliest:
                    lost(cursor, min(earliest, r.until_offset),
                         f"the earliest available offset is {earliest}")
                    cursor = earliest
                else:
                    lost(cursor, r.until_offset, f"the latest available offset is {latest}")
                    cursor = r.until_offset
                if cursor < r.until_offset:
                    consumer.seek(tp, cursor)
                last_progress = time.monotonic()
                continue
            records = polled.get(tp, ())
            earliest_now: Optional[int] = None  # looked up at most once per poll, for gaps
            cols: tuple[list[Any], ...] = tuple([] for _ in range(8 if settings.include_headers else 7))
            keys, values, topics, parts, offsets, stamps, stypes = cols[:7]
            for rec in records:
                off = rec.offset
                if off < cursor:
                    continue
                if off >= r.until_offset:
                    cursor = r.until_offset
                    break
                if off > cursor:
                    if earliest_now is None:
                        earliest_now = available_range()[0]
                    if earliest_now > cursor:  # aged out between planning and reading
                        lost(cursor, min(earliest_now, off),
                             f"the earliest available offset is {earliest_now}")
                    # else: invisible offsets (compacted away, control records): skip them
                keys.append(rec.key)
                values.append(rec.value)
                topics.append(r.topic)
                parts.append(r.partition)
                offsets.append(off)
                stamps.append(rec.timestamp)
                stypes.append(rec.timestamp_type if rec.timestamp_type is not None else -1)
                if settings.include_headers:
                    # a record without headers has a null array, as in Spark's converter
                    cols[7].append(list(rec.headers) if rec.headers else None)
                cursor = off + 1
            if offsets:
                last_progress = time.monotonic()
                yield cols
                continue
            if cursor >= r.until_offset:
                break
            position = consumer.position(tp)
            if position is not None and position > cursor:
                # the fetch moved past offsets that hold no visible record
                cursor = min(int(position), r.until_offset)
                last_progress = time.monotonic()
                continue
            if (time.monotonic() - last_progress) * 1000 >= settings.poll_timeout_ms:
                earliest, latest = available_range()
                if cursor < earliest:
                    lost(cursor, min(earliest, r.until_offset),
                         f"the earliest available offset is {earliest}")
                    cursor = earliest
                    consumer.seek(tp, cursor)
                elif cursor >= latest:
                    lost(cursor, r.until_offset, f"the latest available offset is {latest}")
                    cursor = r.until_offset
                else:
                    raise TimeoutError(f"Cannot fetch record for offset {cursor} of "
                                       f"{r.topic}-{r.partition} in {settings.poll_timeout_ms} "
                                       "milliseconds")
                last_progress = time.monotonic()
    finally:
        consumer.close()


def _arrow_batches(r: OffsetRange, settings: ReadSettings, schema: StructType) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    # exactly the Arrow schema Spark checks a returned RecordBatch against
    pa_schema = to_arrow_schema(schema, timezone="UTC")
    for cols in read_offset_range(r, settings):
        arrays = [
            pa.array(cols[0], pa_schema.field(0).type),
            pa.array(cols[1], pa_schema.field(1).type),
            pa.array(cols[2], pa_schema.field(2).type),
            pa.array(cols[3], pa_schema.field(3).type),
            pa.array(cols[4], pa_schema.field(4).type),
            # Kafka timestamps are epoch milliseconds, Spark's are microseconds
            pa.array([ms * 1000 for ms in cols[5]], pa.int64()).cast(pa_schema.field(5).type),
            pa.array(cols[6], pa_schema.field(6).type),
        ]
        if settings.include_headers:
            arrays.append(pa.array([None if hs is None else [{"key": k, "value": v} for k, v in hs]
                                    for hs in cols[7]], pa_schema.field(7).type))
        yield pa.RecordBatch.from_arrays(arrays, schema=pa_schema)


def _read_settings(o: SourceOptions) -> ReadSettings:
    return ReadSettings(kafka_params=dict(o.kafka_params), include_headers=o.include_headers,
                        fail_on_data_loss=o.fail_on_data_loss, poll_timeout_ms=o.poll_timeout_ms)


def _input_partitions(ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    return [KafkaInputPartition(i, r) for i, r in enumerate(ranges)]


def source_schema(include_headers: bool) -> StructType:
    """The same schema as a StructType (built without a JVM: executors have none)."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                                   StructField, TimestampType)

    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType(
            [StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def _check_schema(schema: StructType, include_headers: bool) -> None:
    expected = source_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in expected.fields]:
        raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")


# --------------------------------------------------------------------------------------------
# The classes Spark calls
# --------------------------------------------------------------------------------------------

class KafkaLiteBatchReader(DataSourceReader):
    """Batch read: one partition per topic partition in [starting, ending) (split further with
    `minPartitions` / `maxRecordsPerPartition`). Offsets are resolved when the query is
    planned."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def planned_ranges(self) -> list[OffsetRange]:
        o = self.options
        assert o.ending is not None
        with OffsetReader(o) as reader:
            start = reader.resolve(o.starting, is_start=True)
            end = reader.resolve(o.ending, is_start=False)
        if set(start) != set(end):
            raise RuntimeError(f"different topic partitions for starting offsets topics "
                               f"{_tps_str(start)} and ending offsets topics {_tps_str(end)}")
        ranges = []
        for tp in sorted(end):
            if start[tp] > end[tp]:
                raise ValueError(f"Beginning offset {start[tp]} is after the ending offset "
                                 f"{end[tp]} for topic {tp[0]} partition {tp[1]}. You either "
                                 "provided an invalid fromOffset, or the Kafka topic has been "
                                 "damaged")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        divvy = (o.min_partitions is not None and o.min_partitions > len(ranges)) or \
            (o.max_records_per_partition is not None
             and any(r.size > o.max_records_per_partition for r in ranges))
        if divvy:
            return split_offset_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        return ranges

    def partitions(self) -> list[InputPartition]:
        return _input_partitions(self.planned_ranges())

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        return _arrow_batches(partition.offset_range, _read_settings(self.options), self.schema)


class KafkaLiteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read. Offsets are `{"topic": {"partition": next offset}}`; Spark checkpoints
    them, so a restarted query continues exactly where the last committed batch ended."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._reader: Optional[OffsetReader] = None
        self._latest: Optional[PartitionOffsets] = None
        self._available_now_target: Optional[PartitionOffsets] = None
        self._available_now = False
        self._last_trigger_ms = 0

    # The offset reader holds a socket: it lives in the driver-side Python process only.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reader"] = None
        return state

    @property
    def reader(self) -> OffsetReader:
        if self._reader is None:
            self._reader = OffsetReader(self.options)
        return self._reader

    def initialOffset(self) -> dict:
        return offsets_to_json(self.reader.resolve(self.options.starting, is_start=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = offsets_from_json(start)
        if self._available_now:
            # everything that exists now, and nothing produced later
            if self._available_now_target is None:
                self._available_now_target = self.reader.latest_all()
            latest = self._available_now_target
        else:
            latest = self.reader.latest_all()
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        o = self.options
        if o.min_offsets_per_trigger is not None:
            now = int(time.time() * 1000)
            if should_delay_batch(o.min_offsets_per_trigger, latest, start_offsets, now,
                                  self._last_trigger_ms, o.max_trigger_delay_ms):
                return start
            self._last_trigger_ms = now
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        if max_rows is not None:
            new = [tp for tp in latest if tp not in start_offsets]
            earliest_new = self.reader.earliest_existing(new) if new else {}
            return offsets_to_json(rate_limit(max_rows, start_offsets, latest, earliest_new))
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> Optional[dict]:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        from_offsets = offsets_from_json(start)
        until_offsets = offsets_from_json(end)
        new = [tp for tp in until_offsets if tp not in from_offsets]
        earliest_new = self.reader.earliest_existing(new) if new else {}
        plan = plan_streaming_ranges(from_offsets, until_offsets, earliest_new,
                                     self.options.min_partitions,
                                     self.options.max_records_per_partition)
        for message in plan.data_loss:
            report_data_loss(message, self.options.fail_on_data_loss)
        return _input_partitions([r for r in plan.ranges if r.size > 0])

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        return _arrow_batches(partition.offset_range, _read_settings(self.options), self.schema)

    def commit(self, end: dict) -> None:
        # Spark's checkpoint is the source of truth; nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


@dataclass
class KafkaWriteCommitMessage(WriterCommitMessage):
    records: int


def _as_bytes(v: Any) -> Optional[bytes]:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def write_rows(rows: Iterator[Any], columns: WriteColumns, sink: SinkOptions) -> int:
    """Produce every row with kafka-python's producer and wait for all acknowledgements; the
    first failed send fails the task (Spark's KafkaWriteTask). Returns the number of records."""
    from kafka import KafkaProducer

    cfg = kafka_python_config(sink.kafka_params, KafkaProducer.DEFAULT_CONFIG)
    cfg.setdefault("linger_ms", 5)  # the Java producer's default since Kafka 4.0
    cfg.setdefault("client_id", "kafkalite-spark-writer")
    cfg.setdefault("metrics_enabled", False)
    producer = KafkaProducer(**cfg)
    errors: list[BaseException] = []
    count = 0
    try:
        for row in rows:
            if errors:
                break
            topic = sink.topic if sink.topic is not None else \
                (row[columns.topic] if columns.topic is not None else None)
            if topic is None:
                raise ValueError("null topic present in the data. Use the topic option for "
                                 "setting a topic.")
            key = _as_bytes(row[columns.key]) if columns.key is not None else None
            value = _as_bytes(row[columns.value])
            partition = row[columns.partition] if columns.partition is not None else None
            headers = None
            if columns.headers is not None and row[columns.headers] is not None:
                headers = [(h[0], _as_bytes(h[1])) for h in row[columns.headers]]
                if any(k is None or v is None for k, v in headers):
                    # the Java client can send a null header value, kafka-python cannot
                    raise ValueError("A header with a null key or value cannot be written by the "
                                     f"kafkalite sink (kafka-python): {headers}")
            fut = producer.send(topic, key=key, value=value, partition=partition, headers=headers)
            fut.add_errback(errors.append)
            count += 1
        producer.flush()
    finally:
        producer.close()
    if errors:
        raise RuntimeError(f"Writing to Kafka failed: {errors[0]!r}") from errors[0]
    return count


class KafkaLiteBatchWriter(DataSourceWriter):
    def __init__(self, sink: SinkOptions, columns: WriteColumns) -> None:
        self.sink = sink
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaWriteCommitMessage(write_rows(iterator, self.columns, self.sink))


class KafkaLiteStreamWriter(DataSourceStreamWriter):
    """At-least-once, like Spark's Kafka sink: a re-run batch produces its rows again."""

    def __init__(self, sink: SinkOptions, columns: WriteColumns) -> None:
        self.sink = sink
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaWriteCommitMessage(write_rows(iterator, self.columns, self.sink))

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        pass

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        pass


def _write_columns(schema: StructType, sink: SinkOptions) -> WriteColumns:
    return validate_write_schema([(f.name, f.dataType.simpleString()) for f in schema.fields],
                                 sink.topic)


class KafkaLiteDataSource(DataSource):
    """`spark.read/readStream/write/writeStream.format("kafkalite")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _include_headers(self) -> bool:
        return parse_bool(lower_keys(self.options).get("includeheaders", "false"), "includeHeaders")

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, streaming=False)
        _check_schema(schema, options.include_headers)
        return KafkaLiteBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options, streaming=True)
        _check_schema(schema, options.include_headers)
        return KafkaLiteStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("Save mode Overwrite not allowed for Kafka. Allowed save modes are "
                             "Append and ErrorIfExists (default).")
        sink = parse_sink_options(self.options)
        return KafkaLiteBatchWriter(sink, _write_columns(schema, sink))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Complete mode asks for truncation; Kafka cannot truncate, Spark's sink ignores it too.
        sink = parse_sink_options(self.options)
        return KafkaLiteStreamWriter(sink, _write_columns(schema, sink))


def register(spark: Any) -> None:
    """Register the `kafkalite` format with a SparkSession."""
    spark.dataSource.register(KafkaLiteDataSource)
