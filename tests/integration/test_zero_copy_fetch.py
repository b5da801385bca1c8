"""Zero-copy fetch through a real broker: the record bytes leave the segment files with sendfile
(responses above the copy threshold), and the frame on the wire is exactly what the codec writes
for every Fetch version — with several partitions, empty ones, partial batches at the partition and
response byte limits, an unknown partition's error, incremental fetch sessions — and real clients
read every record back intact."""
from __future__ import annotations

import uuid

import confluent_kafka as ck
import pytest
from kafka.protocol.consumer import FetchRequest

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, create_topic, parse_records

PRODUCE_VERSION = 9
FETCH_VERSIONS = range(4, 18)


@pytest.fixture(scope="module")
def loaded() -> tuple[BrokerProcess, dict[tuple[str, int], list[bytes]], dict[str, uuid.UUID]]:
    """A broker with topic a (3 partitions: ~200 KB, a few hundred bytes, nothing) and b (~150 KB)."""
    with BrokerProcess() as b:
        create_topic(b.bootstrap_servers, "a", 3)
        create_topic(b.bootstrap_servers, "b", 1)
        values: dict[tuple[str, int], list[bytes]] = {("a", 0): [], ("a", 1): [], ("a", 2): [], ("b", 0): []}
        with RawClient(b.bootstrap_servers) as c:
            for i in range(20):
                recs = [Rec(b"k", bytes([65 + i]) * 1000 + str(j).encode()) for j in range(10)]
                assert c.produce("a", 0, build_batch(recs), version=PRODUCE_VERSION).error_code == 0
                values[("a", 0)] += [r.value for r in recs]
            recs = [Rec(None, b"small-%d" % j) for j in range(5)]
            assert c.produce("a", 1, build_batch(recs), version=PRODUCE_VERSION).error_code == 0
            values[("a", 1)] += [r.value for r in recs]
            for i in range(3):
                recs = [Rec(b"k", bytes([97 + i]) * 50_000)]
                assert c.produce("b", 0, build_batch(recs), version=PRODUCE_VERSION).error_code == 0
                values[("b", 0)] += [r.value for r in recs]
            meta = c.metadata(["a", "b"], version=12)
            ids = {t.name: t.topic_id for t in meta.topics}
        yield b, values, ids


def _request(v: int, ids: dict[str, uuid.UUID], parts: dict[tuple[str, int], int], *, session_id: int = 0,
             epoch: int = -1, max_bytes: int = 250_000, partition_max_bytes: int = 100_000) -> object:
    T = FetchRequest.FetchTopic
    topics: dict[str, list] = {}
    for (t, p), offset in parts.items():
        topics.setdefault(t, []).append(T.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=partition_max_bytes))
    return FetchRequest[v](
        cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[T(topic=t, topic_id=ids.get(t, uuid.UUID(int=0)), partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[], rack_id="")


def _exchange(c: RawClient, req: object) -> tuple[object, bytes, bytes]:
    """(decoded response, the frame as received, the codec's encoding of the decoded response)."""
    corr = c.send(req)
    frame = c.recv_frame()
    resp = c._pending.pop(corr).decode(frame, header=True)
    return resp, frame, bytes(resp.encode(header=True, framed=True))[4:]


def _by_partition(resp: object, v: int, ids: dict[str, uuid.UUID]) -> dict[tuple[str, int], object]:
    names = {tid: name for name, tid in ids.items()}
    return {((names.get(t.topic_id, "?") if v >= 13 else t.topic), p.partition_index): p
            for t in resp.responses for p in t.partitions}


def _check_records(pd: object, offset: int, expected: list[bytes]) -> int:
    """The served whole batches hold the produced values from `offset` on; returns how many."""
    parsed = parse_records(pd.records)
    got = [(r.offset, r.value) for b in parsed.batches if b.crc_ok for r in b.records if r.offset >= offset]
    assert all(b.crc_ok for b in parsed.batches)
    assert got == [(offset + i, v) for i, v in enumerate(expected[offset:offset + len(got)])]
    return len(got)


@pytest.mark.parametrize("v", FETCH_VERSIONS)
def test_wire_bytes_match_the_codec(loaded, v: int) -> None:
    broker, values, ids = loaded
    with RawClient(broker.bootstrap_servers) as c:
        # a-2 fetched at its log end: an empty partition
        parts = {("a", 0): 37, ("a", 1): 0, ("a", 2): len(values[("a", 2)]), ("b", 0): 0, ("a", 9): 0}
        resp, frame, encoded = _exchange(c, _request(v, ids, parts, epoch=0 if v >= 7 else -1))
        assert frame == encoded
        assert len(frame) > 140_000              # past the copy threshold: sent with sendfile
        got = _by_partition(resp, v, ids)
        assert got[("a", 9)].error_code == 3     # UNKNOWN_TOPIC_OR_PARTITION
        assert got[("a", 2)].error_code == 0 and not got[("a", 2)].records
        # partition max bytes cuts a-0 after whole batches (~10 KB each): 9 batches from offset 30
        assert _check_records(got[("a", 0)], 37, values[("a", 0)]) == 90 - 7
        assert _check_records(got[("a", 1)], 0, values[("a", 1)]) == 5
        # b-0: its partition max bytes (100 KB) holds one of its 50 KB batches, not two
        assert _check_records(got[("b", 0)], 0, values[("b", 0)]) == 1
        if v < 7:
            return
        session_id = resp.session_id
        assert session_id != 0
        # incremental: only partitions with news come back
        assert c.produce("a", 2, build_batch([Rec(None, b"late-%d" % v)]), version=PRODUCE_VERSION).error_code == 0
        values[("a", 2)].append(b"late-%d" % v)
        parts = {("a", 0): 37 + 83, ("a", 1): 5, ("a", 2): len(values[("a", 2)]) - 1}
        resp2, frame2, encoded2 = _exchange(c, _request(v, ids, parts, session_id=session_id, epoch=1))
        assert frame2 == encoded2
        got2 = _by_partition(resp2, v, ids)
        assert ("a", 1) not in got2
        assert _check_records(got2[("a", 2)], len(values[("a", 2)]) - 1, values[("a", 2)]) == 1
        assert _check_records(got2[("a", 0)], 120, values[("a", 0)]) == 80


def test_a_consumer_reads_every_record_sent_with_sendfile(loaded) -> None:
    broker, _values, _ids = loaded
    topic = "bulk"
    create_topic(broker.bootstrap_servers, topic, 2)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    n = 6000
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=(b"%08d" % i) * 500, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "zc",
                            "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in (0, 1)])
        seen: dict[int, bytes] = {}
        while len(seen) < n:
            msgs = consumer.consume(num_messages=1000, timeout=10)
            assert msgs, f"stalled at {len(seen)}/{n}"
            for m in msgs:
                assert m.error() is None, m.error()
                seen[int(m.key())] = m.value()
        assert sorted(seen) == list(range(n))
        assert all(v == (b"%08d" % i) * 500 for i, v in seen.items())
    finally:
        consumer.close()
