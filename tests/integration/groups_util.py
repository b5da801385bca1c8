"""Consumer-group test helpers: group members as subprocesses that report what they do as JSON
lines, producers of exactly known records, and checks of what a group consumed.

A member runs in its own process so that a test can SIGKILL it (a crashed consumer) and so that
kafka-python 2.0.2 can run from its own virtualenv. This file is also the member program:
`python groups_util.py --client kafka-python|confluent|aiokafka ...`. Run that way it needs only
the standard library and the client library, so the test-side imports below are skipped then.

A member subscribes to one topic, polls, reports every record as [partition, offset, value],
then commits exactly what it consumed (synchronously, `offset of last record + 1` per partition)
and reports the commit. Events on stdout, one JSON object per line, each with `t` =
time.monotonic() (CLOCK_MONOTONIC is system wide, so times compare across processes):
  started, assigned {added, assignment}, revoked {removed, assignment}, lost {removed, assignment},
  records {recs}, committed {offsets}, commit_failed {offsets, error}, client_error {error},
  nocommit (acknowledges the command), closing (stopped polling, about to close), closed,
  fatal {error}.
Commands on stdin, one per line: `nocommit` (keep consuming, stop committing) and `close`
(clean close: LeaveGroup, except for static members). End of stdin also closes.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

if __name__ != "__main__":  # the test side; the member program needs only stdlib + its client
    import pytest

    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from tests.integration.util import (LATEST_TIMESTAMP, RawClient, Rec, build_batch, create_topic,
                                        wait_until)

# ============================================================================================
# The member program (runs in a subprocess)
# ============================================================================================


class _Reporter:
    """Serialises JSON-line events to stdout; callbacks may run on client threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, ev: str, **fields: Any) -> None:
        fields["ev"] = ev
        fields["t"] = time.monotonic()
        line = json.dumps(fields, separators=(",", ":"))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class _Commands:
    """stdin commands, read on a daemon thread; end of stdin (the test died) means close."""

    def __init__(self) -> None:
        self.close = threading.Event()
        self.nocommit = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "close":
                self.close.set()
            elif cmd == "nocommit":
                self.nocommit.set()
        self.close.set()


def _member_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one consumer-group member reporting JSON lines")
    p.add_argument("--client", required=True, choices=["kafka-python", "confluent", "aiokafka"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--client-id", required=True)
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=500)
    p.add_argument("--max-poll-records", type=int, default=50)
    p.add_argument("--assignor", default=None, help="client-specific assignor name")
    p.add_argument("--instance-id", default=None, help="group.instance.id (static membership)")
    p.add_argument("--commit-metadata", default="", help="metadata string of every commit")
    p.add_argument("--api-version", default=None, help="kafka-python api_version, e.g. 2.5.0")
    p.add_argument("--max-lifetime", type=float, default=240.0, help="exit after this many seconds")
    return p.parse_args(argv)


def _run_kafka_python(a: argparse.Namespace, out: _Reporter, cmds: _Commands) -> None:
    import kafka
    import kafka.errors
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition

    current: set[int] = set()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            removed = sorted(tp.partition for tp in revoked)
            current.difference_update(removed)
            out.emit("revoked", removed=removed, assignment=sorted(current))

        def on_partitions_assigned(self, assigned: Any) -> None:
            added = sorted(tp.partition for tp in assigned)
            current.update(added)
            out.emit("assigned", added=added, assignment=sorted(current))

    kw: dict[str, Any] = dict(
        bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.client_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=a.session_timeout_ms, heartbeat_interval_ms=a.heartbeat_interval_ms,
        max_poll_records=a.max_poll_records, request_timeout_ms=max(30000, a.session_timeout_ms + 5000),
        reconnect_backoff_max_ms=1000)
    if a.api_version:
        kw["api_version"] = tuple(int(x) for x in a.api_version.split("."))
    if a.instance_id:
        kw["group_instance_id"] = a.instance_id
    if a.assignor:
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        kw["partition_assignment_strategy"] = [
            {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[a.assignor]]
    three_fields = len(OffsetAndMetadata._fields) == 3  # 3.x added leader_epoch

    consumer = KafkaConsumer(**kw)
    out.emit("started", client="kafka-python", version=kafka.__version__, pid=os.getpid())
    # The group's leader must know the topic's partitions in its metadata snapshot before its first
    # join. Otherwise it assigns from an empty snapshot, its next metadata answer (queued behind a
    # fetch long poll on the same connection, so often after the following join) differs, and it
    # rejoins; kafka-python 3.0.12 can then lose that completed join (its leader updates the
    # assignment snapshot before poll() handles the finished join task, so need_rejoin() turns
    # False and the assignment is never applied nor are heartbeats re-enabled; cf.
    # dpkp/kafka-python#2855) and the member spins unassigned. The snapshot is taken only from a
    # metadata answer that arrives after subscribe(), so subscribe first, then fetch metadata
    # (topics() always asks the broker) until it lists the topic.
    consumer.subscribe([a.topic], listener=Listener())
    deadline = time.monotonic() + 20
    while a.topic not in consumer.topics() and time.monotonic() < deadline:
        time.sleep(0.05)
    deadline = time.monotonic() + a.max_lifetime
    acked_nocommit = False
    while not cmds.close.is_set() and time.monotonic() < deadline:
        if cmds.nocommit.is_set() and not acked_nocommit:
            acked_nocommit = True
            out.emit("nocommit")
        try:
            batch = consumer.poll(timeout_ms=100)
        except kafka.errors.KafkaError as e:
            # kafka-python 3 raises connection errors of its background coordinator lookups from
            # poll() (e.g. while the broker restarts); an application retries, and so do we.
            out.emit("client_error", error=repr(e))
            time.sleep(0.1)
            continue
        if not batch:
            continue
        recs, offsets = [], {}
        for tp, msgs in batch.items():
            for m in msgs:
                recs.append([tp.partition, m.offset, m.value.decode() if m.value is not None else None])
            offsets[tp.partition] = msgs[-1].offset + 1
        out.emit("records", recs=recs)
        if acked_nocommit:
            continue
        oam = {TopicPartition(a.topic, p): (OffsetAndMetadata(o, a.commit_metadata, -1) if three_fields
                                             else OffsetAndMetadata(o, a.commit_metadata))
               for p, o in offsets.items()}
        try:
            consumer.commit(oam)
            out.emit("committed", offsets=offsets)
        except Exception as e:  # noqa: BLE001 - reported; the test decides what it means
            out.emit("commit_failed", offsets=offsets, error=repr(e))
    out.emit("closing")
    consumer.close(autocommit=False)
    out.emit("closed")


def _run_confluent(a: argparse.Namespace, out: _Reporter, cmds: _Commands) -> None:
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    current: set[int] = set()

    def on_assign(_c: Any, parts: list) -> None:
        added = sorted(tp.partition for tp in parts)
        current.update(added)
        out.emit("assigned", added=added, assignment=sorted(current))

    def on_revoke(_c: Any, parts: list) -> None:
        removed = sorted(tp.partition for tp in parts)
        current.difference_update(removed)
        out.emit("revoked", removed=removed, assignment=sorted(current))

    def on_lost(_c: Any, parts: list) -> None:
        removed = sorted(tp.partition for tp in parts)
        current.difference_update(removed)
        out.emit("lost", removed=removed, assignment=sorted(current))

    conf: dict[str, Any] = {
        "bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.client_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": a.session_timeout_ms, "heartbeat.interval.ms": a.heartbeat_interval_ms,
        "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 5000,
        "error_cb": lambda err: out.emit("client_error", error=str(err)),
    }
    if a.assignor:
        conf["partition.assignment.strategy"] = a.assignor
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    consumer = Consumer(conf)
    out.emit("started", client="confluent", version=confluent_kafka.libversion()[0], pid=os.getpid())
    consumer.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    deadline = time.monotonic() + a.max_lifetime
    acked_nocommit = False
    # Offsets whose commit was refused (ILLEGAL_GENERATION while a rebalance races it, as Kafka
    # answers): committed again once the rebalance is over, for the partitions still owned, so
    # that what was consumed is committed even when no further records arrive.
    pending: dict[int, int] = {}
    retry_at = 0.0
    while not cmds.close.is_set() and time.monotonic() < deadline:
        if cmds.nocommit.is_set() and not acked_nocommit:
            acked_nocommit = True
            out.emit("nocommit")
        msgs = consumer.consume(num_messages=a.max_poll_records, timeout=0.1)
        recs, offsets = [], {}
        for m in msgs:
            if m.error():
                out.emit("client_error", error=str(m.error()))
                continue
            v = m.value()
            recs.append([m.partition(), m.offset(), v.decode() if v is not None else None])
            offsets[m.partition()] = m.offset() + 1
        if recs:
            out.emit("records", recs=recs)
        elif not pending or time.monotonic() < retry_at:
            continue
        if acked_nocommit:
            continue
        offsets = {p: o for p, o in {**pending, **offsets}.items() if p in current}
        pending = {}
        if not offsets:
            continue
        try:
            tps = [TopicPartition(a.topic, p, o, a.commit_metadata) if a.commit_metadata
                   else TopicPartition(a.topic, p, o) for p, o in offsets.items()]
            res = consumer.commit(offsets=tps, asynchronous=False)
            errs = [f"{tp.partition}: {tp.error}" for tp in (res or []) if tp.error is not None]
            if errs:
                out.emit("commit_failed", offsets=offsets, error="; ".join(errs))
                pending, retry_at = offsets, time.monotonic() + 0.5
            else:
                out.emit("committed", offsets=offsets)
        except KafkaException as e:
            out.emit("commit_failed", offsets=offsets, error=str(e))
            pending, retry_at = offsets, time.monotonic() + 0.5
    out.emit("closing")
    consumer.close()
    out.emit("closed")


def _run_aiokafka(a: argparse.Namespace, out: _Reporter, cmds: _Commands) -> None:
    import asyncio

    import aiokafka
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition

    current: set[int] = set()

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            removed = sorted(tp.partition for tp in revoked)
            current.difference_update(removed)
            out.emit("revoked", removed=removed, assignment=sorted(current))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            added = sorted(tp.partition for tp in assigned)
            current.update(added)
            out.emit("assigned", added=added, assignment=sorted(current))

    async def main() -> None:
        kw: dict[str, Any] = dict(
            bootstrap_servers=a.bootstrap, group_id=a.group, client_id=a.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=a.session_timeout_ms, heartbeat_interval_ms=a.heartbeat_interval_ms,
            max_poll_records=a.max_poll_records, request_timeout_ms=max(30000, a.session_timeout_ms + 5000),
            retry_backoff_ms=100)
        if a.instance_id:
            kw["group_instance_id"] = a.instance_id
        consumer = AIOKafkaConsumer(**kw)
        consumer.subscribe([a.topic], listener=Listener())
        await consumer.start()
        out.emit("started", client="aiokafka", version=aiokafka.__version__, pid=os.getpid())
        deadline = time.monotonic() + a.max_lifetime
        acked_nocommit = False
        try:
            while not cmds.close.is_set() and time.monotonic() < deadline:
                if cmds.nocommit.is_set() and not acked_nocommit:
                    acked_nocommit = True
                    out.emit("nocommit")
                batch = await consumer.getmany(timeout_ms=100, max_records=a.max_poll_records)
                if not batch:
                    continue
                recs, offsets = [], {}
                for tp, msgs in batch.items():
                    for m in msgs:
                        recs.append([tp.partition, m.offset, m.value.decode() if m.value is not None else None])
                    offsets[tp.partition] = msgs[-1].offset + 1
                out.emit("records", recs=recs)
                if acked_nocommit:
                    continue
                try:
                    await consumer.commit({TopicPartition(a.topic, p): OffsetAndMetadata(o, a.commit_metadata)
                                           for p, o in offsets.items()})
                    out.emit("committed", offsets=offsets)
                except Exception as e:  # noqa: BLE001 - reported; the test decides what it means
                    out.emit("commit_failed", offsets=offsets, error=repr(e))
        finally:
            out.emit("closing")
            await consumer.stop()
        out.emit("closed")

    asyncio.run(main())


def member_main(argv: Optional[Sequence[str]] = None) -> int:
    a = _member_args(argv)
    log_dir = os.environ.get("KAFKALITE_MEMBER_LOG_DIR")  # debugging aid: client logs per member
    if log_dir:
        import logging
        logging.basicConfig(level=logging.DEBUG, filename=os.path.join(log_dir, f"{a.client_id}.log"),
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    out = _Reporter()
    cmds = _Commands()
    runner = {"kafka-python": _run_kafka_python, "confluent": _run_confluent, "aiokafka": _run_aiokafka}[a.client]
    try:
        runner(a, out, cmds)
    except Exception as e:  # noqa: BLE001 - the test sees it as a fatal event and a non-zero exit
        import traceback
        out.emit("fatal", error=repr(e), traceback=traceback.format_exc())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(member_main())


# ============================================================================================
# The test side
# ============================================================================================

# Fast group dynamics for tests (Kafka's defaults: 3000 ms initial delay, 6000 ms minimum session).
GROUP_BROKER_OVERRIDES: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}

# Kafka error codes these tests assert.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
_RETRIABLE_COORDINATOR_ERRORS = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}

OFFSETS_TOPIC = "__consumer_offsets"
THIS_FILE = Path(__file__).resolve()

Tp = tuple[int, int]  # (partition, offset)


def committed_metadata(client: str, metadata: str) -> str:
    """The metadata string a client's commit carries on the wire. confluent-kafka's binding passes
    librdkafka the C string with its terminating NUL counted in metadata_size, so its commits
    carry a trailing "\\x00" (kafka-python and aiokafka send the string as given); the broker
    stores and returns the bytes it got."""
    return metadata + "\x00" if client == "confluent" and metadata else metadata


def record_value(topic: str, partition: int, offset: int) -> str:
    """The value every test record carries, so a consumer's report can be checked record by record."""
    return f"{topic}/{partition}/{offset}"


# -- Kafka's placement of a group in __consumer_offsets ------------------------------------

def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group: str, num_partitions: int = 50) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partition count
    (Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# -- producing exactly known records ------------------------------------------------------

def produce_phase(bootstrap: str, topic: str, partitions: Iterable[int], per_partition: int) -> set[Tp]:
    """Append `per_partition` records to each partition (one batch each, acks=all) and return the
    (partition, offset) set written. Offsets are asserted: the test is the topic's only producer."""
    written: set[Tp] = set()
    with RawClient(bootstrap) as c:
        for p in partitions:
            start = c.list_offset(topic, p, LATEST_TIMESTAMP).offset
            recs = [Rec(key=f"k{start + i}".encode(), value=record_value(topic, p, start + i).encode())
                    for i in range(per_partition)]
            r = c.produce(topic, p, build_batch(recs))
            assert r.error_code == 0 and r.base_offset == start, f"produce {topic}-{p}: {r}"
            written.update((p, start + i) for i in range(per_partition))
    return written


# -- group members ------------------------------------------------------------------------

@dataclass
class Ownership:
    partition: int
    start: float
    end: Optional[float]  # None: still owned


class Member:
    """One group member subprocess and everything it reported."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, client_id: str, *,
                 python: str = sys.executable, session_timeout_ms: int = 6000,
                 heartbeat_interval_ms: int = 500, max_poll_records: int = 50,
                 assignor: Optional[str] = None, instance_id: Optional[str] = None,
                 commit_metadata: str = "", api_version: Optional[str] = None) -> None:
        self.client, self.topic, self.group, self.client_id = client, topic, group, client_id
        self.session_timeout_ms = session_timeout_ms
        self.commit_metadata = commit_metadata
        self.heartbeat_interval_ms = heartbeat_interval_ms
        args = [python, str(THIS_FILE), "--client", client, "--bootstrap", bootstrap, "--topic", topic,
                "--group", group, "--client-id", client_id,
                "--session-timeout-ms", str(session_timeout_ms),
                "--heartbeat-interval-ms", str(heartbeat_interval_ms),
                "--max-poll-records", str(max_poll_records), "--commit-metadata", commit_metadata]
        for flag, val in (("--assignor", assignor), ("--instance-id", instance_id), ("--api-version", api_version)):
            if val:
                args += [flag, val]
        self.events: list[dict[str, Any]] = []
        self.noise: list[str] = []      # stdout lines that are not events
        self.stderr: list[str] = []
        self.killed_at: Optional[float] = None
        self.closed_at: Optional[float] = None
        self._lock = threading.Lock()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PYTHONPATH", None)  # the member imports only its client (maybe from another venv)
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, env=env,
                                     cwd=str(THIS_FILE.parent))
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- readers ----------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            try:
                ev = json.loads(line)
                ok = isinstance(ev, dict) and "ev" in ev
            except ValueError:
                ok = False
            with self._lock:
                if ok:
                    self.events.append(ev)
                else:
                    self.noise.append(line)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line.rstrip("\n"))
                del self.stderr[:-300]

    # -- views ------------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["ev"] == kind]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and self.killed_at is None and self.closed_at is None

    @property
    def assignment(self) -> frozenset[int]:
        """The latest assignment the member reported (empty once it is closed or killed)."""
        if not self.alive:
            return frozenset()
        evs = [e for e in self.snapshot() if e["ev"] in ("assigned", "revoked", "lost")]
        return frozenset(evs[-1]["assignment"]) if evs else frozenset()

    def rebalance_event_count(self) -> int:
        return sum(1 for e in self.snapshot() if e["ev"] in ("assigned", "revoked", "lost"))

    def consumed(self, since: float = float("-inf")) -> list[tuple[int, int, Optional[str]]]:
        return [(p, o, v) for e in self.snapshot() if e["ev"] == "records" and e["t"] >= since
                for p, o, v in e["recs"]]

    def committed(self) -> dict[int, int]:
        """Last successfully committed offset per partition, as reported."""
        out: dict[int, int] = {}
        for e in self.of("committed"):
            out.update({int(p): o for p, o in e["offsets"].items()})
        return out

    def ownership(self) -> list[Ownership]:
        """Intervals during which the member owned each partition, from its own reports; a killed
        member's ownership ends when it died, a closed one's when it stopped polling to close (its
        LeaveGroup comes after; the test seeing it exit can come much later on a busy machine)."""
        open_: dict[int, float] = {}
        out: list[Ownership] = []
        for e in self.snapshot():
            if e["ev"] == "assigned":
                for p in e["added"]:
                    open_.setdefault(p, e["t"])
            elif e["ev"] in ("revoked", "lost"):
                for p in e["removed"]:
                    if p in open_:
                        out.append(Ownership(p, open_.pop(p), e["t"]))
        end = self.killed_at
        if end is None and self.closed_at is not None:
            end = next((e["t"] for e in self.snapshot() if e["ev"] == "closing"), self.closed_at)
        out.extend(Ownership(p, s, end) for p, s in open_.items())
        return out

    def describe(self) -> str:
        evs = self.snapshot()
        kinds = Counter(e["ev"] for e in evs)
        rebal = [(round(e["t"] - self.started_at, 2), e["ev"], e.get("added", e.get("removed")), e["assignment"])
                 for e in evs if e["ev"] in ("assigned", "revoked", "lost")]
        problems = [e for e in evs if e["ev"] in ("commit_failed", "client_error", "fatal")][-5:]
        return (f"member {self.client_id} ({self.client}) rc={self.proc.poll()} events={dict(kinds)} "
                f"rebalances={rebal} problems={problems} noise={self.noise[-5:]} stderr={self.stderr[-15:]}")

    # -- control ----------------------------------------------------------------------------
    def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        def find() -> Optional[dict[str, Any]]:
            for e in self.snapshot():
                if pred(e):
                    return e
            if self.proc.poll() is not None:
                raise AssertionError(f"member exited before {what}: {self.describe()}")
            return None
        try:
            return wait_until(find, timeout, what=f"{self.client_id}: {what}")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_started(self, timeout: float = 20.0) -> None:
        self.wait_event(lambda e: e["ev"] == "started", timeout, "started")

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def stop_committing(self, timeout: float = 10.0) -> None:
        self.send("nocommit")
        self.wait_event(lambda e: e["ev"] == "nocommit", timeout, "nocommit acknowledged")

    def close(self, timeout: float = 20.0) -> float:
        """Clean close; returns the time the command was sent. Asserts exit code 0."""
        t = time.monotonic()
        self.send("close")
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"member did not close within {timeout}s: {self.describe()}")
        time.sleep(0.05)  # let the reader thread take the last lines
        self.closed_at = time.monotonic()
        assert rc == 0 and self.of("closed"), f"member close failed (rc={rc}): {self.describe()}"
        return t

    def kill(self) -> float:
        """SIGKILL (a crashed consumer); returns the time it was dead."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.killed_at = time.monotonic()
        return self.killed_at

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


class Fleet:
    """Every member a test starts; all killed at teardown (see the `fleet` fixture)."""

    def __init__(self) -> None:
        self.members: list[Member] = []

    def spawn(self, *args: Any, **kwargs: Any) -> Member:
        m = Member(*args, **kwargs)
        self.members.append(m)
        return m

    def alive(self) -> list[Member]:
        return [m for m in self.members if m.alive]

    def describe(self) -> str:
        return "\n".join(m.describe() for m in self.members)

    def shutdown(self) -> None:
        for m in self.members:
            m.terminate()


if __name__ != "__main__":
    @pytest.fixture
    def fleet() -> Iterator[Fleet]:
        f = Fleet()
        try:
            yield f
        finally:
            f.shutdown()


# -- waiting on the group -------------------------------------------------------------------

def assignments(members: Sequence[Member]) -> dict[str, frozenset[int]]:
    return {m.client_id: m.assignment for m in members}


def _balanced_cover(members: Sequence[Member], partitions: frozenset[int]) -> Optional[dict[str, frozenset[int]]]:
    a = assignments(members)
    sets = list(a.values())
    if sum(len(s) for s in sets) != len(partitions) or frozenset().union(*sets) != partitions:
        return None  # not covering, or overlapping
    sizes = [len(s) for s in sets]
    if max(sizes) - min(sizes) > 1:
        return None
    return a


def wait_stable(members: Sequence[Member], partitions: Iterable[int], timeout: float = 30.0,
                settle: float = 1.0) -> dict[str, frozenset[int]]:
    """Wait until the members' assignments are disjoint, cover `partitions`, are balanced (sizes
    differ by at most one), and no member reported a rebalance event for `settle` seconds."""
    parts = frozenset(partitions)
    deadline = time.monotonic() + timeout
    stable_since: Optional[float] = None
    last_key: Any = None
    while True:
        for m in members:
            if m.proc.poll() is not None and m.killed_at is None and m.closed_at is None:
                raise AssertionError(f"a member exited unexpectedly:\n{m.describe()}")
        a = _balanced_cover(members, parts)
        key = (tuple(sorted((k, tuple(sorted(v))) for k, v in a.items())) if a else None,
               tuple(m.rebalance_event_count() for m in members))
        now = time.monotonic()
        if a is not None and key == last_key and stable_since is not None:
            if now - stable_since >= settle:
                return a
        elif a is not None:
            stable_since, last_key = now, key
        else:
            stable_since, last_key = None, None
        if now > deadline:
            raise AssertionError(f"no stable balanced assignment of {sorted(parts)} within {timeout}s: "
                                 f"{assignments(members)}\n" + "\n".join(m.describe() for m in members))
        time.sleep(0.05)


def consumed_multiset(members: Sequence[Member]) -> Counter[Tp]:
    c: Counter[Tp] = Counter()
    for m in members:
        c.update((p, o) for p, o, _ in m.consumed())
    return c


def wait_consumed(members: Sequence[Member], expected: set[Tp], timeout: float = 30.0) -> None:
    def done() -> bool:
        return expected <= set(consumed_multiset(members))
    try:
        wait_until(done, timeout, what=f"{len(expected)} records consumed by the group")
    except AssertionError as e:
        missing = expected - set(consumed_multiset(members))
        raise AssertionError(f"{e}; missing {len(missing)} e.g. {sorted(missing)[:10]}\n"
                             + "\n".join(m.describe() for m in members)) from None


def wait_committed(member: Member, timeout: float = 15.0) -> dict[int, int]:
    """Wait until the member has committed, for every partition it owns, everything it consumed
    there (last offset + 1)."""
    def want() -> dict[int, int]:
        # A commit for a partition the member has since lost may legitimately have failed
        # (ILLEGAL_GENERATION in a rebalance); the new owner re-reads from the group's offset.
        owned = member.assignment
        w: dict[int, int] = {}
        for p, o, _ in member.consumed():
            if p in owned:
                w[p] = max(w.get(p, 0), o + 1)
        return w

    def done() -> Optional[list[dict[int, int]]]:
        got = member.committed()
        return [got] if all(got.get(p) == o for p, o in want().items()) else None  # [{}] is truthy
    try:
        return wait_until(done, timeout, what=f"{member.client_id} to commit what it consumed")[0]
    except AssertionError as e:
        raise AssertionError(f"{e}: consumed up to {want()}, committed {member.committed()}\n"
                             f"{member.describe()}") from None


def handover_duplicates(members: Sequence[Member]) -> frozenset[Tp]:
    """Kafka's at-least-once rule, checked at every hand-over of a partition: whenever a member
    starts owning a partition and reads from it, its first offset is exactly the group's
    committed offset at that moment (the latest successful commit reported before its
    assignment; 0 = earliest when none). Returns the records that must therefore be consumed a
    second time: those consumed on that partition before the hand-over at or after that offset
    (by a member killed or whose commit failed). Empty when every consumed record was committed."""
    commits: list[tuple[float, int, int]] = [(e["t"], int(p), o) for m in members for e in m.of("committed")
                                             for p, o in e["offsets"].items()]
    reads: list[tuple[float, str, int, int]] = [(e["t"], m.client_id, p, o) for m in members
                                                for e in m.of("records") for p, o, _ in e["recs"]]
    again: set[Tp] = set()
    for m in members:
        starts: dict[int, list[float]] = defaultdict(list)
        for own in m.ownership():
            starts[own.partition].append(own.start)
        for p, ss in starts.items():
            ss.sort()
            for i, start in enumerate(ss):
                # a record belongs to the latest assignment before it was reported (a revocation
                # may be reported inside the same poll that returned the record)
                until = ss[i + 1] if i + 1 < len(ss) else float("inf")
                mine = [o for t, cid, q, o in reads if cid == m.client_id and q == p and start <= t < until]
                if not mine:
                    continue
                first = min(mine)
                committed = max((o for t, q, o in commits if q == p and t < start), default=0)
                assert first == committed, (
                    f"{m.client_id} started partition {p} at offset {first}, the group had committed "
                    f"{committed} when it was assigned the partition\n" + "\n".join(x.describe() for x in members))
                again.update((p, o) for t, _, q, o in reads if q == p and t < start and o >= first)
    return frozenset(again)


def assert_exactly_once(members: Sequence[Member], topic: str, expected: set[Tp],
                        allowed_duplicates: Optional[frozenset[Tp]] = None) -> frozenset[Tp]:
    """Across the group every produced record was consumed, nothing else was, each record carried
    its value, and exactly the records of handover_duplicates() were consumed twice (none more).
    `allowed_duplicates`, when given (a SIGKILL window), must be among them, and be all of them
    unless some commit failed. Returns the duplicates."""
    counts = consumed_multiset(members)
    got = set(counts)
    assert got == expected, (f"consumed set differs: missing {sorted(expected - got)[:10]}, "
                             f"unexpected {sorted(got - expected)[:10]}")
    repeats = handover_duplicates(members)
    if allowed_duplicates is not None:
        assert allowed_duplicates <= repeats, sorted(allowed_duplicates - repeats)[:10]
        if not any(m.of("commit_failed") for m in members):
            assert repeats == allowed_duplicates, sorted(repeats - allowed_duplicates)[:10]
    dups = {k for k, n in counts.items() if n > 1}
    assert all(n <= 2 for n in counts.values()), f"records consumed 3+ times: {[k for k, n in counts.items() if n > 2][:10]}"
    assert dups == set(repeats), (
        f"duplicates differ from the at-least-once window: unexpected {sorted(dups - repeats)[:10]}, "
        f"expected but not repeated {sorted(repeats - dups)[:10]}\n"
        + "\n".join(m.describe() for m in members))
    for m in members:
        for p, o, v in m.consumed():
            assert v == record_value(topic, p, o), f"{m.client_id} read {v!r} at {p}/{o}"
    if repeats:
        print(f"[at-least-once] {len(repeats)} records consumed twice after hand-overs")
    return repeats


def assert_no_concurrent_ownership(members: Sequence[Member]) -> None:
    """No partition was owned by two members at the same moment (by their own reports)."""
    by_partition: dict[int, list[tuple[Ownership, str]]] = defaultdict(list)
    for m in members:
        for own in m.ownership():
            by_partition[own.partition].append((own, m.client_id))
    for p, owns in by_partition.items():
        owns.sort(key=lambda x: x[0].start)
        for (a, ma), (b, mb) in zip(owns, owns[1:]):
            assert a.end is not None and a.end <= b.start, (
                f"partition {p} owned by {ma} [{a.start:.3f}, {a.end}] and {mb} from {b.start:.3f}")


# How clients report a commit refused because the generation moved on (Kafka answers
# ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS to a commit that races a rebalance).
_REBALANCE_COMMIT_ERRORS = ("ILLEGAL_GENERATION", "IllegalGeneration", "REBALANCE_IN_PROGRESS",
                            "RebalanceInProgress", "CommitFailedError")


def assert_no_problems(members: Sequence[Member], rebalance_window: float = 3.0) -> None:
    """No member died of an error, and every failed commit is one Kafka gives a commit that races
    a rebalance: a generation error within `rebalance_window` s of a rebalance of that member.
    (client_error events are transient connection noise and not checked.)"""
    for m in members:
        evs = m.snapshot()
        fatal = [e for e in evs if e["ev"] == "fatal"]
        assert not fatal, f"{m.client_id}: {fatal[:3]}"
        rebalances = [e["t"] for e in evs if e["ev"] in ("assigned", "revoked", "lost")]
        for e in evs:
            if e["ev"] != "commit_failed":
                continue
            assert any(k in e["error"] for k in _REBALANCE_COMMIT_ERRORS), f"{m.client_id}: {e}"
            assert any(abs(t - e["t"]) <= rebalance_window for t in rebalances), (
                f"{m.client_id}: commit failed away from any rebalance: {e}\n{m.describe()}")


def last_commit_metadata(members: Sequence[Member]) -> dict[int, str]:
    """Per partition, the metadata string of the member whose successful commit came last."""
    latest: dict[int, tuple[float, str]] = {}
    for m in members:
        for e in m.of("committed"):
            for p in e["offsets"]:
                if int(p) not in latest or latest[int(p)][0] < e["t"]:
                    latest[int(p)] = (e["t"], m.commit_metadata)
    return {p: meta for p, (_, meta) in latest.items()}


def first_offsets(member: Member, since: float) -> dict[int, int]:
    """The first offset the member consumed per partition after `since`."""
    out: dict[int, int] = {}
    for p, o, _ in member.consumed(since):
        out.setdefault(p, o)
    return out


# -- raw group requests -------------------------------------------------------------------------

def _retry_coordinator(call: Callable[[], tuple[int, Any]], timeout: float = 15.0, what: str = "") -> Any:
    """Retry while the coordinator is loading / not yet available, as clients do."""
    result: list[Any] = []

    def attempt() -> bool:
        err, value = call()
        if err in _RETRIABLE_COORDINATOR_ERRORS:
            return False
        result.append((err, value))
        return True
    wait_until(attempt, timeout, interval=0.1, what=what or "the group coordinator")
    return result[0]


def find_coordinator(c: "RawClient", group: str) -> Any:
    """FindCoordinator for a group on `c`, retried while the coordinator is not available (the
    broker creates __consumer_offsets on the first lookup); returns the answer (error NONE)."""
    v = c.version_for(FindCoordinatorRequest, at_most=3)

    def call() -> tuple[int, Any]:
        r = c.request(FindCoordinatorRequest[v](key=group, key_type=0))
        return r.error_code, r
    err, r = _retry_coordinator(call, what=f"FindCoordinator({group})")
    assert err == NONE, f"FindCoordinator({group}): error {err}"
    assert (r.node_id, r.port) == (0, int(c.bootstrap.rsplit(":", 1)[1])), r
    return r


def offset_fetch(bootstrap: str, group: str, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, Optional[str]]]:
    """Committed (offset, metadata) per partition by OffsetFetch (v<=7, one group); -1 = none."""
    parts = list(partitions)
    with RawClient(bootstrap) as c:
        find_coordinator(c, group)
        v = c.version_for(OffsetFetchRequest, at_most=7)
        T = OffsetFetchRequest.OffsetFetchRequestTopic

        def call() -> tuple[int, Any]:
            r = c.request(OffsetFetchRequest[v](group_id=group, topics=[T(name=topic, partition_indexes=parts)],
                                                require_stable=False))
            err = r.error_code if v >= 2 else 0
            if err == 0:
                pes = {pp.error_code for t in r.topics for pp in t.partitions}
                if pes & _RETRIABLE_COORDINATOR_ERRORS:
                    err = min(pes & _RETRIABLE_COORDINATOR_ERRORS)
            return err, r
        err, r = _retry_coordinator(call, what=f"OffsetFetch({group})")
    assert err == 0, f"OffsetFetch {group}: error {err}"
    out: dict[int, tuple[int, Optional[str]]] = {}
    for t in r.topics:
        assert t.name == topic
        for pp in t.partitions:
            assert pp.error_code == 0, f"OffsetFetch {group} {topic}-{pp.partition_index}: error {pp.error_code}"
            out[pp.partition_index] = (pp.committed_offset, pp.metadata)
    assert sorted(out) == sorted(parts), out
    return out


def offset_commit_simple(bootstrap: str, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> dict[int, int]:
    """OffsetCommit as a simple consumer (generation -1, no member id): error code per partition."""
    with RawClient(bootstrap) as c:
        find_coordinator(c, group)
        v = c.version_for(OffsetCommitRequest, at_most=8)
        T = OffsetCommitRequest.OffsetCommitRequestTopic

        def call() -> tuple[int, Any]:
            r = c.request(OffsetCommitRequest[v](
                group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                retention_time_ms=-1,
                topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1, commit_timestamp=-1,
                    committed_metadata=meta) for p, (o, meta) in offsets.items()])]))
            errs = {pp.error_code for t in r.topics for pp in t.partitions}
            retriable = errs & _RETRIABLE_COORDINATOR_ERRORS
            return (min(retriable) if retriable else 0), r
        _, r = _retry_coordinator(call, what=f"OffsetCommit({group})")
    return {pp.partition_index: pp.error_code for t in r.topics for pp in t.partitions}


def describe_group_raw(bootstrap: str, group: str) -> tuple[int, Any]:
    """(negotiated version, the group's DescribeGroups entry)."""
    with RawClient(bootstrap) as c:
        find_coordinator(c, group)
        v = c.version_for(DescribeGroupsRequest)

        def call() -> tuple[int, Any]:
            r = c.request(DescribeGroupsRequest[v](groups=[group], include_authorized_operations=False))
            return r.groups[0].error_code, r.groups[0]
        _, g = _retry_coordinator(call, what=f"DescribeGroups({group})")
    return v, g


def make_topic(bootstrap: str, topic: str, partitions: int = 6) -> None:
    create_topic(bootstrap, topic, partitions)


# -- the scenarios every client goes through ------------------------------------------------------

def _assigned_after(member: Member, since: float, partitions: Iterable[int]) -> Optional[float]:
    """Time of the member's first `assigned` event after `since` that adds one of `partitions`."""
    ps = set(partitions)
    for e in member.snapshot():
        if e["ev"] == "assigned" and e["t"] > since and ps & set(e["added"]):
            return e["t"]
    return None


def _consumed_only_owned(members: Sequence[Member], owners: dict[str, frozenset[int]], since: float) -> None:
    for m in members:
        got = {p for p, _, _ in m.consumed(since)}
        assert got <= owners[m.client_id], (
            f"{m.client_id} consumed partitions {sorted(got - owners[m.client_id])} it did not own at steady state")


def run_close_and_resume(fleet: Fleet, bootstrap: str, client: str, topic: str, *,
                         session_timeout_ms: int = 10000, per_phase: int = 20, cooperative: bool = False,
                         **member_kw: Any) -> None:
    """Three members over six partitions: balanced disjoint assignment, every record consumed once;
    one member closes -> its partitions move well within the session timeout (LeaveGroup, not
    expiry); everyone closes -> a new member starts exactly at the committed offsets."""
    partitions = range(6)
    make_topic(bootstrap, topic, 6)
    group = "g-" + topic
    meta = f"meta-{client}"
    stored_meta = committed_metadata(client, meta)
    expected = produce_phase(bootstrap, topic, partitions, per_phase)

    def spawn(name: str) -> Member:
        return fleet.spawn(client, bootstrap, topic, group, name, session_timeout_ms=session_timeout_ms,
                           commit_metadata=meta, **member_kw)
    members = [spawn(f"{client}-{i}") for i in range(3)]
    owners = wait_stable(members, partitions)
    assert sorted(len(s) for s in owners.values()) == [2, 2, 2], owners
    wait_consumed(members, expected)

    # Steady state: new records go to the partitions' owners and nobody else.
    t_steady = time.monotonic()
    expected |= produce_phase(bootstrap, topic, partitions, per_phase)
    wait_consumed(members, expected)
    _consumed_only_owned(members, owners, t_steady)
    assert assignments(members) == owners, "assignment changed without a membership change"

    # A clean close: LeaveGroup makes the others rebalance at once.
    leaver, rest = members[2], members[:2]
    for m in members:
        wait_committed(m)
    t_close = leaver.close()
    owners2 = wait_stable(rest, partitions, timeout=session_timeout_ms / 1000, settle=0.5)
    assert sorted(len(s) for s in owners2.values()) == [3, 3], owners2
    moved = [t for t in (_assigned_after(m, t_close, owners[leaver.client_id]) for m in rest) if t is not None]
    assert moved, f"the leaver's partitions {sorted(owners[leaver.client_id])} were never assigned:\n{fleet.describe()}"
    move_s = max(moved) - t_close
    print(f"[{client}] partitions moved {move_s:.2f}s after close")
    assert move_s < session_timeout_ms / 1000 / 2, (
        f"partitions moved {move_s:.2f}s after close; session timeout is {session_timeout_ms} ms")
    if cooperative:  # incremental rebalance: survivors keep what they had, nothing revoked
        for m in rest:
            revoked = [e for e in m.snapshot() if e["ev"] in ("revoked", "lost") and e["t"] > t_close]
            assert not revoked, f"{m.client_id} lost partitions in a cooperative rebalance: {revoked}"
            assert owners[m.client_id] <= owners2[m.client_id], (owners, owners2)
    t_steady2 = time.monotonic()
    expected |= produce_phase(bootstrap, topic, partitions, per_phase)
    wait_consumed(members, expected)
    _consumed_only_owned(rest, owners2, t_steady2)

    # Everyone leaves; a new member must start exactly at the committed offsets.
    for m in rest:
        wait_committed(m)
        m.close()
    committed = offset_fetch(bootstrap, group, topic, partitions)
    assert committed == {p: (3 * per_phase, stored_meta) for p in partitions}, committed
    t_new = time.monotonic()
    latest = produce_phase(bootstrap, topic, partitions, per_phase)
    expected |= latest
    newcomer = spawn(f"{client}-new")
    assert wait_stable([newcomer], partitions, settle=0.3) == {newcomer.client_id: frozenset(partitions)}
    wait_consumed([newcomer], latest)
    assert first_offsets(newcomer, t_new) == {p: 3 * per_phase for p in partitions}
    assert {(p, o) for p, o, _ in newcomer.consumed()} == latest, "the new member re-read committed records"
    wait_committed(newcomer)
    newcomer.close()

    everyone = members + [newcomer]
    assert_exactly_once(everyone, topic, expected)
    assert_no_concurrent_ownership(everyone)
    assert_no_problems(everyone)
    assert offset_fetch(bootstrap, group, topic, partitions) == {p: (4 * per_phase, stored_meta) for p in partitions}


def run_sigkill(fleet: Fleet, bootstrap: str, client: str, topic: str, *, session_timeout_ms: int = 2000,
                heartbeat_interval_ms: int = 500, per_phase: int = 20, **member_kw: Any) -> None:
    """Three members; one stops committing, consumes a phase, and is SIGKILLed. Its partitions
    move only after the session timeout (a dead TCP connection is not a LeaveGroup), the new
    owners start exactly at its last committed offsets, and exactly the records it consumed after
    its last commit are consumed twice (Kafka's at-least-once window); nothing else repeats."""
    partitions = range(6)
    make_topic(bootstrap, topic, 6)
    group = "g-" + topic
    expected = produce_phase(bootstrap, topic, partitions, per_phase)
    members = [fleet.spawn(client, bootstrap, topic, group, f"{client}-{i}", session_timeout_ms=session_timeout_ms,
                           heartbeat_interval_ms=heartbeat_interval_ms, **member_kw) for i in range(3)]
    owners = wait_stable(members, partitions)
    assert sorted(len(s) for s in owners.values()) == [2, 2, 2], owners
    wait_consumed(members, expected)
    for m in members:
        wait_committed(m)

    victim, survivors = members[1], [members[0], members[2]]
    vparts = owners[victim.client_id]
    victim.stop_committing()
    # Everything of the first phase is consumed and committed (by whoever owned it then).
    last_commit = {p: o for p, (o, _) in offset_fetch(bootstrap, group, topic, sorted(vparts)).items()}
    assert last_commit == {p: per_phase for p in vparts}, last_commit
    window = produce_phase(bootstrap, topic, partitions, per_phase)
    expected |= window
    wait_consumed(members, expected)
    assert assignments(members) == owners
    t_kill = victim.kill()
    # Kafka does not react to the closed connection: the member is still in the group and its
    # commits are the group's committed offsets for its partitions.
    at_broker = offset_fetch(bootstrap, group, topic, sorted(vparts))
    assert at_broker == {p: (last_commit[p], "") for p in vparts}, (at_broker, last_commit)

    owners2 = wait_stable(survivors, partitions, timeout=session_timeout_ms / 1000 + 20, settle=0.5)
    assert sorted(len(s) for s in owners2.values()) == [3, 3], owners2
    moved = [t for t in (_assigned_after(m, t_kill, vparts) for m in survivors) if t is not None]
    assert moved, f"the victim's partitions {sorted(vparts)} were never reassigned:\n{fleet.describe()}"
    move_s = min(moved) - t_kill
    print(f"[{client}] partitions moved {move_s:.2f}s after SIGKILL (session {session_timeout_ms} ms)")
    # The coordinator expires the member a session timeout after its last heartbeat, which was
    # at most one heartbeat interval before the kill.
    assert move_s >= (session_timeout_ms - heartbeat_interval_ms) / 1000 - 0.25, (
        f"partitions moved {move_s:.2f}s after SIGKILL: before the session timeout ({session_timeout_ms} ms)")
    assert move_s <= session_timeout_ms / 1000 + 10, f"partitions moved only {move_s:.2f}s after SIGKILL"

    redelivered = frozenset((p, o) for p, o, _ in victim.consumed() if p in vparts and o >= last_commit[p])
    assert redelivered == {(p, o) for p, o in window if p in vparts}, "the victim did not consume its phase"
    wait_consumed(survivors, set(redelivered))
    new_owner_firsts: dict[int, int] = {}
    for m in survivors:
        firsts = first_offsets(m, t_kill)
        new_owner_firsts.update({p: o for p, o in firsts.items() if p in vparts})
    assert new_owner_firsts == {p: last_commit[p] for p in vparts}, (new_owner_firsts, last_commit)

    expected |= produce_phase(bootstrap, topic, partitions, per_phase)
    wait_consumed(members, expected)
    assert_exactly_once(members, topic, expected, redelivered)
    assert_no_concurrent_ownership(members)
    assert_no_problems(members)
    for m in survivors:
        wait_committed(m)
        m.close()
    assert offset_fetch(bootstrap, group, topic, partitions) == {p: (3 * per_phase, "") for p in partitions}


# -- reading __consumer_offsets as Kafka lays it out ----------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        v = struct.unpack_from(">" + fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(">" + fmt)
        return v

    def string(self) -> Optional[str]:
        n = self.take("h")
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v

    def uvarint(self) -> int:
        shift = out = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    def compact_string(self) -> Optional[str]:
        n = self.uvarint() - 1
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v


@dataclass(frozen=True)
class OffsetsTopicRecord:
    """One record of __consumer_offsets: an offset commit (key version 0/1: group, topic,
    partition) or a group metadata record (key version 2: group)."""
    partition: int          # of __consumer_offsets
    offset: int
    key_version: int
    group: str
    topic: Optional[str] = None
    topic_partition: Optional[int] = None
    value_version: Optional[int] = None   # None: tombstone
    committed_offset: Optional[int] = None
    leader_epoch: Optional[int] = None
    metadata: Optional[str] = None


def decode_offsets_topic_record(partition: int, offset: int, key: bytes, value: Optional[bytes]) -> OffsetsTopicRecord:
    k = _Reader(key)
    kv = k.take("h")
    group = k.string()
    assert group is not None
    if kv in (0, 1):
        topic, tp = k.string(), k.take("i")
        assert k.pos == len(key), f"trailing bytes in offset commit key {key!r}"
        if value is None:
            return OffsetsTopicRecord(partition, offset, kv, group, topic, tp)
        r = _Reader(value)
        vv = r.take("h")
        assert 0 <= vv <= 4, f"OffsetCommitValue version {vv}"
        committed = r.take("q")
        epoch = r.take("i") if vv >= 3 else -1
        meta = r.compact_string() if vv >= 4 else r.string()
        r.take("q")  # commit timestamp
        if vv == 1:
            r.take("q")  # expire timestamp
        return OffsetsTopicRecord(partition, offset, kv, group, topic, tp, vv, committed, epoch, meta)
    assert kv == 2, f"unknown __consumer_offsets key version {kv}"
    return OffsetsTopicRecord(partition, offset, kv, group,
                              value_version=None if value is None else struct.unpack_from(">h", value)[0])


def read_offsets_topic(bootstrap: str, num_partitions: int = 50) -> list[OffsetsTopicRecord]:
    """Every record of every __consumer_offsets partition, by raw Fetch up to the high watermark."""
    out: list[OffsetsTopicRecord] = []
    with RawClient(bootstrap) as c:
        for p in range(num_partitions):
            parsed, _hw = c.fetch_all(OFFSETS_TOPIC, p)
            for r in parsed.records:
                assert r.key is not None, f"__consumer_offsets-{p}@{r.offset} has no key"
                out.append(decode_offsets_topic_record(p, r.offset, r.key, r.value))
    return out
