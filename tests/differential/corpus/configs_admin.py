"""Topic configs — DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) on TOPIC
resources (BROKER resources are owned elsewhere and not in this corpus) — and the cluster views
DescribeCluster (60), DescribeLogDirs (35)."""
from __future__ import annotations

from tests.differential.compare import NOT_COMPARED
from tests.differential.corpus.steps import create_topic, produce
from tests.differential.framework import Case, Step

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS = 32, 33, 44, 60, 35
TOPIC = 2
DOCS = {"results[*].configs[*].documentation": "kafkalite documents configs in its own words"}
LOG_DIRS = {
    "results[*].log_dir": "each broker has its own log directory",
    "results[*].total_bytes": "the size of the volume under each log directory",
    "results[*].usable_bytes": "the free space of that volume",
}


def _describe(keys: list | None = None, synonyms: bool = True, docs: bool = True, name: str = "{topic}",
              rtype: int = TOPIC) -> dict:
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": docs}


def _alter(configs: dict, validate_only: bool = False, name: str = "{topic}") -> dict:
    return {"resources": [{"resource_type": TOPIC, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": validate_only}


def _incremental(ops: list, validate_only: bool = False, name: str = "{topic}") -> dict:
    return {"resources": [{"resource_type": TOPIC, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": validate_only}


def _describe_step(keys: list) -> Step:
    return Step(DESCRIBE_CONFIGS, 4, _describe(keys, synonyms=True, docs=False))


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
KEYS = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes"]
WITH_OVERRIDES = create_topic(configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})

CASES = [
    Case(f"describe_configs_v{v}_topic_keys", DESCRIBE_CONFIGS, v, _describe(KEYS), setup=WITH_OVERRIDES,
         allow=DOCS) for v in range(0, 5)
] + [
    Case("describe_configs_v0_all_topic_configs", DESCRIBE_CONFIGS, 0, _describe(None), setup=WITH_OVERRIDES),
] + [
    Case("describe_configs_v4_all_topic_configs", DESCRIBE_CONFIGS, 4, _describe(None, docs=False),
         setup=create_topic()),
    Case("describe_configs_v4_without_synonyms", DESCRIBE_CONFIGS, 4, _describe(KEYS, synonyms=False, docs=False),
         setup=WITH_OVERRIDES),
    Case("describe_configs_v4_unknown_topic", DESCRIBE_CONFIGS, 4, _describe(KEYS, name="{topic2}")),
    Case("describe_configs_v4_unknown_key", DESCRIBE_CONFIGS, 4, _describe(["no.such.config"]),
         setup=create_topic()),
    Case("describe_configs_v4_invalid_topic_name", DESCRIBE_CONFIGS, 4, _describe(KEYS, name="bad/name")),
    Case("describe_configs_v4_unknown_resource_type", DESCRIBE_CONFIGS, 4, _describe(KEYS, rtype=9)),
] + [
    Case(f"alter_configs_v{v}", ALTER_CONFIGS, v, _alter({"retention.ms": "7200000", "segment.ms": "600000"}),
         setup=create_topic(), then=[_describe_step(["retention.ms", "segment.ms"])]) for v in range(0, 3)
] + [
    Case("alter_configs_v2_invalid_value", ALTER_CONFIGS, 2, _alter({"retention.ms": "soon"}), setup=create_topic()),
    Case("alter_configs_v2_unknown_config", ALTER_CONFIGS, 2, _alter({"no.such.config": "1"}), setup=create_topic()),
    Case("alter_configs_v2_unknown_topic", ALTER_CONFIGS, 2, _alter({"retention.ms": "1"}, name="{topic2}")),
    Case("alter_configs_v2_validate_only", ALTER_CONFIGS, 2, _alter({"retention.ms": "1000"}, validate_only=True),
         setup=create_topic(), then=[_describe_step(["retention.ms"])]),
    Case("alter_configs_v2_null_value", ALTER_CONFIGS, 2, _alter({"retention.ms": None}), setup=create_topic()),
] + [
    Case(f"incremental_alter_configs_v{v}", INCREMENTAL_ALTER_CONFIGS, v,
         _incremental([("retention.ms", SET, "60000"), ("cleanup.policy", DELETE, None)]),
         setup=WITH_OVERRIDES, then=[_describe_step(["retention.ms", "cleanup.policy"])]) for v in range(0, 2)
] + [
    Case("incremental_alter_configs_v1_append_subtract", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("leader.replication.throttled.replicas", APPEND, "0:0"),
                        ("follower.replication.throttled.replicas", SUBTRACT, "0:0")]),
         setup=create_topic(), then=[_describe_step(["leader.replication.throttled.replicas",
                                                     "follower.replication.throttled.replicas"])]),
    Case("incremental_alter_configs_v1_append_non_list", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("retention.ms", APPEND, "5")]), setup=create_topic()),
    Case("incremental_alter_configs_v1_unknown_operation", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("retention.ms", 7, "5")]), setup=create_topic(),
         allow={"responses[*].error_code": NOT_COMPARED + "Kafka 3.9 fails on OpType.forId(7) == null with a "
                "NullPointerException (UNKNOWN_SERVER_ERROR, a Kafka bug); kafkalite answers INVALID_REQUEST",
                "responses[*].error_message": NOT_COMPARED + "see error_code"}),
    Case("incremental_alter_configs_v1_duplicate_key", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("retention.ms", SET, "5"), ("retention.ms", SET, "6")]), setup=create_topic()),
    Case("incremental_alter_configs_v1_invalid_value", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("min.cleanable.dirty.ratio", SET, "2.5")]), setup=create_topic()),
    Case("incremental_alter_configs_v1_unknown_topic", INCREMENTAL_ALTER_CONFIGS, 1,
         _incremental([("retention.ms", SET, "5")], name="{topic2}")),
] + [
    Case(f"describe_cluster_v{v}", DESCRIBE_CLUSTER, v,
         {"include_cluster_authorized_operations": True, "endpoint_type": 1}) for v in range(0, 2)
] + [
    Case("describe_cluster_v1_controller_endpoints", DESCRIBE_CLUSTER, 1,
         {"include_cluster_authorized_operations": False, "endpoint_type": 2}),
    Case("describe_cluster_v1_unknown_endpoint_type", DESCRIBE_CLUSTER, 1,
         {"include_cluster_authorized_operations": False, "endpoint_type": 9}),
] + [
    Case(f"describe_log_dirs_v{v}", DESCRIBE_LOG_DIRS, v,
         {"topics": [{"topic": "{topic}", "partitions": [0, 1, 7]}]},
         setup=[*create_topic(partitions=2), produce(partition=1)], allow=LOG_DIRS) for v in range(0, 5)
] + [
    Case("describe_log_dirs_v4_unknown_topic", DESCRIBE_LOG_DIRS, 4,
         {"topics": [{"topic": "{topic2}", "partitions": [0]}]}, allow=LOG_DIRS),
]
