"""Idempotent and transactional producers: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeProducers (61), DescribeTransactions (65), ListTransactions (66)."""
from __future__ import annotations

from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.differential.corpus.steps import (BASE_TS, coordinator_ready, create_topic, idempotent_records,
                                             init_producer, produce)
from tests.differential.framework import Case, Step, Var, Vars

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 27, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66

TIMES = {
    "transaction_states[*].transaction_start_time_ms": "the wall-clock time the transaction started",
    "active_producers[*].last_timestamp": "an idempotent batch's timestamp is fixed, a marker's is the clock",
}
MARKER_TIME = {"responses[*].partitions[*].records.batches[*].records[*].timestamp":
               "a transaction marker is stamped with the coordinator's clock"}
TXN_READY = [coordinator_ready("{txn}", key_type=1), init_producer("{txn}")]
PID, EPOCH = Var("producer_id"), Var("producer_epoch")


def _init(transactional_id: str | None = None, timeout_ms: int = 60000, producer_id: Any = -1,
          producer_epoch: Any = -1) -> dict:
    return {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms,
            "producer_id": producer_id, "producer_epoch": producer_epoch}


def _add_partitions(version: int, topic: str = "{topic}", partitions: tuple = (0,), producer_id: Any = PID,
                    producer_epoch: Any = EPOCH, transactional_id: str = "{txn}",
                    verify_only: bool = False) -> dict:
    topics = [{"name": topic, "partitions": list(partitions)}]
    if version >= 4:
        return {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": verify_only, "topics": topics}]}
    return {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": producer_epoch, "v3_and_below_topics": topics}


def add_partitions_step() -> Step:
    return Step(ADD_PARTITIONS, 3, _add_partitions(3),
                until=lambda r: r["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                    "partition_error_code"] == 0)


def _add_offsets(producer_id: Any = PID, producer_epoch: Any = EPOCH) -> dict:
    return {"transactional_id": "{txn}", "producer_id": producer_id, "producer_epoch": producer_epoch,
            "group_id": "{group}"}


def _end(committed: bool = True, producer_id: Any = PID, producer_epoch: Any = EPOCH) -> dict:
    return {"transactional_id": "{txn}", "producer_id": producer_id, "producer_epoch": producer_epoch,
            "committed": committed}


def _txn_commit(generation_id: int = -1, member_id: str = "", topic: str = "{topic}") -> dict:
    return {"transactional_id": "{txn}", "group_id": "{group}", "producer_id": PID, "producer_epoch": EPOCH,
            "generation_id": generation_id, "member_id": member_id, "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 4,
                                                        "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}


def _markers(committed: bool = True, coordinator_epoch: int = 0, topic: str = "{topic}") -> dict:
    return {"markers": [{"producer_id": PID, "producer_epoch": EPOCH, "transaction_result": committed,
                         "topics": [{"name": topic, "partition_indexes": [0]}],
                         "coordinator_epoch": coordinator_epoch}]}


def own_transactions(response: dict, variables: Vars) -> dict:
    """ListTransactions lists every transaction of the broker: keep the case's own."""
    return {**response, "transaction_states": [t for t in response["transaction_states"]
                                               if t["transactional_id"] == variables["txn"]]}


def _producer_txn_batch(v: Vars) -> bytes:
    """One transactional batch of the session's producer (its id differs per broker)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=v["producer_id"], producer_epoch=v["producer_epoch"],
                                  base_sequence=0, batch_size=1 << 20)
    b.append(0, BASE_TS, b"k", b"txn-value", [])
    return bytes(b.build())


def _txn_produce() -> Step:
    return Step(0, 9, {"transactional_id": "{txn}", "acks": -1, "timeout_ms": 10000,
                       "topic_data": [{"name": "{topic}",
                                       "partition_data": [{"index": 0, "records": _producer_txn_batch}]}]},
                until=lambda r: r["responses"][0]["partition_responses"][0]["error_code"] == 0)


IN_TXN = [*create_topic(), *TXN_READY, add_partitions_step()]
ADD_OFFSETS_STEP = Step(ADD_OFFSETS, 3, _add_offsets(), until=lambda r: r["error_code"] == 0)
WITH_DATA = [*IN_TXN, _txn_produce()]

CASES = [
    # the setup's InitProducerId waits out Kafka's first answer, COORDINATOR_LOAD_IN_PROGRESS while
    # its broker fetches a block of producer ids from the controller
    Case(f"init_producer_id_v{v}_idempotent", INIT_PRODUCER_ID, v, _init(), setup=[init_producer()])
    for v in range(0, 6)
] + [
    Case(f"init_producer_id_v{v}_transactional", INIT_PRODUCER_ID, v, _init("{txn}"),
         setup=[coordinator_ready("{txn}", key_type=1), init_producer("{txn}")]) for v in range(0, 6)
] + [
    Case("init_producer_id_v4_timeout_too_large", INIT_PRODUCER_ID, 4, _init("{txn}", timeout_ms=10**9),
         setup=[coordinator_ready("{txn}", key_type=1)]),
    Case("init_producer_id_v4_zero_timeout", INIT_PRODUCER_ID, 4, _init("{txn}", timeout_ms=0),
         setup=[coordinator_ready("{txn}", key_type=1)]),
    Case("init_producer_id_v4_empty_transactional_id", INIT_PRODUCER_ID, 4, _init("")),
    Case("init_producer_id_v4_recover_wrong_epoch", INIT_PRODUCER_ID, 4,
         _init("{txn}", producer_id=PID, producer_epoch=Var("wrong_epoch")),
         setup=[*TXN_READY, Step(INIT_PRODUCER_ID, 4, _init("{txn}"), until=lambda r: r["error_code"] == 0,
                                 save={"wrong_epoch": "producer_epoch"})]),
    Case("init_producer_id_v4_idempotent_with_producer_id", INIT_PRODUCER_ID, 4,
         _init(producer_id=5, producer_epoch=0)),
] + [
    Case(f"add_partitions_to_txn_v{v}", ADD_PARTITIONS, v, _add_partitions(v), setup=[*create_topic(), *TXN_READY])
    for v in range(0, 6)
] + [
    # KIP-890 part 1: a broker verifying partitions before a transactional append; those not in the
    # transaction are TRANSACTION_ABORTABLE at v4 as at v5 (v5 only says the sender knows the code)
    Case(f"add_partitions_to_txn_v{v}_verify_only", ADD_PARTITIONS, v,
         _add_partitions(v, partitions=(0, 1), verify_only=True),
         setup=[*create_topic(partitions=2), *TXN_READY, add_partitions_step()]) for v in range(4, 6)
] + [
    Case("add_partitions_to_txn_v3_unknown_topic", ADD_PARTITIONS, 3, _add_partitions(3, topic="{topic2}"),
         setup=[*create_topic(), *TXN_READY]),
    Case("add_partitions_to_txn_v3_wrong_producer_id", ADD_PARTITIONS, 3, _add_partitions(3, producer_id=123456789),
         setup=[*create_topic(), *TXN_READY]),
    Case("add_partitions_to_txn_v1_old_epoch", ADD_PARTITIONS, 1, _add_partitions(1, producer_epoch=Var("old_epoch")),
         setup=[*create_topic(), *TXN_READY,
                Step(INIT_PRODUCER_ID, 4, _init("{txn}"), until=lambda r: r["error_code"] == 0,
                     save={"old_epoch": "producer_epoch"}),
                Step(INIT_PRODUCER_ID, 4, _init("{txn}"), until=lambda r: r["error_code"] == 0,
                     save={"producer_epoch": "producer_epoch"})]),
    Case("add_partitions_to_txn_v3_unknown_transactional_id", ADD_PARTITIONS, 3,
         _add_partitions(3, transactional_id="{txn}-other"), setup=[*create_topic(), *TXN_READY]),
    Case("add_partitions_to_txn_v3_internal_topic", ADD_PARTITIONS, 3,
         _add_partitions(3, topic="__transaction_state"), setup=[*create_topic(), *TXN_READY]),
    Case("add_partitions_to_txn_v3_unknown_partition", ADD_PARTITIONS, 3, _add_partitions(3, partitions=(0, 9)),
         setup=[*create_topic(), *TXN_READY]),
] + [
    Case(f"add_offsets_to_txn_v{v}", ADD_OFFSETS, v, _add_offsets(), setup=[*IN_TXN, coordinator_ready()])
    for v in range(0, 5)
] + [
    Case("add_offsets_to_txn_v3_wrong_producer_id", ADD_OFFSETS, 3, _add_offsets(producer_id=987654),
         setup=[*IN_TXN, coordinator_ready()]),
    Case("add_offsets_to_txn_v4_wrong_producer_id", ADD_OFFSETS, 4, _add_offsets(producer_id=987654),
         setup=[*IN_TXN, coordinator_ready()]),
] + [
    Case(f"end_txn_v{v}_commit", END_TXN, v, _end(), setup=WITH_DATA) for v in range(0, 5)
] + [
    Case("end_txn_v3_abort", END_TXN, 3, _end(committed=False), setup=WITH_DATA, allow=MARKER_TIME,
         then=[Step(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
                            "topics": [{"topic": "{topic}", "partitions": [{
                                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20}]}],
                            "forgotten_topics_data": [], "rack_id": ""},
                    # EndTxn is answered before the markers are written: wait for the abort marker
                    until=lambda r: r["responses"][0]["partitions"][0]["last_stable_offset"] == 2)]),
    Case("end_txn_v3_no_partitions", END_TXN, 3, _end(), setup=[*create_topic(), *TXN_READY]),
    Case("end_txn_v4_no_partitions", END_TXN, 4, _end(), setup=[*create_topic(), *TXN_READY]),
    Case("end_txn_v4_old_epoch", END_TXN, 4, _end(producer_epoch=Var("old_epoch")),
         setup=[*create_topic(), *TXN_READY,
                Step(INIT_PRODUCER_ID, 4, _init("{txn}"), until=lambda r: r["error_code"] == 0,
                     save={"old_epoch": "producer_epoch"}),
                Step(INIT_PRODUCER_ID, 4, _init("{txn}"), until=lambda r: r["error_code"] == 0)]),
    Case("end_txn_v3_wrong_producer_id", END_TXN, 3, _end(producer_id=4242), setup=WITH_DATA),
    Case("end_txn_v3_unknown_transactional_id", END_TXN, 3,
         {**_end(producer_id=1000, producer_epoch=0), "transactional_id": "{txn}-none"},
         setup=[coordinator_ready("{txn}-none", key_type=1)]),
] + [
    Case(f"txn_offset_commit_v{v}", TXN_OFFSET_COMMIT, v, _txn_commit(),
         setup=[*IN_TXN, coordinator_ready(), ADD_OFFSETS_STEP])
    for v in range(0, 5)
] + [
    # the group's partition was never added (no AddOffsetsToTxn): the coordinator's verification
    # answers TRANSACTION_ABORTABLE, which Kafka passes on from v4 and turns into INVALID_TXN_STATE before
    Case(f"txn_offset_commit_v{v}_without_add_offsets", TXN_OFFSET_COMMIT, v, _txn_commit(),
         setup=[*IN_TXN, coordinator_ready()]) for v in (3, 4)
] + [
    Case("txn_offset_commit_v3_unknown_member", TXN_OFFSET_COMMIT, 3, _txn_commit(generation_id=1, member_id="m"),
         setup=[*IN_TXN, coordinator_ready(), ADD_OFFSETS_STEP]),
] + [
    Case(f"write_txn_markers_v{v}", WRITE_MARKERS, v, _markers(), setup=WITH_DATA) for v in range(0, 2)
] + [
    Case("write_txn_markers_v1_unknown_topic", WRITE_MARKERS, 1, _markers(topic="{topic2}"), setup=WITH_DATA),
] + [
    Case("describe_producers_v0", DESCRIBE_PRODUCERS, 0,
         {"topics": [{"name": "{topic}", "partition_indexes": [0, 3]}]},
         setup=[*create_topic(), init_producer(), produce(batch=idempotent_records(b"a", b"b"))], allow=TIMES),
    Case("describe_producers_v0_transactional", DESCRIBE_PRODUCERS, 0,
         {"topics": [{"name": "{topic}", "partition_indexes": [0]}]}, setup=WITH_DATA, allow=TIMES),
    Case("describe_producers_v0_unknown_topic", DESCRIBE_PRODUCERS, 0,
         {"topics": [{"name": "{topic2}", "partition_indexes": [0]}]}),
    Case("describe_transactions_v0", DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["{txn}"]}, setup=WITH_DATA,
         allow=TIMES),
    Case("describe_transactions_v0_empty", DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["{txn}"]},
         setup=TXN_READY, allow=TIMES),
    Case("describe_transactions_v0_unknown", DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["{txn}-none"]},
         setup=[coordinator_ready("{txn}-none", key_type=1)]),
] + [
    Case(f"list_transactions_v{v}", LIST_TRANSACTIONS, v,
         {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}, setup=WITH_DATA,
         project=own_transactions) for v in range(0, 2)
] + [
    Case("list_transactions_v1_state_filter", LIST_TRANSACTIONS, 1,
         {"state_filters": ["Ongoing", "NoSuchState"], "producer_id_filters": [], "duration_filter": -1},
         setup=WITH_DATA, project=own_transactions),
]
