"""Log compaction through a real broker: a compacted topic with 100k updates over 1k keys read
back by librdkafka and kafka-python, tombstones expiring after delete.retention.ms,
``__consumer_offsets`` compacted and reloaded, and SIGKILL at each phase of a segment swap."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Optional

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kafkalite.log.checkpoint import read_offset_checkpoint
from kafkalite.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT_FILE, CRASH_AFTER_ENV
from tests.harness import BrokerProcess
from tests.integration.util import RawClient, build_batch, create_topic, parse_records, Rec, wait_until

Record = tuple[int, bytes, Optional[bytes]]      # offset, key, value

CLEANER = {"log.cleaner.backoff.ms": "50", "log.cleaner.dedupe.buffer.size": str(4 << 20)}


def topic_configs(segment_bytes: int, delete_retention_ms: int = 60_000) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(delete_retention_ms),
            "file.delete.delay.ms": "0"}


def cleaner_checkpoint(log_dir: Path, topic: str, partition: int = 0) -> Optional[int]:
    try:
        return read_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE).get((topic, partition))
    except Exception:       # noqa: BLE001 - a file being replaced: try again
        return None


def segment_bytes_on_disk(part_dir: Path) -> int:
    return sum(f.stat().st_size for f in part_dir.iterdir() if f.name.endswith(".log"))


def fetch_everything(bootstrap: str, topic: str, partition: int = 0,
                     empty_batches: Optional[list[int]] = None) -> list[Record]:
    """Every record from offset 0 to the high watermark with raw Fetch requests, parsed by
    kafka-python's record code (CRC checked); gaps and empty batches are expected (the base
    offsets of empty ones are added to ``empty_batches``)."""
    out: list[Record] = []
    offset = 0
    deadline = time.monotonic() + 30
    with RawClient(bootstrap) as c:
        while True:
            pd = c.fetch(topic, partition, offset, max_bytes=1 << 20)
            assert pd.error_code == 0
            if offset >= pd.high_watermark:
                return out
            parsed = parse_records(pd.records)
            assert parsed.batches, f"no whole batch at {offset} below HW {pd.high_watermark}"
            for b in parsed.batches:
                assert b.crc_ok
                if not b.records and empty_batches is not None and b.base_offset >= offset:
                    empty_batches.append(b.base_offset)
                out += [(r.offset, r.key, r.value) for r in b.records if r.offset >= offset]
                offset = max(offset, b.last_offset + 1)
            assert time.monotonic() < deadline


def consume_confluent(bootstrap: str, topic: str) -> list[Record]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-it",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    try:
        hw = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Record] = []
        deadline = time.monotonic() + 30
        while c.position([TopicPartition(topic, 0)])[0].offset < hw:
            assert time.monotonic() < deadline, "confluent consumer did not reach the high watermark"
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, hw: int) -> list[Record]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10)
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out: list[Record] = []
        deadline = time.monotonic() + 30
        while c.position(tp) < hw:
            assert time.monotonic() < deadline, "kafka-python consumer did not reach the high watermark"
            for recs in c.poll(timeout_ms=500).values():
                out += [(r.offset, r.key, r.value) for r in recs]
        return out
    finally:
        c.close()


def latest(history: list[Record], below: Optional[int] = None) -> dict[bytes, Record]:
    last: dict[bytes, Record] = {}
    for rec in history:
        if below is None or rec[0] < below:
            last[rec[1]] = rec
    return last


# -- 100k updates over 1k keys ------------------------------------------------------------------

def test_100k_updates_over_1k_keys(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    topic = "compacted"
    history: list[Record] = []

    # 1. produce with the cleaner off, to see the log as written
    with BrokerProcess(log_dir=log_dir, overrides={"log.cleaner.enable": "false"}) as b:
        # delete.retention.ms: long enough for the three reads below to see the tombstones
        # even on a loaded machine, short enough to wait for them to go
        create_topic(b.bootstrap_servers, topic, 1, topic_configs(128 * 1024, delete_retention_ms=15_000))
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 20,
                      "batch.num.messages": 5000, "batch.size": 64 * 1024,
                      "compression.type": "lz4", "queue.buffering.max.messages": 200_000})

        def report(err, msg) -> None:
            assert err is None, err
            history.append((msg.offset(), msg.key(), msg.value()))

        for i in range(100_000):
            p.produce(topic, key=b"key-%d" % (i % 1000), value=b"v%d" % i, on_delivery=report)
            if i % 10_000 == 0:
                p.poll(0)
        for k in range(0, 1000, 10):        # delete 100 keys
            p.produce(topic, key=b"key-%d" % k, value=None, on_delivery=report)
        # distinct keys past the updates, so every update lies below the active segment
        for j in range(1500):
            p.produce(topic, key=b"filler-%d" % j, value=os.urandom(50).hex().encode(),
                      on_delivery=report)
        assert p.flush(30) == 0
        del p       # no reconnect attempts once the broker stops
        history.sort()
        assert [o for o, _k, _v in history] == list(range(101_600))
        before = segment_bytes_on_disk(log_dir / f"{topic}-0")

    expected = sorted(latest(history).values())
    deleted = {b"key-%d" % k for k in range(0, 1000, 10)}
    assert len(expected) == 1000 + 1500

    # 2. restart with the cleaner on: it cleans everything below the active segment
    with BrokerProcess(log_dir=log_dir, overrides=CLEANER) as b:
        wait_until(lambda: (cleaner_checkpoint(log_dir, topic) or 0) >= 100_100, 40,
                   what="the cleaner checkpoint past the last update")
        cleaned_at = time.monotonic()
        after = segment_bytes_on_disk(log_dir / f"{topic}-0")
        got = consume_confluent(b.bootstrap_servers, topic)
        # each key exactly once with its latest value (tombstones still there), at its offset
        assert got == expected
        empty: list[int] = []
        assert fetch_everything(b.bootstrap_servers, topic, empty_batches=empty) == expected
        assert empty        # the clients read across empty batches, not only gaps
        assert consume_kafka_python(b.bootstrap_servers, topic, 101_600) == expected
        assert time.monotonic() - cleaned_at < 15, "too slow to tell the tombstones' window"
        assert after < before / 3, (before, after)
        # 3. delete.retention.ms later the tombstones go, with no new writes
        without_tombstones = [r for r in expected if r[1] not in deleted]
        wait_until(lambda: fetch_everything(b.bootstrap_servers, topic) == without_tombstones, 30,
                   interval=0.5, what="tombstones removed after delete.retention.ms")
        assert consume_confluent(b.bootstrap_servers, topic) == without_tombstones


# -- __consumer_offsets -------------------------------------------------------------------------

def test_consumer_offsets_is_compacted_and_reloads(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    overrides = dict(CLEANER, **{"offsets.topic.num.partitions": "1",
                                 "offsets.topic.segment.bytes": "4096"})
    topic = "data"
    with BrokerProcess(log_dir=log_dir, overrides=overrides) as b:
        create_topic(b.bootstrap_servers, topic, 3)
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g-compacted",
                      "enable.auto.commit": False})
        try:
            for i in range(150):
                c.commit(offsets=[TopicPartition(topic, i % 3, i)], asynchronous=False)
        finally:
            c.close()
        part = log_dir / "__consumer_offsets-0"

        def active_base() -> int:
            return max(int(f.name[:20]) for f in part.glob("*.log"))

        # cleaned up to the active segment: no round runs any more, the files stay still
        wait_until(lambda: cleaner_checkpoint(log_dir, "__consumer_offsets") == active_base() > 0,
                   20, what="__consumer_offsets cleaned up to its active segment")
        cp = cleaner_checkpoint(log_dir, "__consumer_offsets")
        # below the checkpoint: one offset-commit record per (group, topic, partition)
        keys_below = []
        for f in sorted(part.glob("*.log")):
            for pb in parse_records(f.read_bytes()).batches:
                keys_below += [r.key for r in pb.records if r.offset < cp]
        assert len(keys_below) == len(set(keys_below)) == 3
    with BrokerProcess(log_dir=log_dir, overrides=overrides) as b:
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g-compacted"})
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=15)
            assert [(t.partition, t.offset) for t in got] == [(0, 147), (1, 148), (2, 149)]
        finally:
            c.close()


# -- SIGKILL between the phases of a swap -------------------------------------------------------

CRASH_TOPIC = "crashy"


@pytest.fixture(scope="module")
def written_log(tmp_path_factory) -> tuple[Path, list[Record], int]:
    """A log dir with a compacted topic written with the cleaner off: 8 small segments of
    updates over 25 keys plus an active segment. Returns (dir, history, active base)."""
    log_dir = tmp_path_factory.mktemp("crash-template") / "logs"
    history: list[Record] = []
    with BrokerProcess(log_dir=log_dir, overrides={"log.cleaner.enable": "false"}) as b:
        create_topic(b.bootstrap_servers, CRASH_TOPIC, 1, topic_configs(2048))
        with RawClient(b.bootstrap_servers) as c:
            for i in range(0, 1200, 30):
                recs = [Rec(b"k%d" % ((i + j) % 25), b"value-%d" % (i + j)) for j in range(30)]
                resp = c.produce(CRASH_TOPIC, 0, build_batch(recs))
                assert resp.error_code == 0
                history += [(resp.base_offset + j, r.key, r.value) for j, r in enumerate(recs)]
    part = log_dir / f"{CRASH_TOPIC}-0"
    bases = sorted(int(f.name[:20]) for f in part.glob("*.log"))
    assert len(bases) >= 5
    return log_dir, history, bases[-1]


def _bases_of_old_segments(part: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in part.iterdir()
                  if f.name.endswith(".log") or f.name.endswith(".log.deleted"))


@pytest.mark.parametrize("phase,marker", [("cleaned", ".log.cleaned"), ("swap", ".log.swap"),
                                          ("deleted", ".log.swap"), ("final", ".log.deleted")])
def test_sigkill_between_swap_phases(tmp_path, monkeypatch, written_log, phase, marker):
    template, history, active_base = written_log
    log_dir = tmp_path / "logs"
    shutil.copytree(template, log_dir)
    part = log_dir / f"{CRASH_TOPIC}-0"
    old_bases = _bases_of_old_segments(part)

    monkeypatch.setenv(CRASH_AFTER_ENV, phase)
    b = BrokerProcess(log_dir=log_dir, overrides=CLEANER).start()
    try:
        wait_until(lambda: b.proc is not None and b.proc.poll() is not None, 20,
                   what=f"the broker killing itself at phase {phase}")
        assert any(f"cleaner crash point '{phase}'" in line for line in b.stderr_lines)
        files = sorted(f.name for f in part.iterdir())
        assert any(f.endswith(marker) for f in files), files
    finally:
        b.kill()
    monkeypatch.delenv(CRASH_AFTER_ENV)

    # restart with the cleaner off, to see exactly what recovery made of it
    with BrokerProcess(log_dir=log_dir, overrides={"log.cleaner.enable": "false"}) as b2:
        got = fetch_everything(b2.bootstrap_servers, CRASH_TOPIC)
    assert not [f.name for f in part.iterdir() if f.name.endswith((".cleaned", ".swap", ".deleted"))]
    # old or new, never a mix: below some old segment boundary B the log is the cleaned one
    # (the round's map covered everything below the active segment), from B on the original
    last = {k: o for o, k, _v in history if o < active_base}
    cleaned = [r for r in history if r[0] >= active_base or last[r[1]] == r[0]]
    boundaries = [0] if phase == "cleaned" else [x for x in old_bases + [active_base] if x > 0]
    matches = [x for x in boundaries
               if got == [r for r in cleaned if r[0] < x] + [r for r in history if r[0] >= x]]
    assert matches, "recovered log is neither the old nor the cleaned one at any boundary"

    # and cleaning then completes normally
    with BrokerProcess(log_dir=log_dir, overrides=CLEANER) as b3:
        wait_until(lambda: (cleaner_checkpoint(log_dir, CRASH_TOPIC) or 0) >= active_base, 20,
                   what="the cleaner finishing after the restart")
        assert fetch_everything(b3.bootstrap_servers, CRASH_TOPIC) == cleaned
