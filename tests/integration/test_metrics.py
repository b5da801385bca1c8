"""The Prometheus endpoint (kafkalite.metrics.prometheus.port) of a real broker process: off by
default, exact counter deltas across a produce and a fetch, and the docs/operations.md table
matching what a scrape exports."""
from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.metrics import names
from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch, create_topic, parse_records, wait_until

METRICS_RE = re.compile(r"kafkalite metrics: Prometheus endpoint on (http://\S+)")
OPERATIONS_MD = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the samples of `name` carrying at least `labels` (e.g. every version of an API)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def listening_sockets(pid: int) -> int:
    """TCP sockets in LISTEN state held by process `pid` (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                count += 1
    return count


@pytest.fixture
def metrics_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    b = BrokerProcess(log_dir=tmp_path / "logs", overrides={
        "kafkalite.metrics.prometheus.port": "0", "kafkalite.metrics.prometheus.host": "127.0.0.1"})
    b.start()
    try:
        urls = [m.group(1) for line in b.stdout_lines if (m := METRICS_RE.search(line))]
        assert len(urls) == 1, b.stdout_lines
        yield b, urls[0]
    finally:
        b.close()


def test_endpoint_is_off_by_default(fresh_broker: BrokerProcess) -> None:
    assert fresh_broker.proc is not None
    assert not any("kafkalite metrics" in line for line in fresh_broker.stdout_lines)
    assert listening_sockets(fresh_broker.proc.pid) == 1     # the Kafka listener only


def test_the_controllers_requests_to_its_own_broker_are_counted(metrics_broker: tuple[BrokerProcess, str],
                                                              topic_name: str) -> None:
    """They reach the handlers without a connection, and are still Kafka's requests per API."""
    b, url = metrics_broker
    before = scrape(url)
    create_topic(b.bootstrap_servers, topic_name, 1)

    def delta(request: str) -> float:
        return total(scrape(url), "kafka_network_requestmetrics_requests_total", request=request) - \
            total(before, "kafka_network_requestmetrics_requests_total", request=request)
    wait_until(lambda: delta("LeaderAndIsr") == 1 and delta("UpdateMetadata") == 1, timeout=10)
    assert delta("LeaderAndIsr") == 1 and delta("UpdateMetadata") == 1
    assert delta("CreateTopics") == 1


def test_counters_move_exactly_with_a_produce_and_a_fetch(metrics_broker: tuple[BrokerProcess, str],
                                                         topic_name: str) -> None:
    b, url = metrics_broker
    assert b.proc is not None and listening_sockets(b.proc.pid) == 2   # Kafka listener + metrics
    # flush.messages=1: each append flushes the log, one LogFlushRateAndTimeMs sample each
    create_topic(b.bootstrap_servers, topic_name, 1, configs={"flush.messages": "1"})
    n_batches, per_batch = 4, 25
    batches = [build_batch([Rec(key=b"k%d" % j, value=b"v" * (10 + i + j)) for j in range(per_batch)])
               for i in range(n_batches)]
    with RawClient(b.bootstrap_servers) as c:
        c.api_versions()
        before = scrape(url)
        flushes_before = total(before, "kafka_log_logflushstats_logflushrateandtimems_count")
        for i, batch in enumerate(batches, 1):
            r = c.produce(topic_name, 0, batch, acks=-1)
            assert r.error_code == 0
            # flush.messages=1: the append hands a flush of the log to the flusher, which runs it
            # off the event loop after the answer: one LogFlushRateAndTimeMs sample per log flush
            wait_until(lambda: total(scrape(url), "kafka_log_logflushstats_logflushrateandtimems_count")
                       - flushes_before == i, timeout=10)
        pd = c.fetch(topic_name, 0, 0, max_bytes=1 << 20)
        assert pd.error_code == 0 and pd.high_watermark == n_batches * per_batch
        fetched = pd.records
        assert len(parse_records(fetched).records) == n_batches * per_batch
        after = scrape(url)
        open_connections = value(after, names.CONNECTIONS.name, listener="PLAINTEXT")

    def delta(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    bytes_in = sum(len(x) for x in batches)
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name) == n_batches * per_batch
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic=topic_name) == bytes_in
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") - \
        value(before, "kafka_server_brokertopicmetrics_messagesin_total") == n_batches * per_batch
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total") - \
        value(before, "kafka_server_brokertopicmetrics_bytesin_total") == bytes_in
    # the fetch returned every batch as stored: as many bytes out as went in
    assert len(fetched) == bytes_in
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name) == bytes_in
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total") - \
        value(before, "kafka_server_brokertopicmetrics_bytesout_total") == bytes_in
    assert delta("kafka_server_brokertopicmetrics_replicationbytesout_total") == 0
    # requests per API: exactly this client's
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == n_batches
    assert delta("kafka_network_requestmetrics_requests_total", request="Fetch") == 1
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == n_batches
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Fetch") == 1
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    produce_versions = {dict(ls)["version"] for (n, ls), v in after.items()
                        if n == "kafka_network_requestmetrics_requests_total" and dict(ls)["request"] == "Produce"}
    assert len(produce_versions) == 1
    p99 = value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    p50 = value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.5")
    assert 0 < p50 <= p99
    assert total(after, "kafka_log_logflushstats_logflushrateandtimems_count") - flushes_before == n_batches
    # a single broker: everything led here, in sync, the controller active
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_server_replicamanager_partitioncount") == 1
    assert value(after, "kafka_server_replicamanager_leadercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert delta("kafka_server_replicamanager_isrshrinks_total") == 0
    assert {dict(ls)["delayedOperation"] for (n, ls) in after
            if n == "kafka_server_delayedoperationpurgatory_purgatorysize"} == \
        {"Produce", "Fetch", "DeleteRecords", "Heartbeat", "Rebalance"}
    assert value(after, "kafkalite_eventloop_lag_ms_count") > 0
    # this client's connection goes away from the count once closed
    wait_until(lambda: value(scrape(url), names.CONNECTIONS.name, listener="PLAINTEXT") == open_connections - 1,
               timeout=10)


def documented_metric_names() -> list[str]:
    """The first column of the table in docs/operations.md's Metrics section."""
    text = OPERATIONS_MD.read_text()
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)`", section, re.M)


def test_every_documented_metric_is_exported_and_every_exported_one_documented(
        metrics_broker: tuple[BrokerProcess, str], topic_name: str) -> None:
    b, url = metrics_broker
    create_topic(b.bootstrap_servers, topic_name, 1)
    with RawClient(b.bootstrap_servers) as c:
        assert c.produce(topic_name, 0, build_batch([Rec(key=None, value=b"x")])).error_code == 0
        assert c.fetch(topic_name, 0, 0).error_code == 0
    documented = documented_metric_names()
    assert documented == [n for m in names.ALL for n in m.exposed]
    exported = {name for name, _labels in scrape(url)}
    assert sorted(set(documented) - exported) == []
    ours = {n for n in exported if n.startswith(("kafka_", "kafkalite_"))}
    assert sorted(ours - set(documented)) == []
