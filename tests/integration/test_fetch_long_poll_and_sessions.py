"""Fetch through a real broker: a long poll completes on data arrival (DelayedFetch woken by the
append, not by its timeout), min_bytes is honoured, and incremental fetch sessions (KIP-227)
behave as Kafka's: full fetch creates a session, incremental fetches return only changed
partitions, forgotten partitions leave, bad ids/epochs get their error codes."""
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.consumer import FetchRequest

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, create_topic, parse_records

FETCH_VERSION = 12  # topic names; sessions exist from v7
PRODUCE_VERSION = 12  # topic names (v13 addresses topics by id)


def _fetch_req(topics: dict[str, list[tuple[int, int]]], session_id: int, epoch: int,
               forgotten: dict[str, list[int]] | None = None, max_wait_ms: int = 0, min_bytes: int = 0,
               isolation_level: int = 0):
    T = FetchRequest.FetchTopic
    F = FetchRequest.ForgottenTopic
    return FetchRequest[FETCH_VERSION](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=session_id, session_epoch=epoch,
        topics=[T(topic=t, partitions=[T.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=o,
                                                          last_fetched_epoch=-1, log_start_offset=-1,
                                                          partition_max_bytes=1 << 20) for p, o in parts])
                for t, parts in topics.items()],
        forgotten_topics_data=[F(topic=t, partitions=ps) for t, ps in (forgotten or {}).items()],
        rack_id="")


def _partitions(resp) -> dict[tuple[str, int], object]:
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


def test_long_poll_completes_when_data_arrives(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with RawClient(broker.bootstrap_servers) as fetcher, RawClient(broker.bootstrap_servers) as producer:
        # prime: an empty partition, waiting for up to 20 s for 1 byte
        req = _fetch_req({topic_name: [(0, 0)]}, 0, -1, max_wait_ms=20_000, min_bytes=1)
        produced_at: list[float] = []

        def produce_later() -> None:
            time.sleep(0.3)
            produced_at.append(time.monotonic())
            assert producer.produce(topic_name, 0, build_batch([Rec(b"k", b"late")]), version=PRODUCE_VERSION).error_code == 0

        t = threading.Thread(target=produce_later)
        start = time.monotonic()
        t.start()
        resp = fetcher.request(req, timeout=30)
        returned_at = time.monotonic()
        t.join()
        p = resp.responses[0].partitions[0]
        assert p.error_code == 0
        assert p.high_watermark == 1
        recs = parse_records(p.records).records
        assert [(r.offset, r.value) for r in recs] == [(0, b"late")]
        # It waited for the data (not returned empty at once) and returned on the append,
        # long before its 20 s expiry.
        assert returned_at - start >= 0.25
        assert returned_at - produced_at[0] < 2.0


def test_long_poll_expires_empty_after_max_wait(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with RawClient(broker.bootstrap_servers) as c:
        start = time.monotonic()
        resp = c.request(_fetch_req({topic_name: [(0, 0)]}, 0, -1, max_wait_ms=300, min_bytes=1), timeout=10)
        elapsed = time.monotonic() - start
        p = resp.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 0 and not p.records
        assert 0.29 <= elapsed < 5.0


def test_min_bytes_waits_for_enough_data(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with RawClient(broker.bootstrap_servers) as c, RawClient(broker.bootstrap_servers) as prod:
        small = build_batch([Rec(b"k", b"x")])
        assert prod.produce(topic_name, 0, small, version=PRODUCE_VERSION).error_code == 0
        big = build_batch([Rec(b"k", b"y" * 5000)])

        def produce_later() -> None:
            time.sleep(0.3)
            assert prod.produce(topic_name, 0, big, version=PRODUCE_VERSION).error_code == 0

        t = threading.Thread(target=produce_later)
        t.start()
        start = time.monotonic()
        resp = c.request(_fetch_req({topic_name: [(0, 0)]}, 0, -1, max_wait_ms=20_000, min_bytes=4000),
                         timeout=30)
        elapsed = time.monotonic() - start
        t.join()
        recs = parse_records(resp.responses[0].partitions[0].records).records
        assert [r.offset for r in recs] == [0, 1]
        assert recs[1].value == b"y" * 5000
        assert 0.25 <= elapsed < 5.0


@pytest.mark.parametrize("isolation_level", [0, 1], ids=["read_uncommitted", "read_committed"])
def test_long_poll_completes_exactly_when_min_bytes_are_there(broker: BrokerProcess, topic_name: str,
                                                               isolation_level: int) -> None:
    """fetch.min.bytes = the size of three batches: the fetch waits through the first two appends
    (not answered after 1 byte) and answers on the third (not on its 20 s timeout)."""
    create_topic(broker.bootstrap_servers, topic_name, 1)
    batches = [build_batch([Rec(b"k", b"v%d" % k * 300)]) for k in range(3)]
    with RawClient(broker.bootstrap_servers) as c, RawClient(broker.bootstrap_servers) as prod:
        answer: list[object] = []
        req = _fetch_req({topic_name: [(0, 0)]}, 0, -1, max_wait_ms=20_000,
                         min_bytes=sum(len(b) for b in batches), isolation_level=isolation_level)
        fetcher = threading.Thread(target=lambda: answer.append(c.request(req, timeout=30)))
        fetcher.start()
        time.sleep(0.3)
        for b in batches[:2]:
            assert prod.produce(topic_name, 0, b, version=PRODUCE_VERSION).error_code == 0
            time.sleep(0.3)
            assert fetcher.is_alive(), "answered before min_bytes were there"
        last_produced = time.monotonic()
        assert prod.produce(topic_name, 0, batches[2], version=PRODUCE_VERSION).error_code == 0
        fetcher.join(10)
        assert not fetcher.is_alive()
        assert time.monotonic() - last_produced < 5.0
        p = answer[0].responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 3 and p.last_stable_offset == 3
        recs = parse_records(p.records).records
        assert [(r.offset, r.value) for r in recs] == [(k, b"v%d" % k * 300) for k in range(3)]


def test_incremental_fetch_session(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    with RawClient(broker.bootstrap_servers) as c:
        for p in range(3):
            assert c.produce(topic_name, p, build_batch([Rec(b"k", b"p%d" % p)]), version=PRODUCE_VERSION).error_code == 0
        # full fetch, epoch 0, at the log end: creates a session, returns all three partitions
        full = c.request(_fetch_req({topic_name: [(0, 1), (1, 1), (2, 1)]}, 0, 0))
        assert full.error_code == 0
        sid = full.session_id
        assert sid != 0
        parts = _partitions(full)
        assert sorted(parts) == [(topic_name, 0), (topic_name, 1), (topic_name, 2)]
        assert all(p.high_watermark == 1 and not p.records for p in parts.values())

        # incremental, epoch 1, naming nothing: nothing changed -> no partitions
        inc = c.request(_fetch_req({}, sid, 1))
        assert inc.error_code == 0 and inc.session_id == sid
        assert _partitions(inc) == {}

        # new data in partition 2 -> only partition 2 comes back
        assert c.produce(topic_name, 2, build_batch([Rec(b"k", b"more")]), version=PRODUCE_VERSION).error_code == 0
        inc = c.request(_fetch_req({}, sid, 2))
        parts = _partitions(inc)
        assert list(parts) == [(topic_name, 2)]
        assert parts[(topic_name, 2)].high_watermark == 2
        assert [(r.offset, r.value) for r in parse_records(parts[(topic_name, 2)].records).records] == [(1, b"more")]

        # forget partition 1; new data there is no longer reported
        inc = c.request(_fetch_req({topic_name: [(2, 2)]}, sid, 3, forgotten={topic_name: [1]}))
        assert inc.error_code == 0
        assert c.produce(topic_name, 1, build_batch([Rec(b"k", b"unseen")]), version=PRODUCE_VERSION).error_code == 0
        inc = c.request(_fetch_req({}, sid, 4))
        assert _partitions(inc) == {}

        # wrong epoch, unknown session
        bad = c.request(_fetch_req({}, sid, 99))
        assert bad.error_code == 71 and bad.responses == []      # INVALID_FETCH_SESSION_EPOCH
        bad = c.request(_fetch_req({}, sid ^ 0x5A5A5A, 1))
        assert bad.error_code == 70 and bad.responses == []      # FETCH_SESSION_ID_NOT_FOUND

        # close the session (epoch -1): a sessionless full answer, then the id is gone
        closed = c.request(_fetch_req({topic_name: [(0, 0)]}, sid, -1))
        assert closed.error_code == 0 and closed.session_id == 0
        assert list(_partitions(closed)) == [(topic_name, 0)]
        gone = c.request(_fetch_req({}, sid, 5))
        assert gone.error_code == 70
