"""A batch whose payload does not decompress: the same answer from kafkalite as from Apache Kafka
3.9 (the session's `kafka_oracle`, a real broker on a real ZooKeeper).

Kafka's record iterator throws a plain KafkaException("Failed to decompress record stream"),
which ReplicaManager.appendToLocalLog turns into UNKNOWN_SERVER_ERROR for the partition; the
client gets no message (ApiError hides UNKNOWN_SERVER_ERROR's). Checked for each codec on a
compacted topic (kafkalite decodes every client batch for its key check) and on a plain one
(kafkalite decompresses compressed client batches without decoding their records).
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.harness import BrokerProcess
from tests.integration.test_runtime_install import CODEC_NAMES, compressed_batch, payload, undecompressable_batch
from tests.integration.util import RawClient, Rec, create_topic

UNKNOWN_SERVER_ERROR = -1


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(log_dir=tmp_path_factory.mktemp("decompression") / "logs",
                      overrides={"num.partitions": "1", "auto.create.topics.enable": "false"})
    b.start()
    try:
        yield b
    finally:
        b.close()


def answers(bootstrap: str, topic: str, codec: str, policy: str) -> list[tuple[Any, ...]]:
    """The partition answers to an undecompressable batch, then to a good one of the same codec."""
    create_topic(bootstrap, topic, configs={"cleanup.policy": policy})
    out = []
    with RawClient(bootstrap) as c:
        for batch in (undecompressable_batch(codec), compressed_batch([Rec(b"k", payload(1))], codec)):
            p = c.produce(topic, 0, batch, version=9)
            out.append((p.error_code, p.base_offset, p.error_message,
                        [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]))
    return out


@pytest.mark.parametrize("policy", ["compact", "delete"])
@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_undecompressable_batch_same_answer_as_kafka(kafka_oracle: Any, lite: BrokerProcess, codec: str,
                                                     policy: str) -> None:
    topic = f"undecompressable-{codec}-{policy}"
    kafka = answers(kafka_oracle.bootstrap_servers, topic, codec, policy)
    assert kafka == [(UNKNOWN_SERVER_ERROR, -1, None, []), (0, 0, None, [])]
    assert answers(lite.bootstrap_servers, topic, codec, policy) == kafka
