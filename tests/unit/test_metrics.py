"""kafkalite.metrics in process: the counters (stats), the ISR meters fed by a real Partition, the
config property, and the Prometheus endpoint's collector reading the loop from its HTTP thread."""
from __future__ import annotations

import asyncio
import struct
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Optional

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.config.log_config import LogConfig
from kafkalite.config.server_config import ConfigError, build_config
from kafkalite.log.log import Log
from kafkalite.log.record_batch import build_batch
from kafkalite.metrics import names
from kafkalite.metrics.prometheus import BrokerCollector, BrokerMetricSources, PrometheusEndpoint
from kafkalite.metrics.stats import (WINDOW, BrokerTopicStats, EventLoopLagMonitor, IsrChangeStats,
                                     LogFlushStats, RequestMetrics, Window, quantile)
from kafkalite.network.socket_server import CloseConnection
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.replica.alter_partition_manager import LeaderAndIsr
from kafkalite.replica.partition import Partition, ReplicationContext
from kafkalite.server.event_loop_monitor import EventLoopMonitor


def test_quantiles_interpolate_as_yammer_snapshots() -> None:
    values = [float(v) for v in range(1, 11)]     # 1..10
    assert quantile(values, 0.5) == 5.5           # pos 5.5: between the 5th and 6th
    assert quantile(values, 0.75) == 8.25
    assert quantile(values, 0.99) == 10.0         # pos >= n: the largest
    assert quantile([3.0], 0.5) == 3.0 and quantile([], 0.99) == 0.0
    assert quantile(values, 0.05) == 1.0          # pos < 1: the smallest


def test_a_window_keeps_the_latest_samples_and_all_time_count_and_sum() -> None:
    w = Window()
    for v in range(WINDOW + 10):
        w.add(float(v))
    snap = w.snapshot()
    assert snap.count == WINDOW + 10 and snap.sum == sum(range(WINDOW + 10))
    assert sorted(snap.samples) == [float(v) for v in range(10, WINDOW + 10)]
    assert snap.max == WINDOW + 9
    # pos 0.999 * 1025 = 1023.975: between the 1023rd and 1024th of 10..1033
    assert dict(snap.quantiles())[0.999] == pytest.approx(1032.975)


def test_broker_topic_stats_per_topic_all_topics_and_replication() -> None:
    s = BrokerTopicStats()
    s.record_append("a", 100, 3)
    s.record_append("b", 50, 1)
    s.record_append("a", 10, 2)
    s.record_bytes_out(False, [("a", 70), ("b", 0)])
    s.record_bytes_out(True, [("a", 500), ("b", 5)])     # a follower's fetch
    topics, all_topics, replication = s.snapshot()
    assert {t: stats.values() for t, stats in topics} == {"a": (110, 5, 70), "b": (50, 1, 0)}
    assert all_topics == (160, 6, 70) and replication == 505


def frame(api_key: int, version: int) -> memoryview:
    return memoryview(struct.pack(">hhi", api_key, version, 1) + b"\x00\x00")


def test_request_metrics_count_by_api_and_version_and_skip_closed_connections() -> None:
    metrics = RequestMetrics()

    async def handler(conn: Any, f: memoryview) -> Optional[bytes]:
        if f[0:2] == b"\x00\x09":
            raise CloseConnection("unknown")
        await asyncio.sleep(0.01)
        return b"answer"

    async def main() -> None:
        handle = metrics.instrument(handler)
        for key, version in ((0, 9), (0, 9), (0, 7), (1, 12)):
            assert await handle(None, frame(key, version)) == b"answer"
        with pytest.raises(CloseConnection):
            await handle(None, frame(9, 1))
    asyncio.run(main())
    snap = {name: (versions, window) for name, versions, window in metrics.snapshot()}
    assert list(snap) == ["Produce", "Fetch"]
    assert snap["Produce"][0] == {9: 2, 7: 1} and snap["Fetch"][0] == {12: 1}
    assert snap["Produce"][1].count == 3 and min(snap["Produce"][1].samples) >= 10.0


def test_log_flush_stats_time_successful_calls() -> None:
    stats = LogFlushStats()
    calls: list[int] = []

    @stats.timed
    def flush(n: int) -> int:
        if n < 0:
            raise OSError("disk gone")
        calls.append(n)
        return n * 2

    assert flush(1) == 2 and flush(2) == 4
    with pytest.raises(OSError):
        flush(-1)
    assert calls == [1, 2] and stats.snapshot().count == 2


def test_the_lag_monitor_sees_a_blocked_loop() -> None:
    async def main() -> float:
        lag = EventLoopLagMonitor()
        monitor = EventLoopMonitor(interval_ms=50)
        monitor.on_sample = lag.record
        monitor.start()
        await asyncio.sleep(0.12)
        time.sleep(0.3)                  # the loop blocked: the next timer fires about 0.25 s late
        await asyncio.sleep(0.12)
        await monitor.close()
        return lag.snapshot().max
    assert asyncio.run(main()) >= 200.0


# -- the ISR meters, fed by a leader Partition as the controller answers -----------------------

class Recorder:
    def __init__(self) -> None:
        self.proposals: list[tuple[LeaderAndIsr, asyncio.Future[LeaderAndIsr]]] = []

    def submit(self, tp: TopicPartition, topic_id: uuid.UUID, leader_and_isr: LeaderAndIsr,
               controller_epoch: int) -> "asyncio.Future[LeaderAndIsr]":
        future: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        self.proposals.append((leader_and_isr, future))
        return future


def test_isr_expansions_and_shrinks_count_when_the_controller_accepts(tmp_path: Path) -> None:
    async def main() -> IsrChangeStats:
        stats, recorder, now = IsrChangeStats(), Recorder(), [1_000_000]
        log = Log.open(tmp_path / "t-0", LogConfig(segment_index_bytes=64 * 1024))
        ctx = ReplicationContext(replica_lag_time_max_ms=10_000, alter_partition_manager=recorder,  # type: ignore[arg-type]
                                 now_ms=lambda: now[0], mark_isr_change=stats.mark)
        p = Partition(TopicPartition("t", 0), uuid.UUID(int=1), log, 1, ctx)
        p.make_leader(1, [1, 2, 3], [1, 2], partition_epoch=0, controller_epoch=1)
        p.append_records_to_leader(build_batch([(None, b"v", now[0])]), 1, now[0])
        p.update_follower_fetch_state(2, 1, 0, now[0], 1)
        p.update_follower_fetch_state(3, 1, 0, now[0], 1)     # 3 caught up: expansion proposed
        recorder.proposals[-1][1].set_result(LeaderAndIsr(1, 1, (1, 2, 3), 0, 1))
        await asyncio.sleep(0)
        assert (stats.expands, stats.shrinks) == (1, 0)
        p.append_records_to_leader(build_batch([(None, b"w", now[0])]), 1, now[0])
        now[0] += 10_001                                        # 3 silent past the lag limit
        p.update_follower_fetch_state(2, 2, 0, now[0], 2)
        assert p.maybe_shrink_isr()
        recorder.proposals[-1][1].set_result(LeaderAndIsr(1, 1, (1, 2), 0, 2))
        await asyncio.sleep(0)
        assert p.isr == {1, 2}
        p.append_records_to_leader(build_batch([(None, b"x", now[0])]), 1, now[0])
        now[0] += 10_001
        assert p.maybe_shrink_isr()                             # 2 silent too: proposed, refused
        recorder.proposals[-1][1].set_exception(KafkaApiError(ErrorCode.OPERATION_NOT_ATTEMPTED))
        await asyncio.sleep(0)
        assert p.isr == {1, 2}
        log.close()
        return stats
    stats = asyncio.run(main())
    assert (stats.expands, stats.shrinks) == (1, 1)


# -- config ------------------------------------------------------------------------------------

def test_the_endpoint_property_is_off_by_default_and_checked() -> None:
    cfg = build_config({}).config
    assert (cfg.kafkalite_metrics_prometheus_port, cfg.kafkalite_metrics_prometheus_host) == (None, "")
    cfg = build_config({"kafkalite.metrics.prometheus.port": "9404",
                        "kafkalite.metrics.prometheus.host": "127.0.0.1"}).config
    assert (cfg.kafkalite_metrics_prometheus_port, cfg.kafkalite_metrics_prometheus_host) == (9404, "127.0.0.1")
    assert build_config({"kafkalite.metrics.prometheus.port": "9404"}).warnings == []
    with pytest.raises(ConfigError) as e:
        build_config({"kafkalite.metrics.prometheus.port": "65536"})
    assert str(e.value) == ("invalid value '65536' for configuration 'kafkalite.metrics.prometheus.port': "
                            "must be an integer between 0 and 65535")


# -- the endpoint ------------------------------------------------------------------------------

def sources(**kw: Any) -> BrokerMetricSources:
    return BrokerMetricSources(broker_topic_stats=BrokerTopicStats(), request_metrics=RequestMetrics(),
                               isr_stats=IsrChangeStats(), lag_monitor=EventLoopLagMonitor(), **kw)


def test_the_collector_refuses_to_wait_for_its_own_loop() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError):
            list(BrokerCollector(asyncio.get_running_loop(), sources()).collect())
    asyncio.run(main())


def test_the_endpoint_serves_a_snapshot_taken_on_the_loop_and_unbinds_on_stop() -> None:
    src = sources(connection_counts=lambda: {"PLAINTEXT": 3})
    src.broker_topic_stats.record_append("t", 123, 4)
    loop_threads: list[threading.Thread] = []
    real = src.connection_counts

    def counts() -> dict[str, int]:
        loop_threads.append(threading.current_thread())     # where the snapshot is taken
        return real()
    src.connection_counts = counts

    def get(url: str) -> str:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()

    async def main() -> tuple[str, str]:
        endpoint = PrometheusEndpoint("127.0.0.1", 0, src)
        host, port = endpoint.start()
        url = f"http://{host}:{port}/metrics"
        text = await asyncio.to_thread(get, url)
        await endpoint.stop()
        with pytest.raises(urllib.error.URLError):
            await asyncio.to_thread(get, url)
        return text, threading.current_thread().name
    text, loop_thread = asyncio.run(main())
    assert [t.name for t in loop_threads] == [loop_thread]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "t"),))] == 123
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 4
    assert samples[(names.CONNECTIONS.name, (("listener", "PLAINTEXT"),))] == 3
    assert samples[(names.ACTIVE_CONTROLLER.name, ())] == 0
    assert ("process_open_fds", ()) in samples


def test_partition_gauges_count_leaders_under_replicated_and_offline() -> None:
    from types import SimpleNamespace as NS

    from kafkalite.controller.states import PartitionState
    from kafkalite.metrics.prometheus import offline_partition_count, partition_counts, take_snapshot
    partitions = {
        TopicPartition("a", 0): NS(is_leader=True, isr={1, 2}, replicas=[1, 2]),
        TopicPartition("a", 1): NS(is_leader=True, isr={1}, replicas=[1, 2, 3]),      # under-replicated
        TopicPartition("a", 2): NS(is_leader=False, isr={2}, replicas=[1, 2]),        # a follower here
    }
    controller = NS(is_active=True, context=NS(
        partition_states={TopicPartition("a", 0): PartitionState.OnlinePartition,
                          TopicPartition("b", 0): PartitionState.OfflinePartition,
                          TopicPartition("c", 0): PartitionState.OfflinePartition},
        topics_to_be_deleted={"c"}))
    snap = take_snapshot(sources(replica_manager=NS(partitions=partitions), controller=controller))
    assert partition_counts(snap) == (3, 2, 1)
    assert (snap.active_controller, offline_partition_count(snap)) == (1, 1)   # c is being deleted
    controller.is_active = False
    snap = take_snapshot(sources(replica_manager=NS(partitions=partitions), controller=controller))
    assert (snap.active_controller, offline_partition_count(snap)) == (0, 0)
