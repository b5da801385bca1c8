"""Restart with many partitions (issue 13): after SIGKILL and after SIGTERM every acknowledged
record, high watermark, leader epoch and idempotent producer's state is back; a roll plus one
recovery-point checkpoint interval puts the advanced recovery point in the checkpoint file, and
a crash then re-validates only the tail."""
from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaProducer

from kafkalite.log.checkpoint import read_offset_checkpoint
from kafkalite.log.leader_epoch_cache import parse_epoch_checkpoint
from kafkalite.log.segment import log_file
from tests.integration.util import RawClient, Rec, build_batch, create_topic, wait_for_topic, wait_until

PARTITIONS = 500
TIMEOUT = 30.0


def epochs(log_dir: Path, topic: str, partition: int) -> list[tuple[int, int]]:
    return parse_epoch_checkpoint((log_dir / f"{topic}-{partition}" / "leader-epoch-checkpoint").read_text())


def check_all(bootstrap: str, topic: str, expected: dict[int, list[bytes]]) -> None:
    """Every partition holds exactly the expected values at offsets 0.., up to its HW."""
    with RawClient(bootstrap) as c:
        for p, values in expected.items():
            parsed, hw = c.fetch_all(topic, p, timeout=TIMEOUT)
            assert hw == len(values), f"{topic}-{p}: high watermark {hw}, expected {len(values)}"
            assert [r.value for b in parsed.batches for r in b.records] == values, f"{topic}-{p}"


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_restart_many_partitions_after_kill_and_after_term(broker_factory) -> None:
    b = broker_factory({"log.flush.offset.checkpoint.interval.ms": "300",
                        "replica.high.watermark.checkpoint.interval.ms": "300"})
    log_dir = b.log_dir
    create_topic(b.bootstrap_servers, "many", PARTITIONS)
    create_topic(b.bootstrap_servers, "rolls", 1, {"segment.bytes": "1024"})
    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, enable_idempotence=True, acks="all",
                             linger_ms=5, max_block_ms=20000, request_timeout_ms=20000, retries=5)
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}

    def produce_round(tag: str) -> None:
        futures = []
        for p in range(PARTITIONS):
            for i in range(2):
                value = f"{tag}-{p}-{i}".encode()
                futures.append(producer.send("many", value=value, partition=p))
                expected[p].append(value)
        producer.flush(timeout=TIMEOUT)
        for f in futures:
            f.get(timeout=TIMEOUT)

    produce_round("a")
    # One record a batch into a topic with 1 KiB segments: many rolls, each flushed behind.
    with RawClient(b.bootstrap_servers) as c:
        for i in range(60):
            r = c.produce("rolls", 0, build_batch([Rec(b"k", b"roll-%03d" % i)]))
            assert (r.error_code, r.base_offset) == (0, i)
    segments = sorted(int(f.name[:20]) for f in (log_dir / "rolls-0").glob("*.log"))
    assert len(segments) >= 4
    tail_base = segments[-1]
    # After a checkpoint interval the file holds the recovery point the roll flushes reached.
    wait_until(lambda: read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint")
               .get(("rolls", 0)) == tail_base, timeout=10)
    epochs_before = {p: epochs(log_dir, "many", p) for p in (0, PARTITIONS - 1)}
    time.sleep(0.5)     # a high-watermark checkpoint interval

    b.kill()
    # A flipped byte in a flushed segment (below the recovery point) is not re-validated; one
    # in the tail's last batch is, and that batch is cut (Kafka's recovery).
    first = log_file(log_dir / "rolls-0", segments[0])
    first_bytes = first.read_bytes()
    flip_byte(first, len(first_bytes) - 2)
    corrupted_first = first.read_bytes()
    tail = log_file(log_dir / "rolls-0", tail_base)
    tail_batches = 60 - tail_base
    flip_byte(tail, tail.stat().st_size - 2)

    b.start(timeout=TIMEOUT)
    with RawClient(b.bootstrap_servers) as c:
        wait_for_topic(c, "many", PARTITIONS)
        wait_for_topic(c, "rolls", 1)
        assert c.list_offset("rolls", 0, -1).offset == 59      # only the torn tail batch went
        # the old segment's bytes are as the crash left them: not read, not truncated
        assert first.read_bytes() == corrupted_first
        parsed, _hw = c.fetch_all("rolls", 0, start=tail_base, timeout=TIMEOUT)
        assert [r.value for bt in parsed.batches for r in bt.records] == \
            [b"roll-%03d" % i for i in range(tail_base, tail_base + tail_batches - 1)]
    check_all(b.bootstrap_servers, "many", expected)
    for p, before in epochs_before.items():
        after = epochs(log_dir, "many", p)
        assert after[:len(before)] == before

    # The idempotent producer goes on where it was: its sequences are known again (a lost
    # producer state would answer OutOfOrderSequence / UnknownProducerId).
    produce_round("b")
    check_all(b.bootstrap_servers, "many", expected)
    producer.close(timeout=10)

    assert b.stop() == 0
    assert (log_dir / ".kafka_cleanshutdown").exists()
    recovery_points = read_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint")
    assert {p: recovery_points[("many", p)] for p in range(PARTITIONS)} == {p: 4 for p in range(PARTITIONS)}
    # A clean start rewrites no checkpoint whose content did not change.
    unchanged = [log_dir / "recovery-point-offset-checkpoint", log_dir / "log-start-offset-checkpoint",
                 log_dir / "many-0" / "leader-epoch-checkpoint", log_dir / "many-7" / "leader-epoch-checkpoint"]
    stats = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in unchanged]
    b.start(timeout=TIMEOUT)
    with RawClient(b.bootstrap_servers) as c:
        wait_for_topic(c, "many", PARTITIONS)
    check_all(b.bootstrap_servers, "many", expected)
    for p, before in epochs_before.items():
        assert epochs(log_dir, "many", p)[:len(before)] == before
    time.sleep(0.7)     # two recovery-point checkpoint intervals
    assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in unchanged] == stats
