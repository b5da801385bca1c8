"""Two kafkalite brokers handing out producer ids at the same time (InitProducerId without a
transactional id, as every idempotent producer sends it, from several connections to each
broker at once) never give the same id: the ids come from blocks of 1000 claimed in
/latest_producer_id_block with a conditional write, and a block belongs to the one broker that
claimed it. The znode holds Kafka 3.9's layout (version 1, the claiming broker, first and last
id as decimal strings, in Kafka's key order)."""
from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import pytest

from tests.cluster.conftest_h8 import LocalCluster

pytestmark = pytest.mark.cluster

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14   # no block ready yet: Kafka's answer, which producers retry
BLOCK_SIZE = 1000
CONNECTIONS_PER_BROKER = 3
REQUESTS_PER_CONNECTION = 600   # 3600 ids over two brokers: several blocks each


@pytest.fixture(scope="module")
def cluster(zookeeper_server: Any) -> Iterator[LocalCluster]:
    with LocalCluster(zookeeper_server.connect_string, 2) as c:
        yield c


def init_producer_ids(broker: Any, n: int, out: list[tuple[int, int]], errors: list[Any]) -> None:
    """n InitProducerId v4 requests on one connection: (producer id, epoch) of each."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.producer import InitProducerIdRequest
    from kafkalite.testing import _Connection

    try:
        with _Connection(broker.host, broker.port, 30.0) as c:
            while len(out) < n:
                resp = c.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                          producer_id=-1, producer_epoch=-1))
                if resp.error_code == COORDINATOR_LOAD_IN_PROGRESS:
                    continue
                if resp.error_code != NONE:
                    errors.append(resp)
                    return
                out.append((resp.producer_id, resp.producer_epoch))
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def test_concurrent_producer_ids_are_unique(cluster: LocalCluster) -> None:
    results: dict[tuple[int, int], list[tuple[int, int]]] = {}
    errors: list[Any] = []
    threads = []
    for broker_id, broker in cluster.brokers.items():
        for k in range(CONNECTIONS_PER_BROKER):
            results[(broker_id, k)] = []
            threads.append(threading.Thread(target=init_producer_ids,
                                            args=(broker, REQUESTS_PER_CONNECTION, results[(broker_id, k)], errors)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    by_broker = {b: [pid for (bb, _), got in results.items() if bb == b for pid, _ in got] for b in cluster.brokers}
    everything = [pid for ids in by_broker.values() for pid in ids]
    assert len(everything) == len(cluster.brokers) * CONNECTIONS_PER_BROKER * REQUESTS_PER_CONNECTION
    assert len(set(everything)) == len(everything)            # never the same id twice
    assert {epoch for got in results.values() for _, epoch in got} == {0}
    # each block belongs to one broker
    blocks = {b: {pid // BLOCK_SIZE for pid in ids} for b, ids in by_broker.items()}
    assert blocks[0].isdisjoint(blocks[1])
    # the znode: Kafka's layout byte for byte; the newest claim, which is the highest block
    # used or one of up to one per broker prefetched beyond it (claimed at 90% of a block)
    data, stat = cluster.zk.get("/latest_producer_id_block")
    doc = json.loads(data)
    start = int(doc["block_start"])
    assert data == (f'{{"version":1,"broker":{doc["broker"]},"block_start":"{start}",'
                    f'"block_end":"{start + BLOCK_SIZE - 1}"}}').encode()
    highest_used = max(max(bl) for bl in blocks.values())
    assert start % BLOCK_SIZE == 0 and doc["broker"] in cluster.brokers
    assert highest_used <= start // BLOCK_SIZE <= highest_used + len(cluster.brokers), (doc, highest_used)
    # every claim is one conditional write on the node: its version counts the blocks claimed
    assert stat.version == start // BLOCK_SIZE + 1
