"""Setup steps and record builders the corpus files share.

Steps are ordinary requests (run identically against both brokers) with a wait condition where
Kafka completes something asynchronously: leadership after CreateTopics, the coordinator after
the first FindCoordinator, a producer id after the transaction coordinator loads.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence

from tests.differential.framework import Lazy, Step, Var, Vars
from tests.integration.util import Rec, build_batch

# Fixed record timestamps (recent: within retention.ms, or retention would delete the data), so
# both brokers store byte-identical batches.
BASE_TS = (int(time.time()) // 3600 - 1) * 3600 * 1000

METADATA, CREATE_TOPICS, PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID = 3, 19, 0, 10, 22


def all_leaders_ready(response: dict) -> bool:
    """Every requested topic exists and every partition has a leader (Metadata v1+)."""
    return bool(response["topics"]) and all(
        t["error_code"] == 0 and t["partitions"] and all(p["error_code"] == 0 and p["leader_id"] >= 0
                                                        for p in t["partitions"])
        for t in response["topics"])


def wait_topics(*names: str) -> Step:
    return Step(METADATA, 12, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False},
                until=all_leaders_ready)


def create_topic(name: str = "{topic}", partitions: int = 1, configs: Optional[Mapping[str, str]] = None,
                 assignments: Optional[Sequence[tuple[int, list[int]]]] = None) -> list[Step]:
    """CreateTopics, then wait for leadership; saves the topic id as `<placeholder>_id`
    (`topic_id` for "{topic}")."""
    var = name.strip("{}") + "_id" if name.startswith("{") else "topic_id"
    create = Step(CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": -1 if assignments else partitions,
                    "replication_factor": -1 if assignments else 1,
                    "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or [])],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 15000, "validate_only": False},
        until=lambda r: r["topics"][0]["error_code"] == 0)
    return [create, Step(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False},
                         until=all_leaders_ready, save={var: "topics.0.topic_id"})]


def records(*values: bytes, key: Optional[bytes] = b"k", ts_step: int = 10, **batch_kwargs: Any) -> bytes:
    """One magic-2 batch with fixed timestamps."""
    return build_batch([Rec(key, v, timestamp=BASE_TS + ts_step * i) for i, v in enumerate(values)],
                       **batch_kwargs)


def idempotent_records(*values: bytes, base_sequence: int = 0, epoch_delta: int = 0) -> Lazy:
    """A batch of the session's idempotent producer (`producer_id`/`producer_epoch` saved by
    `init_producer`): the ids differ per broker, so it is built per broker."""
    def make(v: Vars) -> bytes:
        return records(*values, producer_id=v["producer_id"], producer_epoch=v["producer_epoch"] + epoch_delta,
                       base_sequence=base_sequence)
    return make


def produce(topic: str = "{topic}", partition: int = 0, batch: Any = None, version: int = 9,
            acks: int = -1) -> Step:
    batch = records(b"v0", b"v1", b"v2") if batch is None else batch
    return Step(PRODUCE, version, {
        "transactional_id": None, "acks": acks, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]},
        until=lambda r: r["responses"][0]["partition_responses"][0]["error_code"] == 0)


def init_producer(transactional_id: Optional[str] = None, timeout_ms: int = 60000) -> Step:
    """InitProducerId, retried while the coordinator loads; saves producer_id/producer_epoch."""
    return Step(INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms,
                                      "producer_id": -1, "producer_epoch": -1},
                until=lambda r: r["error_code"] == 0,
                save={"producer_id": "producer_id", "producer_epoch": "producer_epoch"})


def coordinator_ready(key: str = "{group}", key_type: int = 0) -> Step:
    """FindCoordinator until the coordinator is available (the first one creates
    __consumer_offsets / __transaction_state and answers COORDINATOR_NOT_AVAILABLE)."""
    return Step(FIND_COORDINATOR, 3, {"key": key, "key_type": key_type},
                until=lambda r: r["error_code"] == 0)


def var(name: str) -> Var:
    return Var(name)
