"""End-to-end: kcat (librdkafka's CLI) against a real kafkalite broker.

kcat produces to topics that do not exist yet, so the broker auto-creates them through Metadata
(the shared broker runs with num.partitions=3). Consumption is `-C -o beginning -e` without -G.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from typing import Any

import pytest

from tests.harness import BrokerProcess
from tests.integration.util import (CODECS, RawClient, java_partition, librdkafka_consistent_partition,
                                    wait_for_topic, wait_until)

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")

TIMEOUT = 30.0
AUTO_PARTITIONS = 3  # num.partitions of the shared broker (tests/conftest.py)


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    cmd = ["kcat", "-b", broker.bootstrap_servers, "-m", "10", *args]
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"{' '.join(cmd)} -> rc {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r.stdout


def kcat_produce(broker: BrokerProcess, topic: str, lines: list[str], *args: str) -> None:
    kcat(broker, "-P", "-t", topic, *args, stdin="\n".join(lines) + "\n")


def kcat_consume(broker: BrokerProcess, topic: str, expected: int, *args: str) -> list[dict[str, Any]]:
    out = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-J", *args)
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(msgs) == expected, f"expected {expected} messages, kcat printed {len(msgs)}"
    return msgs


def by_partition(msgs: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in msgs:
        out[m["partition"]].append(m)
    return out


def test_auto_create_metadata_listing_and_keyed_roundtrip(broker: BrokerProcess, topic_name: str) -> None:
    lines = [f"key-{i % 23}:value-{i}" for i in range(150)]
    kcat_produce(broker, topic_name, lines, "-K", ":")

    md = json.loads(kcat(broker, "-L", "-J", "-t", topic_name))
    assert md["controllerid"] == 0
    assert [b["id"] for b in md["brokers"]] == [0]
    assert md["brokers"][0]["name"] == broker.bootstrap_servers
    [t] = md["topics"]
    assert t["topic"] == topic_name and "error" not in t
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"]) for p in t["partitions"]] == [
        (i, 0, [{"id": 0}], [{"id": 0}]) for i in range(AUTO_PARTITIONS)]

    msgs = by_partition(kcat_consume(broker, topic_name, 150))
    expected: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for line in lines:
        k, v = line.split(":")
        expected[librdkafka_consistent_partition(k.encode(), AUTO_PARTITIONS)].append((k, v))
    assert set(msgs) == set(expected)
    for part, ms in msgs.items():
        assert [m["offset"] for m in ms] == list(range(len(ms)))
        assert [(m["key"], m["payload"]) for m in ms] == expected[part]
        assert {m["topic"] for m in ms} == {topic_name}
        assert {m["broker"] for m in ms} == {0}


def test_murmur2_partitioner(broker: BrokerProcess, topic_name: str) -> None:
    lines = [f"k{i}:v{i}" for i in range(60)]
    kcat_produce(broker, topic_name, lines, "-K", ":", "-X", "partitioner=murmur2_random")
    for m in kcat_consume(broker, topic_name, 60):
        assert m["partition"] == java_partition(m["key"].encode(), AUTO_PARTITIONS), m


def test_metadata_listing_all_topics_includes_topic(broker: BrokerProcess, topic_name: str) -> None:
    kcat_produce(broker, topic_name, ["x"], "-p", "1")
    md = json.loads(kcat(broker, "-L", "-J"))
    names = [t["topic"] for t in md["topics"]]
    assert topic_name in names and len(names) == len(set(names))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    values = [f"{codec}-{i:04d}-" + "abcdefghij" * 20 for i in range(200)]
    kcat_produce(broker, topic_name, values, "-p", "0", "-X", f"compression.codec={codec}",
                 "-X", "linger.ms=50")
    ms = kcat_consume(broker, topic_name, 200)
    assert [m["payload"] for m in ms] == values
    assert [m["offset"] for m in ms] == list(range(200))
    assert {m["partition"] for m in ms} == {0}
    with RawClient(broker.bootstrap_servers) as c:
        parsed, hw = c.fetch_all(topic_name, 0)
    assert hw == 200
    assert {b.compression for b in parsed.batches} == {CODECS[codec]}


def test_headers_roundtrip(broker: BrokerProcess, topic_name: str) -> None:
    kcat_produce(broker, topic_name, ["one", "two"], "-p", "2", "-H", "h1=a", "-H", "h2=", "-H", "h1=b")
    ms = kcat_consume(broker, topic_name, 2)
    assert [m["payload"] for m in ms] == ["one", "two"]
    assert [m["headers"] for m in ms] == [["h1", "a", "h2", "", "h1", "b"]] * 2


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: BrokerProcess, topic_name: str, acks: str) -> None:
    # Create first so the acks=0 producer does not race the auto-creation.
    with RawClient(broker.bootstrap_servers) as c:
        t = c.create_topic(topic_name, 1)
        assert t.error_code == 0
        wait_for_topic(c, topic_name, 1)
    lines = [f"{acks}-{i}" for i in range(100)]
    kcat_produce(broker, topic_name, lines, "-p", "0", "-X", f"acks={acks}")
    with RawClient(broker.bootstrap_servers) as c:
        wait_until(lambda: c.list_offset(topic_name, 0, -1).offset == 100, 10, what="100 appended")
    ms = kcat_consume(broker, topic_name, 100)
    assert [m["payload"] for m in ms] == lines
    assert [m["offset"] for m in ms] == list(range(100))


def test_query_offsets_by_timestamp(broker: BrokerProcess, topic_name: str) -> None:
    # kcat cannot set timestamps; produce in three runs so they differ, then ask -Q for each.
    for run in range(3):
        kcat_produce(broker, topic_name, [f"r{run}-{i}" for i in range(5)], "-p", "0", "-X", "linger.ms=0")
    ms = kcat_consume(broker, topic_name, 15)
    ts = [m["ts"] for m in ms]
    assert all(m["tstype"] == "create" for m in ms)

    def query(target: int) -> int:
        # kcat -Q -J: {"<topic>": {"topic": "<topic>", "<partition>": {"partition": p, "offset": o}}}
        out = json.loads(kcat(broker, "-Q", "-J", "-t", f"{topic_name}:0:{target}"))
        entry = out[topic_name]["0"]
        assert entry["partition"] == 0 and "error" not in entry, entry
        return int(entry["offset"])

    for target in sorted(set(ts)) + [ts[-1] + 1, 0]:
        exp = next((off for off, t in enumerate(ts) if t >= target), -1)
        assert query(target) == exp, (target, ts)
    assert query(-2) == 0    # earliest
    assert query(-1) == 15   # latest
