"""How long each work unit of the parallel phase takes, so the xdist scheduler (tests/conftest.py)
hands out the longest first and both workers end together (longest-processing-time-first).

Measured: the sum of setup, call and teardown of the unit's tests on one of the 2 workers of
`bash scripts/test.sh` (2-core machine, 2026-11-28, 3,487 tests in the parallel phase). Units under
8 s are left out and estimated from their test count: a unit test takes ~0.05 s, any other ~0.4 s
(1.0 here, so that a new file of slow tests runs early rather than last). The figures need only be
right relative to each other; re-measure when a unit changes by tens of seconds
(`--durations=0`, summed per unit).
"""
from __future__ import annotations

UNIT_SECONDS: dict[str, float] = {
    "jvm-fixtures": 478,
    "tests/integration/test_cli_tools.py": 112,
    "netfaults": 73,
    "tests/integration/test_admin_tools_cli.py": 62,
    "tests/integration/test_java_client.py": 59,
    "tests/plugin/test_plugin.py": 58,
    "tests/integration/test_cli_verbs.py": 57,
    "tests/integration/test_runtime_install.py": 49,
    "tests/integration/test_groups_confluent.py": 49,
    "tests/cluster/test_coordinator_failover.py": 48,
    "tests/integration/test_dump_log.py": 48,
    "tests/integration/test_groups_restart.py": 46,
    "tests/integration/test_compaction.py": 44,
    "tests/cluster/test_transactions_cluster.py": 42,
    "tests/cluster/test_replication_follower.py": 39,
    "tests/cluster/test_replication_clients.py": 39,
    "tests/integration/test_local_cluster_cli.py": 33,
    "tests/integration/test_startup_failures.py": 33,
    "tests/integration/test_version_sweep.py": 33,
    "tests/unit/test_inter_broker_messages.py": 31,
    "tests/integration/test_settings_effects.py": 31,
    "tests/integration/test_restart.py": 31,
    "tests/unit/test_log_properties.py": 30,
    "tests/cluster/test_broker_failure.py": 28,
    "tests/integration/test_resource_exhaustion.py": 27,
    "tests/integration/test_transactions_java.py": 26,
    "tests/integration/test_groups_kafka_python.py": 25,
    "tests/integration/test_internal_topics.py": 23,
    "tests/cluster/test_cluster_metadata_clients.py": 22,
    "tests/plugin/test_cluster_plugin.py": 22,
    "tests/cluster/test_unclean_election.py": 21,
    "tests/integration/test_groups_kafka_python2.py": 20,
    "tests/cluster/test_session_expiry.py": 19,
    "tests/cluster/test_reassignment.py": 19,
    "tests/integration/test_dynamic_broker_configs.py": 19,
    "tests/integration/test_transactions_confluent.py": 19,
    "tests/cluster/test_internal_topic_rf.py": 18,
    "tests/integration/test_kazoo_store.py": 17,
    "tests/integration/test_groups_aiokafka.py": 17,
    "tests/integration/test_kcat.py": 17,
    "tests/integration/test_cli.py": 17,
    "tests/integration/test_confluent.py": 16,
    "tests/cluster/test_fetch_from_follower.py": 16,
    "tests/integration/test_groups_admin.py": 15,
    "tests/cluster/test_cluster_hostile.py": 14,
    "tests/integration/test_txn_coordinator.py": 13,
    "tests/integration/test_restart_many_partitions.py": 12,
    "tests/cluster/test_topic_deletion_cluster.py": 12,
    "tests/cluster/test_controlled_shutdown.py": 12,
    "tests/integration/test_eos_loop.py": 11,
    "tests/integration/test_idempotence_replay.py": 11,
    "tests/integration/test_metrics.py": 11,
    "tests/unit/test_group_coordinator.py": 10,
    "tests/unit/test_controller_election.py": 10,
    "tests/integration/test_broker_logging.py": 10,
    "tests/integration/test_kafka_python.py": 9,
    "tests/cluster/test_controller_failover.py": 8,
    "tests/integration/test_local_zookeeper_cli.py": 8,
    "tests/integration/test_topic_configs.py": 8,
}


def estimated_seconds(unit: str, tests: int) -> float:
    """The unit's measured seconds, else an estimate from its number of tests."""
    if unit in UNIT_SECONDS:
        return UNIT_SECONDS[unit]
    return tests * (0.05 if unit.startswith("tests/unit/") else 1.0)
