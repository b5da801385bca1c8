"""Idempotent producers: duplicate sends are answered with the original offset, never appended twice.

A confluent-kafka (librdkafka) producer with enable.idempotence=True talks to the broker through
a small TCP proxy in this test that records the bytes of every Produce request (api key 0) and
forwards everything unchanged. The broker advertises the proxy's port, so every connection of the
client goes through it. A captured request is then replayed byte for byte over a raw socket -- an
injected duplicate send, exactly what a retry after a lost response looks like to the broker:
the answer must carry the ORIGINAL base offset and no error, and the log must hold one copy.
The same holds across a clean restart and a SIGKILL crash of the broker between original and
replay (producer state comes back from the `.snapshot` files / is rebuilt from the log).

Hand-built batches (RawClient + InitProducerId) check the two refusals: a sequence gap gets
OUT_OF_ORDER_SEQUENCE_NUMBER (45) and a stale epoch after a newer one INVALID_PRODUCER_EPOCH (47).
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import confluent_kafka as ck
import pytest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, ProduceResponse

from tests.harness import BrokerProcess
from tests.integration.util import (NONE, RawClient, Rec, build_batch, create_topic, parse_records,
                                    wait_until)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
PRODUCE_API_KEY = 0


# ---- a recording TCP proxy -----------------------------------------------------------------------

@dataclass
class CapturedRequest:
    frame: bytes  # size prefix + header + body, exactly as the client sent it
    api_version: int
    correlation_id: int


@dataclass
class ProduceRecordingProxy:
    """Listens on 127.0.0.1 (port chosen at construction); each accepted connection is piped to
    127.0.0.1:`target_port` by two threads. Client->broker bytes are split into request frames
    and Produce frames are recorded; bytes are forwarded as they arrive, unchanged."""

    listener: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    target_port: Optional[int] = None
    captured: list[CapturedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _socks: list[socket.socket] = field(default_factory=list)
    _closed: bool = False

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def start(self, target_port: int) -> "ProduceRecordingProxy":
        self.target_port = target_port
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._socks += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        buf = bytearray()
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                if from_client:
                    buf += chunk
                    self._record_frames(buf)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record_frames(self, buf: bytearray) -> None:
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf, 0)
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[:4 + size])
            del buf[:4 + size]
            api_key, api_version, corr = struct.unpack_from(">hhi", frame, 4)
            if api_key == PRODUCE_API_KEY:
                with self._lock:
                    self.captured.append(CapturedRequest(frame, api_version, corr))

    def produce_requests(self) -> list[CapturedRequest]:
        with self._lock:
            return list(self.captured)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass


# ---- helpers ---------------------------------------------------------------------------------------

def decode_produce_request(c: CapturedRequest) -> Any:
    return ProduceRequest[c.api_version].decode(c.frame[4:], header=True)


def request_batches(c: CapturedRequest) -> list[tuple[str, int, Any]]:
    """(topic, partition, ParsedBatch) for every batch in a captured Produce request."""
    req = decode_produce_request(c)
    out = []
    for t in req.topic_data:
        for p in t.partition_data:
            for b in parse_records(p.records).batches:
                out.append((t.name, p.index, b))
    return out


def replay(bootstrap: str, c: CapturedRequest, timeout: float = 15.0) -> Any:
    """Send the captured frame as is over a fresh raw socket; decode the one response."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(c.frame)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        frame = _recv_exact(s, size)
    (corr,) = struct.unpack_from(">i", frame, 0)
    assert corr == c.correlation_id, (corr, c.correlation_id)
    return ProduceResponse[c.api_version].decode(frame, header=True)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"broker closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def partition_response(resp: Any) -> Any:
    assert len(resp.responses) == 1 and len(resp.responses[0].partition_responses) == 1, resp
    return resp.responses[0].partition_responses[0]


def log_values(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    with RawClient(bootstrap) as c:
        parsed, _hw = c.fetch_all(topic, partition)
    return [(r.offset, r.value) for r in parsed.records]


@dataclass
class Setup:
    broker: BrokerProcess
    proxy: ProduceRecordingProxy
    topic: str


@pytest.fixture
def proxied(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> Any:
    proxy = ProduceRecordingProxy()
    b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.start(b.port)  # type: ignore[arg-type]
    create_topic(b.bootstrap_servers, topic_name, 1)
    try:
        yield Setup(b, proxy, topic_name)
    finally:
        proxy.close()


def produce_two_batches(setup: Setup) -> list[tuple[int, bytes]]:
    """An idempotent producer sends 5 + 5 messages in two flushes (so two Produce requests);
    returns (offset, value) per message from its delivery reports."""
    delivered: list[tuple[int, bytes]] = []
    errors: list[str] = []

    def on_delivery(err: Optional[ck.KafkaError], msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((msg.offset(), msg.value()))

    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{setup.proxy.port}",
                     "enable.idempotence": True, "linger.ms": 50,
                     "message.timeout.ms": 20000, "on_delivery": on_delivery})
    for round_ in range(2):
        for i in range(5):
            p.produce(setup.topic, value=f"m-{round_}-{i}".encode(), partition=0)
        assert p.flush(20) == 0
    assert not errors, errors
    return delivered


def check_replays(setup: Setup, reqs: list[CapturedRequest], bases: tuple[int, ...] = (0, 5)) -> None:
    """Each original request replayed: no error, original base offset; log unchanged."""
    for c, want_base in zip(reqs, bases, strict=True):
        pr = partition_response(replay(setup.broker.bootstrap_servers, c))
        assert (pr.error_code, pr.base_offset) == (NONE, want_base), pr
    values = log_values(setup.broker.bootstrap_servers, setup.topic)
    assert values == [(r * 5 + i, f"m-{r}-{i}".encode()) for r in range(2) for i in range(5)]


def captured_pair(setup: Setup) -> list[CapturedRequest]:
    reqs = setup.proxy.produce_requests()
    # librdkafka sends one request per flush here: one batch of 5, sequences 0 and 5.
    assert len(reqs) == 2, [(c.api_version, request_batches(c)) for c in reqs]
    seen = []
    for c in reqs:
        (topic, partition, b), = request_batches(c)
        assert (topic, partition) == (setup.topic, 0)
        assert b.producer_id >= 0 and b.producer_epoch == 0
        seen.append((b.base_sequence, len(b.records)))
    assert seen == [(0, 5), (5, 5)]
    return reqs


# ---- tests -----------------------------------------------------------------------------------------

def test_replayed_produce_gets_original_offset_and_no_second_copy(proxied: Setup) -> None:
    delivered = produce_two_batches(proxied)
    assert delivered == [(r * 5 + i, f"m-{r}-{i}".encode()) for r in range(2) for i in range(5)]
    reqs = captured_pair(proxied)
    check_replays(proxied, reqs)
    # Replayed again, newest first: still the cached answers (the last 5 batches are kept).
    check_replays(proxied, reqs[::-1], (5, 0))
    with RawClient(proxied.broker.bootstrap_servers) as c:
        assert c.list_offset(proxied.topic, 0, -1).offset == 10


def restart(setup: Setup, how: str) -> None:
    if how == "clean":
        assert setup.broker.stop() == 0
    else:
        setup.broker.kill()
    setup.broker.start()
    with RawClient(setup.broker.bootstrap_servers) as c:
        wait_until(lambda: c.metadata([setup.topic]).topics[0].partitions[0].leader_id == 0,
                   what="partition led after restart")


def check_log(setup: Setup) -> None:
    values = log_values(setup.broker.bootstrap_servers, setup.topic)
    assert values == [(r * 5 + i, f"m-{r}-{i}".encode()) for r in range(2) for i in range(5)]


@pytest.mark.parametrize("first", ["clean", "crash"])
def test_replay_after_broker_restart(proxied: Setup, first: str) -> None:
    """As Kafka: a clean shutdown writes a producer snapshot (Kafka's layout keeps one batch per
    producer: the last), so after it the last request is still a duplicate and an older one is
    out of order; after a crash with no snapshot the state is rebuilt from the log, every cached
    batch included."""
    bs = proxied.broker.bootstrap_servers
    produce_two_batches(proxied)
    older, last = captured_pair(proxied)
    restart(proxied, first)
    pr = partition_response(replay(bs, last))
    assert (pr.error_code, pr.base_offset) == (NONE, 5), pr
    pr = partition_response(replay(bs, older))
    if first == "clean":
        assert pr.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, pr
    else:
        assert (pr.error_code, pr.base_offset) == (NONE, 0), pr
    check_log(proxied)
    # Then a restart of the other kind: the last request is still answered with its offset.
    restart(proxied, "crash" if first == "clean" else "clean")
    pr = partition_response(replay(bs, last))
    assert (pr.error_code, pr.base_offset) == (NONE, 5), pr
    check_log(proxied)


# ---- hand-built batches: gap and stale epoch -------------------------------------------------------

def init_producer_id(c: RawClient) -> tuple[int, int]:
    v = c.version_for(InitProducerIdRequest, at_most=4)
    r = c.request(InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=60000))
    assert r.error_code == NONE, r
    return r.producer_id, r.producer_epoch


def recs(tag: str, n: int) -> list[Rec]:
    now = int(time.time() * 1000)
    return [Rec(key=None, value=f"{tag}-{i}".encode(), timestamp=now) for i in range(n)]


def test_sequence_gap_is_out_of_order(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with RawClient(broker.bootstrap_servers) as c:
        pid, epoch = init_producer_id(c)
        assert epoch == 0
        r = c.produce(topic_name, 0, build_batch(recs("a", 3), producer_id=pid, producer_epoch=0,
                                                 base_sequence=0))
        assert (r.error_code, r.base_offset) == (NONE, 0)
        # Sequences 3 and 4 skipped.
        r = c.produce(topic_name, 0, build_batch(recs("gap", 2), producer_id=pid, producer_epoch=0,
                                                 base_sequence=5))
        assert r.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        # A batch that overlaps the last one without being an exact duplicate is out of order too.
        r = c.produce(topic_name, 0, build_batch(recs("overlap", 2), producer_id=pid,
                                                 producer_epoch=0, base_sequence=2))
        assert r.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        # The next sequence in order is still accepted.
        r = c.produce(topic_name, 0, build_batch(recs("b", 2), producer_id=pid, producer_epoch=0,
                                                 base_sequence=3))
        assert (r.error_code, r.base_offset) == (NONE, 3)
        # And an exact duplicate of the first batch gets its original offset.
        r = c.produce(topic_name, 0, build_batch(recs("a", 3), producer_id=pid, producer_epoch=0,
                                                 base_sequence=0))
        assert (r.error_code, r.base_offset) == (NONE, 0)
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 5
    assert [r.value for r in parsed.records] == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]


def test_stale_epoch_is_invalid_producer_epoch(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with RawClient(broker.bootstrap_servers) as c:
        pid, _ = init_producer_id(c)
        r = c.produce(topic_name, 0, build_batch(recs("e0", 2), producer_id=pid, producer_epoch=0,
                                                 base_sequence=0))
        assert (r.error_code, r.base_offset) == (NONE, 0)
        # A newer epoch starts again at sequence 0.
        r = c.produce(topic_name, 0, build_batch(recs("e1", 2), producer_id=pid, producer_epoch=1,
                                                 base_sequence=0))
        assert (r.error_code, r.base_offset) == (NONE, 2)
        # The old epoch, even with the sequence that would have come next, is fenced.
        r = c.produce(topic_name, 0, build_batch(recs("stale", 2), producer_id=pid,
                                                 producer_epoch=0, base_sequence=2))
        assert r.error_code == INVALID_PRODUCER_EPOCH, r
        # A new epoch that does not start at sequence 0 is out of order.
        r = c.produce(topic_name, 0, build_batch(recs("e2", 1), producer_id=pid, producer_epoch=2,
                                                 base_sequence=4))
        assert r.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, r
        r = c.produce(topic_name, 0, build_batch(recs("e1b", 1), producer_id=pid, producer_epoch=1,
                                                 base_sequence=2))
        assert (r.error_code, r.base_offset) == (NONE, 4)
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 5
    assert [r.value for r in parsed.records] == [b"e0-0", b"e0-1", b"e1-0", b"e1-1", b"e1b-0"]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in parsed.batches] == [
        (pid, 0, 0), (pid, 1, 0), (pid, 1, 2)]
