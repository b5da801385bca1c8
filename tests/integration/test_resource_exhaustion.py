"""Running out of file descriptors never corrupts state: a broker whose RLIMIT_NOFILE (soft and
hard, so it cannot raise it) is too small for a CreateTopics creates what fits, answers
KAFKA_STORAGE_ERROR for the partitions whose logs it could not create, goes on serving (new
connections too: log creation leaves descriptors for them), restarts with the same limit,
refuses to start in one line when the segments on disk cannot fit, and once the limit is raised
creates the missing logs and serves every topic with every acknowledged record.

Running out of disk space never corrupts state either: produce into a log dir that fills up (a
tmpfs in a mount namespace of its own) gets KAFKA_STORAGE_ERROR, with one ERROR line in the
broker's log; the broker goes on serving; once there is room again appends succeed, and every
acknowledged record is there, in order, after a restart too."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kafkalite.testing import Broker, BrokerError
from tests.integration.util import RawClient, Rec, build_batch, create_topic, wait_until

LOW = 400
KAFKA_STORAGE_ERROR = 56
LEADER_NOT_AVAILABLE = 5
BIG = 600     # far more partitions than LOW descriptors allow


def limited(n: int) -> list[str]:
    return ["prlimit", f"--nofile={n}:{n}", "--"]


def produce_one(c: RawClient, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    r = c.produce(topic, partition, build_batch([Rec(b"k", value)]))
    return r.error_code, r.base_offset


def values(c: RawClient, topic: str, partition: int) -> list[bytes]:
    parsed, hw = c.fetch_all(topic, partition)
    assert len(parsed.records) == hw
    return [r.value for r in parsed.records]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_create_topics_out_of_descriptors_then_restart(tmp_path) -> None:
    b = Broker(log_dir=tmp_path / "logs", command_prefix=limited(LOW))
    try:
        b.start()
        create_topic(b.bootstrap_servers, "small", 4)
        with RawClient(b.bootstrap_servers) as c:
            for p in range(4):
                assert produce_one(c, "small", p, b"before-%d" % p) == (0, 0)
            t = c.create_topic("big", BIG)
            # Kafka's ZK-mode answer: the topic is created (assignment written, leaders elected);
            # the partitions whose logs could not be created are offline on the broker.
            assert (t.error_code, t.error_message) == (0, None)
            acked: dict[int, bytes] = {}
            failed = []
            for p in range(BIG):
                code, offset = produce_one(c, "big", p, b"big-%d" % p)
                if code == 0:
                    assert offset == 0
                    acked[p] = b"big-%d" % p
                else:
                    assert code == KAFKA_STORAGE_ERROR
                    failed.append(p)
            assert acked and failed and len(acked) + len(failed) == BIG
            assert len(acked) < LOW
            assert b.pid is not None and open_fds(b.pid) < LOW
            # the controller took the KAFKA_STORAGE_ERROR of the LeaderAndIsr answer: offline
            def leaders() -> dict[int, int] | None:
                parts = c.metadata(["big"]).topics[0].partitions
                by_partition = {q.partition_index: (q.leader_id, q.error_code) for q in parts}
                return by_partition if all(by_partition[q] == (-1, LEADER_NOT_AVAILABLE)
                                           for q in failed) else None
            by_partition = wait_until(leaders, 10, what="failed partitions offline")
            assert all(by_partition[q] == (0, 0) for q in acked)
        # the broker goes on serving, to new connections too
        with RawClient(b.bootstrap_servers) as c:
            for p in range(4):
                assert produce_one(c, "small", p, b"after-%d" % p) == (0, 1)
                assert values(c, "small", p) == [b"before-%d" % p, b"after-%d" % p]
            for p, v in acked.items():
                assert values(c, "big", p) == [v]
        assert "Too many open files" in b.output()
        assert not any(os.path.exists(tmp_path / "logs" / f"big-{p}") for p in failed)

        # restart with the same limit: the segments on disk fit, the rest stays offline
        assert b.stop() == 0
        b.start()
        with RawClient(b.bootstrap_servers) as c:
            for p in range(4):
                assert values(c, "small", p) == [b"before-%d" % p, b"after-%d" % p]
            for p, v in acked.items():
                assert values(c, "big", p) == [v]
            assert produce_one(c, "big", failed[-1], b"x")[0] == KAFKA_STORAGE_ERROR
        assert b.stop() == 0

        # a limit the segments on disk cannot fit: one line, non-zero exit, no traceback
        segments = sum(1 for d in (tmp_path / "logs").iterdir() if d.is_dir()
                       for f in d.iterdir() if f.name.endswith(".log"))
        b.command_prefix = limited(segments // 2)
        before = b.output()
        with pytest.raises(BrokerError, match="exited with code 1 before it was ready"):
            b.start(timeout=20)
        new = b.output()[len(before):]
        lines = [ln for ln in new.splitlines() if "cannot start" in ln]
        assert len(lines) == 1, new
        assert lines[0].startswith(f"kafkalite: cannot start: {segments} log segments need ")
        assert f"(RLIMIT_NOFILE) is {segments // 2};" in lines[0]
        assert "ulimit -n" in lines[0] and "LimitNOFILE=" in lines[0]
        assert "Traceback" not in new

        # a limit raised: every log is created and every acknowledged record is there
        b.command_prefix = limited(4096)
        b.start()
        with RawClient(b.bootstrap_servers) as c:
            for p in range(4):
                assert values(c, "small", p) == [b"before-%d" % p, b"after-%d" % p]
            for p in range(BIG):
                expected = [acked[p]] if p in acked else []
                assert values(c, "big", p) == expected
                assert produce_one(c, "big", p, b"late") == (0, len(expected))
    finally:
        b.close()


def test_one_descriptor_per_partition(tmp_path) -> None:
    """A broker's descriptors grow by exactly one per partition (its segment's .log), with the
    indexes mapped and written (index.interval.bytes=1: every batch adds an entry)."""
    n = 300
    b = Broker(log_dir=tmp_path / "logs", log_index_interval_bytes=1)
    try:
        b.start()
        assert b.pid is not None
        with RawClient(b.bootstrap_servers) as c:
            create_topic(b.bootstrap_servers, "warmup", 1)   # first-use descriptors (e.g. checkpoints)
            assert produce_one(c, "warmup", 0, b"w") == (0, 0)
            base = open_fds(b.pid)
            create_topic(b.bootstrap_servers, "many", n)
            for p in range(n):
                for i in range(2):
                    assert produce_one(c, "many", p, b"v%d" % i) == (0, i)
            wait_until(lambda: open_fds(b.pid) == base + n, 10,
                       what=f"{base + n} descriptors (have {open_fds(b.pid)})")
    finally:
        b.close()


def test_produce_into_a_full_disk_then_make_room(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # the namespace lives as long as this holder; brokers join it through nsenter (which execs)
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               f"mount -t tmpfs -o size=12m tmpfs {mnt} && echo mounted && exec sleep 600"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "mounted":
        holder.kill()
        pytest.fail(f"cannot mount a tmpfs in a mount namespace of its own: {holder.communicate()[1]}")
    in_ns = ["nsenter", "-t", str(holder.pid), "-m"]
    # ~4 MiB left for the broker: its store and 50 __consumer_offsets logs are not created here
    subprocess.run(in_ns + ["dd", "if=/dev/zero", f"of={mnt}/filler", "bs=1M", "count=8"], check=True,
                   capture_output=True)
    b = Broker(log_dir=mnt / "logs", command_prefix=in_ns)
    try:
        b.start()
        # small segments: the disk also fills up while a segment rolls
        create_topic(b.bootstrap_servers, "t", 1, configs={"segment.bytes": "102400"})
        acked: list[bytes] = []
        errors: list[int] = []
        with RawClient(b.bootstrap_servers) as c:
            for i in range(20_000):
                value = b"%06d" % i + b"x" * 1000
                error, offset = produce_one(c, "t", 0, value)
                if error == 0:
                    assert offset == len(acked)
                    acked.append(value)
                else:
                    errors.append(error)
                    if len(errors) == 20:
                        break
            assert set(errors) == {KAFKA_STORAGE_ERROR} and len(errors) == 20
            assert 2000 < len(acked) < 4096
            # still serving: metadata, and reads of what is there
            assert c.metadata(["t"]).topics[0].error_code == 0
            assert values(c, "t", 0) == acked
            subprocess.run(in_ns + ["rm", f"{mnt}/filler"], check=True)
            for i in range(200):
                value = b"after-%03d" % i
                assert produce_one(c, "t", 0, value) == (0, len(acked))
                acked.append(value)
            assert values(c, "t", 0) == acked
        log_lines = b.output().splitlines()
        failed = [ln for ln in log_lines if "Error while appending records to t-0 in dir" in ln]
        assert len(failed) == 1 and " ERROR " in failed[0] and "No space left on device" in failed[0], failed
        assert sum("Appends to t-0 succeed again" in ln for ln in log_lines) == 1
        b.stop()
        b.start()
        with RawClient(b.bootstrap_servers) as c:
            assert values(c, "t", 0) == acked
            assert produce_one(c, "t", 0, b"restarted") == (0, len(acked))
    finally:
        b.close()
        holder.kill()
        holder.wait()
