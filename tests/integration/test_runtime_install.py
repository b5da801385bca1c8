"""kafkalite as a user gets it: built with ``python -m build``, the wheel installed into a fresh
virtualenv with its runtime dependencies only.

The module builds the sdist and, from it, the wheel once (``python -m build`` on a copy of what
the sdist holds), installs the wheel into a new virtualenv (no extras: no pytest, no test
clients) and runs it from there: ``kafkalite serve`` and the console tools as console scripts,
the pytest plugin under that venv's own pytest, and the broker the codec tests use with that
venv's Python (``-I``: neither this checkout nor PYTHONPATH is importable). This process — with
its own kafka-python — is the client of that broker. For gzip, snappy, lz4 and zstd: compaction
of a compacted topic keeps the last value per key (the cleaner decodes and re-encodes batches),
topic-level ``compression.type`` recompresses batches of another codec, timestamp bounds and
LogAppendTime apply to compressed batches, and a batch that does not decompress is
UNKNOWN_SERVER_ERROR with an ERROR log naming the partition and codec. The pip cache lives
outside the repository (``$KAFKALITE_TEST_CACHE``, as the Maven cache), so the second build is
fast. Spark itself is not run from the venv (installing PySpark there costs ~500 MB a run): the
wheel's `spark` extra is checked in its metadata, and ``kafkalite.spark`` is imported from the
installed wheel with this environment's PySpark and pyarrow on the path.
"""
from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from crc32c import crc32c
from kafka import KafkaProducer
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from tests.harness import READY_RE, BrokerProcess
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
# what a test process may not pass on to the venv's programs: they import the installed kafkalite only
CHECKOUT_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")


# -- the distributions and the venv ----------------------------------------------------------

def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CHECKOUT_VARS}
    return {**env, "PIP_CACHE_DIR": str(cache_root() / "pip"), "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def _run(cmd: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None,
         input: str | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else _clean_env(), input=input)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _copy_source(dest: Path) -> Path:
    """The files the build reads (pyproject, README, the package), so the build neither writes
    into the checkout (build/, *.egg-info) nor races other builds there."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "kafkalite", dest / "kafkalite",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def package_files() -> list[str]:
    """Every file of the package in this checkout, Python or data, relative to the repository."""
    source = REPO / "kafkalite"
    return sorted(str(p.relative_to(REPO)) for p in source.rglob("*")
                  if p.is_file() and p.suffix != ".pyc" and "__pycache__" not in p.parts)


@dataclass(frozen=True)
class Distributions:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> Distributions:
    """`python -m build`: the sdist, then the wheel built from that sdist (build's default)."""
    base = tmp_path_factory.mktemp("dist-build")
    src = _copy_source(base / "kafkalite-src")
    out = base / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], cwd=base)
    (sdist,) = out.glob("kafkalite-*.tar.gz")
    (wheel,) = out.glob("kafkalite-*-py3-none-any.whl")
    return Distributions(sdist, wheel)


@dataclass(frozen=True)
class Venv:
    python: Path
    runtime_packages: frozenset[str]    # what `pip install <wheel>` put there (before any test adds pytest)

    @property
    def kafkalite(self) -> str:
        """The wheel's console script."""
        return str(self.python.parent / "kafkalite")


@pytest.fixture(scope="module")
def venv(distributions: Distributions, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("runtime-install")
    # without pip of its own (ensurepip alone takes ~10 s): this environment's pip installs into it
    _run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], cwd=base)
    python = base / "venv" / "bin" / "python"
    _pip(python, "install", "--no-input", str(distributions.wheel))
    listed = json.loads(_pip(python, "list", "--format", "json"))
    return Venv(python, frozenset(d["name"].lower().replace("_", "-") for d in listed))


def _pip(python: Path, *args: str) -> str:
    return _run([sys.executable, "-m", "pip", "--python", str(python), *args], cwd=python.parent)


@pytest.fixture(scope="module")
def venv_python(venv: Venv) -> Path:
    return venv.python


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
    """The harness's broker process, started as a user of the wheel starts one: the venv's
    `kafkalite` console script, `serve --config FILE` (the harness's settings written as a
    properties file), in an environment without this checkout on the path."""

    def __init__(self, python: Path, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.script = python.parent / "kafkalite"
        self.config_file = self.log_dir.parent / "server.properties"

    def command(self) -> list[str]:
        args = super().command()
        assert args[1:4] == ["-m", "kafkalite", "serve"] and set(args[4::2]) == {"--override"}
        self.config_file.write_text("".join(f"{setting}\n" for setting in args[5::2]))
        return [str(self.script), "serve", "--config", str(self.config_file)]

    def environment(self) -> dict[str, str]:
        return _clean_env()


def test_distributions_hold_every_package_file(distributions: Distributions) -> None:
    """The sdist and the wheel built from it hold every file of the package in this checkout:
    each module and each data file the code opens (the protocol and coordinator JSON schemas,
    the packaged server.properties; the pytest plugin and kafkalite.spark are modules). A data
    file missing from [tool.setuptools.package-data] fails here, not at a user's start-up."""
    expected = package_files()
    assert {"kafkalite/config/server.properties",
            "kafkalite/coordinator/group/schemas/OffsetCommitKey.json",
            "kafkalite/coordinator/transaction/schemas/TransactionLogKey.json",
            "kafkalite/protocol/schemas/LeaderAndIsrRequest.json",
            "kafkalite/pytest_plugin.py", "kafkalite/spark/datasource.py"} <= set(expected)
    with zipfile.ZipFile(distributions.wheel) as whl:
        in_wheel = sorted(n for n in whl.namelist() if n.startswith("kafkalite/"))
    with tarfile.open(distributions.sdist) as sdist:
        names = [m.name.split("/", 1) for m in sdist.getmembers() if m.isfile()]
    assert {top for top, _ in names} == {distributions.sdist.name.removesuffix(".tar.gz")}
    in_sdist = sorted(path for _, path in names if path.startswith("kafkalite/"))
    assert in_wheel == expected
    assert in_sdist == expected


def test_wheel_metadata(distributions: Distributions) -> None:
    """The wheel declares pyproject's runtime dependencies, the `spark` extra (PySpark and
    pyarrow, for kafkalite.spark) and `test`, the `kafkalite` console script and the pytest plugin."""
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(distributions.wheel) as whl:
        (info,) = {n.split("/")[0] for n in whl.namelist() if n.endswith(".dist-info/METADATA")}
        metadata = email.parser.Parser().parsestr(whl.read(f"{info}/METADATA").decode())
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    requires = metadata.get_all("Requires-Dist")
    assert [r for r in requires if "; extra ==" not in r] == project["dependencies"]
    assert metadata.get_all("Provides-Extra") == ["test", "spark"]
    assert [r for r in requires if r.endswith('; extra == "spark"')] == \
        ['pyspark==4.2.0; extra == "spark"', 'pyarrow>=15; extra == "spark"']
    assert entry_points.split() == ["[console_scripts]", "kafkalite", "=", "kafkalite.cli:main",
                                    "[pytest11]", "kafkalite", "=", "kafkalite.pytest_plugin"]


def test_installed_without_test_extras(venv: Venv, tmp_path: Path) -> None:
    """The venv holds the runtime dependencies only, kafkalite comes from its site-packages
    (package data included), and every codec library kafka-python's codec module wants is there."""
    assert venv.runtime_packages.isdisjoint({"pytest", "confluent-kafka", "aiokafka", "hypothesis",
                                             "pyspark", "pyarrow", "build"})
    assert {"kafkalite", "kafka-python", "uvloop", "kazoo"} <= venv.runtime_packages
    out = _run([str(venv.python), "-I", "-c", (
        "import kafkalite, kafka.codec as c\n"
        "from importlib import resources\n"
        "print(kafkalite.__file__)\n"
        "print(c.has_gzip(), c.has_snappy(), c.has_lz4(), c.has_zstd())\n"
        "print(sorted(p.name for p in resources.files('kafkalite.coordinator.transaction.schemas').iterdir()"
        " if p.name.endswith('.json')))\n")], cwd=tmp_path)
    location, codecs, schemas = out.splitlines()
    assert location.startswith(str(venv.python.parent.parent)) and "site-packages" in location, location
    assert codecs == "True True True True"
    assert schemas == "['TransactionLogKey.json', 'TransactionLogValue.json']"


def test_every_data_file_is_installed(venv_python: Path, tmp_path: Path) -> None:
    """Every non-Python file of the package in this checkout (schemas, server.properties) is in
    the installed package."""
    code = "import kafkalite, os; print(os.path.dirname(kafkalite.__file__))"
    installed = Path(_run([str(venv_python), "-I", "-c", code], cwd=tmp_path).strip()).parent
    data_files = [f for f in package_files() if not f.endswith(".py")]
    assert "kafkalite/coordinator/transaction/schemas/TransactionLogKey.json" in data_files
    assert [f for f in data_files if not (installed / f).is_file()] == []


def test_console_scripts_serve_produce_and_consume(venv: Venv, broker: VenvBroker, tmp_path: Path) -> None:
    """`kafkalite serve --config` from the wheel (the module's broker) and the wheel's console
    tools: a topic created, three keyed records produced from stdin and consumed back exactly."""
    env = _clean_env()
    usage = _run([venv.kafkalite, "--help"], cwd=tmp_path, env=env)
    assert usage.startswith("usage: kafkalite ") and "    serve " in usage
    assert broker.stdout_lines and READY_RE.search(broker.stdout_lines[-1])
    bootstrap = ["--bootstrap-server", broker.bootstrap_servers]
    created = _run([venv.kafkalite, "topics", *bootstrap, "--create", "--topic", "rt-tools",
                    "--partitions", "1"], cwd=tmp_path, env=env)
    assert created == "Created topic rt-tools.\n"
    produced = _run([venv.kafkalite, "console-producer", *bootstrap, "--topic", "rt-tools",
                     "--property", "parse.key=true", "--property", "key.separator=:"],
                    cwd=tmp_path, env=env, input="k1:first\nk2:second\nk1:third\n")
    assert produced == ""
    consumed = subprocess.run(
        [venv.kafkalite, "console-consumer", *bootstrap, "--topic", "rt-tools", "--from-beginning",
         "--max-messages", "3", "--timeout-ms", "20000", "--property", "print.key=true",
         "--property", "print.offset=true"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (consumed.returncode, consumed.stdout) == \
        (0, "Offset:0\tk1\tfirst\nOffset:1\tk2\tsecond\nOffset:2\tk1\tthird\n")
    assert consumed.stderr.splitlines()[-1] == "Processed a total of 3 messages"


PLUGIN_USER_TEST = """
import sys

import kafkalite
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_round_trip(kafkalite_broker):
    assert kafkalite.__file__.startswith(sys.prefix), kafkalite.__file__   # the wheel's
    topic = kafkalite_broker.create_topic("orders")
    producer = KafkaProducer(bootstrap_servers=kafkalite_broker.bootstrap_servers)
    for i in range(3):
        producer.send(topic, key=b"k%d" % i, value=b"order-%d" % i).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafkalite_broker.bootstrap_servers,
                             consumer_timeout_ms=20000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append((message.offset, message.key, message.value))
        if len(got) == 3:
            break
    consumer.close()
    assert got == [(0, b"k0", b"order-0"), (1, b"k1", b"order-1"), (2, b"k2", b"order-2")]


def test_bootstrap(kafkalite_bootstrap, kafkalite_broker):
    assert kafkalite_bootstrap == kafkalite_broker.bootstrap_servers
"""


def test_pytest_plugin_from_the_wheel(venv: Venv, tmp_path: Path) -> None:
    """A user's test suite, run by the venv's own pytest (installed after the wheel), gets the
    `kafkalite_broker` fixture from the wheel's pytest11 entry point."""
    _pip(venv.python, "install", "--no-input", "pytest>=8")
    (tmp_path / "test_user.py").write_text(PLUGIN_USER_TEST)
    out = _run([str(venv.python), "-I", "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_user.py"],
               cwd=tmp_path, timeout=120)
    # (kafka-python's schema loading warns of importlib.resources' deprecated open_text)
    assert re.fullmatch(r"2 passed(, \d+ warnings)? in [\d.]+s", out.splitlines()[-1]), out


def test_spark_source_imports_from_the_wheel(venv: Venv, tmp_path: Path) -> None:
    """kafkalite.spark, installed from the wheel, loads with the `spark` extra's PySpark (this
    environment's, which scripts/test.sh installs with that extra) on the path."""
    import py4j
    import pyspark
    extra = tmp_path / "spark-extra"
    extra.mkdir()
    for module in (pyspark, py4j):
        (extra / module.__name__).symlink_to(Path(module.__file__).parent)
    env = _clean_env(PYTHONPATH=str(extra))
    out = _run([str(venv.python), "-s", "-c", (
        "import kafkalite.spark as s, pyspark\n"
        "print(s.__file__)\n"
        "print(pyspark.__version__, s.FORMAT_NAME, s.KafkaLiteDataSource.name())\n")], cwd=tmp_path, env=env)
    location, versions = out.splitlines()
    assert location.startswith(str(venv.python.parent.parent)) and "site-packages" in location, location
    assert versions == "4.2.0 kafkalite kafkalite"


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
