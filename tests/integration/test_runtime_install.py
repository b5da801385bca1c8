"""kafkalite from a plain, non-editable install: every codec works with runtime dependencies only.

The module builds a fresh virtualenv once, installs the repository into it with ``pip install``
(not editable, no extras: no pytest, no test clients), and runs the broker with that venv's
Python (``-I``: neither this checkout nor PYTHONPATH is importable). This process — with its own
kafka-python — is the client. For gzip, snappy, lz4 and zstd: compaction of a compacted topic
keeps the last value per key (the cleaner decodes and re-encodes batches), topic-level
``compression.type`` recompresses batches of another codec, timestamp bounds and LogAppendTime
apply to compressed batches, and a batch that does not decompress is UNKNOWN_SERVER_ERROR with an
ERROR log naming the partition and codec. The pip cache lives outside the repository
(``$KAFKALITE_TEST_CACHE``, as the Maven cache), so the second build is fast.
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from crc32c import crc32c
from kafka import KafkaProducer
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.util import (CODECS, ParsedBatch, RawClient, Rec, build_batch, create_topic,
                                    parse_records, wait_until)
from tests.support.maven import cache_root

REPO = Path(__file__).resolve().parents[2]
CODEC_NAMES = ("gzip", "snappy", "lz4", "zstd")
INVALID_TIMESTAMP = 32
UNKNOWN_SERVER_ERROR = -1
HOUR_MS = 3_600_000
TIMESTAMP_TYPE_BIT = 0x08           # batch attributes: LogAppendTime
BATCH_HEADER = 61


# -- the venv --------------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _copy_source(dest: Path) -> Path:
    """What a source distribution holds (pyproject, README, the package), so the build neither
    writes into the checkout nor races other builds there."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "kafkalite", dest / "kafkalite",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("runtime-install")
    src = _copy_source(base / "kafkalite-src")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
          "--cache-dir", str(cache_root() / "pip"), str(src)], cwd=base)
    return python


@pytest.fixture(scope="module")
def broker(venv_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator["VenvBroker"]:
    b = VenvBroker(venv_python, log_dir=tmp_path_factory.mktemp("runtime-logs") / "logs",
                   overrides={"num.partitions": "1", "auto.create.topics.enable": "false",
                              "log.cleaner.backoff.ms": "50",
                              "log.cleaner.dedupe.buffer.size": str(4 << 20)})
    b.start()
    try:
        yield b
    finally:
        b.close()


class VenvBroker(BrokerProcess):
    """The harness's broker process, run by the venv's Python in isolated mode."""

    def __init__(self, python: Path, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.python = python

    def command(self) -> list[str]:
        args = super().command()
        assert args[1:3] == ["-m", "kafkalite"]
        return [str(self.python), "-I"] + args[1:]


def test_installed_without_test_extras(venv_python: Path, tmp_path: Path) -> None:
    """The venv holds the runtime dependencies only, kafkalite comes from its site-packages
    (package data included), and every codec library kafka-python's codec module wants is there."""
    out = _run([str(venv_python), "-I", "-c", (
        "import importlib.util as u, kafkalite, kafka.codec as c\n"
        "from importlib import resources\n"
        "print(kafkalite.__file__)\n"
        "print(sorted(m for m in ('pytest', 'confluent_kafka', 'aiokafka', 'hypothesis') if u.find_spec(m)))\n"
        "print(c.has_gzip(), c.has_snappy(), c.has_lz4(), c.has_zstd())\n"
        "print(sorted(p.name for p in resources.files('kafkalite.coordinator.transaction.schemas').iterdir()"
        " if p.name.endswith('.json')))\n")], cwd=tmp_path)
    location, extras, codecs, schemas = out.splitlines()
    assert location.startswith(str(venv_python.parent.parent)) and "site-packages" in location, location
    assert extras == "[]"
    assert codecs == "True True True True"
    assert schemas == "['TransactionLogKey.json', 'TransactionLogValue.json']"


def test_every_data_file_is_installed(venv_python: Path, tmp_path: Path) -> None:
    """Every non-Python file of the package in this checkout (schemas, server.properties) is in
    the installed package: a data file missing from [tool.setuptools.package-data] fails here,
    not at a user's start-up."""
    code = "import kafkalite, os; print(os.path.dirname(kafkalite.__file__))"
    installed = Path(_run([str(venv_python), "-I", "-c", code], cwd=tmp_path).strip())
    source = REPO / "kafkalite"
    data_files = sorted(str(p.relative_to(source)) for p in source.rglob("*")
                        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)
    assert "coordinator/transaction/schemas/TransactionLogKey.json" in data_files
    assert [f for f in data_files if not (installed / f).is_file()] == []


def test_broker_serves_transactions_and_groups(broker: VenvBroker) -> None:
    """The coordinators read their JSON schemas at start-up and on every write: an installed
    broker (which used to fail start-up on the missing transaction schemas) initialises a
    transactional producer and commits a group's offsets."""
    create_topic(broker.bootstrap_servers, "rt-txn")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="rt-txn-producer")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("rt-txn", key=b"k", value=b"committed")
        p.commit_transaction()
    finally:
        p.close()
    with RawClient(broker.bootstrap_servers) as c:
        parsed, hw = c.fetch_all("rt-txn", 0)
        # the record, then the COMMIT marker (control record key: version 0, type 1 = COMMIT)
        assert hw == 2
        assert [(r.offset, r.key) for r in parsed.records] == [(0, b"k"), (1, b"\x00\x00\x00\x01")]
        assert parsed.records[0].value == b"committed"
        # a standalone offset commit (generation -1) is written to and read back from
        # __consumer_offsets with the group coordinator's schemas
        find_coordinator(c, "rt-group")
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        commit = c.request(OffsetCommitRequest[8](
            group_id="rt-group", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[T(name="rt-txn", partitions=[T.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata="m")])]))
        assert [(p.partition_index, p.error_code) for p in commit.topics[0].partitions] == [(0, 0)]
        F = OffsetFetchRequest.OffsetFetchRequestTopic
        fetched = c.request(OffsetFetchRequest[7](group_id="rt-group", require_stable=False,
                                                  topics=[F(name="rt-txn", partition_indexes=[0])]))
        assert fetched.error_code == 0
        assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                for p in fetched.topics[0].partitions] == [(0, 2, "m", 0)]


# -- compaction ------------------------------------------------------------------------------

def fetch_with_gaps(bootstrap: str, topic: str) -> tuple[list[ParsedBatch], int]:
    """Every batch from offset 0 to the high watermark (a compacted log has offset gaps and may
    hold emptied batches), CRCs checked; and the high watermark."""
    out: list[ParsedBatch] = []
    offset = 0
    with RawClient(bootstrap) as c:
        while True:
            pd = c.fetch(topic, 0, offset)
            if offset >= pd.high_watermark:
                return out, pd.high_watermark
            batches = [b for b in parse_records(pd.records).batches if b.last_offset >= offset]
            assert batches and all(b.crc_ok for b in batches)
            out += batches
            offset = batches[-1].last_offset + 1


KEYS = [f"key-{i}".encode() for i in range(5)]
ROUNDS = 6
END = b"end-" + b"z" * 200      # the sentinel's value, compressible like the others


def written_in_round(r: int) -> list[bytes]:
    """Round r writes every key but one, so the round before last keeps one record after
    compaction: its batch is rebuilt and re-compressed by the cleaner."""
    return [k for i, k in enumerate(KEYS) if i != r % len(KEYS)]


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_compaction_keeps_the_last_value_per_key(broker: VenvBroker, codec: str) -> None:
    topic = f"rt-compact-{codec}"
    # segment.ms=1: every produce lands in a new segment, so all but the sentinel's are cleanable
    create_topic(broker.bootstrap_servers, topic,
                 configs={"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01",
                          "min.compaction.lag.ms": "0", "file.delete.delay.ms": "0"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=5)
    history: list[tuple[int, bytes, bytes]] = []
    try:
        for r in range(ROUNDS):
            # one batch per round: sent together, then flushed
            # compressible values: kafka-python sends a batch uncompressed when that is smaller
            sent = [(k, f"{k.decode()}@{r}-".encode() + b"y" * 200) for k in written_in_round(r)]
            futures = [producer.send(topic, key=k, value=v) for k, v in sent]
            producer.flush()
            history += [(f.get(timeout=10).offset, k, v) for f, (k, v) in zip(futures, sent)]
            time.sleep(0.005)                              # past segment.ms before the next batch
        sentinel = producer.send(topic, key=b"sentinel", value=END).get(timeout=10).offset
    finally:
        producer.close()
    assert [o for o, _k, _v in history] == list(range(ROUNDS * (len(KEYS) - 1)))
    last = {k: (o, k, v) for o, k, v in history}
    expected = sorted(last.values()) + [(sentinel, b"sentinel", END)]
    assert len(expected) == len(KEYS) + 1

    def compacted() -> list[ParsedBatch] | None:
        batches, hw = fetch_with_gaps(broker.bootstrap_servers, topic)
        got = [(r.offset, r.key, r.value) for b in batches for r in b.records]
        return batches if got == expected and hw == sentinel + 1 else None

    batches = wait_until(compacted, timeout=20, interval=0.1, what=f"{topic} compacted to the last value per key")
    with_records = [b for b in batches if b.records]
    # every surviving batch still has the producer's codec, including the one the cleaner rebuilt
    assert {b.compression for b in with_records} == {CODECS[codec]}
    survivors = {b.base_offset: len(b.records) for b in with_records}
    assert sorted(survivors.values()) == [1, 1, len(KEYS) - 1]     # rounds 4 and 5, the sentinel


# -- compression.type ------------------------------------------------------------------------

# (what the client sends, what the topic stores): every codec decoded once and encoded once
RECOMPRESSION = [("gzip", "zstd"), ("snappy", "gzip"), ("lz4", "snappy"), ("zstd", "lz4")]


@pytest.mark.parametrize("sent,stored", RECOMPRESSION)
def test_topic_compression_type_recompresses(broker: VenvBroker, sent: str, stored: str) -> None:
    topic = f"rt-recompress-{sent}-to-{stored}"
    create_topic(broker.bootstrap_servers, topic, configs={"compression.type": stored})
    now = int(time.time() * 1000)
    records = [Rec(f"k{i}".encode(), f"value-{i}-".encode() * 20, headers=(("h", f"{i}".encode()),),
                   timestamp=now - 1000 + i) for i in range(50)]
    with RawClient(broker.bootstrap_servers) as c:
        p = c.produce(topic, 0, compressed_batch(records, sent))
        assert (p.error_code, p.base_offset) == (0, 0)
        pd = c.fetch(topic, 0, 0)
    parsed = parse_records(pd.records)
    (batch,) = parsed.batches
    assert batch.crc_ok and batch.compression == CODECS[stored]
    assert (batch.base_offset, batch.last_offset) == (0, 49)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in batch.records] == \
        [(i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(records)]


# -- timestamps ------------------------------------------------------------------------------

def compressed_batch(records: list[Rec], codec: str) -> bytes:
    """build_batch with `codec`, checked to really be compressed (kafka-python's builder sends a
    batch uncompressed when compression would not make it smaller)."""
    data = build_batch(records, compression=codec)
    assert struct.unpack_from(">h", data, 21)[0] & 0x07 == CODECS[codec]
    return data


def payload(i: int) -> bytes:
    return f"value-{i}-".encode() + b"x" * 200           # compressible by every codec

@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_timestamp_bounds_on_compressed_batches(broker: VenvBroker, codec: str) -> None:
    topic = f"rt-timestamps-{codec}"
    create_topic(broker.bootstrap_servers, topic,
                 configs={"message.timestamp.before.max.ms": str(HOUR_MS),
                          "message.timestamp.after.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    stamps = [now - 2 * HOUR_MS, now, now + 2 * HOUR_MS, now - 1000]
    with RawClient(broker.bootstrap_servers) as c:
        bad = compressed_batch([Rec(b"k", payload(i), timestamp=t) for i, t in enumerate(stamps)], codec)
        p = c.produce(topic, 0, bad, version=9)
        assert p.error_code == INVALID_TIMESTAMP
        assert p.error_message == "One or more records have been rejected due to invalid timestamp"
        assert [e.batch_index for e in p.record_errors] == [0, 2]
        assert all(e.batch_index_error_message.startswith(f"Timestamp {stamps[e.batch_index]} of message with offset ")
                   for e in p.record_errors)
        good = compressed_batch([Rec(b"k", payload(9), timestamp=now - 1000)], codec)
        p = c.produce(topic, 0, good, version=9)
        assert (p.error_code, p.base_offset) == (0, 0)         # nothing of the refused batch was written
        parsed, hw = c.fetch_all(topic, 0)
    assert hw == 1 and [(r.offset, r.value, r.timestamp) for r in parsed.records] == [(0, payload(9), now - 1000)]
    assert parsed.batches[0].compression == CODECS[codec]


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_log_append_time_on_compressed_batches(broker: VenvBroker, codec: str) -> None:
    topic = f"rt-append-time-{codec}"
    create_topic(broker.bootstrap_servers, topic, configs={"message.timestamp.type": "LogAppendTime"})
    old = int(time.time() * 1000) - 10 * HOUR_MS
    with RawClient(broker.bootstrap_servers) as c:
        before = int(time.time() * 1000)
        p = c.produce(topic, 0, compressed_batch([Rec(b"k", payload(i), timestamp=old + i) for i in range(3)],
                                                 codec), version=9)
        after = int(time.time() * 1000)
        assert p.error_code == 0 and before <= p.log_append_time_ms <= after
        raw = bytes(c.fetch(topic, 0, 0).records)
    attributes, max_timestamp = struct.unpack_from(">h", raw, 21)[0], struct.unpack_from(">q", raw, 35)[0]
    assert attributes & 0x07 == CODECS[codec] and attributes & TIMESTAMP_TYPE_BIT
    assert max_timestamp == p.log_append_time_ms
    (batch,) = parse_records(raw).batches
    assert [(r.value, r.timestamp) for r in batch.records] == [(payload(i), p.log_append_time_ms) for i in range(3)]


# -- a batch that does not decompress --------------------------------------------------------

def undecompressable_batch(codec: str) -> bytes:
    """A batch whose codec bits say `codec` but whose payload is no stream of it; CRC and length
    are right, so only decompression can notice."""
    good = bytearray(compressed_batch([Rec(b"k", payload(0))], codec))
    bad = good[:BATCH_HEADER] + b"\xff" * 40
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    return bytes(bad)


@pytest.mark.parametrize("policy", ["compact", "delete"])
@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_undecompressable_batch_is_unknown_server_error(broker: VenvBroker, codec: str, policy: str) -> None:
    topic = f"rt-corrupt-{codec}-{policy}"
    create_topic(broker.bootstrap_servers, topic, configs={"cleanup.policy": policy})
    with RawClient(broker.bootstrap_servers) as c:
        p = c.produce(topic, 0, undecompressable_batch(codec), version=9)
        assert (p.error_code, p.base_offset, p.error_message) == (UNKNOWN_SERVER_ERROR, -1, None)
        # the connection and the partition go on: a good batch of the same codec is appended at 0
        p = c.produce(topic, 0, compressed_batch([Rec(b"k", payload(0))], codec), version=9)
        assert (p.error_code, p.base_offset) == (0, 0)
    line = f"Error processing append operation on partition {topic}-0 ({codec} batch)"
    logged = wait_until(lambda: [s for s in broker.stderr_lines if line in s], what="the append error logged")
    assert len(logged) == 1 and "ERROR" in logged[0] and f"Failed to decompress record stream ({codec})" in logged[0]
