"""The official Java client (kafka-clients 3.9.1 and 4.4.0 from Maven Central) against kafkalite.

tests/java/ClientCheck.java is compiled once per session and client version with Debian's javac
against that version's jars (tests/support/java_clients.py) and run with `java -cp ...` as a
subprocess; it prints one JSON object per line, which these tests check
exactly: partitions (Kafka's murmur2 partitioner, recomputed here in Python), offsets contiguous
from 0 per partition, keys/values/headers/timestamps round-tripping, ListOffsets by time.

Consumer groups are not used: the consumer assigns all partitions and seeks to the beginning.
Missing java/javac/jars FAIL these tests on purpose (CI installs `default-jdk-headless` and maven).

Every test runs at both client versions: a run is one JVM of 1-2 s, so both versions of this
file together take about 25 s, and the two lines send different request versions (the round trip
checks that each client uses the newest version both sides speak).
"""
from __future__ import annotations

import time

import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

import pytest
from kafka.partitioner.default import murmur2

from tests.harness import BrokerProcess
from tests.support import maven
from tests.support.check_program import CheckRun, run_check
from tests.support.java_clients import KAFKA_CLIENTS_VERSIONS, NEWEST, kafka_clients_jars

pytestmark = pytest.mark.java

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
SOURCE = JAVA_DIR / "ClientCheck.java"
LOG_CONFIG = JAVA_DIR / "log4j2.properties"

NUM_PARTITIONS = 3
N = 30
# An hour ago, whole seconds: explicit timestamps must be within retention.ms (7 days), or the
# broker's retention check deletes the data, exactly as Kafka's does.
BASE_TS = (int(time.time()) - 3600) * 1000
BROKER_ID = 0
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID.toString()

# Small heap, serial GC, C1 only: several JVMs run on a shared 2-core machine.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

# APIs the client uses in this file (ApiVersions, Metadata, Produce, Fetch, ListOffsets,
# InitProducerId, CreateTopics, DeleteTopics) by api key.
NEEDED_APIS = {"API_VERSIONS": 18, "METADATA": 3, "PRODUCE": 0, "FETCH": 1, "LIST_OFFSETS": 2,
               "INIT_PRODUCER_ID": 22, "CREATE_TOPICS": 19, "DELETE_TOPICS": 20}


# ---- running the Java program ------------------------------------------------------------------

class JavaRun(CheckRun):
    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") in ("error", "send_error")]

    def requests_sent(self) -> list[str]:
        """'API vN' per request, from NetworkClient's DEBUG 'Sending ... header ...' lines."""
        out = []
        for line in self.stderr.splitlines():
            if "Sending " in line and "RequestHeader(apiKey=" in line:
                hdr = line.split("RequestHeader(apiKey=", 1)[1]
                api = hdr.split(",", 1)[0]
                ver = hdr.split("apiVersion=", 1)[1].split(",", 1)[0]
                out.append(f"{api} v{ver}")
        return out

    def report(self) -> str:
        """What to show when an assertion fails: errors, versions used, client warnings."""
        seen = list(dict.fromkeys(self.requests_sent()))
        warn = [l for l in self.stderr.splitlines() if " WARN " in l or " ERROR " in l]
        return "\n".join([
            f"exit code {self.returncode}",
            "errors: " + json.dumps(self.errors(), indent=1),
            "request versions sent: " + ", ".join(seen),
            "client WARN/ERROR log (last 30):", *warn[-30:],
            "non-JSON stdout: " + repr(self.noise[-5:]),
        ])


class JavaClient:
    """Runs one compiled check program (ClientCheck, TxnCheck) against a broker."""

    def __init__(self, java: str, classpath: str, main_class: str = "ClientCheck",
                 extra_flags: tuple[str, ...] = (), default_timeout: float = 90.0,
                 version: str = NEWEST) -> None:
        self.version = version  # of kafka-clients on the classpath
        self.java = java
        self.classpath = classpath
        self.main_class = main_class
        self.extra_flags = extra_flags
        self.default_timeout = default_timeout

    def run(self, bootstrap: str, *commands: str, timeout: Optional[float] = None) -> JavaRun:
        timeout = self.default_timeout if timeout is None else timeout
        cmd = [self.java, *JVM_FLAGS,
               f"-Dlog4j2.configurationFile={LOG_CONFIG}", *self.extra_flags,
               # The program's own watchdog fires first and reports where it was stuck.
               f"-Dclientcheck.deadline.ms={int((timeout - 10) * 1000)}",
               "-cp", self.classpath, self.main_class, bootstrap, *commands]
        run = run_check(JavaRun, cmd, timeout)
        if run.timed_out:
            pytest.fail(f"{self.main_class} killed after {timeout}s: {commands}\n{run.report()}")
        return run


SUPPORT = JAVA_DIR / "CheckSupport.java"


def compile_check_program(main: Path, version: str = NEWEST) -> tuple[str, str]:
    """Compile a check program (with CheckSupport.java) against kafka-clients `version` from
    Maven Central; returns (java, classpath). Fails the test when java/javac or the jars are missing: the Java client
    tests must run, not skip. Compiled classes are cached in the temp dir by a hash of the
    sources, the jars and javac's version, so repeated sessions skip javac; a fresh dir is
    renamed into place so concurrent sessions never see a half-written cache."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        pytest.fail("java/javac not found on PATH: install Debian's default-jdk-headless "
                    "(the Java client tests must run, not skip)")
    try:
        jars = kafka_clients_jars(version)
    except maven.MavenError as exc:
        pytest.fail(f"kafka-clients {version} from Maven Central: {exc}")
    compile_cp = os.pathsep.join(str(j) for j in jars)
    sources = [SUPPORT, main]
    h = hashlib.sha256()
    for src in sources:
        h.update(src.read_bytes())
    for j in jars:
        h.update(j.name.encode())
    h.update(subprocess.run([javac, "-version"], capture_output=True, text=True).stdout.encode())
    name = f"{main.stem.lower()}-{version}"
    out_dir = Path(tempfile.gettempdir()) / f"kafkalite-{name}-{h.hexdigest()[:16]}"
    if not (out_dir / f"{main.stem}.class").exists():
        build = Path(tempfile.mkdtemp(prefix=f"kafkalite-{name}-build-"))
        res = subprocess.run([javac, "-nowarn", "-d", str(build), "-cp", compile_cp, *map(str, sources)],
                             capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"javac failed:\n{res.stdout}\n{res.stderr}")
        try:
            os.rename(build, out_dir)
        except OSError:  # another session won the race; its classes are identical
            shutil.rmtree(build, ignore_errors=True)
    return java, os.pathsep.join([str(out_dir), compile_cp])


def java_version_params() -> list[Any]:
    """pytest params, one per kafka-clients version, with ids like `java-3.9.1`."""
    return [pytest.param(v, id=f"java-{v}") for v in KAFKA_CLIENTS_VERSIONS]


@pytest.fixture(scope="session", params=java_version_params())
def java_client(request: pytest.FixtureRequest) -> JavaClient:
    version: str = request.param
    # NetworkClient at DEBUG logs each request's api key and version (see JavaRun.report()).
    return JavaClient(*compile_check_program(SOURCE, version),
                      extra_flags=("-Dclientcheck.netlevel=DEBUG",), version=version)


# ---- expectations, computed independently of the broker ----------------------------------------

def java_partition(key: str, num_partitions: int = NUM_PARTITIONS) -> int:
    """Kafka's built-in partitioner for keyed records: toPositive(murmur2(key)) % numPartitions."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % num_partitions


def expected_value(i: int) -> Optional[str]:
    return None if i % 10 == 7 else f"v-{i}-\u00e9\u6f22\u5b57"  # mirrors ClientCheck.valueFor


def expected_headers(i: int) -> list[list[Optional[str]]]:
    return [["idx", str(i).encode().hex()], ["bin", "000102ff"], ["dup", "61"], ["dup", "62"],
            ["nil", None]]  # mirrors ClientCheck.headersFor; values hex, null stays null


def assert_records_as_sent(by_partition: dict[int, list[dict[str, Any]]], layout: dict[int, list[int]],
                           ts_of: dict[int, int]) -> None:
    """Every partition of `layout` holds its records at offsets 0.. in send order, each with the
    key, value, headers and CreateTime timestamp the check program sent, in a batch stamped with
    leader epoch 0 (ZooKeeper-mode Kafka stamps batches with the leader epoch, 0 for a new
    topic). Shared by the Java and Go client tests; each adds its own per-record checks."""
    for p, idxs in layout.items():
        got = by_partition[p]
        assert [r["offset"] for r in got] == list(range(len(idxs))), f"partition {p} offsets"
        assert [r["key"] for r in got] == [f"k-{i}" for i in idxs], f"partition {p} order"
        for r, i in zip(got, idxs):
            assert r["value"] == expected_value(i), r
            assert r["headers"] == expected_headers(i), r
            assert (r["timestamp"], r["timestampType"]) == (ts_of[i], "CREATE_TIME"), r
            assert r["leaderEpoch"] == 0, r


def expected_layout(n: int = N) -> dict[int, list[int]]:
    """Partition -> record indexes in send order (= offset order: one producer, in order)."""
    layout: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        layout[java_partition(f"k-{i}")].append(i)
    return dict(layout)


def test_python_murmur2_matches_the_java_partitioner(java_client: JavaClient) -> None:
    """No broker: the Java producer's own partitioner agrees with java_partition() for our keys."""
    keys = [f"k-{i}" for i in range(N)] + ["x", "a-much-longer-key-0123456789"]
    run = java_client.run("-", f"partitions {NUM_PARTITIONS} " + " ".join(keys[:N]),
                          "partitions 7 " + " ".join(keys), timeout=60)
    assert run.returncode == 0, run.report()
    got = [(e["key"], e["partition"]) for e in run.of("partition_for_key")]
    assert got == ([(k, java_partition(k)) for k in keys[:N]]
                   + [(k, java_partition(k, 7)) for k in keys])
    # The round-trip checks below are only meaningful if every partition gets records.
    assert {p: len(v) for p, v in expected_layout().items()} == {0: 8, 1: 11, 2: 11}


# ---- broker's ApiVersions, by a raw v0 request (independent of any client library) -------------

def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"broker closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def broker_api_ranges(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    client_id = b"kafkalite-java-test"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        data = _recv_exact(s, size)
    corr, err, count = struct.unpack_from(">ihi", data, 0)
    assert corr == 7 and err == 0, f"ApiVersions v0: correlation {corr}, error {err}"
    ranges = {}
    for k in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * k)
        ranges[key] = (lo, hi)
    return ranges


def not_newest_common_versions(run: JavaRun, advertised: dict[int, tuple[int, int]]) -> list[str]:
    """Requests the client sent at a version other than the newest both it and the broker speak
    (NetworkClient's choice), e.g. "PRODUCE v11, expected v13". ApiVersions is left out: a client
    newer than the broker first tries its own newest and falls back (KIP-511)."""
    keys = {e["api"]: e["key"] for e in run.of("api_range")}
    latest = {e["api"]: e["latest"] for e in run.of("api_range")}
    wrong = []
    for sent in dict.fromkeys(run.requests_sent()):
        api, version = sent.rsplit(" v", 1)
        if api == "API_VERSIONS":
            continue
        expected = min(latest[api], advertised[keys[api]][1])
        if int(version) != expected:
            wrong.append(f"{sent}, expected v{expected}")
    return wrong


# ---- tests ---------------------------------------------------------------------------------------

def test_codecs_and_native_libs_load(java_client: JavaClient) -> None:
    """No broker: Kafka's own codec classes round-trip bytes, zstd/snappy natives load here."""
    run = java_client.run("-", "codecs", timeout=60)
    assert run.returncode == 0, run.report()
    codecs = {e["codec"]: e for e in run.of("codec")}
    assert sorted(codecs) == ["gzip", "lz4", "none", "snappy", "zstd"]
    assert all(e["ok"] for e in codecs.values())
    for name in ("gzip", "snappy", "lz4", "zstd"):
        assert codecs[name]["compressed"] < codecs[name]["raw"], name
    (impls,) = run.of("codec_impls")
    assert impls["zstd_native"] is True and impls["snappy_native"] is True, impls


def test_broker_advertises_what_the_java_client_needs(java_client: JavaClient,
                                                      broker: BrokerProcess) -> None:
    """For each API used here, the broker's advertised range overlaps the client's window."""
    run = java_client.run("-", "api-ranges", timeout=60)
    assert run.returncode == 0, run.report()
    client = {e["api"]: (e["oldest"], e["latest"]) for e in run.of("api_range")}
    advertised = broker_api_ranges(broker)
    problems = []
    for api, key in NEEDED_APIS.items():
        lo, hi = client[api]
        if key not in advertised:
            problems.append(f"{api} (key {key}) not advertised; Java {java_client.version} "
                            f"speaks v{lo}-v{hi}")
        elif advertised[key][1] < lo or advertised[key][0] > hi:
            problems.append(f"{api} (key {key}): broker v{advertised[key][0]}-v{advertised[key][1]},"
                            f" Java {java_client.version} needs a version in v{lo}-v{hi}")
    # Produce v13 / Fetch v13+ address topics by id, taken from Metadata (topic ids since v10).
    meta_hi = advertised.get(3, (0, -1))[1]
    for api, key in (("PRODUCE", 0), ("FETCH", 1)):
        if advertised.get(key, (0, -1))[1] >= 13 and meta_hi < 10:
            problems.append(f"{api} v13+ advertised but Metadata max v{meta_hi} < 10 gives no topic ids")
    assert not problems, "\n".join(problems)


def test_admin_topic_lifecycle(java_client: JavaClient, broker: BrokerProcess,
                               topic_name: str) -> None:
    t = topic_name
    run = java_client.run(broker.bootstrap_servers,
                          f"create-topic {t} {NUM_PARTITIONS}",
                          f"expect-error TopicExistsException create-topic {t} {NUM_PARTITIONS}",
                          f"describe-topic {t}",
                          "list-topics",
                          f"delete-topic {t}",
                          "list-topics",
                          f"expect-error UnknownTopicOrPartitionException describe-topic {t}")
    assert run.returncode == 0 and not run.errors(), run.report()

    (created,) = run.of("created")
    assert created["topic"] == t
    assert created["numPartitions"] == NUM_PARTITIONS and created["replicationFactor"] == 1
    assert created["topicId"] != ZERO_UUID

    (described,) = run.of("described")
    assert described["topic"] == t and described["internal"] is False
    assert described["topicId"] == created["topicId"]
    assert described["partitions"] == [
        {"partition": p, "leader": BROKER_ID, "replicas": [BROKER_ID], "isr": [BROKER_ID]}
        for p in range(NUM_PARTITIONS)]

    before, after = run.of("topics")
    assert t in before["topics"]
    assert t not in after["topics"]
    assert not [n for n in before["topics"] + after["topics"] if n.startswith("__")], \
        "listTopics() without listInternal must not show internal topics"

    assert [e["error"] for e in run.of("expected_error")] == [
        "TopicExistsException", "UnknownTopicOrPartitionException"]


@pytest.mark.parametrize("compression,acks", [
    ("none", "all"), ("gzip", "all"), ("snappy", "all"), ("lz4", "all"), ("zstd", "all"),
    ("none", "0"), ("lz4", "1"),
])
def test_produce_consume_roundtrip(java_client: JavaClient, broker: BrokerProcess, topic_name: str,
                                   compression: str, acks: str) -> None:
    t = topic_name
    layout = expected_layout()
    ts_of = {i: BASE_TS + i for i in range(N)}
    queries = [BASE_TS - 1, BASE_TS, BASE_TS + 7, BASE_TS + 13, BASE_TS + N - 1, BASE_TS + N + 1000]
    run = java_client.run(broker.bootstrap_servers,
                          "api-ranges",
                          f"create-topic {t} {NUM_PARTITIONS}",
                          f"produce {t} {N} {compression} {acks} {BASE_TS}",
                          f"consume {t} {N} 20000",
                          f"offsets {t} {','.join(map(str, queries))}")
    assert run.returncode == 0 and not run.errors(), run.report()
    # The client's DEBUG log names every request; the version check below needs them.
    apis_sent = {sent.rsplit(" v", 1)[0] for sent in run.requests_sent()}
    assert {"PRODUCE", "FETCH", "LIST_OFFSETS", "METADATA"} <= apis_sent, run.report()
    assert not_newest_common_versions(run, broker_api_ranges(broker)) == [], run.report()

    # -- producer's view (RecordMetadata) --
    sent = run.of("sent")
    assert [e["i"] for e in sent] == list(range(N)), run.report()
    for e in sent:
        assert e["topic"] == t
        assert e["partition"] == java_partition(e["key"]), e
        assert e["timestamp"] == ts_of[e["i"]], e  # CreateTime: broker returns -1 log-append time
    if acks == "0":
        assert all(e["offset"] == -1 for e in sent)  # no response, so no offset
    else:
        for p, idxs in layout.items():
            assert [sent[i]["offset"] for i in idxs] == list(range(len(idxs))), f"partition {p}"

    # -- consumer's view --
    records = run.of("record")
    assert len(records) == N, run.report()
    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        assert r["topic"] == t
        by_partition[r["partition"]].append(r)
    assert_records_as_sent(by_partition, layout, ts_of)
    if acks != "0":
        for p, idxs in layout.items():
            for r, i in zip(by_partition[p], idxs):
                assert r["offset"] == sent[i]["offset"]
    assert sorted(by_partition) == sorted(layout)

    # -- ListOffsets: earliest, latest, by timestamp --
    (offs,) = run.of("offsets")
    assert offs["beginning"] == {str(p): 0 for p in range(NUM_PARTITIONS)}
    assert offs["end"] == {str(p): len(layout.get(p, [])) for p in range(NUM_PARTITIONS)}
    by_time = {e["ts"]: e["result"] for e in run.of("offsets_for_times")}
    assert sorted(by_time) == sorted(queries)
    for q in queries:
        expected = {}
        for p in range(NUM_PARTITIONS):
            hits = [(off, ts_of[i]) for off, i in enumerate(layout.get(p, [])) if ts_of[i] >= q]
            expected[str(p)] = list(hits[0]) if hits else None
        assert by_time[q] == expected, f"offsetsForTimes({q})"
