"""Internal topics (__consumer_offsets, __transaction_state) in topic administration requests, as
Kafka 3.9 (ZooKeeper mode) answers them: only DeleteRecords is refused (INVALID_TOPIC_EXCEPTION,
ReplicaManager); CreateTopics on the existing topic is TOPIC_ALREADY_EXISTS, and CreatePartitions and
(Incremental)AlterConfigs are validated as for any topic. DeleteTopics is not here: Kafka 3.9 deletes
an internal topic like any other (checked with this file's framework against a fresh oracle: both
brokers answered NONE), and deleting it on the shared oracle would disturb every later group and
transaction case."""
from __future__ import annotations

from tests.differential.corpus.steps import coordinator_ready
from tests.differential.framework import Case

CREATE_TOPICS, CREATE_PARTITIONS, DELETE_RECORDS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 19, 37, 21, 33, 44
TOPIC = 2
INTERNAL = {"__consumer_offsets": coordinator_ready(), "__transaction_state": coordinator_ready("{txn}", 1)}
CONFIG_DOCS = {"topics[*].configs[*].documentation": "kafkalite documents configs in its own words"}


def _slug(name: str) -> str:
    return name.strip("_")


CASES = [
    c for name, ready in INTERNAL.items() for c in (
        Case(f"internal_create_topics_v7_{_slug(name)}", CREATE_TOPICS, 7,
             {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout_ms": 15000, "validate_only": False}, setup=[ready]),
        Case(f"internal_create_topics_v7_validate_only_{_slug(name)}", CREATE_TOPICS, 7,
             {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout_ms": 15000, "validate_only": True}, setup=[ready]),
        Case(f"internal_create_partitions_v3_validate_only_{_slug(name)}", CREATE_PARTITIONS, 3,
             {"topics": [{"name": name, "count": 1000, "assignments": None}], "timeout_ms": 15000,
              "validate_only": True}, setup=[ready]),
        Case(f"internal_delete_records_v2_{_slug(name)}", DELETE_RECORDS, 2,
             {"topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": -1}]}],
              "timeout_ms": 15000}, setup=[ready]),
        Case(f"internal_alter_configs_v2_validate_only_{_slug(name)}", ALTER_CONFIGS, 2,
             {"resources": [{"resource_type": TOPIC, "resource_name": name,
                             "configs": [{"name": "retention.ms", "value": "3600000"}]}], "validate_only": True},
             setup=[ready]),
        Case(f"internal_incremental_alter_configs_v1_validate_only_{_slug(name)}", INCREMENTAL_ALTER_CONFIGS, 1,
             {"resources": [{"resource_type": TOPIC, "resource_name": name,
                             "configs": [{"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}],
              "validate_only": True}, setup=[ready]),
    )
]
