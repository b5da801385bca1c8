#!/usr/bin/env python3
"""Scale measurements of scripts/bench.py (issue 13): many partitions, restart, resources, stalls.

  produce-N  -- a fresh broker; CreateTopics of one N-partition topic (timed until every partition
                has a leader), then `--scale-messages` 1 KiB values spread round-robin over the N
                partitions (first produce to final flush), then VmRSS and open descriptors of the
                broker process against the same figures before the topic existed.
  restart-N  -- on that broker (or a fresh one with the N-partition topic): one record produced to
                every partition, SIGTERM (time to exit), restart on the same log dir; again one
                record to every partition, SIGKILL, restart. Ready, defined identically for both
                brokers and clocked from the spawn: (a) Metadata shows all N partitions with a
                leader, (b) one record produced to each partition has been acknowledged (acks=1).
  stall-*    -- another client's small request while a load runs: a subprocess sends one
                ApiVersions request every `--probe-interval-ms` after the previous answer, on its
                own connection, and records each round trip; p99 and max are the stall figures.
                Loads: stall-fetch (a consumer fetching a 50 MiB partition with
                max.partition.fetch.bytes = 50 MiB), stall-flush (produce into a topic with
                `flush.messages`, so the broker fsyncs every K messages), stall-create (CreateTopics
                of 1,000 partitions until all have leaders). The same probe with no load is shown.

`python scripts/bench_scale.py probe HOST PORT INTERVAL_MS MAX_S` is the probe's own entry point
(bench.py starts it); it stops at EOF on stdin or after MAX_S and prints its samples as JSON.
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

MIB = 1024 * 1024
SCALE_RE = re.compile(r"^(produce|restart)-(\d+)$")
STALL_PHASES = ("stall-fetch", "stall-flush", "stall-create")
STALL_LOADS = ("idle",) + tuple(p.split("-", 1)[1] for p in STALL_PHASES)
# Every client of a scale measurement reconnects and retries quickly, on both brokers alike:
# librdkafka's defaults (100 ms doubling up to 10 s between connection attempts) would time the
# client's back-off instead of the broker's start-up.
FAST_CLIENT = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100,
               "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
               "topic.metadata.refresh.fast.interval.ms": 20, "log_level": 2}
PROBE_SAMPLES_MAX = 2_000_000  # bounds the probe's memory whatever MAX_S says


class ScaleError(RuntimeError):
    """A scale measurement could not be completed; the message says why."""


def scale_phase(phase: str) -> Optional[tuple[str, int]]:
    """"produce-1000" -> ("produce", 1000); None for any other phase name."""
    m = SCALE_RE.match(phase)
    return (m.group(1), int(m.group(2))) if m and int(m.group(2)) > 0 else None


def is_scale_phase(phase: str) -> bool:
    return scale_phase(phase) is not None or phase in STALL_PHASES


# --------------------------------------------------------------------------------------------
# Process resources
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resources:
    rss_kib: int
    fds: int


def process_resources(pid: int) -> Resources:
    """VmRSS (/proc/<pid>/status) and the number of open descriptors (/proc/<pid>/fd)."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
                break
    return Resources(rss, len(os.listdir(f"/proc/{pid}/fd")))


# --------------------------------------------------------------------------------------------
# Produce over many partitions, readiness
# --------------------------------------------------------------------------------------------

def _ck() -> Any:
    import confluent_kafka
    return confluent_kafka


@dataclass
class SpreadResult:
    seconds: float
    messages: int
    bytes: int

    @property
    def mb_s(self) -> float:
        return self.bytes / MIB / self.seconds


def produce_spread(bootstrap: str, topic: str, partitions: int, messages: int, value: bytes,
                   timeout: float, extra: Optional[dict[str, Any]] = None) -> SpreadResult:
    """`messages` values round-robin over `partitions` (linger.ms=5, acks=1, as bench.py's
    produce); first produce to final flush. Only failed deliveries call back into Python."""
    ck = _ck()
    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1",
            "delivery.report.only.error": True, "on_delivery": on_error, "log_level": 2}
    conf.update(extra or {})
    producer = ck.Producer(conf)
    producer.list_topics(topic, timeout=min(timeout, 30.0))
    deadline = time.monotonic() + timeout
    produce = producer.produce
    t0 = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.001)
                if time.monotonic() > deadline:
                    raise ScaleError(f"produce timed out after {timeout:.0f} s at message {i}")
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    t1 = time.perf_counter()
    producer.poll(0)
    if remaining:
        raise ScaleError(f"produce: {remaining} messages undelivered at the {timeout:.0f} s limit")
    if errors:
        raise ScaleError("produce delivery errors: " + "; ".join(errors))
    return SpreadResult(t1 - t0, messages, messages * len(value))


def wait_leaders(bootstrap: str, topic: str, partitions: int, deadline: float,
                 failed: Callable[[], Optional[str]] = lambda: None) -> float:
    """perf_counter() when Metadata first shows `topic` with `partitions` partitions, each with
    a leader. `failed` is asked between polls (a restart that died ends the wait at once)."""
    ck = _ck()
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(dict(FAST_CLIENT, **{"bootstrap.servers": bootstrap}))
    last = "no metadata"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ScaleError(f"{topic}: not all {partitions} partitions led in time: {last}")
        why = failed()
        if why:
            raise ScaleError(why)
        try:
            md = admin.list_topics(topic, timeout=max(0.2, min(2.0, left)))
            t = md.topics.get(topic)
            if t is not None and t.error is None:
                led = sum(1 for p in t.partitions.values() if p.leader >= 0)
                if led == partitions == len(t.partitions):
                    return time.perf_counter()
                last = f"{len(t.partitions)} partitions, {led} with a leader"
            elif t is not None:
                last = str(t.error)
        except ck.KafkaException as e:
            last = str(e)
        time.sleep(0.01)


def produce_to_each(bootstrap: str, topic: str, partitions: int, deadline: float) -> float:
    """One 100-byte record to every partition, acks=1; partitions whose delivery failed
    (a leader not yet ready, say) are produced to again until the deadline. Returns
    perf_counter() when every partition has an acknowledged record."""
    ck = _ck()
    pending = set(range(partitions))
    failed: set[int] = set()
    last_error = [""]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.add(msg.partition())
            last_error[0] = str(err)

    producer = ck.Producer(dict(FAST_CLIENT, **{
        "bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
        "delivery.report.only.error": True, "on_delivery": on_delivery,
        "message.timeout.ms": 5000}))
    value = b"r" * 100
    while pending:
        if time.monotonic() > deadline:
            raise ScaleError(f"{topic}: {len(pending)} of {partitions} partitions took no "
                             f"record in time ({last_error[0] or 'no error reported'})")
        failed.clear()
        for p in sorted(pending):
            while True:
                try:
                    producer.produce(topic, value, partition=p)
                    break
                except BufferError:
                    producer.poll(0.001)
        left = producer.flush(max(0.1, min(10.0, deadline - time.monotonic())))
        if left:
            raise ScaleError(f"{topic}: {left} records unacknowledged after 10 s")
        pending = set(failed)
        if pending:
            time.sleep(0.02)
    return time.perf_counter()


@dataclass
class RestartResult:
    stop_s: Optional[float]  # SIGTERM to exit (None for SIGKILL)
    leaders_s: float         # spawn -> Metadata shows every partition led
    produce_s: float         # spawn -> a record acknowledged by every partition


def measure_restart(target: Any, topic: str, partitions: int, sig: int,
                    timeout: float) -> RestartResult:
    """Records into every partition, stop the broker with `sig`, restart it on the same log dir
    and port; time its readiness from the spawn. `target` has bootstrap, halt(sig) -> seconds to
    exit, respawn() (returns once the process says it is up, or raises)."""
    deadline = time.monotonic() + timeout
    produce_to_each(target.bootstrap, topic, partitions, deadline)
    stop_s = target.halt(sig)
    if sig == signal.SIGKILL and hasattr(target, "wait_session_expired"):
        target.wait_session_expired(timeout)
    failure: list[BaseException] = []

    def respawn() -> None:
        try:
            target.respawn()
        except BaseException as e:  # noqa: BLE001 -- reported by the waiting thread
            failure.append(e)

    starter = threading.Thread(target=respawn, name="bench-respawn", daemon=True)
    deadline = time.monotonic() + timeout
    t0 = time.perf_counter()
    starter.start()
    try:
        leaders_at = wait_leaders(target.bootstrap, topic, partitions, deadline,
                                  lambda: f"restart failed: {str(failure[0])[-1200:]}"
                                  if failure else None)
        produced_at = produce_to_each(target.bootstrap, topic, partitions, deadline)
    finally:
        # The respawn is bounded by the target's own ready timeout (set to `timeout`); waiting
        # it out means a broker that comes up late is still stopped by the caller, never leaked.
        starter.join(timeout + 60.0)
    if failure:
        raise ScaleError(f"restart failed: {str(failure[0])[-1200:]}")
    return RestartResult(stop_s if sig == signal.SIGTERM else None, leaders_at - t0,
                         produced_at - t0)


# --------------------------------------------------------------------------------------------
# Stall probe
# --------------------------------------------------------------------------------------------

def _api_versions_frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, len("stall-probe")) + b"stall-probe"
    return struct.pack(">i", len(body)) + body


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return bytes(buf)


def probe_main(host: str, port: int, interval_ms: float, max_s: float) -> int:
    """ApiVersions v0 round trips on one connection, one every `interval_ms` after the previous
    answer, until EOF on stdin or `max_s`; prints "ready" after the first answer and, at the
    end, {"samples_ms": [...], "error": ...} as one JSON line."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    samples: list[float] = []
    error = None
    end = time.monotonic() + max_s
    try:
        with socket.create_connection((host, port), timeout=30.0) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cid = 0
            while not stop.is_set() and time.monotonic() < end \
                    and len(samples) < PROBE_SAMPLES_MAX:
                cid = (cid + 1) & 0x7FFFFFFF
                t0 = time.perf_counter()
                s.sendall(_api_versions_frame(cid))
                (size,) = struct.unpack(">i", _read_exact(s, 4))
                frame = _read_exact(s, size)
                t1 = time.perf_counter()
                got_cid, code = struct.unpack_from(">ih", frame, 0)
                if got_cid != cid or code != 0:
                    raise ConnectionError(f"answer {got_cid}/{code} to request {cid}")
                if not samples:
                    print("ready", flush=True)
                samples.append((t1 - t0) * 1000.0)
                time.sleep(interval_ms / 1000.0)
    except (OSError, ConnectionError, struct.error) as e:
        error = f"{type(e).__name__}: {e}"
        if not samples:
            print("ready", flush=True)  # let the waiting side read the error below
    print(json.dumps({"samples_ms": samples, "error": error}), flush=True)
    return 0


class StallProbe:
    """The probe subprocess: a process of its own, so that the benchmark's Python work (the
    load's client) can never delay it through the GIL."""

    def __init__(self, bootstrap: str, interval_ms: float, max_s: float) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.cmd = [sys.executable, str(Path(__file__).resolve()), "probe", host, port,
                    str(interval_ms), str(max_s)]
        self.max_s = max_s
        self.proc: Optional[subprocess.Popen[str]] = None

    def start(self, timeout: float = 30.0) -> "StallProbe":
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, start_new_session=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.kill()
            raise ScaleError(f"stall probe did not start: {line!r}")
        return self

    def finish(self) -> list[float]:
        """Stops the probe; its samples (ms). Raises if its connection failed meanwhile."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            out, _ = self.proc.communicate(timeout=30)  # closes stdin: the probe's stop
        finally:
            self.kill()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines:
            raise ScaleError("stall probe printed no samples")
        report = json.loads(lines[-1])
        if report["error"]:
            raise ScaleError(f"stall probe: {report['error']} after "
                             f"{len(report['samples_ms'])} answers")
        return list(report["samples_ms"])

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> "StallProbe":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def percentile(samples: list[float], pct: float) -> float:
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(pct / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


@dataclass
class StallResult:
    samples_ms: list[float]
    load_s: float  # how long the load ran

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    @property
    def max(self) -> float:
        return max(self.samples_ms)


def measure_stall(bootstrap: str, load: Callable[[], Any], interval_ms: float,
                  timeout: float) -> StallResult:
    """The probe's round trips while `load()` runs (started once the probe has its first answer,
    stopped when the load returned)."""
    probe = StallProbe(bootstrap, interval_ms, timeout + 30.0)
    with probe:
        t0 = time.perf_counter()
        load()
        load_s = time.perf_counter() - t0
        samples = probe.finish()
    if len(samples) < 2:
        raise ScaleError(f"stall probe: only {len(samples)} answers")
    return StallResult(samples, load_s)


def fetch_big(bootstrap: str, topic: str, messages: int, fetch_bytes: int, fetches: int,
              timeout: float) -> None:
    """`fetches` times: a fresh consumer reads the whole 1-partition topic from offset 0, with
    max.partition.fetch.bytes = fetch.max.bytes = `fetch_bytes`, so that one Fetch carries it."""
    ck = _ck()
    deadline = time.monotonic() + timeout
    for _ in range(fetches):
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-stall-fetch",
                         "enable.auto.commit": False, "fetch.max.bytes": fetch_bytes,
                         "max.partition.fetch.bytes": fetch_bytes,
                         "receive.message.max.bytes": fetch_bytes + MIB, "log_level": 2})
        try:
            c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
            n = 0
            while n < messages:
                if time.monotonic() > deadline:
                    raise ScaleError(f"stall-fetch: {n}/{messages} read at the time limit")
                for m in c.consume(num_messages=100000, timeout=0.2):
                    if m.error():
                        if m.error().code() != ck.KafkaError._PARTITION_EOF:
                            raise ScaleError(f"stall-fetch: {m.error()}")
                        continue
                    n += 1
        finally:
            c.close()


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float,
                 config: Optional[dict[str, str]] = None) -> float:
    """CreateTopics through an AdminClient, then until every partition has a leader; seconds."""
    from confluent_kafka.admin import AdminClient, NewTopic
    t0 = time.perf_counter()
    # socket.timeout.ms: librdkafka gives up on any request after 60 s by default, whatever
    # request_timeout says (300 s at most); a 10,000-partition CreateTopics on a loaded machine
    # can take longer
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2,
                         "socket.timeout.ms": int(min(max(timeout, 60.0), 300.0) * 1000)})
    fut = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                              operation_timeout=timeout, request_timeout=timeout)[topic]
    fut.result(timeout)
    wait_leaders(bootstrap, topic, partitions, time.monotonic() + timeout)
    return time.perf_counter() - t0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "probe":
        sys.exit(probe_main(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                            float(sys.argv[5])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
