"""`kafkalite log-dirs --describe`: the log directories of brokers and the partitions in them,
through DescribeLogDirs, printed as Kafka's kafka-log-dirs.sh (LogDirsCommand) prints them:

    Querying brokers for log directories information
    Received log directory information from brokers 0
    {"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":68,
      "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/var/kafkalite"}]}],"version":1}

(the JSON on one line). Kafka's tool builds the JSON from Java hash maps, so keys and entries
come in Java's HashMap iteration order; that order is reproduced here (java_hash_order)."""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Iterable, Sequence, TypeVar

from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "log-dirs"
T = TypeVar("T")
KAFKA_STORAGE_ERROR = 56
# The exception class Kafka's admin client names in "error" for a log dir's error code.
ERROR_CLASSES = {KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException"}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="describe the log directories of brokers",
                       description="Query the log directories of brokers and the partitions in them "
                                   "(as kafka-log-dirs.sh).")
    common.add_connection_args(p)
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the log directories (the only action)")
    p.add_argument("--broker-list", default="", metavar="0,1,2",
                   help="the brokers to query (default: every broker of the cluster)")
    p.add_argument("--topic-list", default="", metavar="T1,T2",
                   help="the topics to show (default: all)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


def java_string_hash(text: str) -> int:
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()."""
    return (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF


def java_hash_order(items: Sequence[T], hash_of: Callable[[T], int]) -> list[T]:
    """Items in the order a java.util.HashMap filled with them (in this order) iterates:
    by bucket of the spread hash in a table sized for them, insertion order within a bucket."""
    capacity = 16
    while len(items) > capacity * 0.75:
        capacity *= 2

    def bucket(item: T) -> int:
        h = hash_of(item)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(items, key=bucket)    # sorted is stable: a bucket keeps insertion order


def parse_id_list(text: str, what: str) -> list[int]:
    out: list[int] = []
    for item in (s for s in text.split(",") if s):
        try:
            out.append(int(item))
        except ValueError:
            raise ToolError(f"invalid {what} {item!r}: expected a comma separated list of integers") from None
    return out


def _get(d: Any, *names: str) -> Any:
    for n in names:
        if isinstance(d, dict) and n in d:
            return d[n]
    raise KeyError(names[0])


def log_dirs_json(by_broker: dict[int, list[dict[str, Any]]], topics: set[str]) -> str:
    """Kafka's JSON of DescribeLogDirs results (kafka-python's dicts), in Java's key order."""
    brokers = []
    for broker in java_hash_order(sorted(by_broker), lambda b: b & 0xFFFFFFFF):
        dirs = []
        results = java_hash_order(by_broker[broker], lambda r: java_string_hash(_get(r, "log_dir")))
        for result in results:
            partitions = [(t["name"], p) for t in _get(result, "topics") for p in t["partitions"]
                          if not topics or t["name"] in topics]
            ordered = java_hash_order(partitions, lambda tp: topic_partition_hash(tp[0], tp[1]["partition_index"]))
            code = _get(result, "error_code")
            # Jackson prints these maps (HashMaps) in their hash order: partition, size,
            # offsetLag, isFuture and partitions, error, logDir.
            dirs.append({
                "partitions": [{"partition": common.tp_name(t, p["partition_index"]), "size": p["partition_size"],
                                "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]} for t, p in ordered],
                "error": None if code == 0 else ERROR_CLASSES.get(code, "org.apache.kafka.common.errors.UnknownServerException"),
                "logDir": _get(result, "log_dir"),
            })
        brokers.append({"broker": broker, "logDirs": dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"), ensure_ascii=False)


def comma_list(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in java_hash_order(sorted(set(ids)), lambda b: b & 0xFFFFFFFF))


def _run(args: argparse.Namespace) -> int:
    wanted = parse_id_list(args.broker_list, "broker id")
    topics = {t for t in args.topic_list.split(",") if t}
    with common.admin_client(args) as admin:
        # kafka-python names the id broker_id (DescribeCluster, and its Metadata fallback renames node_id).
        cluster = {_get(b, "broker_id", "node_id") for b in admin.describe_cluster()["brokers"]}
        missing = set(wanted) - cluster
        if missing:
            raise ToolError(f"ERROR: The given brokers do not exist from --broker-list: {comma_list(missing)}. "
                            f"Current existent brokers: {comma_list(cluster)}")
        brokers = sorted(set(wanted) & cluster) if wanted else sorted(cluster)
        common.print_lines(["Querying brokers for log directories information"])
        results = admin.describe_log_dirs(brokers=brokers)
    by_broker = {r["broker"]: r["log_dirs"] for r in results}
    common.print_lines([f"Received log directory information from brokers {comma_list(brokers)}",
                        log_dirs_json(by_broker, topics)])
    return 0
