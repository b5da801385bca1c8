"""`kafkalite topics`: create, list, describe, alter and delete topics (Kafka's kafka-topics.sh).

    kafkalite topics --create   --topic T [--partitions N] [--replication-factor R] [--config K=V ...] [--if-not-exists]
    kafkalite topics --list     [--topic REGEX] [--exclude-internal]
    kafkalite topics --describe [--topic REGEX] [--exclude-internal] [--if-exists]
    kafkalite topics --alter    --topic T [--partitions N] [--config K=V ...] [--delete-config K ...] [--if-exists]
    kafkalite topics --delete   --topic T [--if-exists]

Output (stable; documented in docs/operations.md):
    Created topic T.
    Topic: T<TAB>TopicId: <id><TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: k=v,k=v
    <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 0<TAB>Replicas: 0<TAB>Isr: 0
"""
from __future__ import annotations

import argparse
import base64
import re
import uuid
from typing import Any, Optional

from kafkalite.tools import common
from kafkalite.tools import configs as configs_tool
from kafkalite.tools.common import ToolError

TOOL = "topics"
TOPIC_ALREADY_EXISTS = 36


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="create, list, describe, alter and delete topics",
                       description="Create, list, describe, alter and delete topics (as kafka-topics.sh).")
    common.add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a topic")
    actions.add_argument("--list", action="store_true", help="list topic names")
    actions.add_argument("--describe", action="store_true",
                         help="partitions, leaders, replicas, ISR and non-default configs")
    actions.add_argument("--alter", action="store_true",
                         help="add partitions and/or change the topic's configs")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    p.add_argument("--topic", help="topic name; with --list, --describe, --alter and --delete a regular "
                                    "expression the whole name must match (commas separate alternatives), "
                                    "as kafka-topics.sh")
    p.add_argument("--partitions", type=common.positive_int, metavar="N",
                   help="--create: partition count (default: the broker's num.partitions); "
                        "--alter: the new, larger partition count")
    p.add_argument("--replication-factor", type=common.replication_factor, metavar="R",
                   help="--create: replication factor (default: the broker's default.replication.factor)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config to set (--create, --alter; repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="--alter: topic config to remove, back to the broker default (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if the topic exists")
    p.add_argument("--if-exists", action="store_true",
                   help="--describe/--alter/--delete: no error if the topic does not exist")
    p.add_argument("--exclude-internal", action="store_true",
                   help="--list/--describe: leave out internal topics (__consumer_offsets)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


# what makes --topic a pattern rather than a name: regex syntax, IncludeList's commas (alternatives)
# and quotes ('.' is both: a name with dots stays a regex, as in Kafka, where "a.b" also selects "axb")
_REGEX_SYNTAX = re.compile(r"""[\\^$*+?{}\[\]|(),'"]""")


def _validate(args: argparse.Namespace) -> None:
    p: argparse.ArgumentParser = args.parser
    action = next(a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a))
    if action in ("create", "alter", "delete") and not args.topic:
        p.error(f"--{action} requires --topic")
    allowed = {
        "partitions": ("create", "alter"), "replication_factor": ("create",), "config": ("create", "alter"),
        "delete_config": ("alter",), "if_not_exists": ("create",), "if_exists": ("describe", "alter", "delete"),
        "exclude_internal": ("list", "describe"), "topic": ("create", "list", "describe", "alter", "delete"),
    }
    for opt, actions in allowed.items():
        if getattr(args, opt) and action not in actions:
            p.error(f"--{opt.replace('_', '-')} cannot be used with --{action}")
    if action == "alter" and not (args.partitions or args.config or args.delete_config):
        p.error("--alter requires --partitions, --config or --delete-config")
    if args.topic is not None and action != "create":  # --create: the broker says why a name is refused
        # Kafka's TopicCommand selects the topics of --list/--describe/--alter/--delete with
        # TopicFilter.IncludeList (a regex); a plain name Kafka would refuse is said so at once.
        if action in ("alter", "delete") and not _REGEX_SYNTAX.search(args.topic):
            common.check_topic_name(args.topic)
        try:
            args.topic_pattern = common.include_list(args.topic)
        except re.error as e:
            p.error(f"--topic {args.topic!r} is not a valid regular expression: {e}")
    args.configs = common.parse_key_values(args.config, "--config", p)
    both = sorted(set(args.configs) & set(args.delete_config))
    if both:
        p.error(f"config {both[0]!r} is both set and deleted")
    args.action = action


def _run(args: argparse.Namespace) -> int:
    _validate(args)
    with common.admin_client(args) as admin:
        return {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
                "delete": _delete}[args.action](admin, args)


def _create(admin: Any, args: argparse.Namespace) -> int:
    spec = {"num_partitions": args.partitions or -1, "replication_factor": args.replication_factor or -1,
            "configs": args.configs}
    result = admin.create_topics({args.topic: spec}, raise_errors=False)
    (topic,) = result["topics"]
    code = topic["error_code"]
    if code == TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    if code:
        raise ToolError(common.error_text(code, topic.get("error_message")))
    common.print_lines([f"Created topic {args.topic}."])
    return 0


def _topic_metadata(admin: Any, names: Optional[list[str]]) -> list[dict[str, Any]]:
    """Metadata (no auto-creation) of the named topics, or of all topics when `names` is None."""
    return admin.describe_topics(names)


def _matching(admin: Any, args: argparse.Namespace) -> list[str]:
    """The names --topic selects for --alter/--delete (TopicCommand.getTopics: internal topics
    included), sorted; none is an error unless --if-exists."""
    names = [t["name"] for t in _selected(admin, args)]
    if not names and not args.if_exists:
        raise ToolError(f"topic '{args.topic}' does not exist")
    return names


def _selected(admin: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Metadata of every topic --topic (a pattern) selects, or of all of them, sorted by name
    (--list, --alter and --delete name a topic whose metadata has an error too, e.g. one still being
    created, as TopicCommand lists names only)."""
    pattern = getattr(args, "topic_pattern", None)
    return sorted((t for t in _topic_metadata(admin, None)
                   if (t["error_code"] == 0 or args.action in ("list", "alter", "delete"))
                   and not (args.exclude_internal and t["is_internal"])
                   and (pattern is None or pattern.match(t["name"]))), key=lambda t: t["name"])


def _list(admin: Any, args: argparse.Namespace) -> int:
    common.print_lines(t["name"] for t in _selected(admin, args))
    return 0


def kafka_topic_id(topic_id: Any) -> Optional[str]:
    """A topic id as Kafka prints it (Uuid.toString: URL-safe base64 of the 16 bytes, unpadded);
    None for a missing or all-zero id."""
    if topic_id is None:
        return None
    u = topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id))
    if u.int == 0:
        return None
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def describe_lines(md: dict[str, Any], configs: dict[str, dict[str, Any]]) -> list[str]:
    """kafka-topics.sh --describe lines of one topic: the summary (configs not at their default,
    sorted by name), then one line per partition."""
    name = md["name"]
    partitions = sorted(md["partitions"], key=lambda p: p["partition_index"])
    overrides = ",".join(f"{k}={'null' if v['value'] is None else v['value']}"
                         for k, v in sorted(configs.items()) if v["config_source"] != "DEFAULT_CONFIG")
    head = f"Topic: {name}"
    tid = kafka_topic_id(md.get("topic_id"))
    if tid:
        head += f"\tTopicId: {tid}"
    rf = len(partitions[0]["replica_nodes"]) if partitions else 0
    lines = [f"{head}\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {overrides}"]
    for p in partitions:
        leader = p["leader_id"] if p["leader_id"] >= 0 else "none"
        lines.append(f"\tTopic: {name}\tPartition: {p['partition_index']}\tLeader: {leader}"
                     f"\tReplicas: {','.join(map(str, p['replica_nodes']))}"
                     f"\tIsr: {','.join(map(str, p['isr_nodes']))}")
    return lines


def topic_configs(admin: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Every config of each topic with its source (DescribeConfigs)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if not names:
        return {}
    got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names],
                                 config_filter="all")
    return got.get("topic", {})


def _describe(admin: Any, args: argparse.Namespace) -> int:
    topics = _selected(admin, args)
    if args.topic is not None and not topics and not args.if_exists:
        raise ToolError(f"topic '{args.topic}' does not exist")
    configs = topic_configs(admin, [t["name"] for t in topics])
    lines: list[str] = []
    for md in topics:
        lines += describe_lines(md, configs.get(md["name"], {}))
    common.print_lines(lines)
    return 0


def _alter(admin: Any, args: argparse.Namespace) -> int:
    names = _matching(admin, args)
    out: list[str] = []
    if args.partitions and names:
        response = admin.create_partitions({n: args.partitions for n in names}, raise_errors=False)
        for result in sorted(response.results, key=lambda r: r.name):
            if result.error_code:
                raise ToolError(common.error_text(result.error_code, result.error_message))
        # kafka-topics.sh prints nothing on success here (nor for --delete)
    if args.configs or args.delete_config:
        for name in names:
            configs_tool.alter_resource(admin, "topics", name, args.configs, args.delete_config)
            out.append(f"Completed updating config for topic {name}.")
    common.print_lines(out)
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    names = _matching(admin, args)
    if not names:
        return 0
    result = admin.delete_topics(names, raise_errors=False)
    for topic in sorted(result["topics"], key=lambda t: t["name"]):
        if topic["error_code"]:
            raise ToolError(common.error_text(topic["error_code"], topic.get("error_message")))
    return 0
