"""`kafkalite console-consumer`: print a topic's records (Kafka's kafka-console-consumer.sh).

    kafkalite console-consumer (--topic T | --include REGEX) [--from-beginning] [--group G] [--max-messages N]
                               [--timeout-ms MS] [--partition P [--offset earliest|latest|N]]
                               [--isolation-level read_committed]
                               [--property print.key=true ...] [--consumer-property K=V ...]
                               [--consumer.config FILE]

One record per output line, formatted as Kafka's DefaultMessageFormatter does: the fields enabled by
print.timestamp (`CreateTime:1700000000000`), print.partition (`Partition:0`), print.offset
(`Offset:5`), print.headers (`k1:v1,k2:v2` or `NO_HEADERS`), print.key and print.value (on by
default), separated by key.separator (TAB) and ended by line.separator (newline); a null key or
value prints as null.literal (`null`). Keys and values are written as their raw bytes.

With --group the tool is a member of that consumer group: it starts from the group's committed
offsets (--from-beginning applies only where there are none) and commits what it printed. Without
--group it joins no group and commits nothing: it reads every partition (or --partition) from the
end, or from the beginning with --from-beginning. It stops after --max-messages records, after
--timeout-ms without a record, or on SIGINT/SIGTERM, then prints `Processed a total of N messages`
on stderr and exits 0.
"""
from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

from kafkalite.config.properties import parse_java_integer
from kafkalite.cluster.topic_validation import INTERNAL_TOPICS
from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "console-consumer"
_POLL_SLICE_MS = 200  # a poll never blocks longer, so signals and deadlines are noticed quickly


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="print records of a topic",
                       description="Consume a topic and print its records (as kafka-console-consumer.sh).")
    common.add_connection_args(p, "--consumer.config", "consumer")
    topics = p.add_mutually_exclusive_group(required=True)
    topics.add_argument("--topic", help="the topic to read")
    topics.add_argument("--include", metavar="REGEX",
                        help="read every topic whose whole name matches this regular expression")
    p.add_argument("--group", help="consumer group to join (commits what it prints)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset (with --group: where the group has no committed offset)")
    p.add_argument("--partition", type=common.non_negative_int, metavar="P", help="read only this partition")
    p.add_argument("--offset", metavar="earliest|latest|N",
                   help="with --partition: where to start (default latest)")
    p.add_argument("--max-messages", type=common.positive_int, metavar="N", help="exit after N records")
    p.add_argument("--timeout-ms", type=common.positive_int, metavar="MS",
                   help="exit when no record arrives for this long")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   help="default read_uncommitted")
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="formatter property: print.key, print.value, print.partition, print.offset, "
                        "print.timestamp, print.headers, key.separator, line.separator, headers.separator, "
                        "null.literal (repeatable)")
    p.add_argument("--consumer-property", action="append", default=[], metavar="K=V",
                   help="consumer config by its Kafka name, e.g. fetch.max.wait.ms=100 (repeatable)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


@dataclass(frozen=True)
class Formatter:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    def format(self, record: Any) -> bytes:
        """One record as Kafka's DefaultMessageFormatter writes it."""
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(_timestamp(record).encode())
        if self.print_partition:
            fields.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            if record.headers:
                fields.append(self.headers_separator.join(
                    k.encode() + b":" + (self.null_literal if v is None else bytes(v)) for k, v in record.headers))
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if record.key is None else bytes(record.key))
        if self.print_value:
            fields.append(self.null_literal if record.value is None else bytes(record.value))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator


def _timestamp(record: Any) -> str:
    kind = {0: "CreateTime", 1: "LogAppendTime"}.get(record.timestamp_type)
    return f"{kind}:{record.timestamp}" if kind else "NO_TIMESTAMP"


_FLAGS = {"print.timestamp": "print_timestamp", "print.partition": "print_partition", "print.offset": "print_offset",
          "print.headers": "print_headers", "print.key": "print_key", "print.value": "print_value"}
_BYTES = {"key.separator": "key_separator", "line.separator": "line_separator",
          "headers.separator": "headers_separator", "null.literal": "null_literal"}


def formatter(props: dict[str, str]) -> Formatter:
    """Formatter settings from --property values; ValueError for an unknown property."""
    kw: dict[str, Any] = {}
    for name, value in props.items():
        if name in _FLAGS:
            kw[_FLAGS[name]] = value.strip().lower() == "true"
        elif name in _BYTES:
            kw[_BYTES[name]] = value.encode("utf-8")
        else:
            raise ValueError(f"unknown property {name!r}")
    return Formatter(**kw)


def _parse_start_offset(text: Optional[str], parser: argparse.ArgumentParser) -> Optional[object]:
    if text is None:
        return None
    if text.lower() in ("earliest", "latest"):   # any case, as ConsoleConsumerOptions.parseOffset
        return text.lower()
    offset = parse_java_integer(text, 64)   # Long.parseLong: no blanks, no '_'
    if offset is None or offset < 0:
        parser.error(f"--offset must be earliest, latest or a non-negative integer, got {text!r}")
    return offset


def _validate(args: argparse.Namespace) -> None:
    p: argparse.ArgumentParser = args.parser
    if args.partition is not None and args.topic is None:
        p.error("--partition requires --topic")
    if args.offset is not None and args.partition is None:
        p.error("--offset requires --partition")
    if args.offset is not None and args.from_beginning:
        p.error("--from-beginning and --offset cannot be used together")
    if args.include is not None:
        try:
            re.compile(args.include)  # a syntax error's position is then one in the user's text
            # Kafka matches the whole topic name (Pattern.matcher(topic).matches())
            args.include_pattern = re.compile(f"(?:{args.include})\\Z")
        except re.error as e:
            p.error(f"--include {args.include!r} is not a valid regular expression: {e}")
    args.consumer_overrides = common.option_client_properties(args, args.consumer_property, "--consumer-property")
    # group.id may come from --group, --consumer.config or --consumer-property: they must agree
    groups = list(dict.fromkeys(g for g in (args.group, args.client_properties.pop("group_id", None),
                                            args.consumer_overrides.pop("group_id", None)) if g is not None))
    if len(groups) > 1:
        p.error("the group ids given by --group, --consumer.config and --consumer-property do not match: "
                + ", ".join(f"'{g}'" for g in groups))
    args.group = groups[0] if groups else None
    if args.group and args.partition is not None:
        p.error("--group and --partition cannot be used together")
    args.start = _parse_start_offset(args.offset, p)
    try:
        args.formatter = formatter(common.parse_key_values(args.property, "--property", p, strip_values=False))
    except ValueError as e:
        p.error(str(e))
    reset = args.consumer_overrides.get("auto_offset_reset", args.client_properties.get("auto_offset_reset"))
    if args.from_beginning and reset not in (None, "earliest"):
        raise ToolError(f"can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                        "please remove one option")
    if args.topic is not None:
        common.check_topic_name(args.topic)


class _Stop:
    """SIGINT/SIGTERM end the loop; the consumer is then closed cleanly (and commits)."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True


def _run(args: argparse.Namespace) -> int:
    from kafka import KafkaConsumer
    import kafka.errors as Errors

    _validate(args)
    # Kafka's precedence: the tool's defaults, the --consumer.config file, --consumer-property,
    # then the options given explicitly.
    configs: dict[str, Any] = dict(
        isolation_level="read_uncommitted", enable_auto_commit=bool(args.group),
        auto_offset_reset="earliest" if args.from_beginning or args.start == "earliest" else "latest")
    configs.update(common.client_configs(args))
    configs.update(args.consumer_overrides)
    configs["group_id"] = args.group
    # kafka-python wants a fetch's wait below the request timeout: keep a short --request-timeout-ms usable
    configs.setdefault("fetch_max_wait_ms", min(500, max(1, args.request_timeout_ms // 2)))
    if args.isolation_level is not None:
        configs["isolation_level"] = args.isolation_level
    stop = _Stop()
    try:
        consumer = KafkaConsumer(**configs)
    except Errors.KafkaTimeoutError:
        raise common.connect_error(args) from None
    try:
        if args.group and args.include is not None:
            consumer.subscribe(pattern=args.include_pattern.pattern)
        elif args.group:
            consumer.subscribe([args.topic])
            # The subscribed topic's metadata before the group's first join (a fetch, as the
            # topic is not cached yet): otherwise the leader assigns from a metadata snapshot
            # without it and rejoins at once, and that rejoin meets kafka-python 3.0.12 races:
            # a poll whose timer expires as the SyncGroup completes leaves the join's result
            # unconsumed (assignment never applied, heartbeats off) while need_rejoin() reads
            # False, and a close during it cannot commit (seen under load in ~1 of 20 runs).
            consumer.partitions_for_topic(args.topic)
        else:
            _assign(consumer, args)
        processed = _loop(consumer, args, stop)
    finally:
        consumer.close()  # with --group: commits the positions of what was printed
    print(f"Processed a total of {processed} messages", file=sys.stderr, flush=True)
    return 0


def _metadata_wait_s(args: argparse.Namespace) -> float:
    """How long to wait for the topic(s) to appear: the request timeout, or --timeout-ms if shorter."""
    wait_ms = args.request_timeout_ms if args.timeout_ms is None else min(args.request_timeout_ms, args.timeout_ms)
    return wait_ms / 1000


def _matching_partitions(consumer: Any, args: argparse.Namespace) -> dict[str, set[int]]:
    """{topic: partition ids} of --topic, or of every topic --include matches (internal topics only
    when exclude.internal.topics=false, as Kafka's pattern subscription)."""
    if args.include is None:
        partitions = consumer.partitions_for_topic(args.topic)
        return {args.topic: partitions} if partitions else {}
    exclude_internal = consumer.config["exclude_internal_topics"]
    names = [t for t in consumer.topics() if args.include_pattern.match(t)
             and not (exclude_internal and t in INTERNAL_TOPICS)]
    return {t: ps for t in names if (ps := consumer.partitions_for_topic(t))}


def _assign(consumer: Any, args: argparse.Namespace) -> None:
    """Without a group: assign the partitions and position them."""
    from kafka import TopicPartition

    deadline = time.monotonic() + _metadata_wait_s(args)
    found = _matching_partitions(consumer, args)
    while not found and time.monotonic() < deadline:  # a topic being auto-created has no leader yet
        time.sleep(0.1)
        found = _matching_partitions(consumer, args)
    if not found:
        if args.include is not None:
            raise ToolError(f"no topic matches --include '{args.include}'")
        raise ToolError(f"topic '{args.topic}' does not exist")
    if args.partition is not None:
        if args.partition not in found[args.topic]:
            raise ToolError(f"partition {args.partition} of topic '{args.topic}' does not exist")
        found = {args.topic: {args.partition}}
    tps = [TopicPartition(t, p) for t in sorted(found) for p in sorted(found[t])]
    consumer.assign(tps)
    if isinstance(args.start, int):
        consumer.seek(tps[0], args.start)  # out of range: auto_offset_reset (latest) applies
    elif args.from_beginning or args.start == "earliest":
        consumer.seek_to_beginning(*tps)
    else:
        consumer.seek_to_end(*tps)


def _loop(consumer: Any, args: argparse.Namespace, stop: _Stop) -> int:
    out = sys.stdout.buffer
    fmt: Formatter = args.formatter
    processed = 0
    last_record = time.monotonic()
    while not stop.requested:
        if args.max_messages is not None and processed >= args.max_messages:
            break
        wait_ms = _POLL_SLICE_MS
        if args.timeout_ms is not None:
            left_ms = args.timeout_ms - (time.monotonic() - last_record) * 1000
            if left_ms <= 0:
                break
            wait_ms = max(1, min(wait_ms, int(left_ms)))
        limit = None if args.max_messages is None else args.max_messages - processed
        # max_records bounds what the consumer hands out, so its position (and the group's
        # commit) never runs ahead of what was printed.
        batches = consumer.poll(timeout_ms=wait_ms, max_records=limit)
        records = sorted((r for recs in batches.values() for r in recs),
                         key=lambda r: (r.topic, r.partition, r.offset))
        if records:
            last_record = time.monotonic()
            out.write(b"".join(fmt.format(r) for r in records))
            out.flush()
            processed += len(records)
    return processed
