"""`kafkalite records`: delete records below an offset (Kafka's kafka-delete-records.sh).

    kafkalite records --delete --offset-json-file FILE

FILE is Kafka's format, offset -1 meaning the high watermark:
    {"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}
Output, one line per partition sorted by topic and partition:
    Executing records delete operation
    Records delete operation completed:
    partition: t-0<TAB>low_watermark: 3
"""
from __future__ import annotations

import argparse
import json
import re
from typing import Any

from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "records"


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="delete records below given offsets",
                       description="Delete records below given offsets (as kafka-delete-records.sh).")
    common.add_connection_args(p)
    p.add_argument("--delete", action="store_true", required=True, help="delete records (the only action)")
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='{"partitions": [{"topic": T, "partition": P, "offset": O}], "version": 1}')
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


def parse_offset_json(text: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} of kafka-delete-records.sh's JSON; ValueError says what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError('expected an object with a "partitions" list')
    if doc.get("version", 1) != 1:
        raise ValueError(f"unsupported version {doc.get('version')!r}")
    out: dict[tuple[str, int], int] = {}
    duplicates: list[str] = []
    for entry in doc["partitions"]:
        if not isinstance(entry, dict):
            raise ValueError(f"partition entry {entry!r} is not an object")
        topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"entry {json.dumps(entry)} has no topic name")
        if type(partition) is not int or partition < 0:
            raise ValueError(f"entry {json.dumps(entry)} has no valid partition")
        if type(offset) is not int or offset < -1:
            raise ValueError(f"entry {json.dumps(entry)} has no valid offset (>= 0, or -1 for the high watermark)")
        if (topic, partition) in out:
            duplicates.append(common.tp_name(topic, partition))
        out[(topic, partition)] = offset
    if duplicates:
        raise ValueError(f"duplicate partitions: {', '.join(duplicates)}")
    if not out:
        raise ValueError("no partitions given")
    return out


def _check_partitions_exist(admin: Any, wanted: set[tuple[str, int]]) -> None:
    found = {t["name"]: {p["partition_index"] for p in t["partitions"]}
             for t in admin.describe_topics(sorted({t for t, _ in wanted})) if t["error_code"] == 0}
    for topic, partition in sorted(wanted):
        if topic not in found:
            raise ToolError(f"topic '{topic}' does not exist")
        if partition not in found[topic]:
            raise ToolError(f"partition {partition} of topic '{topic}' does not exist")


def _run(args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    import kafka.errors as Errors

    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ToolError(f"cannot read {args.offset_json_file}: {e.strerror}") from None
    try:
        wanted = parse_offset_json(text)
    except ValueError as e:
        raise ToolError(f"invalid offset JSON file {args.offset_json_file}: {e}") from None
    with common.admin_client(args) as admin:
        _check_partitions_exist(admin, set(wanted))
        common.print_lines(["Executing records delete operation"])
        try:
            result = admin.delete_records({TopicPartition(t, p): off for (t, p), off in wanted.items()},
                                          timeout_ms=args.request_timeout_ms)
        except Errors.BrokerResponseError as e:
            # kafka-python names the partition in its message when exactly one failed.
            m = re.search(r"from topic (\S+) partition (\d+)", str(e))
            if m:
                raise ToolError(f"cannot delete records of {m.group(1)}-{m.group(2)}: "
                                f"{common.error_text(type(e))}") from None
            raise ToolError(f"cannot delete records: {common.exception_text(e)}") from None
    lines = ["Records delete operation completed:"]
    for tp, r in sorted(result.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        lines.append(f"partition: {common.tp_name(tp.topic, tp.partition)}\tlow_watermark: {_low_watermark(r)}")
    common.print_lines(lines)
    return 0


def _low_watermark(r: Any) -> Any:
    return r["low_watermark"] if isinstance(r, dict) else r.low_watermark
