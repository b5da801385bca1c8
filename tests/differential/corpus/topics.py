"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DeleteRecords (21) — each version both brokers advertise, and their refusals."""
from __future__ import annotations

import uuid

from tests.differential.corpus.steps import create_topic, produce, records
from tests.differential.framework import Case, Var

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DELETE_RECORDS = 19, 20, 37, 21
UNKNOWN_ID = uuid.UUID("00000000-0000-0000-0000-00000000abcd")
CONFIG_DOCS = {"topics[*].configs[*].documentation": "kafkalite documents configs in its own words"}


def _topic(name: str = "{topic}", partitions: int = 2, rf: int = 1, configs: dict | None = None,
           assignments: list | None = None) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or [])],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def _create(*topics: dict, validate_only: bool = False, timeout_ms: int = 15000) -> dict:
    return {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}


def _delete(version: int, *names: str, ids: tuple = ()) -> dict:
    if version >= 6:
        return {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
                + [{"name": None, "topic_id": i} for i in ids], "timeout_ms": 15000}
    return {"topic_names": list(names), "timeout_ms": 15000}


def _partitions(count: int, assignments: list | None = None, validate_only: bool = False,
                name: str = "{topic}") -> dict:
    return {"topics": [{"name": name, "count": count,
                        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}],
            "timeout_ms": 15000, "validate_only": validate_only}


def _delete_records(offset: int, partition: int = 0, name: str = "{topic}") -> dict:
    return {"topics": [{"name": name, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout_ms": 15000}


CASES = [
    Case(f"create_topics_v{v}", CREATE_TOPICS, v, _create(_topic(partitions=3)), allow=CONFIG_DOCS)
    for v in range(0, 8)
] + [
    Case("create_topics_v1_validate_only", CREATE_TOPICS, 1, _create(_topic(), validate_only=True)),
    Case("create_topics_v0_invalid_config_value", CREATE_TOPICS, 0, _create(_topic(configs={"retention.ms": "x"}))),
] + [
    Case(f"create_topics_v{v}_already_exists", CREATE_TOPICS, v, _create(_topic()), setup=create_topic())
    for v in (2, 5, 7)
] + [
    Case(f"create_topics_v{v}_validate_only_with_configs", CREATE_TOPICS, v,
         _create(_topic(configs={"cleanup.policy": "compact", "retention.ms": "12345", "segment.bytes": "1048576"}),
                 validate_only=True), allow=CONFIG_DOCS)
    for v in (2, 5, 7)
] + [
    Case("create_topics_v7_invalid_names", CREATE_TOPICS, 7,
         _create(_topic("bad/name"), _topic(""), _topic("."), _topic("x" * 250))),
    Case("create_topics_v7_negative_partitions", CREATE_TOPICS, 7, _create(_topic(partitions=-5))),
    Case("create_topics_v7_zero_partitions", CREATE_TOPICS, 7, _create(_topic(partitions=0))),
    Case("create_topics_v7_replication_factor_too_large", CREATE_TOPICS, 7, _create(_topic(rf=3))),
    Case("create_topics_v7_zero_replication_factor", CREATE_TOPICS, 7, _create(_topic(rf=0))),
    Case("create_topics_v7_default_partitions_and_rf", CREATE_TOPICS, 7, _create(_topic(partitions=-1, rf=-1)),
         allow=CONFIG_DOCS),
    Case("create_topics_v7_unknown_config", CREATE_TOPICS, 7, _create(_topic(configs={"no.such.config": "1"}))),
    Case("create_topics_v7_invalid_config_value", CREATE_TOPICS, 7,
         _create(_topic(configs={"retention.ms": "soon"}))),
    Case("create_topics_v7_compression_levels", CREATE_TOPICS, 7,
         _create(_topic(configs={"compression.gzip.level": "9", "compression.lz4.level": "1",
                                 "compression.zstd.level": "-5", "remote.log.copy.disable": "false"})),
         allow=CONFIG_DOCS),
    Case("create_topics_v7_remote_log_copy_disable", CREATE_TOPICS, 7,
         _create(_topic(configs={"remote.log.copy.disable": "true"}))),
    Case("create_topics_v7_gzip_level_zero", CREATE_TOPICS, 7,
         _create(_topic(configs={"compression.gzip.level": "0"}))),
    Case("create_topics_v7_lz4_level_too_high", CREATE_TOPICS, 7,
         _create(_topic(configs={"compression.lz4.level": "18"}))),
    Case("create_topics_v7_zstd_level_too_low", CREATE_TOPICS, 7,
         _create(_topic(configs={"compression.zstd.level": "-131073"}))),
    Case("create_topics_v7_invalid_cleanup_policy", CREATE_TOPICS, 7,
         _create(_topic(configs={"cleanup.policy": "shred"}))),
    Case("create_topics_v7_manual_assignment", CREATE_TOPICS, 7,
         _create(_topic(partitions=-1, rf=-1, assignments=[(0, [0]), (1, [0])])), allow=CONFIG_DOCS),
    Case("create_topics_v7_assignment_and_count", CREATE_TOPICS, 7,
         _create(_topic(partitions=2, rf=1, assignments=[(0, [0])]))),
    Case("create_topics_v7_duplicate_in_request", CREATE_TOPICS, 7, _create(_topic(), _topic())),
    Case("create_topics_v7_two_topics", CREATE_TOPICS, 7, _create(_topic(), _topic("{topic2}", partitions=1)),
         allow=CONFIG_DOCS),
] + [
    Case(f"delete_topics_v{v}", DELETE_TOPICS, v, _delete(v, "{topic}"), setup=create_topic())
    for v in range(0, 7)
] + [
    Case(f"delete_topics_v{v}_unknown", DELETE_TOPICS, v, _delete(v, "{topic}")) for v in (0, 1, 5, 6)
] + [
    Case("delete_topics_v6_by_id", DELETE_TOPICS, 6, _delete(6, ids=(Var("topic_id"),)), setup=create_topic()),
    Case("delete_topics_v6_unknown_id", DELETE_TOPICS, 6, _delete(6, ids=(UNKNOWN_ID,))),
    Case("delete_topics_v6_invalid_name", DELETE_TOPICS, 6, _delete(6, "bad/name")),
    Case("delete_topics_v5_unknown_and_existing", DELETE_TOPICS, 5, _delete(5, "{topic2}", "{topic}", "{topic2}"),
         setup=create_topic()),
    Case("delete_topics_v6_name_and_id", DELETE_TOPICS, 6,
         {"topics": [{"name": "{topic}", "topic_id": UNKNOWN_ID}, {"name": "{topic2}", "topic_id": uuid.UUID(int=0)}],
          "timeout_ms": 15000}),
] + [
    Case(f"create_partitions_v{v}", CREATE_PARTITIONS, v, _partitions(3), setup=create_topic(partitions=1))
    for v in range(0, 4)
] + [
    Case("create_partitions_v3_decrease", CREATE_PARTITIONS, 3, _partitions(1), setup=create_topic(partitions=2)),
    Case("create_partitions_v3_same_count", CREATE_PARTITIONS, 3, _partitions(2), setup=create_topic(partitions=2)),
    Case("create_partitions_v3_unknown_topic", CREATE_PARTITIONS, 3, _partitions(2)),
    Case("create_partitions_v3_validate_only", CREATE_PARTITIONS, 3, _partitions(4, validate_only=True),
         setup=create_topic(partitions=1)),
    Case("create_partitions_v3_assignments", CREATE_PARTITIONS, 3, _partitions(3, assignments=[[0], [0]]),
         setup=create_topic(partitions=1)),
    Case("create_partitions_v3_assignment_count_mismatch", CREATE_PARTITIONS, 3,
         _partitions(3, assignments=[[0]]), setup=create_topic(partitions=1)),
    Case("create_partitions_v3_assignment_unknown_broker", CREATE_PARTITIONS, 3,
         _partitions(2, assignments=[[5]]), setup=create_topic(partitions=1)),
    Case("create_partitions_v3_negative_count", CREATE_PARTITIONS, 3, _partitions(-1),
         setup=create_topic(partitions=1)),
] + [
    Case(f"delete_records_v{v}", DELETE_RECORDS, v, _delete_records(2),
         setup=[*create_topic(), produce(batch=records(b"a", b"b", b"c", b"d"))])
    for v in range(0, 3)
] + [
    Case("delete_records_v2_to_high_watermark", DELETE_RECORDS, 2, _delete_records(-1),
         setup=[*create_topic(), produce()]),
    Case("delete_records_v2_beyond_high_watermark", DELETE_RECORDS, 2, _delete_records(10),
         setup=[*create_topic(), produce()]),
    Case("delete_records_v2_negative_offset", DELETE_RECORDS, 2, _delete_records(-7),
         setup=[*create_topic(), produce()]),
    Case("delete_records_v2_unknown_partition", DELETE_RECORDS, 2, _delete_records(0, partition=3),
         setup=create_topic()),
    Case("delete_records_v2_unknown_topic", DELETE_RECORDS, 2, _delete_records(0)),
    Case("delete_records_v2_compacted_topic", DELETE_RECORDS, 2, _delete_records(1),
         setup=[*create_topic(configs={"cleanup.policy": "compact"}), produce()]),
]
