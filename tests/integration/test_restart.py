"""Durability across restarts: clean stop (SIGTERM), crash (SIGKILL) during a produce stream, and
restarts over many small segments. Each test owns its broker and log dir."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest
from kafka import KafkaProducer

from tests.harness import BrokerProcess
from tests.integration.util import (RawClient, Rec, build_batch, create_topic, parse_records, wait_for_topic,
                                    wait_until)

TIMEOUT = 20.0


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    with RawClient(bootstrap) as c:
        out = []
        for p in range(partitions):
            r = c.list_offset(topic, p, -1)
            assert r.error_code == 0
            out.append(r.offset)
        return out


def read_partition(bootstrap: str, topic: str, partition: int) -> list[Rec]:
    """Every record from offset 0 to the high watermark; asserts intact batches and contiguous offsets."""
    with RawClient(bootstrap) as c:
        parsed, hw = c.fetch_all(topic, partition, timeout=TIMEOUT)
    recs = parsed.records
    first = next((i for i, r in enumerate(recs) if r.offset == 0), 0)
    recs = recs[first:]
    assert [r.offset for r in recs] == list(range(hw)), f"{topic}-{partition}: offsets not 0..{hw - 1}"
    return recs


def test_clean_restart_10k_messages(fresh_broker: BrokerProcess, topic_name: str) -> None:
    b = fresh_broker
    create_topic(b.bootstrap_servers, topic_name, 3)
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=10, batch_size=32768,
                      compression_type="lz4", max_block_ms=10000, request_timeout_ms=10000)
    futs = [p.send(topic_name, value=f"msg-{i:05d}".encode() * 3, key=str(i).encode(), partition=i % 3)
            for i in range(10_000)]
    p.flush(timeout=TIMEOUT)
    assert all(f.get(timeout=TIMEOUT).offset == i // 3 for i, f in enumerate(futs))
    p.close()
    leo_before = log_end_offsets(b.bootstrap_servers, topic_name, 3)
    assert leo_before == [3334, 3333, 3333]

    assert b.stop() == 0
    b.start()
    with RawClient(b.bootstrap_servers) as c:
        wait_for_topic(c, topic_name, 3)
    assert log_end_offsets(b.bootstrap_servers, topic_name, 3) == leo_before
    for part in range(3):
        recs = read_partition(b.bootstrap_servers, topic_name, part)
        assert [(r.key, r.value) for r in recs] == [
            (str(i).encode(), f"msg-{i:05d}".encode() * 3) for i in range(part, 10_000, 3)]
    # The log keeps accepting appends at the recovered end.
    with RawClient(b.bootstrap_servers) as c:
        r = c.produce(topic_name, 0, build_batch([Rec(b"after", b"restart")]))
        assert (r.error_code, r.base_offset) == (0, 3334)


PRODUCER_SCRIPT = textwrap.dedent("""
    import sys, time
    from kafka import KafkaProducer
    bootstrap, topic, ack_path = sys.argv[1:4]
    out = open(ack_path, "w", buffering=1)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, batch_size=2048,
                      retries=0, enable_idempotence=False, max_in_flight_requests_per_connection=5,
                      request_timeout_ms=3000, max_block_ms=3000, delivery_timeout_ms=4000)
    def acked(i):
        def cb(md):
            out.write("%d %d %d\\n" % (md.partition, md.offset, i))
        return cb
    i = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            p.send(topic, value=b"crash-%08d" % i + b"." * (i % 97), partition=i % 3).add_callback(acked(i))
        except Exception:
            break
        i += 1
        if i % 50 == 0:
            time.sleep(0.001)
""")


def read_acks(path: Path) -> list[tuple[int, int, int]]:
    acks = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break  # a line cut by the kill
            p, off, i = line.split()
            acks.append((int(p), int(off), int(i)))
    return acks


def test_sigkill_during_produce_keeps_every_acknowledged_message(fresh_broker: BrokerProcess, topic_name: str,
                                                                  tmp_path: Path) -> None:
    b = fresh_broker
    create_topic(b.bootstrap_servers, topic_name, 3)
    ack_path = tmp_path / "acks.txt"
    ack_path.touch()
    prod = subprocess.Popen([sys.executable, "-c", PRODUCER_SCRIPT, b.bootstrap_servers, topic_name, str(ack_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_until(lambda: len(read_acks(ack_path)) >= 3000 or prod.poll() is not None, TIMEOUT,
                   what="3000 acknowledged messages")
        assert prod.poll() is None, "producer died: " + (prod.stderr.read().decode() if prod.stderr else "")
        b.kill()  # SIGKILL while requests are in flight
        time.sleep(0.3)
    finally:
        if prod.poll() is None:
            os.killpg(prod.pid, signal.SIGKILL)
        prod.wait(10)
    acks = read_acks(ack_path)
    assert len(acks) >= 3000

    b.start()
    with RawClient(b.bootstrap_servers) as c:
        wait_for_topic(c, topic_name, 3)
    for part in range(3):
        recs = read_partition(b.bootstrap_servers, topic_name, part)  # intact batches, offsets 0..hw-1
        mine = [(off, i) for p, off, i in acks if p == part]
        assert mine, part
        for off, i in mine:
            assert off < len(recs), f"acknowledged offset {off} of partition {part} lost (log end {len(recs)})"
            assert recs[off].value == b"crash-%08d" % i + b"." * (i % 97), (part, off, i, recs[off])
        # Everything in the log is something the producer sent to this partition, each once.
        sent_ids = [int(r.value[6:14]) for r in recs]
        assert all(i % 3 == part for i in sent_ids) and len(set(sent_ids)) == len(sent_ids)
        # Appends continue right after the recovered end, and read back intact.
        with RawClient(b.bootstrap_servers) as c:
            r = c.produce(topic_name, part, build_batch([Rec(None, b"post-crash-%d" % part)]))
            assert (r.error_code, r.base_offset) == (0, len(recs))
        recs2 = read_partition(b.bootstrap_servers, topic_name, part)
        assert recs2[-1].value == b"post-crash-%d" % part and recs2[:-1] == recs


@pytest.mark.parametrize("damage", ["partial-batch", "bad-crc-batch", "zeros"])
def test_torn_tail_after_crash_is_truncated(fresh_broker: BrokerProcess, topic_name: str, damage: str) -> None:
    """A crash can leave a half-written batch at the end of the active segment. Recovery must cut
    it off: never serve it, and append new data right after the last whole batch."""
    b = fresh_broker
    create_topic(b.bootstrap_servers, topic_name, 1)
    values = [b"acked-%03d" % i for i in range(60)]
    with RawClient(b.bootstrap_servers) as c:
        for start in range(0, 60, 10):
            r = c.produce(topic_name, 0, build_batch([Rec(None, v) for v in values[start:start + 10]]))
            assert (r.error_code, r.base_offset) == (0, start)
    b.kill()
    active = sorted((b.log_dir / f"{topic_name}-0").glob("*.log"))[-1]
    size_before = active.stat().st_size
    tail = bytearray(build_batch([Rec(None, b"torn-%03d" % i) for i in range(10)]))
    struct.pack_into(">q", tail, 0, 60)  # as the broker would have written it
    if damage == "partial-batch":
        junk = bytes(tail[: len(tail) // 2])
    elif damage == "bad-crc-batch":
        tail[-1] ^= 0xFF
        junk = bytes(tail)
    else:
        junk = b"\x00" * 4096  # preallocated/zero-filled tail
    with open(active, "ab") as f:
        f.write(junk)

    b.start()
    with RawClient(b.bootstrap_servers) as c:
        wait_for_topic(c, topic_name, 1)
        assert c.list_offset(topic_name, 0, -1).offset == 60
    recs = read_partition(b.bootstrap_servers, topic_name, 0)
    assert [r.value for r in recs] == values
    with RawClient(b.bootstrap_servers) as c:
        r = c.produce(topic_name, 0, build_batch([Rec(None, b"after-recovery")]))
        assert (r.error_code, r.base_offset) == (0, 60)
    recs = read_partition(b.bootstrap_servers, topic_name, 0)
    assert [r.value for r in recs] == values + [b"after-recovery"]
    assert b.stop() == 0
    # The junk is gone from the segment file itself, not merely skipped.
    data = active.read_bytes()
    assert junk not in data[size_before:] or damage == "zeros"
    assert b"torn-" not in data


def test_restart_with_many_segments(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory({"log.segment.bytes": "16384", "log.index.interval.bytes": "1024"})
    create_topic(b.bootstrap_servers, topic_name, 1)
    base_ts = 1_600_000_000_000
    n = 3000
    values = [f"seg-{i:05d}-".encode() + b"z" * 80 for i in range(n)]
    with RawClient(b.bootstrap_servers) as c:
        off = 0
        for start in range(0, n, 25):  # 120 batches of 25 records
            recs = [Rec(str(i).encode(), values[i], (("n", str(i).encode()),), base_ts + i * 10)
                    for i in range(start, start + 25)]
            r = c.produce(topic_name, 0, build_batch(recs))
            assert (r.error_code, r.base_offset) == (0, off)
            off += 25
    seg_dir = b.log_dir / f"{topic_name}-0"
    segments = sorted(seg_dir.glob("*.log"))
    assert len(segments) >= 10, f"expected many segments, found {len(segments)}"
    assert all(len(s.stem) == 20 and s.stem.isdigit() for s in segments)
    assert segments[0].stem == "0" * 20

    def verify() -> None:
        recs = read_partition(b.bootstrap_servers, topic_name, 0)
        assert len(recs) == n
        assert [r.value for r in recs] == values
        assert [r.timestamp for r in recs] == [base_ts + i * 10 for i in range(n)]
        assert [r.headers for r in recs] == [(("n", str(i).encode()),) for i in range(n)]
        with RawClient(b.bootstrap_servers) as c:
            assert c.list_offset(topic_name, 0, -2).offset == 0
            assert c.list_offset(topic_name, 0, -1).offset == n
            for target_i in [0, 1, 24, 25, 777, 1500, 2999]:
                r = c.list_offset(topic_name, 0, base_ts + target_i * 10 - 5)
                assert (r.error_code, r.offset, r.timestamp) == (0, target_i, base_ts + target_i * 10), target_i
            assert c.list_offset(topic_name, 0, base_ts + n * 10).offset == -1
            # Fetch from the middle of a segment: served batches start at or before the offset.
            for start in [1, 1234, 2990]:
                pd = c.fetch(topic_name, 0, start, max_bytes=4096)
                parsed = parse_records(pd.records)
                assert parsed.batches and parsed.batches[0].base_offset <= start <= parsed.batches[0].last_offset
                assert all(bt.crc_ok for bt in parsed.batches)

    verify()
    assert b.stop() == 0
    b.start()
    verify()
    assert sorted(seg_dir.glob("*.log")) == segments
    b.kill()
    b.start()
    verify()
