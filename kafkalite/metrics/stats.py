"""The counters themselves: plain attributes bumped on the event loop, read by the Prometheus
collector through a snapshot taken on the loop (kafkalite.metrics.prometheus), so nothing here
needs a lock — except LogFlushStats, whose fsyncs may run in worker threads.

Kafka's Yammer meters become monotonic counters (Prometheus derives the rate); its histograms
and timers become a count, a sum and a sliding window of the latest samples from which the
quantiles Kafka reports (50th ... 99.9th percentile) are computed at scrape time."""
from __future__ import annotations

import functools
import struct
import threading
import time
from typing import Any, Awaitable, Callable, Iterable, TypeVar

from kafka.protocol.api_key import ApiKey


R = TypeVar("R")

# Kafka's Yammer histograms keep 1028 samples; a plain sliding window of about that many
# bounds the memory and the scrape-time sort alike.
WINDOW = 1024
# The percentiles Kafka's JMX histograms expose (50thPercentile ... 999thPercentile)
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


class Window:
    """The latest WINDOW samples of a histogram, with their all-time count and sum."""

    __slots__ = ("samples", "next", "count", "sum")

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.next = 0
        self.count = 0
        self.sum = 0.0

    def add(self, value: float) -> None:
        if len(self.samples) < WINDOW:
            self.samples.append(value)
        else:
            self.samples[self.next] = value
            self.next = (self.next + 1) % WINDOW
        self.count += 1
        self.sum += value

    def snapshot(self) -> "WindowSnapshot":
        return WindowSnapshot(list(self.samples), self.count, self.sum)


class WindowSnapshot:
    __slots__ = ("samples", "count", "sum")

    def __init__(self, samples: list[float], count: int, total: float) -> None:
        self.samples = samples
        self.count = count
        self.sum = total

    def quantiles(self) -> list[tuple[float, float]]:
        """(q, value) for Kafka's percentiles, Yammer's Snapshot.getValue interpolation; 0 with
        no samples, as Kafka's histograms read before any update."""
        values = sorted(self.samples)
        return [(q, quantile(values, q)) for q in QUANTILES]

    @property
    def max(self) -> float:
        return max(self.samples, default=0.0)


def quantile(sorted_values: list[float], q: float) -> float:
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return sorted_values[0]
    if pos >= n:
        return sorted_values[-1]
    lower = sorted_values[int(pos) - 1]
    upper = sorted_values[int(pos)]
    return lower + (pos - int(pos)) * (upper - lower)


# ---------------------------------------------------------------------------------------------
# BrokerTopicMetrics


class TopicStats:
    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0

    def values(self) -> tuple[int, int, int]:
        return self.bytes_in, self.messages_in, self.bytes_out


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: bytes and messages in per topic and for all topics (counted by
    the replica manager's leader appends, clients' and coordinators' alike, as Kafka's
    appendToLocalLog counts them), bytes out of consumer fetches per topic; follower fetches
    count as replication bytes out instead."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.all_topics = TopicStats()
        self.replication_bytes_out = 0

    def _topic(self, topic: str) -> TopicStats:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = TopicStats()
        return stats

    def record_append(self, topic: str, size: int, messages: int) -> None:
        stats = self._topic(topic)
        stats.bytes_in += size
        stats.messages_in += messages
        total = self.all_topics
        total.bytes_in += size
        total.messages_in += messages

    def record_bytes_out(self, from_follower: bool, sizes: Iterable[tuple[str, int]]) -> None:
        """A Fetch answered: (topic, record bytes) of each partition in the response."""
        if from_follower:
            self.replication_bytes_out += sum(size for _topic, size in sizes)
            return
        for topic, size in sizes:
            if size:
                self._topic(topic).bytes_out += size
                self.all_topics.bytes_out += size

    def snapshot(self) -> tuple[list[tuple[str, TopicStats]], tuple[int, int, int], int]:
        """On the loop: a C-speed copy of the per-topic entries (their int attributes are read
        later, from the scrape's thread: each is replaced whole, so it reads as some recent value)."""
        return list(self.topics.items()), self.all_topics.values(), self.replication_bytes_out


# ---------------------------------------------------------------------------------------------
# RequestMetrics

_API_NAMES: dict[int, str] = {k.value: k.name for k in ApiKey}
_PEEK = struct.Struct(">hh")


class ApiRequestStats:
    __slots__ = ("name", "versions", "total_time_ms")

    def __init__(self, name: str) -> None:
        self.name = name
        self.versions: dict[int, int] = {}
        self.total_time_ms = Window()


class RequestMetrics:
    """Kafka's RequestMetrics per API: RequestsPerSec by version and TotalTimeMs (received to
    answered; kafkalite's time excludes writing the response to the socket)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiRequestStats] = {}

    def record(self, api_key: int, api_version: int, elapsed_ms: float) -> None:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiRequestStats(_API_NAMES.get(api_key, f"ApiKey{api_key}"))
        versions = stats.versions
        versions[api_version] = versions.get(api_version, 0) + 1
        stats.total_time_ms.add(elapsed_ms)

    def instrument(self, handler: Callable[[Any, memoryview], Awaitable[R]]
                   ) -> Callable[[Any, memoryview], Awaitable[R]]:
        """The socket server's request handler, timed. A request that closes the connection
        (malformed, unknown api) is not counted."""
        record = self.record
        clock = time.perf_counter
        peek = _PEEK.unpack_from

        async def handle(conn: Any, frame: memoryview) -> R:
            started = clock()
            response = await handler(conn, frame)
            api_key, api_version = peek(frame, 0)
            record(api_key, api_version, (clock() - started) * 1000.0)
            return response
        return handle

    def snapshot(self) -> list[tuple[str, dict[int, int], WindowSnapshot]]:
        return [(s.name, dict(s.versions), s.total_time_ms.snapshot())
                for _key, s in sorted(self.apis.items())]


# ---------------------------------------------------------------------------------------------
# ReplicaManager's ISR meters


class IsrChangeStats:
    """IsrShrinksPerSec / IsrExpandsPerSec: ISR changes the controller accepted (Kafka marks them
    in Partition.handleAlterPartitionUpdate)."""

    __slots__ = ("shrinks", "expands")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def mark(self, expand: bool) -> None:
        if expand:
            self.expands += 1
        else:
            self.shrinks += 1


# ---------------------------------------------------------------------------------------------
# LogFlushStats


class LogFlushStats:
    """Kafka's LogFlushStats.LogFlushRateAndTimeMs: one sample per segment flush. A process-wide
    object as in Kafka (a static timer there); flushes may run in worker threads, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window = Window()

    def record(self, elapsed_ms: float) -> None:
        with self._lock:
            self._window.add(elapsed_ms)

    def timed(self, fn: Callable[..., R]) -> Callable[..., R]:
        """Decorator: time each successful call of `fn`."""
        clock = time.perf_counter

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            started = clock()
            result = fn(*args, **kwargs)
            self.record((clock() - started) * 1000.0)
            return result
        return wrapper

    def snapshot(self) -> WindowSnapshot:
        with self._lock:
            return self._window.snapshot()


LOG_FLUSH_STATS = LogFlushStats()


# ---------------------------------------------------------------------------------------------
# Event-loop lag


class EventLoopLagMonitor:
    """The event-loop lag percentiles: a window of how late the loop ran a periodic callback,
    fed through `record` by the broker's one loop monitor (kafkalite.server.event_loop_monitor)."""

    def __init__(self) -> None:
        self.lag_ms = Window()

    def record(self, lag_ms: float) -> None:
        self.lag_ms.add(max(0.0, lag_ms))

    def snapshot(self) -> WindowSnapshot:
        return self.lag_ms.snapshot()
