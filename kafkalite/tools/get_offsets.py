"""`kafkalite get-offsets`: partition offsets by time through ListOffsets, as Kafka's
kafka-get-offsets.sh (GetOffsetShell) prints them, one `topic:partition:offset` line per
partition, sorted by the text `topic-partition`:

    kafkalite get-offsets --topic 'orders.*' [--partitions 0,1] [--time -1|-2|-3|TIMESTAMP]
    kafkalite get-offsets --topic-partitions 'orders:0-3,audit:1'

`--topic` is a regular expression matched against the whole name; `--time` takes latest (-1,
the default), earliest (-2), max-timestamp (-3), earliest-local (-4), latest-tiered (-5) or a
timestamp in ms. A partition with no offset for the time (no record at or after it) is left
out, as Kafka leaves it out."""
from __future__ import annotations

import argparse
import re
from typing import Any, Callable, Optional

from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "get-offsets"
INT32_MAX = 2**31 - 1
UNKNOWN_OFFSET = -1
NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
TOPIC_PARTITION_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}

PartitionFilter = Callable[[str, int], bool]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="print partition offsets for a time",
                       description="Print the offsets of partitions at a time (as kafka-get-offsets.sh).")
    common.add_connection_args(p)
    p.add_argument("--topic", metavar="REGEX", help="topics to query, a regular expression (default: all)")
    p.add_argument("--partitions", metavar="0,1", help="partition ids to query (default: all)")
    p.add_argument("--topic-partitions", metavar="T:P,T:LO-HI",
                   help="topic-partition patterns, comma separated: REGEX[:N|:LO-HI|:LO-|:-HI] "
                        "(cannot be used with --topic or --partitions)")
    p.add_argument("--time", default="latest", metavar="TIME",
                   help="-1 or latest (default), -2 or earliest, -3 or max-timestamp, -4 or "
                        "earliest-local, -5 or latest-tiered, or a timestamp in ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


def parse_time(text: str) -> int:
    if text in NAMED_TIMES:
        return NAMED_TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
                        f"max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long "
                        f"format timestamp") from None


def topic_regex(text: str) -> "re.Pattern[str]":
    """Kafka's IncludeList (common.include_list), a bad pattern in one line."""
    try:
        return common.include_list(text)
    except re.error as e:
        raise ToolError(f"invalid topic regular expression {text!r}: {e}") from None


def partition_set(text: Optional[str]) -> set[int]:
    if not text:
        return set()
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise ToolError(f"--partitions expects a comma separated list of numeric partition ids, "
                        f"but received: {text}") from None


def topic_and_partitions_filter(topic: Optional[str], partitions: Optional[str]) -> PartitionFilter:
    regex = topic_regex(topic if topic is not None else ".*")
    ids = partition_set(partitions)
    return lambda t, p: bool(regex.fullmatch(t)) and (not ids or p in ids)


def rule_filter(spec: str) -> PartitionFilter:
    m = TOPIC_PARTITION_PATTERN.fullmatch(spec)
    if not m:
        raise ToolError(f"Invalid rule specification: {spec}")
    regex = topic_regex(m.group(1) or ".*")
    if m.group(2):
        single = int(m.group(2))
        return lambda t, p: bool(regex.fullmatch(t)) and p == single
    low = int(m.group(3)) if m.group(3) else 0
    high = int(m.group(4)) if m.group(4) else INT32_MAX
    return lambda t, p: bool(regex.fullmatch(t)) and low <= p < high


def pattern_list_filter(text: str) -> PartitionFilter:
    rules = [rule_filter(spec) for spec in text.split(",")]
    return lambda t, p: any(rule(t, p) for rule in rules)


def partition_filter(args: argparse.Namespace) -> PartitionFilter:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise ToolError("--topic-partitions cannot be used with --topic or --partitions")
        return pattern_list_filter(args.topic_partitions)
    return topic_and_partitions_filter(args.topic, args.partitions)


def offset_lines(offsets: dict[tuple[str, int], int]) -> list[str]:
    """Kafka sorts by the partition's text `topic-partition` (so t-10 before t-2)."""
    return [f"{t}:{p}:{o}" for (t, p), o in sorted(offsets.items(), key=lambda kv: common.tp_name(*kv[0]))
            if o != UNKNOWN_OFFSET]


def _offset_of(result: Any) -> int:
    return result.offset if hasattr(result, "offset") else result[0]


def _run(args: argparse.Namespace) -> int:
    from kafka import TopicPartition

    when = parse_time(args.time)
    accept = partition_filter(args)
    with common.admin_client(args) as admin:
        names = [t for t in admin.list_topics()
                 if not (args.exclude_internal_topics and t in INTERNAL_TOPICS)]
        wanted = [TopicPartition(t["name"], p["partition_index"])
                  for t in admin.describe_topics(sorted(names))
                  if t["error_code"] == 0 for p in t["partitions"] if accept(t["name"], p["partition_index"])]
        if not wanted:
            raise ToolError("Could not match any topic-partitions with the specified filters")
        found = admin.list_partition_offsets({tp: when for tp in wanted})
    common.print_lines(offset_lines({(tp.topic, tp.partition): _offset_of(r) for tp, r in found.items()}))
    return 0

