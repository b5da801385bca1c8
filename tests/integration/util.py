"""Helpers for the end-to-end tests: a raw Kafka-protocol socket client built on kafka-python's
`kafka.protocol` codec, record-batch builders/parsers, reference partitioners, bounded waits.

Everything here talks to a real broker over a real socket; nothing is mocked.
"""
from __future__ import annotations

import errno
import itertools
import select
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

# Kafka error codes the tests assert (org.apache.kafka.common.protocol.Errors).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_RECORD = 87

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

# Compression codec ids as carried in the batch attributes.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

DEFAULT_TIMEOUT = 10.0


# --------------------------------------------------------------------------------------------
# Bounded waiting
# --------------------------------------------------------------------------------------------

def uvarint(value: int) -> bytes:
    """An unsigned varint (compact lengths and counts, tagged fields), written here rather than
    with the broker's own writer: the tests that build frames by hand stay independent of it."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def wait_until(pred: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, interval: float = 0.05,
               what: str = "condition") -> Any:
    """Poll `pred` until it returns a truthy value; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline, then reported
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


def split_host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


# --------------------------------------------------------------------------------------------
# Reference partitioners (independent of the clients; checked against Java's Utils.murmur2)
# --------------------------------------------------------------------------------------------

def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), as a signed 32-bit int like Java."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = data[4 * n4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, num_partitions: int) -> int:
    """Java client / kafka-python / aiokafka default partitioner for a non-null key
    (librdkafka's `murmur2_random` is the same function)."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def librdkafka_consistent_partition(key: bytes, num_partitions: int) -> int:
    """librdkafka's `consistent` / `consistent_random` partitioner for a non-null key: CRC-32 % n."""
    return (zlib.crc32(key) & 0xFFFFFFFF) % num_partitions


# --------------------------------------------------------------------------------------------
# Record batches
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    """One record as produced/fetched; `offset` is -1 before the broker assigns one."""
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: Optional[int] = None
    offset: int = -1


def build_batch(records: Sequence[Rec], compression: str = "none", producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A magic-2 record batch as a client would send it (base offset 0, CRC-32C filled in)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[compression], is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, r in enumerate(records):
        ts = r.timestamp if r.timestamp is not None else now
        assert b.append(i, ts, r.key, r.value, list(r.headers)) is not None
    return bytes(b.build())


def build_legacy_message_set(records: Sequence[Rec], magic: int = 1) -> bytes:
    """A magic-0/1 message set (the pre-0.11 format)."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, r in enumerate(records):
        assert b.append(i, r.timestamp if r.timestamp is not None else now, r.key, r.value) is not None
    return bytes(b.build())


@dataclass(frozen=True)
class LegacyRec:
    """One message of a magic 0/1 message set as a pre-0.11 consumer sees it."""
    offset: int
    magic: int
    timestamp: Optional[int]        # None for magic 0
    log_append_time: bool           # the timestamp type bit (magic 1)
    key: Optional[bytes]
    value: Optional[bytes]


def parse_legacy_records(data: Optional[bytes]) -> list[LegacyRec]:
    """The messages of a magic 0/1 message set (a Fetch v0-3 answer), compressed wrappers opened
    by kafka-python's reader; a trailing partial message or overflow stub ends it, as for a
    consumer."""
    out: list[LegacyRec] = []
    records = MemoryRecords(data or b"")
    while (batch := records.next_batch()) is not None:
        assert batch.magic in (0, 1), batch.magic
        out += [LegacyRec(r.offset, batch.magic, r.timestamp, r.timestamp_type == 1, r.key, r.value)
                for r in batch]
    return out


BATCH_CRC_OFFSET = DefaultRecordBatch.CRC_OFFSET          # 17
BATCH_ATTRIBUTES_OFFSET = DefaultRecordBatch.ATTRIBUTES_OFFSET  # 21
BATCH_HEADER_SIZE = DefaultRecordBatch.HEADER_STRUCT.size  # 61


@dataclass
class ParsedBatch:
    base_offset: int
    last_offset: int
    magic: int
    crc_ok: bool
    compression: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Rec]


@dataclass
class ParsedRecords:
    batches: list[ParsedBatch] = field(default_factory=list)
    trailing_partial_bytes: int = 0  # an incomplete last batch (allowed by the protocol)

    @property
    def records(self) -> list[Rec]:
        return [r for b in self.batches for r in b.records]


def parse_records(data: Optional[bytes]) -> ParsedRecords:
    """Split fetched bytes into batches. A batch whose declared length fits in the data is 'served'
    and must parse; a shorter tail is a partial batch (Kafka may cut the last one at max_bytes)."""
    out = ParsedRecords()
    if not data:
        return out
    data = bytes(data)
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            out.trailing_partial_bytes = len(data) - pos
            break
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            out.trailing_partial_bytes = len(data) - pos
            break
        raw = data[pos:end]
        magic = raw[16]
        assert magic == 2, f"served batch at byte {pos} has magic {magic}, expected 2"
        batch = DefaultRecordBatch(raw)
        crc_ok = batch.validate_crc()
        recs = []
        if crc_ok:
            for r in batch:
                recs.append(Rec(key=None if r.key is None else bytes(r.key),
                                value=None if r.value is None else bytes(r.value),
                                headers=tuple((k, bytes(v)) for k, v in r.headers),
                                timestamp=r.timestamp, offset=r.offset))
        out.batches.append(ParsedBatch(
            base_offset=batch.base_offset, last_offset=batch.last_offset, magic=magic, crc_ok=crc_ok,
            compression=batch.compression_type, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence, records=recs))
        pos = end
    return out


# --------------------------------------------------------------------------------------------
# Raw protocol client
# --------------------------------------------------------------------------------------------

class ConnectionClosed(Exception):
    pass


class RawClient:
    """One blocking TCP connection speaking the Kafka protocol via kafka-python's codec.

    Requests may be pipelined: `send()` returns the correlation id, `recv()` returns the next
    (correlation_id, decoded response) in arrival order.
    """

    def __init__(self, bootstrap: str, client_id: str = "kafkalite-it", timeout: float = DEFAULT_TIMEOUT):
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.timeout = timeout
        self.sock = socket.create_connection(split_host_port(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = itertools.count(1)
        self._pending: dict[int, Any] = {}  # correlation id -> response class (versioned)
        self._buf = bytearray()
        self._versions: Optional[dict[int, tuple[int, int]]] = None

    # -- plumbing -------------------------------------------------------------------------------
    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete frame within {self.timeout}s ({len(self._buf)}/{n} bytes)")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(max(65536, n - len(self._buf)))
            except socket.timeout:
                continue
            except ConnectionResetError as e:
                raise ConnectionClosed("connection reset by broker") from e
            if not chunk:
                raise ConnectionClosed("connection closed by broker")
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def recv_frame(self, timeout: Optional[float] = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        (size,) = struct.unpack(">i", self._read_exact(4, deadline))
        assert 0 <= size < (1 << 30), f"implausible response frame size {size}"
        return self._read_exact(size, deadline)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection within `timeout` (any data read is discarded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                continue
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    return True
                raise
            if not chunk:
                return True
        return False

    # -- requests -------------------------------------------------------------------------------
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's advertised (min, max) per api key (ApiVersions v0, asked once)."""
        if self._versions is None:
            resp = self.request(ApiVersionsRequest[0]())
            assert resp.error_code == 0, resp
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return self._versions

    def version_for(self, req_cls: Any, at_most: Optional[int] = None) -> int:
        """Highest version of `req_cls` both the broker and kafka-python support."""
        lo, hi = self.api_versions()[req_cls.API_KEY]
        v = min(hi, req_cls.max_version)
        if at_most is not None:
            v = min(v, at_most)
        assert v >= lo, f"no common version for {req_cls.__name__}: broker {lo}-{hi}"
        return v

    def send(self, req: Any, correlation_id: Optional[int] = None, expect_response: bool = True) -> int:
        corr = next(self._corr) if correlation_id is None else correlation_id
        req.with_header(correlation_id=corr, client_id=self.client_id)
        data = req.encode(header=True, framed=True)
        if expect_response and req.expect_response():
            self._pending[corr] = req.header.get_response_class()
        self.sock.sendall(data)
        return corr

    def recv(self, timeout: Optional[float] = None) -> tuple[int, Any]:
        frame = self.recv_frame(timeout)
        (corr,) = struct.unpack_from(">i", frame, 0)
        cls = self._pending.pop(corr, None)
        assert cls is not None, f"response with unexpected correlation id {corr} (pending {sorted(self._pending)})"
        resp = cls.decode(frame, header=True)
        return corr, resp

    def request(self, req: Any, timeout: Optional[float] = None) -> Any:
        corr = self.send(req)
        got, resp = self.recv(timeout)
        assert got == corr, f"expected correlation id {corr}, got {got}"
        return resp

    # -- typed helpers ----------------------------------------------------------------------------
    def metadata(self, topics: Optional[Iterable[str]], allow_auto_topic_creation: bool = False,
                 version: Optional[int] = None) -> Any:
        v = self.version_for(MetadataRequest) if version is None else version
        ts = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return self.request(MetadataRequest[v](topics=ts, allow_auto_topic_creation=allow_auto_topic_creation))

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1,
                timeout_ms: int = 10000, version: Optional[int] = None) -> Any:
        """Produce one records blob; returns the single partition response (or the correlation id
        for acks=0, which gets no response)."""
        # v13 addresses topics by id only; these tests address them by name.
        v = self.version_for(ProduceRequest, at_most=12) if version is None else version
        P = ProduceRequest.TopicProduceData
        req = ProduceRequest[v](
            transactional_id=None, acks=acks, timeout_ms=timeout_ms,
            topic_data=[P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])])
        if acks == 0:
            return self.send(req)
        resp = self.request(req, timeout=timeout_ms / 1000 + 5)
        assert len(resp.responses) == 1 and len(resp.responses[0].partition_responses) == 1, resp
        return resp.responses[0].partition_responses[0]

    def fetch_request(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
                      max_wait_ms: int = 0, min_bytes: int = 0, version: Optional[int] = None) -> Any:
        """A sessionless (session id 0, epoch -1) Fetch request object for one partition."""
        v = self.version_for(FetchRequest, at_most=12) if version is None else version
        T = FetchRequest.FetchTopic
        return FetchRequest[v](
            cluster_id=None, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
            max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[T(topic=topic, partitions=[T.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes)])],
            forgotten_topics_data=[], rack_id="")

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
              max_wait_ms: int = 0, version: Optional[int] = None) -> Any:
        """Fetch one partition; returns its PartitionData (error_code, high_watermark, records...)."""
        resp = self.request(self.fetch_request(topic, partition, offset, max_bytes, max_wait_ms, version=version))
        assert resp.error_code == 0, resp
        assert len(resp.responses) == 1 and len(resp.responses[0].partitions) == 1, resp
        return resp.responses[0].partitions[0]

    def fetch_all(self, topic: str, partition: int, start: int = 0, max_bytes: int = 1 << 20,
                  timeout: float = DEFAULT_TIMEOUT) -> tuple[ParsedRecords, int]:
        """Fetch from `start` up to the high watermark. Returns (all served batches, high watermark).
        Asserts every served batch is intact (CRC) and offsets are contiguous."""
        out = ParsedRecords()
        offset = start
        deadline = time.monotonic() + timeout
        while True:
            pd = self.fetch(topic, partition, offset, max_bytes=max_bytes)
            assert pd.error_code == 0, f"fetch {topic}-{partition}@{offset}: error {pd.error_code}"
            hw = pd.high_watermark
            if offset >= hw:
                return out, hw
            parsed = parse_records(pd.records)
            assert parsed.batches, f"fetch {topic}-{partition}@{offset} below HW {hw} returned no whole batch"
            for b in parsed.batches:
                assert b.crc_ok, f"served batch at offset {b.base_offset} has a bad CRC"
                if b.last_offset < offset:
                    continue  # a batch that starts before the fetch offset (allowed: whole batches are served)
                out.batches.append(b)
                for r in b.records:
                    if r.offset < offset:
                        continue
                    assert r.offset == offset, f"offset gap: expected {offset}, got {r.offset}"
                    offset += 1
            if time.monotonic() > deadline:
                raise AssertionError(f"fetch_all {topic}-{partition} did not reach HW {hw} (at {offset})")

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    version: Optional[int] = None) -> Any:
        v = self.version_for(ListOffsetsRequest, at_most=7) if version is None else version
        T = ListOffsetsRequest.ListOffsetsTopic
        resp = self.request(ListOffsetsRequest[v](
            replica_id=-1, isolation_level=0,
            topics=[T(name=topic, partitions=[T.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])],
            timeout_ms=5000))
        return resp.topics[0].partitions[0]

    def create_topic(self, name: str, num_partitions: int = 1, replication_factor: int = 1,
                     configs: Optional[dict[str, str]] = None, validate_only: bool = False) -> Any:
        v = self.version_for(CreateTopicsRequest)
        T = CreateTopicsRequest.CreatableTopic
        resp = self.request(CreateTopicsRequest[v](
            topics=[T(name=name, num_partitions=num_partitions, replication_factor=replication_factor,
                      assignments=[],
                      configs=[T.CreatableTopicConfig(name=k, value=val) for k, val in (configs or {}).items()])],
            timeout_ms=10000, validate_only=validate_only))
        return resp.topics[0]


def create_topic(bootstrap: str, name: str, num_partitions: int = 1,
                 configs: Optional[dict[str, str]] = None) -> None:
    """Create a topic through the raw protocol and wait until its metadata shows a leader everywhere."""
    with RawClient(bootstrap) as c:
        t = c.create_topic(name, num_partitions, 1, configs)
        assert t.error_code == 0, f"CreateTopics {name}: error {t.error_code} {t.error_message}"
        wait_for_topic(c, name, num_partitions)


def wait_for_topic(c: RawClient, name: str, num_partitions: int, timeout: float = DEFAULT_TIMEOUT) -> Any:
    def ready() -> Any:
        md = c.metadata([name])
        t = md.topics[0]
        if t.error_code != 0 or len(t.partitions) != num_partitions:
            return None
        if any(p.error_code != 0 or p.leader_id != 0 for p in t.partitions):
            return None
        return t
    return wait_until(ready, timeout, what=f"topic {name} with {num_partitions} partitions led by broker 0")


FIND_COORDINATOR = 10


def librdkafka_lz4_enabled(bootstrap: str) -> bool:
    """librdkafka turns on LZ4 only if the broker advertises FindCoordinator (its feature table
    ties LZ4 to that 0.8.2-era API); otherwise it silently produces uncompressed batches."""
    with RawClient(bootstrap) as c:
        return FIND_COORDINATOR in c.api_versions()


def broker_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")
