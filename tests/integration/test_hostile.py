"""Hostile and malformed input over raw sockets. Bad input gets a Kafka error code or a closed
connection, never a crashed broker, and never harms other connections or acknowledged data.

All tests share one module broker (small `socket.request.max.bytes` / `message.max.bytes`); they run
in file order, and the last ones check that the broker survived everything before them.
Expected answers are Apache Kafka's (KafkaApis / SocketServer / ProduceRequest.validateRecords).
"""
from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from tests.harness import BrokerProcess
from tests.integration.util import (BATCH_HEADER_SIZE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TOPIC_EXCEPTION,
                                    MESSAGE_TOO_LARGE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
                                    UNSUPPORTED_VERSION, RawClient, Rec, broker_rss_kb, build_batch, parse_records,
                                    build_legacy_message_set, create_topic, split_host_port, uvarint,
                                    wait_until)

MAX_REQUEST = 262_144   # socket.request.max.bytes
MAX_MESSAGE = 65_536    # message.max.bytes
BASE_TOPIC = "hostile-base"
DATA_TOPIC = "hostile-data"
INVALID_NAMES = ["", ".", "..", "a" * 250, "bad/name", "sp ace"]


@pytest.fixture(scope="module")
def hb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(log_dir=tmp_path_factory.mktemp("hostile") / "logs",
                      overrides={"socket.request.max.bytes": str(MAX_REQUEST),
                                 "message.max.bytes": str(MAX_MESSAGE),
                                 "auto.create.topics.enable": "true", "num.partitions": "1"})
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def bystander(hb: BrokerProcess) -> Iterator[RawClient]:
    """A healthy connection opened before the abuse and used again after it."""
    c = RawClient(hb.bootstrap_servers)
    assert c.metadata([]).brokers[0].node_id == 0
    yield c
    c.close()


# Acknowledged before any abuse; verified byte for byte at the end.
BASELINE = {p: [f"baseline-{p}-{i}".encode() for i in range(40)] for p in range(3)}


def header_v1(api_key: int, api_version: int, corr: int, client_id: bytes = b"hostile") -> bytes:
    return struct.pack(">hhih", api_key, api_version, corr, len(client_id)) + client_id


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def encoded(req: Any, corr: int = 1) -> bytes:
    req.with_header(correlation_id=corr, client_id="hostile")
    return bytes(req.encode(header=True, framed=True))


def assert_alive(hb: BrokerProcess) -> None:
    assert hb.proc is not None and hb.proc.poll() is None, "broker process died:\n" + "\n".join(hb.stderr_lines[-30:])
    with RawClient(hb.bootstrap_servers) as c:
        assert c.request(ApiVersionsRequest[0]()).error_code == 0


def closed_after(hb: BrokerProcess, data: bytes, timeout: float = 5.0) -> bool:
    with RawClient(hb.bootstrap_servers) as c:
        try:
            c.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return c.wait_closed(timeout)


def log_end(c: RawClient, topic: str, partition: int) -> int:
    r = c.list_offset(topic, partition, -1)
    assert r.error_code == 0
    return r.offset


def test_baseline_data_acknowledged(hb: BrokerProcess, bystander: RawClient) -> None:
    create_topic(hb.bootstrap_servers, BASE_TOPIC, 3)
    create_topic(hb.bootstrap_servers, DATA_TOPIC, 2)
    p = KafkaProducer(bootstrap_servers=hb.bootstrap_servers, max_block_ms=10000, request_timeout_ms=10000)
    futs = [(part, i, p.send(BASE_TOPIC, value=v, partition=part)) for part, vs in BASELINE.items()
            for i, v in enumerate(vs)]
    p.flush(timeout=15)
    assert all(f.get(timeout=15).offset == i for _, i, f in futs)
    p.close()


# --- framing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_close_connection(hb: BrokerProcess, seed: int) -> None:
    rng = random.Random(seed)
    payload = bytearray(rng.randbytes(60))
    payload[0] = 0x7F  # api key >= 0x7f00: no such API, whatever the rest says
    assert closed_after(hb, frame(bytes(payload)))
    assert_alive(hb)


def test_random_garbage_stream_closes_connection(hb: BrokerProcess) -> None:
    rng = random.Random(42)
    garbage = b"\x7f" + rng.randbytes(8191)  # size prefix 0x7f...: far above the limit
    assert closed_after(hb, garbage)
    assert_alive(hb)


def test_truncated_frame_then_close(hb: BrokerProcess) -> None:
    req = encoded(MetadataRequest[1](topics=None))
    for cut in (1, 3, 4, 7, len(req) - 1):
        s = socket.create_connection(split_host_port(hb.bootstrap_servers), timeout=5)
        s.sendall(req[:cut])
        s.close()
    # A frame announced but never completed does not block other connections.
    s = socket.create_connection(split_host_port(hb.bootstrap_servers), timeout=5)
    s.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
    try:
        assert_alive(hb)
    finally:
        s.close()
    assert_alive(hb)


@pytest.mark.parametrize("size", [2**31 - 1, MAX_REQUEST + 1, -1, -(2**31)])
def test_oversized_or_negative_size_prefix_closes_without_reading(hb: BrokerProcess, size: int) -> None:
    assert hb.proc is not None
    rss_before = broker_rss_kb(hb.proc.pid)
    with RawClient(hb.bootstrap_servers) as c:
        t0 = time.monotonic()
        c.send_bytes(struct.pack(">i", size))  # only the prefix: the broker must not wait for a body
        assert c.wait_closed(5.0), f"size prefix {size}: connection not closed"
        assert time.monotonic() - t0 < 5.0
    assert broker_rss_kb(hb.proc.pid) - rss_before < 50_000, "broker allocated memory for a refused frame"
    assert_alive(hb)


def test_request_at_size_limit_is_served(hb: BrokerProcess) -> None:
    """A frame just under socket.request.max.bytes is read and answered (here: a too-large batch)."""
    with RawClient(hb.bootstrap_servers) as c:
        big = build_batch([Rec(None, random.Random(1).randbytes(MAX_REQUEST - 400))])
        r = c.produce(DATA_TOPIC, 0, big)
        assert r.error_code == MESSAGE_TOO_LARGE


# --- unknown / unsupported APIs --------------------------------------------------------------------

def test_unknown_api_key_closes_connection(hb: BrokerProcess) -> None:
    assert closed_after(hb, frame(header_v1(9999, 0, 1) + b"\x00" * 8))
    assert closed_after(hb, frame(header_v1(-1, 0, 1)))
    assert_alive(hb)


def test_unsupported_version_of_known_api_closes_connection(hb: BrokerProcess) -> None:
    data = bytearray(encoded(MetadataRequest[1](topics=None)))
    struct.pack_into(">h", data, 6, 99)  # request_api_version
    assert closed_after(hb, bytes(data))
    data = bytearray(encoded(MetadataRequest[1](topics=None)))
    struct.pack_into(">h", data, 6, -1)
    assert closed_after(hb, bytes(data))
    assert_alive(hb)


def test_api_versions_unsupported_version_answers_35_as_v0(hb: BrokerProcess) -> None:
    data = bytearray(encoded(ApiVersionsRequest[3](client_software_name="hostile",
                                                   client_software_version="1.0"), corr=4242))
    struct.pack_into(">h", data, 6, 99)
    with RawClient(hb.bootstrap_servers) as c:
        c.send_bytes(bytes(data))
        frame_ = c.recv_frame()
        (corr,) = struct.unpack_from(">i", frame_)
        assert corr == 4242
        resp = ApiVersionsResponse[0].decode(frame_, header=True)
        assert resp.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        # Kafka lists (at least) its own ApiVersions range so the client can retry with a good version.
        assert ranges[ApiVersionsRequest.API_KEY][0] == 0 and ranges[ApiVersionsRequest.API_KEY][1] >= 3
        # The connection stays usable: the client retries with a supported version.
        ok = c.request(ApiVersionsRequest[0]())
        assert ok.error_code == 0
        keys = {k.api_key for k in ok.api_keys}
        assert {0, 1, 2, 3, 18, 19, 20, 22} <= keys  # Produce Fetch ListOffsets Metadata ApiVersions Create/Delete InitPid


def test_produce_v0_to_v2_are_served(hb: BrokerProcess) -> None:
    """Kafka 3.9 serves Produce from v0 (message formats 0/1 are converted on append: see
    test_message_format.py): v0-2 requests are answered, in their own layouts, on a connection
    that stays open."""
    with RawClient(hb.bootstrap_servers) as c:
        lo, hi = c.api_versions()[ProduceRequest.API_KEY]
        assert (lo, hi >= 9) == (0, True), (lo, hi)
        for v in (0, 1, 2):
            resp = c.request(ProduceRequest[v](acks=1, timeout_ms=1000, topic_data=[]))
            assert resp.responses == [] and (v == 0 or resp.throttle_time_ms == 0)
    assert_alive(hb)


# --- produce validation ----------------------------------------------------------------------------

def test_produce_corrupt_crc_is_corrupt_message(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, DATA_TOPIC, 0)
        good = bytearray(build_batch([Rec(b"k", b"value-%d" % i) for i in range(5)]))
        bad_payload = bytearray(good)
        bad_payload[BATCH_HEADER_SIZE + 3] ^= 0xFF  # a record byte: CRC-32C no longer matches
        assert c.produce(DATA_TOPIC, 0, bytes(bad_payload)).error_code == CORRUPT_MESSAGE
        bad_crc = bytearray(good)
        bad_crc[17] ^= 0x01  # the CRC field itself
        assert c.produce(DATA_TOPIC, 0, bytes(bad_crc)).error_code == CORRUPT_MESSAGE
        assert log_end(c, DATA_TOPIC, 0) == before
        r = c.produce(DATA_TOPIC, 0, bytes(good))  # same connection keeps working
        assert (r.error_code, r.base_offset) == (0, before)


def test_produce_batch_above_message_max_bytes(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, DATA_TOPIC, 1)
        big = build_batch([Rec(None, random.Random(7).randbytes(MAX_MESSAGE + 1000))])
        assert c.produce(DATA_TOPIC, 1, big).error_code == MESSAGE_TOO_LARGE
        # Many small records adding up past the limit: the batch size is what counts.
        many = build_batch([Rec(None, random.Random(i).randbytes(1000)) for i in range(80)])
        assert len(many) > MAX_MESSAGE
        assert c.produce(DATA_TOPIC, 1, many).error_code == MESSAGE_TOO_LARGE
        assert log_end(c, DATA_TOPIC, 1) == before
        just_under = build_batch([Rec(None, b"u" * (MAX_MESSAGE - 200))])
        assert len(just_under) <= MAX_MESSAGE
        assert c.produce(DATA_TOPIC, 1, just_under).error_code == 0


def test_produce_legacy_magic_and_malformed_record_sets_are_invalid_record(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, DATA_TOPIC, 0)
        v1 = build_legacy_message_set([Rec(b"k", b"v1"), Rec(b"k2", b"v2")], magic=1)
        assert c.produce(DATA_TOPIC, 0, v1).error_code == INVALID_RECORD
        v0 = build_legacy_message_set([Rec(b"k", b"v0")], magic=0)
        assert c.produce(DATA_TOPIC, 0, v0).error_code == INVALID_RECORD
        two = build_batch([Rec(None, b"a")]) + build_batch([Rec(None, b"b")])
        assert c.produce(DATA_TOPIC, 0, two).error_code == INVALID_RECORD
        assert c.produce(DATA_TOPIC, 0, b"").error_code == INVALID_RECORD
        assert log_end(c, DATA_TOPIC, 0) == before


def test_produce_to_unknown_topic_partition_and_invalid_names(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        batch = build_batch([Rec(None, b"x")])
        assert c.produce(DATA_TOPIC, 2, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert c.produce(DATA_TOPIC, -1, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert c.produce("hostile-no-such-topic", 0, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        # Kafka's Produce never creates topics: a name that is not a topic (valid or not) is
        # UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleProduceRequest checks the metadata cache).
        for name in INVALID_NAMES:
            assert c.produce(name, 0, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION, repr(name)
        md = c.metadata(["hostile-no-such-topic"], allow_auto_topic_creation=False)
        assert md.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_nulls_in_non_nullable_fields_close_the_connection(hb: BrokerProcess) -> None:
    """Kafka's generated parsers throw "non-nullable field X was serialized as null" for a negative
    length where the schema allows no null, and the broker closes the connection (kafka-python's
    decoder would hand the handlers None). Nothing is appended."""
    P = ProduceRequest.TopicProduceData
    D = P.PartitionProduceData
    batch = build_batch([Rec(None, b"never")])
    requests = [
        ProduceRequest[3](transactional_id=None, acks=1, timeout_ms=1000, topic_data=None),
        ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=None),
        ProduceRequest[3](transactional_id=None, acks=1, timeout_ms=1000,
                          topic_data=[P(name=None, partition_data=[D(index=0, records=batch)])]),
        ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000,
                          topic_data=[P(name=None, partition_data=[D(index=0, records=batch)])]),
        ProduceRequest[7](transactional_id=None, acks=1, timeout_ms=1000,
                          topic_data=[P(name=BASE_TOPIC, partition_data=None)]),
        # Metadata's topic array is nullable from v1 only (kafka-python writes None as [] at v0:
        # the null is the frame below), a topic name from v10 only
        MetadataRequest[4](topics=[MetadataRequest.MetadataRequestTopic(name=None)],
                           allow_auto_topic_creation=False),
        ListOffsetsRequest[1](replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=None, partitions=[])]),
        # an array of strings: its elements are never nullable
        DescribeGroupsRequest[0](groups=["g", None]),
    ]
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, BASE_TOPIC, 0)
        for req in requests:
            assert closed_after(hb, encoded(req)), req
        assert closed_after(hb, frame(header_v1(3, 0, 1) + struct.pack(">i", -1)))
        assert log_end(c, BASE_TOPIC, 0) == before
    assert_alive(hb)


def _produce_v9(txn: bytes, topic: bytes, records: bytes, partition_tags: bytes) -> bytes:
    """Produce v9 (header v2, compact fields) of one batch to partition 0 of `topic`."""
    txn_field = uvarint(len(txn) + 1) + txn if txn else b"\x00"
    body = (txn_field + struct.pack(">hi", 1, 1000) + uvarint(2) + uvarint(len(topic) + 1) + topic + uvarint(2)
            + struct.pack(">i", 0) + uvarint(len(records) + 1) + records + partition_tags + b"\x00" + b"\x00")
    return frame(header_v1(0, 9, 1) + b"\x00" + body)


def test_produce_shapes_kafka_refuses_close_the_connection(hb: BrokerProcess) -> None:
    """Produce bodies kafka-python's decoder read and Kafka's parser refuses (compared with Kafka
    3.9 in tests/differential/corpus/hostile.py): an array count of -2, a tagged field running
    past the body, a compact string of 32,768 bytes. The connection is closed, nothing appended;
    the same v9 frame with a whole tagged field is answered and appended."""
    name = DATA_TOPIC.encode()
    batch = build_batch([Rec(None, b"tagged")])
    v7 = header_v1(0, 7, 1) + struct.pack(">hhi", -1, 1, 1000)
    refused = [
        frame(v7 + struct.pack(">i", -2)),
        frame(v7 + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", -2)),
        _produce_v9(b"", name, batch, uvarint(1) + uvarint(5) + uvarint(40) + b"short"),
        _produce_v9(b"t" * 0x8000, name, batch, b"\x00"),
    ]
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, DATA_TOPIC, 0)
        for data in refused:
            assert closed_after(hb, data), data[:40]
        assert log_end(c, DATA_TOPIC, 0) == before
        c.send_bytes(_produce_v9(b"", name, batch, uvarint(1) + uvarint(5) + uvarint(5) + b"whole"))
        answer = ProduceResponse[9].decode(c.recv_frame(), header=True)
        assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
                for t in answer.responses] == [(DATA_TOPIC, [(0, 0, before)])]
        assert log_end(c, DATA_TOPIC, 0) == before + 1
    assert_alive(hb)


def test_metadata_auto_create_refuses_invalid_names(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        md = c.metadata(INVALID_NAMES, allow_auto_topic_creation=True)
        assert sorted((t.name, t.error_code) for t in md.topics) == sorted(
            (n, INVALID_TOPIC_EXCEPTION) for n in INVALID_NAMES)
        names = {t.name for t in c.metadata(None).topics}
        assert names == {BASE_TOPIC, DATA_TOPIC}


# --- fetch / list offsets validation ----------------------------------------------------------------

def test_fetch_out_of_range_and_unknown_partition(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        leo = log_end(c, BASE_TOPIC, 1)
        assert leo == 40
        for off in (leo + 1, 10_000, -1):
            pd = c.fetch(BASE_TOPIC, 1, off)
            assert pd.error_code == OFFSET_OUT_OF_RANGE, off
            assert not pd.records
        pd = c.fetch(BASE_TOPIC, 1, leo)  # exactly the log end: empty, no error
        assert (pd.error_code, pd.high_watermark) == (0, leo) and not pd.records
        assert c.fetch(BASE_TOPIC, 9, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert c.fetch("hostile-no-such-topic", 0, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert c.list_offset(BASE_TOPIC, 9, -1).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_tiny_max_bytes_still_returns_one_whole_batch(hb: BrokerProcess) -> None:
    """KIP-74: the first batch is returned whole even when larger than max_bytes, so a consumer
    can always make progress."""
    with RawClient(hb.bootstrap_servers) as c:
        for off in (0, 17):
            pd = c.fetch(BASE_TOPIC, 0, off, max_bytes=1)
            assert pd.error_code == 0
            parsed = parse_records(pd.records)
            assert len(parsed.batches) >= 1 and parsed.batches[0].crc_ok
            b0 = parsed.batches[0]
            assert b0.base_offset <= off <= b0.last_offset
            assert [r.value for r in b0.records if r.offset == off] == [BASELINE[0][off]]


FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def session_fetch(c: RawClient, session_id: int, epoch: int, partitions: list[tuple[int, int]],
                  topic: str) -> Any:
    """A Fetch in a session (KIP-227): `partitions` lists (partition, fetch offset) to add/update."""
    T = FetchRequest.FetchTopic
    topics = [T(topic=topic, partitions=[T.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1, log_start_offset=-1,
        partition_max_bytes=1 << 20) for p, off in partitions])] if partitions else []
    return c.request(FetchRequest[c.version_for(FetchRequest, at_most=12)](
        cluster_id=None, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch, topics=topics, forgotten_topics_data=[], rack_id=""))


def test_fetch_sessions_incremental_and_errors(hb: BrokerProcess) -> None:
    topic = "hostile-session"
    create_topic(hb.bootstrap_servers, topic, 2)
    with RawClient(hb.bootstrap_servers) as c:
        for part in (0, 1):
            r = c.produce(topic, part, build_batch([Rec(None, b"s%d-%d" % (part, i)) for i in range(5)]))
            assert (r.error_code, r.base_offset) == (0, 0)
        # Full fetch that creates a session (id 0, epoch 0): a session id comes back with the data.
        full = session_fetch(c, 0, 0, [(0, 0), (1, 0)], topic)
        assert full.error_code == 0 and full.session_id != 0
        sid = full.session_id
        got = {p.partition_index: [r.value for r in parse_records(p.records).records]
               for t in full.responses for p in t.partitions}
        assert got == {part: [b"s%d-%d" % (part, i) for i in range(5)] for part in (0, 1)}
        # Incremental: move both fetch offsets to the end; nothing new, so no partition is returned.
        inc = session_fetch(c, sid, 1, [(0, 5), (1, 5)], topic)
        assert inc.error_code == 0 and inc.session_id == sid
        assert [p for t in inc.responses for p in t.partitions] == []
        # New data on partition 1 shows up in an incremental fetch that names no partitions.
        r = c.produce(topic, 1, build_batch([Rec(None, b"session-new")]))
        assert (r.error_code, r.base_offset) == (0, 5)
        inc = session_fetch(c, sid, 2, [], topic)
        assert inc.error_code == 0
        parts = [p for t in inc.responses for p in t.partitions]
        assert [(p.partition_index, p.error_code, p.high_watermark) for p in parts] == [(1, 0, 6)]
        assert [r.value for r in parse_records(parts[0].records).records] == [b"session-new"]
        # Wrong epoch and unknown session id are top-level errors.
        assert session_fetch(c, sid, 7, [], topic).error_code == INVALID_FETCH_SESSION_EPOCH
        unknown = sid + 1 if sid < 2**31 - 1 else 1
        assert session_fetch(c, unknown, 1, [], topic).error_code == FETCH_SESSION_ID_NOT_FOUND
        # Closing the session (epoch -1) makes its id unknown.
        assert session_fetch(c, sid, -1, [(0, 5)], topic).error_code == 0
        assert session_fetch(c, sid, 3, [], topic).error_code == FETCH_SESSION_ID_NOT_FOUND


# --- acks=0, ordering ---------------------------------------------------------------------------

def test_acks0_produce_gets_no_response(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        before = log_end(c, DATA_TOPIC, 1)
        c.produce(DATA_TOPIC, 1, build_batch([Rec(None, b"fire-and-forget")]), acks=0)
        corr = c.send(MetadataRequest[1](topics=None))
        got, resp = c.recv()
        assert got == corr  # the metadata answer is the first thing on the wire
        assert resp.controller_id == 0
        wait_until(lambda: log_end(c, DATA_TOPIC, 1) == before + 1, 5, what="acks=0 append")
        pd = c.fetch(DATA_TOPIC, 1, before)
        assert [r.value for r in parse_records(pd.records).records if r.offset == before] == [b"fire-and-forget"]


def test_acks0_produce_with_error_closes_connection(hb: BrokerProcess) -> None:
    """Kafka cannot answer an acks=0 request, so it reports a failed one by closing the connection."""
    bad = bytearray(build_batch([Rec(None, b"x")]))
    bad[BATCH_HEADER_SIZE + 1] ^= 0xFF
    with RawClient(hb.bootstrap_servers) as c:
        c.produce(DATA_TOPIC, 0, bytes(bad), acks=0)
        assert c.wait_closed(5.0)
    assert_alive(hb)


def test_pipelined_requests_answered_in_order(hb: BrokerProcess) -> None:
    with RawClient(hb.bootstrap_servers) as c:
        assert log_end(c, BASE_TOPIC, 2) == 40
        kinds = []
        sent = []
        for i in range(50):
            kind = i % 5
            if kind == 0:
                # A fetch that waits (min_bytes=1 at the log end): later requests must not overtake it.
                req = c.fetch_request(BASE_TOPIC, 2, 40, max_wait_ms=100, min_bytes=1)
            elif kind == 1:
                req = ApiVersionsRequest[0]()
            elif kind == 2:
                req = MetadataRequest[c.version_for(MetadataRequest)](topics=None, allow_auto_topic_creation=False)
            elif kind == 3:
                v = c.version_for(ListOffsetsRequest, at_most=7)
                T = ListOffsetsRequest.ListOffsetsTopic
                req = ListOffsetsRequest[v](replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[
                    T(name=BASE_TOPIC, partitions=[T.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
            else:
                P = ProduceRequest.TopicProduceData
                req = ProduceRequest[c.version_for(ProduceRequest, at_most=12)](
                    transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P(
                        name=DATA_TOPIC, partition_data=[P.PartitionProduceData(
                            index=1, records=build_batch([Rec(None, b"pipelined-%d" % i)]))])])
            kinds.append(kind)
            sent.append(c.send(req))
        t0 = time.monotonic()
        received = []
        for kind in kinds:
            corr, resp = c.recv(timeout=15)
            received.append(corr)
            if kind == 4:
                assert resp.responses[0].partition_responses[0].error_code == 0
            elif kind == 0:
                assert resp.responses[0].partitions[0].error_code == 0
        assert received == sent
        assert time.monotonic() - t0 < 15


def test_answered_response_is_not_held_behind_a_waiting_request(hb: BrokerProcess) -> None:
    """Responses answered in one turn of the event loop leave in one write; one answered before a
    pipelined request that waits (a fetch at the log end, max_wait 4 s) leaves at once."""
    with RawClient(hb.bootstrap_servers) as c:
        end = log_end(c, BASE_TOPIC, 2)
        t0 = time.monotonic()
        first = c.send(ApiVersionsRequest[0]())
        waiting = c.send(c.fetch_request(BASE_TOPIC, 2, end, max_wait_ms=4000, min_bytes=1))
        corr, resp = c.recv(timeout=15)
        answered = time.monotonic() - t0
        assert (corr, resp.error_code) == (first, 0)
        corr, resp = c.recv(timeout=15)
        waited = time.monotonic() - t0
        assert corr == waiting
        assert resp.responses[0].partitions[0].error_code == 0
        assert resp.responses[0].partitions[0].records in (b"", None)
        # generous: the first answer came long before the fetch's wait ended
        assert answered < 2.0 and waited >= 3.5, (answered, waited)


# --- survival -----------------------------------------------------------------------------------

def test_after_all_abuse_clients_work_and_data_is_intact(hb: BrokerProcess, bystander: RawClient,
                                                         topic_name: str) -> None:
    assert_alive(hb)
    # The connection opened before the abuse still works.
    md = bystander.metadata([BASE_TOPIC])
    assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 3
    # Data acknowledged before the abuse is intact.
    c = KafkaConsumer(bootstrap_servers=hb.bootstrap_servers, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(BASE_TOPIC, p) for p in range(3)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {p: [] for p in range(3)}
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < 120:
            assert time.monotonic() < deadline
            for tp, recs in c.poll(timeout_ms=200).items():
                got[tp.partition] += [r.value for r in recs]
                assert [r.offset for r in recs] == list(range(recs[0].offset, recs[0].offset + len(recs)))
        assert got == BASELINE
        assert c.end_offsets(tps) == {tp: 40 for tp in tps}
    finally:
        c.close()
    # A fresh round trip with a stock client.
    p = KafkaProducer(bootstrap_servers=hb.bootstrap_servers, max_block_ms=10000)
    f = p.send(topic_name, value=b"still alive", key=b"k")  # auto-created topic
    md0 = f.get(timeout=15)
    p.close()
    assert md0.offset == 0
    c = KafkaConsumer(bootstrap_servers=hb.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic_name, md0.partition)
        c.assign([tp])
        c.seek(tp, 0)
        recs = []
        deadline = time.monotonic() + 15
        while not recs:
            assert time.monotonic() < deadline
            recs = c.poll(timeout_ms=200).get(tp, [])
        assert [(r.offset, r.key, r.value) for r in recs] == [(0, b"k", b"still alive")]
    finally:
        c.close()
    assert hb.proc is not None and hb.proc.poll() is None
