"""The Prometheus endpoint: prometheus_client's HTTP server in its own thread, and a collector
that reads the broker through a snapshot taken ON the event loop.

Why a snapshot on the loop: the broker's state (partitions, purgatories, the controller's
context, connections) is mutated by the loop without locks; iterating those dicts from the HTTP
thread could fail or see half an update. So a scrape asks the loop for plain values (a call
scheduled with call_soon_threadsafe, waited for in the HTTP thread), and does everything else —
quantiles, text rendering, the socket — in its own thread. The loop's share is a copy of a few
counters and C-speed copies of the partition and controller-state collections (a list() of 10,000
partitions takes well under a millisecond); the per-partition counting (under-replicated, leaders,
offline) runs in the HTTP thread over those copies. It reads only attributes the loop replaces
whole (a partition's `isr` set, `replicas` list, leader id), never iterates a live container, so
each partition is seen in a consistent state, though not all at one instant."""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kafkalite.metrics import names
from kafkalite.metrics.stats import (LOG_FLUSH_STATS, BrokerTopicStats, EventLoopLagMonitor, IsrChangeStats,
                                     RequestMetrics, TopicStats, WindowSnapshot)

log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 10.0


@dataclass
class BrokerSnapshot:
    """Plain values copied on the event loop."""
    topics: list[tuple[str, TopicStats]] = field(default_factory=list)
    all_topics: tuple[int, int, int] = (0, 0, 0)
    replication_bytes_out: int = 0
    requests: list[tuple[str, dict[int, int], WindowSnapshot]] = field(default_factory=list)
    purgatories: list[tuple[str, int, int]] = field(default_factory=list)   # name, watched, delayed
    partitions: list[Any] = field(default_factory=list)     # the replica manager's Partition objects
    isr_shrinks: int = 0
    isr_expands: int = 0
    active_controller: int = 0
    # the active controller's (partition, state) pairs and the topics queued for deletion
    partition_states: list[tuple[Any, Any]] = field(default_factory=list)
    topics_being_deleted: frozenset[str] = frozenset()
    connections: dict[str, int] = field(default_factory=dict)
    event_loop_lag: Optional[WindowSnapshot] = None
    log_flush: Optional[WindowSnapshot] = None


@dataclass
class BrokerMetricSources:
    """What a snapshot reads. The counters are kafkalite.metrics.stats objects; the rest are the
    broker's components, read duck-typed (this package imports nothing from the server)."""
    broker_topic_stats: BrokerTopicStats
    request_metrics: RequestMetrics
    isr_stats: IsrChangeStats
    lag_monitor: EventLoopLagMonitor
    replica_manager: Any = None            # .partitions: {tp: Partition}
    purgatories: Callable[[], Iterable[Any]] = lambda: ()   # each with .name, .watched, .delayed
    controller: Any = None                 # KafkaController: .is_active, .context.partition_states
    connection_counts: Callable[[], dict[str, int]] = dict


def offline_partition_count(snap: BrokerSnapshot) -> int:
    """Kafka's ControllerContext.offlinePartitionCount: partitions in OfflinePartition state, topics
    queued for deletion left out (no states are copied off a broker that is not the active controller)."""
    deleting = snap.topics_being_deleted
    return sum(1 for tp, state in snap.partition_states
               if state.name == "OfflinePartition" and tp.topic not in deleting)


def partition_counts(snap: BrokerSnapshot) -> tuple[int, int, int]:
    """(hosted, led, under-replicated): Kafka's PartitionCount, LeaderCount and
    UnderReplicatedPartitions (led here with an ISR smaller than the replica set)."""
    leaders = under = 0
    for p in snap.partitions:
        if p.is_leader:
            leaders += 1
            if len(p.isr) < len(p.replicas):
                under += 1
    return len(snap.partitions), leaders, under


def take_snapshot(src: BrokerMetricSources) -> BrokerSnapshot:
    """Runs on the event loop: copies only (no per-partition Python loop), no awaits."""
    snap = BrokerSnapshot()
    snap.topics, snap.all_topics, snap.replication_bytes_out = src.broker_topic_stats.snapshot()
    snap.requests = src.request_metrics.snapshot()
    snap.purgatories = [(p.name, p.watched, p.delayed) for p in src.purgatories()]
    if src.replica_manager is not None:
        snap.partitions = list(src.replica_manager.partitions.values())
    snap.isr_shrinks, snap.isr_expands = src.isr_stats.shrinks, src.isr_stats.expands
    controller = src.controller
    if controller is not None and controller.is_active:
        snap.active_controller = 1
        snap.partition_states = list(controller.context.partition_states.items())
        snap.topics_being_deleted = frozenset(controller.context.topics_to_be_deleted)
    snap.connections = src.connection_counts()
    snap.event_loop_lag = src.lag_monitor.snapshot()
    snap.log_flush = LOG_FLUSH_STATS.snapshot()
    return snap


def _summary(metric: names.MetricName, labels: dict[str, str], window: WindowSnapshot) -> Metric:
    family = Metric(metric.name, metric.help, "summary")
    _add_summary(family, labels, window)
    return family


def _add_summary(family: Metric, labels: dict[str, str], window: WindowSnapshot) -> None:
    for q, value in window.quantiles():
        family.add_sample(family.name, {**labels, "quantile": repr(q)}, value)
    family.add_sample(family.name + "_count", labels, window.count)
    family.add_sample(family.name + "_sum", labels, window.sum)


def render(snap: BrokerSnapshot) -> Iterator[Metric]:
    """The metric families of a snapshot (runs in the HTTP thread)."""
    topic_values = sorted((topic, stats.values()) for topic, stats in snap.topics)
    for metric, index in ((names.BYTES_IN, 0), (names.MESSAGES_IN, 1), (names.BYTES_OUT, 2)):
        family = CounterMetricFamily(metric.name, metric.help, labels=None)
        family.add_metric([], snap.all_topics[index])
        for topic, values in topic_values:
            family.add_sample(metric.name + "_total", {"topic": topic}, values[index])
        yield family
    yield CounterMetricFamily(names.REPLICATION_BYTES_OUT.name, names.REPLICATION_BYTES_OUT.help,
                              value=snap.replication_bytes_out)

    requests = CounterMetricFamily(names.REQUESTS.name, names.REQUESTS.help, labels=("request", "version"))
    total_time = Metric(names.TOTAL_TIME.name, names.TOTAL_TIME.help, "summary")
    for api, versions, window in snap.requests:
        for version, count in sorted(versions.items()):
            requests.add_metric([api, str(version)], count)
        _add_summary(total_time, {"request": api}, window)
    yield requests
    yield total_time

    size = GaugeMetricFamily(names.PURGATORY_SIZE.name, names.PURGATORY_SIZE.help, labels=("delayedOperation",))
    delayed = GaugeMetricFamily(names.NUM_DELAYED.name, names.NUM_DELAYED.help, labels=("delayedOperation",))
    for name, watched, waiting in snap.purgatories:
        size.add_metric([name], watched)
        delayed.add_metric([name], waiting)
    yield size
    yield delayed

    hosted, led, under_replicated = partition_counts(snap)
    for metric, value in ((names.UNDER_REPLICATED, under_replicated),
                          (names.PARTITION_COUNT, hosted),
                          (names.LEADER_COUNT, led),
                          (names.ACTIVE_CONTROLLER, snap.active_controller),
                          (names.OFFLINE_PARTITIONS, offline_partition_count(snap))):
        yield GaugeMetricFamily(metric.name, metric.help, value=value)
    for metric, value in ((names.ISR_SHRINKS, snap.isr_shrinks), (names.ISR_EXPANDS, snap.isr_expands)):
        yield CounterMetricFamily(metric.name, metric.help, value=value)

    if snap.log_flush is not None:
        yield _summary(names.LOG_FLUSH, {}, snap.log_flush)
    connections = GaugeMetricFamily(names.CONNECTIONS.name, names.CONNECTIONS.help, labels=("listener",))
    for listener, count in sorted(snap.connections.items()):
        connections.add_metric([listener], count)
    yield connections
    if snap.event_loop_lag is not None:
        yield _summary(names.EVENT_LOOP_LAG, {}, snap.event_loop_lag)
        yield GaugeMetricFamily(names.EVENT_LOOP_LAG_MAX.name, names.EVENT_LOOP_LAG_MAX.help,
                                value=snap.event_loop_lag.max)


class BrokerCollector:
    """A prometheus_client collector: each collect() (in the HTTP thread) takes one snapshot on
    the broker's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sources: BrokerMetricSources) -> None:
        self._loop = loop
        self._sources = sources

    def describe(self) -> list[Metric]:
        return []   # names are not checked against other collectors at registration

    def collect(self) -> Iterator[Metric]:
        try:
            running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("BrokerCollector.collect would wait for the loop it runs on")
        future: concurrent.futures.Future[BrokerSnapshot] = concurrent.futures.Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(take_snapshot(self._sources))
                except BaseException as e:  # handed to the scrape, which answers 500
                    future.set_exception(e)
        try:
            self._loop.call_soon_threadsafe(run)
        except RuntimeError:   # the loop is closed: the broker is gone
            return iter(())
        snap = future.result(timeout=SNAPSHOT_TIMEOUT_S)
        return render(snap)


class PrometheusEndpoint:
    """`kafkalite.metrics.prometheus.port`: prometheus_client's WSGI server (a daemon thread)
    with this broker's registry."""

    def __init__(self, host: str, port: int, sources: BrokerMetricSources) -> None:
        self.host = host
        self.port = port
        self.sources = sources
        self.registry = CollectorRegistry(auto_describe=False)
        self._httpd: Optional[WSGIServer] = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> tuple[str, int]:
        """Bind and serve; returns the bound (host, port). Call on the event loop."""
        loop = asyncio.get_running_loop()
        self.registry.register(BrokerCollector(loop, self.sources))   # type: ignore[arg-type]
        ProcessCollector(registry=self.registry)      # RSS, open descriptors, CPU seconds
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        # binding is one quick syscall; serving happens in prometheus_client's thread
        self._httpd, self._thread = start_http_server(self.port, addr=self.host or "0.0.0.0", registry=self.registry)
        self.port = self._httpd.server_port
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host or "0.0.0.0", self.port)
        return self.host or "0.0.0.0", self.port

    async def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        # shutdown() waits for serve_forever's poll loop (up to half a second): off the event loop
        await asyncio.to_thread(httpd.shutdown)
        httpd.server_close()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
