"""`kafkalite groups`: list, describe, reset and delete consumer groups (Kafka's
kafka-consumer-groups.sh).

    kafkalite groups --list [--state [STATE,...]]
    kafkalite groups --describe (--group G ... | --all-groups) [--offsets | --members [--verbose] | --state]
    kafkalite groups --reset-offsets --group G ... (--topic T[:P,P] ... | --all-topics)
                     (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N | --to-datetime DT
                      | --by-duration PnDTnHnMnS)
                     [--execute | --dry-run] [--export]
    kafkalite groups --reset-offsets --group G ... --from-file CSV [--execute | --dry-run] [--export]
    kafkalite groups --delete --group G ...
    kafkalite groups --delete-offsets --group G --topic T[:P,P] ...

Tables are Kafka's columns, padded and separated by blanks (a missing value is `-`):
    GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
"""
from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from typing import Any, Optional

from kafkalite.cluster.topic_validation import topic_name_error
from kafkalite.tools import common
from kafkalite.tools.common import MISSING, ToolError

TOOL = "groups"
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
OFFSETS_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="list, describe, reset offsets of and delete consumer groups",
                       description="List, describe, reset offsets of and delete consumer groups "
                                   "(as kafka-consumer-groups.sh).")
    common.add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list consumer groups")
    actions.add_argument("--describe", action="store_true", help="offsets and lag, members or state")
    actions.add_argument("--reset-offsets", action="store_true", help="reset the committed offsets of an inactive group")
    actions.add_argument("--delete", action="store_true", help="delete groups (they must have no members)")
    actions.add_argument("--delete-offsets", action="store_true", help="delete a group's committed offsets of topics")
    p.add_argument("--group", action="append", default=[], metavar="G", help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="--describe/--reset-offsets/--delete: every group")
    p.add_argument("--topic", action="append", default=[], metavar="T[:P,P]",
                   help="--reset-offsets/--delete-offsets: a topic, or some of its partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="--reset-offsets: every topic the group has committed offsets for")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="--describe: members")
    view.add_argument("--state", nargs="?", const="", default=None, metavar="STATE,...",
                      help="--describe: the group's state; --list: show states, only these if given")
    p.add_argument("--verbose", action="store_true", help="--describe --members: also the assignments")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    target.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    target.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    target.add_argument("--to-offset", type=common.int64, metavar="N", help="reset to N (clamped to the partition's range)")
    target.add_argument("--shift-by", type=common.int64, metavar="N",
                        help="move the committed offset by N, may be negative (clamped)")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
                        help="reset to the first offset at or after this time (UTC without a zone, as Kafka)")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS",
                        help="reset to the first offset at or after now minus this ISO-8601 duration")
    target.add_argument("--from-file", metavar="CSV",
                        help="reset to the offsets of a CSV file: topic,partition,offset lines for one --group, "
                             "group,topic,partition,offset lines otherwise (what --export writes)")
    p.add_argument("--export", action="store_true",
                   help="--reset-offsets: print the new offsets as CSV (the --from-file format) instead of a table")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--execute", action="store_true", help="--reset-offsets: commit the new offsets")
    run_mode.add_argument("--dry-run", action="store_true",
                          help="--reset-offsets: only show the new offsets (the default)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def parse_topic_spec(spec: str) -> tuple[str, Optional[list[int]]]:
    """`T` -> (T, None) (all partitions); `T:0,2` -> (T, [0, 2]). ValueError when malformed."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ValueError(spec)
    if not sep:
        return topic, None
    partitions = sorted({int(x) for x in parts.split(",") if x.strip() != ""})
    if not partitions or any(x < 0 for x in partitions):
        raise ValueError(spec)
    return topic, partitions


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime_ms(text: str) -> int:
    """kafka-consumer-groups.sh's --to-datetime (Kafka's Utils.getDateTime): `2024-01-31T12:00:00.000`,
    milliseconds required, then an optional zone `Z`, `+01`, `+0100` or `+01:00`; UTC without
    one. Epoch milliseconds; ValueError when malformed or not a real date."""
    m = _DATETIME.fullmatch(text)
    if not m:
        raise ValueError(text)
    zone = m.group(8) or "Z"
    offset = datetime.timedelta(0)
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        if zone[0] == "-":
            offset = -offset
    year, month, day, hour, minute, second, millis = (int(g) for g in m.groups()[:7])
    dt = datetime.datetime(year, month, day, hour, minute, second, millis * 1000,
                           tzinfo=datetime.timezone(offset))
    return int(dt.timestamp() * 1000)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?"
                       r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (`P1DT2H`, `PT15M`, `PT0.5S`,
    signs allowed), in milliseconds; ValueError when malformed."""
    m = _DURATION.fullmatch(text)
    if not m or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(text)
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction_ms = int((m.group(7) or "").ljust(3, "0")[:3] or 0)
    if (m.group(6) or "").startswith("-"):
        fraction_ms = -fraction_ms
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + fraction_ms
    return -total if m.group(1) == "-" else total


ResetPlan = dict[str, dict[tuple[str, int], int]]


def parse_reset_plan(text: str, groups: list[str]) -> ResetPlan:
    """{group: {(topic, partition): offset}} of a --from-file CSV: `topic,partition,offset` lines
    when exactly one --group is given, else `group,topic,partition,offset` (kafka-consumer-groups.sh's
    two formats). Blank lines are skipped; ValueError names the first bad line."""
    plan: ResetPlan = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and len(groups) == 1:
            fields.insert(0, groups[0])
        elif len(fields) != 4:
            expected = "topic,partition,offset" if len(groups) == 1 else "group,topic,partition,offset"
            raise ValueError(f"line {number}: expected {expected}, got {line!r}")
        group, topic, partition, offset = fields
        if not re.fullmatch(r"\d+", partition) or not re.fullmatch(r"\d+", offset) or not topic or not group:
            raise ValueError(f"line {number}: expected a topic, a partition and an offset >= 0, got {line!r}")
        invalid = topic_name_error(topic)
        if invalid is not None:
            raise ValueError(f"line {number}: {common.sentence(invalid)}")
        plan.setdefault(group, {})[(topic, int(partition))] = int(offset)
    return plan


def _validate(args: argparse.Namespace) -> None:
    p: argparse.ArgumentParser = args.parser
    action = next(a for a in ("list", "describe", "reset_offsets", "delete", "delete_offsets") if getattr(args, a))
    flag = "--" + action.replace("_", "-")
    targets = [args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
               args.shift_by is not None, args.to_datetime is not None, args.by_duration is not None,
               args.from_file is not None]
    if action == "list":
        if args.group or args.all_groups:
            p.error("--list takes no --group/--all-groups")
    elif not args.group and not (args.all_groups and action != "delete_offsets"):
        p.error(f"{flag} requires --group" + ("" if action == "delete_offsets" else " or --all-groups"))
    if args.group and args.all_groups:
        p.error("--group and --all-groups cannot be used together")
    if action == "delete_offsets" and len(args.group) != 1:
        p.error("--delete-offsets takes exactly one --group")
    if (args.offsets or args.members) and action != "describe":
        p.error("--offsets/--members can only be used with --describe")
    if args.state is not None and action not in ("describe", "list"):
        p.error("--state can only be used with --describe or --list")
    if args.state and action == "describe":
        p.error("--state takes no value with --describe")
    if args.verbose and not (action == "describe" and args.members):
        p.error("--verbose can only be used with --describe --members")
    if action in ("reset_offsets", "delete_offsets"):
        if action == "reset_offsets" and args.from_file is not None and (args.topic or args.all_topics):
            p.error("--from-file takes its partitions from the file: no --topic/--all-topics")
        if action == "reset_offsets" and not (args.topic or args.all_topics or args.from_file is not None):
            p.error("--reset-offsets requires --topic or --all-topics")
        if action == "delete_offsets" and not args.topic:
            p.error("--delete-offsets requires --topic")
        if args.topic and args.all_topics:
            p.error("--topic and --all-topics cannot be used together")
    elif args.topic or args.all_topics:
        p.error("--topic/--all-topics can only be used with --reset-offsets or --delete-offsets")
    if action == "reset_offsets":
        if not any(targets):
            p.error("--reset-offsets requires one of --to-earliest, --to-latest, --to-current, --to-offset, "
                    "--shift-by, --to-datetime, --by-duration, --from-file")
        if args.to_offset is not None and args.to_offset < 0:
            p.error("--to-offset must be >= 0")
        if args.to_datetime is not None:
            try:
                args.datetime_ms = parse_datetime_ms(args.to_datetime)
            except ValueError:
                p.error(f"invalid --to-datetime {args.to_datetime!r}: expected YYYY-MM-DDTHH:mm:SS.sss")
        if args.by_duration is not None:
            try:
                args.datetime_ms = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
            except ValueError:
                p.error(f"invalid --by-duration {args.by_duration!r}: expected PnDTnHnMnS")
    elif any(targets) or args.execute or args.dry_run or args.export:
        p.error("--to-*/--by-duration/--from-file/--shift-by/--execute/--dry-run/--export can only be used "
                "with --reset-offsets")
    specs: list[tuple[str, Optional[list[int]]]] = []
    for spec in args.topic:
        try:
            specs.append(parse_topic_spec(spec))
        except ValueError:
            p.error(f"invalid --topic {spec!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...]")
    for topic, _ in specs:
        common.check_topic_name(topic)
    args.topic_specs = specs
    args.action = action
    args.reset_plan = _read_reset_plan(args.from_file, args.group) if args.from_file is not None else None


def _read_reset_plan(path: str, groups: list[str]) -> ResetPlan:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ToolError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        return parse_reset_plan(text, groups)
    except ValueError as e:
        raise ToolError(f"invalid reset plan {path}: {e}") from None


def _run(args: argparse.Namespace) -> int:
    _validate(args)
    with common.admin_client(args) as admin:
        if args.group:
            _await_coordinators(admin, list(dict.fromkeys(args.group)), args.request_timeout_ms)
        return {"list": _list, "describe": _describe, "reset_offsets": _reset_offsets, "delete": _delete,
                "delete_offsets": _delete_offsets}[args.action](admin, args)


# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------

def _await_coordinators(admin: Any, groups: list[str], timeout_ms: int) -> None:
    """Look up the groups' coordinators, retrying while the broker answers a retriable error:
    a fresh broker answers the first FindCoordinator COORDINATOR_NOT_AVAILABLE while it creates
    __consumer_offsets, and Kafka's AdminClient retries until its timeout where kafka-python's
    raises at once. The coordinators found are cached by the client for the calls that follow."""
    import kafka.errors as Errors

    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            admin._manager.run(admin._find_coordinator_ids, groups)
            return
        except (Errors.CoordinatorNotAvailableError, Errors.CoordinatorLoadInProgressError,
                Errors.NotCoordinatorError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _consumer_groups(admin: Any) -> list[dict[str, Any]]:
    """Consumer groups (protocol type `consumer`, or empty for groups that only commit), as
    kafka-consumer-groups.sh lists them."""
    return sorted((g for g in admin.list_groups() if g.get("protocol_type") in ("consumer", "")),
                  key=lambda g: g["group_id"])


def _group_ids(admin: Any, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g["group_id"] for g in _consumer_groups(admin)]
    return list(dict.fromkeys(args.group))


def _describe_group(admin: Any, group: str, must_exist: bool = True) -> dict[str, Any]:
    desc = admin.describe_groups([group])[group]
    if must_exist and _is_missing(desc):
        raise ToolError(f"consumer group '{group}' does not exist")
    return desc


def _is_missing(desc: dict[str, Any]) -> bool:
    # DescribeGroups answers an unknown group with state Dead (v0-5) or GROUP_ID_NOT_FOUND (v6).
    return desc.get("group_state") == "Dead" or (desc.get("error") or "").startswith("[Error 69]")


def _assignment(member: dict[str, Any]) -> list[tuple[str, int]]:
    a = member.get("member_assignment")
    if not isinstance(a, dict):
        return []  # not the consumer protocol, or undecodable
    return sorted((t["topic"], p) for t in a.get("assigned_partitions") or [] for p in t["partitions"])


def _existing_partitions(admin: Any, topics: set[str]) -> dict[str, list[int]]:
    """Partition ids of those of `topics` that exist."""
    if not topics:
        return {}
    return {t["name"]: sorted(p["partition_index"] for p in t["partitions"])
            for t in admin.describe_topics(sorted(topics)) if t["error_code"] == 0}


def _list_offsets(admin: Any, tps: set[Any], spec: Any) -> dict[Any, int]:
    """ListOffsets of existing partitions: {TopicPartition: offset}."""
    existing = _existing_partitions(admin, {tp.topic for tp in tps})
    wanted = {tp: spec for tp in tps if tp.partition in existing.get(tp.topic, ())}
    if not wanted:
        return {}
    return {tp: r.offset for tp, r in admin.list_partition_offsets(wanted).items()}


def _committed(admin: Any, group: str) -> dict[Any, Any]:
    return admin.list_group_offsets({group: None}).get(group, {})


# --------------------------------------------------------------------------------------------
# --list
# --------------------------------------------------------------------------------------------

def _list(admin: Any, args: argparse.Namespace) -> int:
    groups = _consumer_groups(admin)
    if args.state is None:
        common.print_lines(g["group_id"] for g in groups)
        return 0
    wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    rows = [(g["group_id"], g.get("group_state") or "Unknown") for g in groups
            if not wanted or (g.get("group_state") or "").lower() in wanted]
    common.print_lines(common.format_table(("GROUP", "STATE"), rows))
    return 0


# --------------------------------------------------------------------------------------------
# --describe
# --------------------------------------------------------------------------------------------

def _state_note(group: str, state: str) -> None:
    if state == "Empty":
        print(f"Consumer group '{group}' has no active members.", file=sys.stderr, flush=True)
    elif state in _REBALANCING:
        print(f"Warning: Consumer group '{group}' is rebalancing.", file=sys.stderr, flush=True)


def offset_rows(admin: Any, group: str, desc: dict[str, Any]) -> list[list[Any]]:
    """Rows of the offsets view: every assigned or committed partition, sorted by topic and
    partition, then members without partitions."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    committed = _committed(admin, group)
    owner: dict[Any, dict[str, Any]] = {}
    idle: list[dict[str, Any]] = []
    for m in desc.get("members") or []:
        tps = _assignment(m)
        for topic, partition in tps:
            owner[TopicPartition(topic, partition)] = m
        if not tps:
            idle.append(m)
    tps = set(committed) | set(owner)
    end = _list_offsets(admin, tps, OffsetSpec.LATEST)
    rows: list[list[Any]] = []
    for tp in sorted(tps, key=lambda t: (t.topic, t.partition)):
        current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        leo = end.get(tp)
        lag = leo - current if leo is not None and current is not None else None
        m = owner.get(tp)
        rows.append([group, tp.topic, tp.partition, _show(current), _show(leo), _show(lag),
                     m["member_id"] if m else MISSING, m["client_host"] if m else MISSING,
                     m["client_id"] if m else MISSING])
    for m in sorted(idle, key=lambda m: m["member_id"]):
        rows.append([group, MISSING, MISSING, MISSING, MISSING, MISSING, m["member_id"], m["client_host"],
                     m["client_id"]])
    return rows


def _show(v: Optional[int]) -> str:
    return MISSING if v is None else str(v)


def member_rows(group: str, desc: dict[str, Any], verbose: bool) -> list[list[Any]]:
    rows = []
    for m in sorted(desc.get("members") or [], key=lambda m: m["member_id"]):
        tps = _assignment(m)
        row = [group, m["member_id"], m["client_host"], m["client_id"], len(tps)]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            row.append(",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())) or MISSING)
        rows.append(row)
    return rows


def _coordinator(admin: Any, group: str) -> str:
    """`host:port (id)` of the group's coordinator. kafka-python has no public call for it; its
    admin client's own FindCoordinator lookup is used."""
    node_id = admin._manager.run(admin._find_coordinator_id, group)
    for b in admin.describe_cluster()["brokers"]:
        if b["broker_id"] == node_id:
            return f"{b['host']}:{b['port']} ({node_id})"
    return f"{MISSING} ({node_id})"


def _describe(admin: Any, args: argparse.Namespace) -> int:
    tables: list[list[str]] = []
    for group in _group_ids(admin, args):
        desc = _describe_group(admin, group)
        state = desc["group_state"]
        if args.state is not None:
            members = len(desc.get("members") or [])
            tables.append(common.format_table(
                ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                [[group, _coordinator(admin, group), desc.get("protocol_data") or MISSING, state, members]]))
            continue
        _state_note(group, state)
        if args.members:
            rows = member_rows(group, desc, args.verbose)
            header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if args.verbose else [])
        else:
            rows = offset_rows(admin, group, desc)
            header = list(OFFSETS_HEADER)
        if rows:
            tables.append(common.format_table(header, rows))
    out: list[str] = []
    for i, table in enumerate(tables):
        if i:
            out.append("")
        out += table
    common.print_lines(out)
    return 0


# --------------------------------------------------------------------------------------------
# --reset-offsets
# --------------------------------------------------------------------------------------------

def _scope(admin: Any, args: argparse.Namespace, committed: dict[Any, Any], group: str = "") -> list[Any]:
    """The partitions to reset: those named by --topic (all of a topic's when no partitions are
    given; the topic must exist), those of the group's --from-file plan (they must exist), or
    every partition with a committed offset (--all-topics)."""
    from kafka import TopicPartition

    if args.all_topics:
        return sorted(committed, key=lambda t: (t.topic, t.partition))
    specs = args.topic_specs
    if args.reset_plan is not None:
        specs = [(topic, [partition]) for topic, partition in sorted(args.reset_plan.get(group, {}))]
    existing = _existing_partitions(admin, {t for t, _ in specs})
    out: set[Any] = set()
    for topic, partitions in specs:
        if topic not in existing:
            raise ToolError(f"topic '{topic}' does not exist")
        for p in partitions if partitions is not None else existing[topic]:
            if p not in existing[topic]:
                raise ToolError(f"partition {p} of topic '{topic}' does not exist")
            out.add(TopicPartition(topic, p))
    return sorted(out, key=lambda t: (t.topic, t.partition))


def new_offsets(args: argparse.Namespace, group: str, tps: list[Any], committed: dict[Any, Any],
                earliest: dict[Any, int], latest: dict[Any, int], by_time: dict[Any, int]) -> dict[Any, int]:
    """The target of each partition, clamped to [earliest, latest] as Kafka's reset does."""
    out: dict[Any, int] = {}
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        if args.to_earliest:
            target = lo
        elif args.to_latest:
            target = hi
        elif args.to_current:
            target = current if current is not None else hi
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.shift_by is not None:
            if current is None:
                raise ToolError(f"partition {common.tp_name(tp.topic, tp.partition)} has no committed offset to shift")
            target = current + args.shift_by
        elif args.reset_plan is not None:
            target = args.reset_plan[group][(tp.topic, tp.partition)]
        else:  # --to-datetime, --by-duration
            found = by_time.get(tp, -1)
            target = found if found >= 0 else hi  # no record at or after that time: the end
        out[tp] = min(max(target, lo), hi)
    return out


def _reset_offsets(admin: Any, args: argparse.Namespace) -> int:
    from kafka import OffsetAndMetadata
    from kafka.admin import OffsetSpec, OffsetTimestamp

    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing.", file=sys.stderr, flush=True)
    groups = _group_ids(admin, args)
    if args.reset_plan is not None:
        missing = [g for g in groups if g not in args.reset_plan]
        if missing:
            raise ToolError(f"no reset plan for group '{missing[0]}' in {args.from_file}")
        for group in groups:  # every group's plan is checked before any is committed
            _scope(admin, args, {}, group)
    tables: list[list[str]] = []
    csv_lines: list[str] = []
    for group in groups:
        desc = _describe_group(admin, group, must_exist=False)
        state = desc["group_state"]
        if state not in ("Empty", "Dead"):
            raise ToolError(f"assignments can only be reset if the group '{group}' is inactive, "
                            f"but the current state is {state}")
        committed = _committed(admin, group) if not _is_missing(desc) else {}
        tps = _scope(admin, args, committed, group)
        earliest = _list_offsets(admin, set(tps), OffsetSpec.EARLIEST)
        latest = _list_offsets(admin, set(tps), OffsetSpec.LATEST)
        tps = [tp for tp in tps if tp in earliest and tp in latest]  # --all-topics: skip deleted topics
        by_time: dict[Any, int] = {}
        if args.to_datetime is not None or args.by_duration is not None:
            by_time = _list_offsets(admin, set(tps), OffsetTimestamp(args.datetime_ms))
        targets = new_offsets(args, group, tps, committed, earliest, latest, by_time)
        if args.execute and targets:
            result = admin.alter_group_offsets(group, {
                tp: OffsetAndMetadata(off, committed[tp].metadata if tp in committed else "", None)
                for tp, off in targets.items()})
            for tp, err in sorted(result.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
                if err.errno:
                    raise ToolError(f"cannot commit the offset of {common.tp_name(tp.topic, tp.partition)} "
                                    f"for group '{group}': {common.error_text(err)}")
        tables.append(common.format_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                                          [[group, tp.topic, tp.partition, off] for tp, off in targets.items()]))
        # --export: kafka-consumer-groups.sh's CSV, with the group column unless one --group was named
        prefix = "" if len(args.group) == 1 else f"{group},"
        csv_lines += [f"{prefix}{tp.topic},{tp.partition},{off}" for tp, off in targets.items()]
    if args.export:
        common.print_lines(csv_lines)
        return 0
    out: list[str] = []
    for i, table in enumerate(tables):
        if i:
            out.append("")
        out += table
    common.print_lines(out)
    return 0


# --------------------------------------------------------------------------------------------
# --delete, --delete-offsets
# --------------------------------------------------------------------------------------------

def _delete(admin: Any, args: argparse.Namespace) -> int:
    import kafka.errors as Errors

    groups = _group_ids(admin, args)
    if not groups:
        return 0
    result = admin.delete_groups(groups)
    for group in groups:
        outcome = result.get(group, "OK")
        if outcome == "OK":
            continue
        err = getattr(Errors, outcome, None)
        if err is Errors.GroupIdNotFoundError:
            raise ToolError(f"consumer group '{group}' does not exist")
        raise ToolError(f"cannot delete consumer group '{group}': "
                        f"{common.error_text(err) if err is not None else outcome}")
    names = ", ".join(f"'{g}'" for g in groups)
    common.print_lines([f"Deletion of requested consumer groups ({names}) was successful."])
    return 0


def _delete_offsets(admin: Any, args: argparse.Namespace) -> int:
    import kafka.errors as Errors

    group = args.group[0]
    tps = _scope(admin, args, {})
    try:
        result = admin.delete_group_offsets(group, tps)
    except Errors.GroupIdNotFoundError:
        raise ToolError(f"consumer group '{group}' does not exist") from None
    rows = []
    for tp in tps:
        err = result.get(tp, Errors.NoError)
        if err.errno:
            raise ToolError(f"cannot delete the offset of {common.tp_name(tp.topic, tp.partition)} "
                            f"from group '{group}': {common.error_text(err)}")
        rows.append([tp.topic, tp.partition, "Successful"])
    common.print_lines(common.format_table(("TOPIC", "PARTITION", "STATUS"), rows))
    return 0
