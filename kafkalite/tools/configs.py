"""`kafkalite configs`: describe and alter topic and broker configs (Kafka's kafka-configs.sh).

    kafkalite configs --entity-type topics|brokers [--entity-name NAME | --entity-default] --describe [--all]
    kafkalite configs --entity-type topics|brokers (--entity-name NAME | --entity-default) --alter
                      [--add-config K=V[,K=V...]] [--delete-config K[,K...]]

Describe prints, per entity, a heading and one line per config sorted by name:
    Dynamic configs for topic T are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}
Without --all only dynamic overrides are listed (the topic's own, the broker's own, or the
cluster-wide broker defaults), as kafka-configs.sh does. Alterations are IncrementalAlterConfigs
SET/DELETE operations; the broker validates names and values.
"""
from __future__ import annotations

import argparse
from typing import Any, Optional

from kafkalite.tools import common
from kafkalite.tools.common import ToolError

TOOL = "configs"
UNKNOWN_TOPIC_OR_PARTITION = 3
DEFAULT_BROKER = ""  # the resource name of the cluster-wide broker defaults

# Which sources count as "dynamic" for a plain --describe (kafka-configs.sh's filter).
# kafka-configs.sh's other entity types. Their APIs (DescribeClientQuotas, AlterClientQuotas,
# DescribeUserScramCredentials, AlterUserScramCredentials; BROKER_LOGGER, CLIENT_METRICS and GROUP
# config resources) are not implemented by kafkalite, so the tool refuses them in one line.
UNSUPPORTED_ENTITY_TYPES = ("users", "clients", "ips", "broker-loggers", "client-metrics", "groups")
_UNSUPPORTED_WHY = {"users": "client quotas or SCRAM credentials", "clients": "client quotas",
                    "ips": "connection quotas", "broker-loggers": "BROKER_LOGGER config resources",
                    "client-metrics": "CLIENT_METRICS config resources", "groups": "GROUP config resources"}

_DYNAMIC_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG"}


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="describe and alter topic and broker configs",
                       description="Describe and alter topic and broker configs (as kafka-configs.sh).")
    common.add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list configs")
    actions.add_argument("--alter", action="store_true", help="set and/or delete configs")
    p.add_argument("--entity-type", required=True, choices=("topics", "brokers") + UNSUPPORTED_ENTITY_TYPES,
                   help="topics or brokers (kafka-configs.sh's other types are refused: see docs/operations.md)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--entity-name", metavar="NAME", help="topic name or broker id")
    who.add_argument("--entity-default", action="store_true",
                     help="brokers only: the cluster-wide default broker configs")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only dynamic overrides")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                   help="--alter: configs to set; a list value is written in brackets, k=[a,b] (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                   help="--alter: configs to remove (repeatable)")
    p.set_defaults(func=lambda args: common.run_tool(TOOL, _run, args), parser=p)


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config syntax: `k1=v1,k2=[a,b]` -- commas inside brackets belong
    to the value, the brackets are dropped. Raises ValueError for an entry without `=`."""
    entries: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    out: dict[str, str] = {}
    for entry in entries:
        if not entry.strip():
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise ValueError(entry)
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _validate(args: argparse.Namespace) -> None:
    p: argparse.ArgumentParser = args.parser
    if args.entity_type in UNSUPPORTED_ENTITY_TYPES:
        raise ToolError(f"--entity-type {args.entity_type} is not supported: kafkalite has no "
                        f"{_UNSUPPORTED_WHY[args.entity_type]}")
    if args.entity_type == "topics" and args.entity_name is not None:
        common.check_topic_name(args.entity_name)
    if args.entity_default and args.entity_type != "brokers":
        p.error("--entity-default is only valid with --entity-type brokers")
    if args.entity_type == "brokers" and args.entity_name is not None:
        try:
            int(args.entity_name)
        except ValueError:
            p.error(f"--entity-name must be a broker id for --entity-type brokers, got {args.entity_name!r}")
    if args.alter:
        if args.entity_name is None and not args.entity_default:
            p.error("--alter requires --entity-name or --entity-default")
        if args.all:
            p.error("--all can only be used with --describe")
        args.set_configs = {}
        for item in args.add_config:
            try:
                args.set_configs.update(parse_add_config(item))
            except ValueError as e:
                p.error(f"invalid --add-config entry {str(e)!r}: expected KEY=VALUE")
        args.delete_keys = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
        if not args.set_configs and not args.delete_keys:
            p.error("--alter requires --add-config or --delete-config")
        both = sorted(set(args.set_configs) & set(args.delete_keys))
        if both:
            p.error(f"config {both[0]!r} is both added and deleted")
    elif args.add_config or args.delete_config:
        p.error("--add-config/--delete-config can only be used with --alter")


def _run(args: argparse.Namespace) -> int:
    _validate(args)
    with common.admin_client(args) as admin:
        if args.describe:
            return _describe(admin, args)
        return _alter(admin, args)


# --------------------------------------------------------------------------------------------
# kafka-python access (the cluster-default broker resource has the empty name, which
# kafka-python's describe/alter helpers refuse -- they route broker resources by integer id --
# so that one resource is sent to any broker directly with the library's own request builders)
# --------------------------------------------------------------------------------------------

def _resource(entity_type: str, name: str, configs: Any = None) -> Any:
    from kafka.admin import ConfigResource, ConfigResourceType

    rtype = ConfigResourceType.TOPIC if entity_type == "topics" else ConfigResourceType.BROKER
    return ConfigResource(rtype, name, configs)


def describe_resource(admin: Any, entity_type: str, name: str) -> dict[str, dict[str, Any]]:
    """Every config of one resource: {name: {value, config_source, is_sensitive, synonyms, ...}}."""
    resource = _resource(entity_type, name)
    if entity_type == "brokers" and name == DEFAULT_BROKER:
        request = admin._describe_configs_request([resource], include_synonyms=True)
        response = admin._manager.run(admin._manager.send, request)
        _raise_resource_errors(response.results)
        got = admin._describe_configs_process_responses([response], "all")
    else:
        got = admin.describe_configs([resource], include_synonyms=True, config_filter="all")
    return got.get("topic" if entity_type == "topics" else "broker", {}).get(name, {})


def _raise_resource_errors(results: Any) -> None:
    for r in results:
        if r.error_code:
            raise ToolError(common.error_text(r.error_code, r.error_message))


def alter_resource(admin: Any, entity_type: str, name: str, set_configs: dict[str, str],
                   delete_keys: list[str]) -> None:
    """IncrementalAlterConfigs: SET each of `set_configs`, DELETE each of `delete_keys`."""
    from kafka.admin import AlterConfigOp

    ops: dict[str, Any] = dict(set_configs)
    ops.update({k: (AlterConfigOp.DELETE, None) for k in delete_keys})
    resource = _resource(entity_type, name, ops)
    if entity_type == "brokers" and name == DEFAULT_BROKER:
        request = admin._alter_configs_request([resource], validate_only=False, incremental=True)
        response = admin._manager.run(admin._manager.send, request)
        _raise_resource_errors(response.responses)
        return
    result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    outcome = result.get("topic" if entity_type == "topics" else "broker", {}).get(name, "OK")
    if outcome != "OK":
        if entity_type == "topics" and outcome.startswith(f"[Error {UNKNOWN_TOPIC_OR_PARTITION}]"):
            raise ToolError(f"topic '{name}' does not exist")
        raise ToolError(common.error_string_text(outcome))


# --------------------------------------------------------------------------------------------
# Actions
# --------------------------------------------------------------------------------------------

def _entities(admin: Any, args: argparse.Namespace) -> list[str]:
    """The resource names to describe; a named topic or broker that does not exist is an error."""
    if args.entity_type == "topics":
        if args.entity_name is not None:
            (md,) = admin.describe_topics([args.entity_name])
            if md["error_code"] == UNKNOWN_TOPIC_OR_PARTITION:
                raise ToolError(f"topic '{args.entity_name}' does not exist")
            return [args.entity_name]
        return sorted(t["name"] for t in admin.describe_topics(None) if t["error_code"] == 0)
    if args.entity_default:
        return [DEFAULT_BROKER]
    brokers = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    if args.entity_name is not None:
        if int(args.entity_name) not in brokers:
            raise ToolError(f"broker {int(args.entity_name)} does not exist")
        return [str(int(args.entity_name))]
    return [str(b) for b in brokers]


def _heading(args: argparse.Namespace, name: str) -> str:
    if args.entity_type == "brokers" and name == DEFAULT_BROKER:
        return "Default configs for brokers in the cluster are:"
    kind = "topic" if args.entity_type == "topics" else "broker"
    return f"{'All' if args.all else 'Dynamic'} configs for {kind} {name} are:"


def config_line(name: str, entry: dict[str, Any]) -> str:
    """`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` (kafka-configs.sh)."""
    def show(v: Optional[str]) -> str:
        return "null" if v is None else v

    synonyms = ", ".join(f"{s['source']}:{s['name']}={show(s['value'])}" for s in entry.get("synonyms") or [])
    return (f"  {name}={show(entry['value'])} sensitive={str(bool(entry['is_sensitive'])).lower()} "
            f"synonyms={{{synonyms}}}")


def _describe(admin: Any, args: argparse.Namespace) -> int:
    lines: list[str] = []
    for name in _entities(admin, args):
        configs = describe_resource(admin, args.entity_type, name)
        if args.entity_type == "brokers" and name == DEFAULT_BROKER:
            wanted = None if args.all else "DYNAMIC_DEFAULT_BROKER_CONFIG"
        else:
            wanted = None if args.all else _DYNAMIC_SOURCE[args.entity_type]
        lines.append(_heading(args, name))
        lines += [config_line(k, v) for k, v in sorted(configs.items())
                  if wanted is None or v["config_source"] == wanted]
    common.print_lines(lines)
    return 0


def _alter(admin: Any, args: argparse.Namespace) -> int:
    name = DEFAULT_BROKER if args.entity_default else args.entity_name
    if args.entity_type == "brokers" and not args.entity_default:
        name = _entities(admin, args)[0]
    alter_resource(admin, args.entity_type, name, args.set_configs, args.delete_keys)
    if args.entity_default:
        common.print_lines(["Completed updating default config for brokers in the cluster."])
    else:
        kind = "topic" if args.entity_type == "topics" else "broker"
        common.print_lines([f"Completed updating config for {kind} {name}."])
    return 0
