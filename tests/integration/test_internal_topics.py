"""Internal topics (__consumer_offsets, __transaction_state) under the admin APIs of kafka-python and
confluent-kafka, answered as Apache Kafka 3.9 in ZooKeeper mode answers them (each answer checked
against Kafka 3.9.1): CreateTopics on the existing topic TOPIC_ALREADY_EXISTS, on a missing one
creates it as asked (flagged internal, used by the coordinators); CreatePartitions and
AlterConfigs validated as for any topic; DeleteRecords INVALID_TOPIC_EXCEPTION; Produce
INVALID_TOPIC_EXCEPTION unless the client id is `__admin_client`. None of it touches the committed
offsets or the transactional state, which survive a restart. DeleteTopics deletes an internal topic
as it deletes any other, its offsets with it (Kafka 3.9 refuses nothing there either); the
coordinator then recreates the topic and what is committed afterwards survives a restart."""
from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.harness import BrokerProcess
from tests.integration.test_txn_coordinator import init_ok
from tests.integration.util import RawClient, Rec, build_batch, create_topic, wait_until

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
INTERNAL = (OFFSETS, TXN_STATE)
INTERNAL_PARTITIONS = 2
NONE, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS = 0, 17, 36, 37
OVERRIDES = {"offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
             "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
             "group.initial.rebalance.delay.ms": "0"}
TOPIC, GROUP, TXN_ID = "data", "g-internal", "txn-internal"


@pytest.fixture
def b(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(log_dir=tmp_path / "logs", overrides=OVERRIDES) as broker:
        yield broker


# -- the two clients' admin APIs, reduced to (error code, message) per operation ---------------

class KafkaPythonAdmin:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaAdminClient
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)

    def create_topic(self, name: str) -> tuple[int, Any]:
        (t,) = self.admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}},
                                        raise_errors=False)["topics"]
        return t["error_code"], t["error_message"]

    def create_partitions(self, name: str, count: int, validate_only: bool) -> tuple[int, Any]:
        (r,) = self.admin.create_partitions({name: count}, validate_only=validate_only, raise_errors=False).results
        return r.error_code, r.error_message

    def delete_records(self, name: str) -> tuple[int, Any]:
        import kafka.errors as Errors
        from kafka import TopicPartition
        try:
            self.admin.delete_records({TopicPartition(name, 0): -1}, partition_leader_id=0)
        except Errors.BrokerResponseError as e:
            return e.errno, None
        return NONE, None

    def alter_topic_config(self, name: str, key: str, value: str) -> tuple[int, Any]:
        from kafka.admin import ConfigResource, ConfigResourceType
        got = self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={key: value})],
                                       validate_only=True, raise_on_unknown=False, incremental=True)
        result = got["topic"][name]
        return getattr(result, "errno", NONE), None

    def delete_topic(self, name: str) -> tuple[int, Any]:
        (t,) = self.admin.delete_topics([name], timeout_ms=15000, raise_errors=False)["topics"]
        return t["error_code"], t.get("error_message")

    def close(self) -> None:
        self.admin.close()


class ConfluentAdmin:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    @staticmethod
    def _outcome(future: Any) -> tuple[int, Any]:
        from confluent_kafka import KafkaException
        try:
            future.result(30)
        except KafkaException as e:
            return e.args[0].code(), e.args[0].str()
        return NONE, None

    def create_topic(self, name: str) -> tuple[int, Any]:
        from confluent_kafka.admin import NewTopic
        return self._outcome(self.admin.create_topics([NewTopic(name, 1, 1)])[name])

    def create_partitions(self, name: str, count: int, validate_only: bool) -> tuple[int, Any]:
        from confluent_kafka.admin import NewPartitions
        return self._outcome(self.admin.create_partitions([NewPartitions(name, count)],
                                                          validate_only=validate_only)[name])

    def delete_records(self, name: str) -> tuple[int, Any]:
        from confluent_kafka import TopicPartition
        (future,) = self.admin.delete_records([TopicPartition(name, 0, -1)]).values()
        return self._outcome(future)

    def alter_topic_config(self, name: str, key: str, value: str) -> tuple[int, Any]:
        from confluent_kafka.admin import ConfigResource
        (future,) = self.admin.alter_configs([ConfigResource("topic", name, set_config={key: value})],
                                             validate_only=True).values()
        return self._outcome(future)

    def delete_topic(self, name: str) -> tuple[int, Any]:
        return self._outcome(self.admin.delete_topics([name], operation_timeout=15)[name])

    def close(self) -> None:
        pass


CLIENTS: dict[str, Callable[[str], Any]] = {"kafka-python": KafkaPythonAdmin, "confluent-kafka": ConfluentAdmin}


@contextmanager
def admin_client(client: str, bootstrap: str) -> Iterator[Any]:
    admin = CLIENTS[client](bootstrap)
    try:
        yield admin
    finally:
        admin.close()


# -- state that must survive ---------------------------------------------------------------------

def commit_offset(bootstrap: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        c.close()


def committed_offset(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=30)
        return tp.offset
    finally:
        c.close()


def commit_transaction(bootstrap: str) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, value=b"in a transaction", partition=0)
    p.commit_transaction(30)


def txn_producer(bootstrap: str) -> tuple[int, int]:
    """InitProducerId for the transactional id: the same producer id with the next epoch as long as
    the transaction log still holds the id's state."""
    with RawClient(bootstrap) as c:
        # as clients do: find the coordinator first (which creates a deleted transaction log afresh)
        wait_until(lambda: coordinator_found(c, TXN_ID, 1), what="transaction coordinator")
        return init_ok(c, TXN_ID)


def coordinator_found(c: RawClient, key: str, key_type: int) -> bool:
    return c.request(FindCoordinatorRequest[3](key=key, key_type=key_type)).error_code == NONE


def setup_state(b: BrokerProcess) -> tuple[int, int]:
    create_topic(b.bootstrap_servers, TOPIC)
    commit_offset(b.bootstrap_servers, 5)
    commit_transaction(b.bootstrap_servers)
    return txn_producer(b.bootstrap_servers)


def partition_counts(bootstrap: str) -> dict[str, int]:
    with RawClient(bootstrap) as c:
        return {t.name: len(t.partitions) for t in c.metadata(list(INTERNAL)).topics}


def produce_error(bootstrap: str, client_id: str) -> int:
    """Produce a tombstone for a group no one uses (GroupMetadataKey v2 "x") to __consumer_offsets."""
    key = b"\x00\x02\x00\x01x"
    with RawClient(bootstrap, client_id=client_id) as c:
        return c.produce(OFFSETS, 0, build_batch([Rec(key=key, value=None)])).error_code


# -- tests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_refused_and_validated_admin_operations_leave_offsets_and_transactions(b: BrokerProcess, client: str) -> None:
    pid, epoch = setup_state(b)
    with admin_client(client, b.bootstrap_servers) as admin:
        for name in INTERNAL:
            assert admin.create_topic(name) == (TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            assert admin.create_partitions(name, INTERNAL_PARTITIONS, validate_only=False) == \
                (INVALID_PARTITIONS, f"Topic already has {INTERNAL_PARTITIONS} partitions.")
            assert admin.create_partitions(name, INTERNAL_PARTITIONS + 3, validate_only=True)[0] == NONE
            assert admin.delete_records(name)[0] == INVALID_TOPIC_EXCEPTION
            assert admin.alter_topic_config(name, "retention.ms", "1000")[0] == NONE   # validate_only
    b.restart()
    assert committed_offset(b.bootstrap_servers) == 5
    assert txn_producer(b.bootstrap_servers) == (pid, epoch + 1)
    assert partition_counts(b.bootstrap_servers) == {OFFSETS: INTERNAL_PARTITIONS, TXN_STATE: INTERNAL_PARTITIONS}


def test_produce_to_an_internal_topic_only_as_the_admin_client_id(b: BrokerProcess) -> None:
    create_topic(b.bootstrap_servers, TOPIC)
    commit_offset(b.bootstrap_servers, 1)
    assert produce_error(b.bootstrap_servers, "kafkalite-it") == INVALID_TOPIC_EXCEPTION
    # Kafka's KafkaApis lets the client id "__admin_client" append to internal topics
    assert produce_error(b.bootstrap_servers, "__admin_client") == NONE
    b.restart()     # the tombstone of an unknown group loads without harm
    assert committed_offset(b.bootstrap_servers) == 1


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_deleting_an_internal_topic_deletes_it_as_kafka_does(b: BrokerProcess, client: str) -> None:
    pid, epoch = setup_state(b)
    with admin_client(client, b.bootstrap_servers) as admin:
        for name in INTERNAL:
            assert admin.delete_topic(name)[0] == NONE
    with RawClient(b.bootstrap_servers) as c:
        wait_until(lambda: all(t.error_code != NONE for t in c.metadata(list(INTERNAL)).topics),
                   what="internal topics deleted")
    # the offsets and the transactional id went with the topics; naming the coordinators creates
    # the topics afresh and the coordinators work on as before
    assert committed_offset(b.bootstrap_servers) == -1001
    new_pid, new_epoch = txn_producer(b.bootstrap_servers)
    assert (new_pid, new_epoch) != (pid, epoch + 1) and new_epoch == 0
    commit_offset(b.bootstrap_servers, 9)
    b.restart()
    assert committed_offset(b.bootstrap_servers) == 9
    assert txn_producer(b.bootstrap_servers) == (new_pid, 1)


def test_console_producer_to_an_internal_topic_is_one_line(b: BrokerProcess) -> None:
    with RawClient(b.bootstrap_servers) as c:
        wait_until(lambda: coordinator_found(c, GROUP, 0), what="offsets topic")
    r = subprocess.run([sys.executable, "-m", "kafkalite", "console-producer", "--bootstrap-server",
                        b.bootstrap_servers, "--topic", OFFSETS], input=b"hello\n", capture_output=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (1, b"", (
        f"kafkalite console-producer: cannot produce to topic '{OFFSETS}': cannot append to internal "
        f"topic {OFFSETS} (INVALID_TOPIC)\n"))


@pytest.mark.parametrize("name, reason", [
    ("bad name", "'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("..", "'..' is not allowed"),
])
def test_console_producer_to_an_invalid_topic_name_is_one_line(name: str, reason: str) -> None:
    # refused before any connection (nothing listens on port 1), with Kafka's InvalidTopicException message
    r = subprocess.run([sys.executable, "-m", "kafkalite", "console-producer", "--bootstrap-server", "127.0.0.1:1",
                        "--topic", name], input=b"hello\n", capture_output=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (1, b"", (
        f"kafkalite console-producer: topic name is invalid: {reason}\n"))


def _internal_answers(c: RawClient, allow_auto_topic_creation: bool) -> dict[str, tuple[int, bool, int]]:
    answer = c.metadata(list(INTERNAL), allow_auto_topic_creation=allow_auto_topic_creation)
    return {t.name: (t.error_code, t.is_internal, len(t.partitions)) for t in answer.topics}


def test_metadata_creates_internal_topics_only_where_auto_creation_is_allowed(b: BrokerProcess,
                                                                               tmp_path: Path) -> None:
    """Kafka 3.9 (KafkaApis.getTopicMetadata, AutoTopicCreationManager): a Metadata request naming a
    missing internal topic creates it, with its coordinator's partition count and configs, only
    when the request allows auto-creation and auto.create.topics.enable is on; otherwise
    UNKNOWN_TOPIC_OR_PARTITION, flagged internal."""
    UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
    with RawClient(b.bootstrap_servers) as c:
        assert _internal_answers(c, False) == {n: (UNKNOWN_TOPIC_OR_PARTITION, True, 0) for n in INTERNAL}
        assert {t.name for t in c.metadata(None).topics} == set()
        assert _internal_answers(c, True) == {n: (LEADER_NOT_AVAILABLE, True, 0) for n in INTERNAL}
        wait_until(lambda: _internal_answers(c, False) == {n: (NONE, True, INTERNAL_PARTITIONS) for n in INTERNAL},
                   what="both internal topics created and led")
    with BrokerProcess(log_dir=tmp_path / "no-auto-create",
                       overrides={**OVERRIDES, "auto.create.topics.enable": "false"}) as no_auto:
        with RawClient(no_auto.bootstrap_servers) as c:
            assert _internal_answers(c, True) == {n: (UNKNOWN_TOPIC_OR_PARTITION, True, 0) for n in INTERNAL}
            assert {t.name for t in c.metadata(None).topics} == set()


def test_creating_a_missing_internal_topic_creates_it_as_asked(b: BrokerProcess) -> None:
    """Kafka 3.9's ZkAdminManager.createTopics has no internal-topic rule: CreateTopics of an
    internal topic that does not exist yet creates it with the request's partitions and configs
    (the default cleanup.policy=delete, not the coordinator's compacted layout); it is flagged
    internal; the coordinators use it (at the partition count they read at start-up) and what
    they store survives a restart."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    create_topic(b.bootstrap_servers, TOPIC)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=15000)
    try:
        answers = admin.create_topics({name: {"num_partitions": INTERNAL_PARTITIONS, "replication_factor": 1}
                                       for name in INTERNAL}, raise_errors=False)["topics"]
        assert sorted((t["name"], t["error_code"]) for t in answers) == [(OFFSETS, NONE), (TXN_STATE, NONE)]
        with RawClient(b.bootstrap_servers) as c:
            wait_until(lambda: _internal_answers(c, False) == {n: (NONE, True, INTERNAL_PARTITIONS) for n in INTERNAL},
                       what="both internal topics created and led")
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in INTERNAL],
                                           config_filter="all")["topic"]
        policies = {name: (described[name]["cleanup.policy"]["value"], described[name]["cleanup.policy"]["config_source"])
                    for name in INTERNAL}
        assert policies == {OFFSETS: ("delete", "DEFAULT_CONFIG"), TXN_STATE: ("delete", "DEFAULT_CONFIG")}
    finally:
        admin.close()
    commit_offset(b.bootstrap_servers, 7)
    pid, epoch = txn_producer(b.bootstrap_servers)
    b.restart()
    assert committed_offset(b.bootstrap_servers) == 7
    assert txn_producer(b.bootstrap_servers) == (pid, epoch + 1)
