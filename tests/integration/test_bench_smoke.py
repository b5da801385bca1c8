"""Smoke test of scripts/bench.py: its quickest mode against all three targets (kafkalite, Apache
Kafka 3.9 with its ZooKeeper, librdkafka's mock) must complete and report every figure.

No timing assertions: speed is the benchmark's business, not the tests'. What is checked is that
every measurement ran on every target it applies to, with exact counts where there are counts
(messages read back, rounds, starts, SIGTERM stops), and that the table carries the figures and
the ratios.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.java

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK_MESSAGES = 3000  # bench.py's --quick size, restated so that a change of it is noticed

EVERY = ("kafkalite", "kafka", "mock")
BROKERS = ("kafkalite", "kafka")
# metric -> targets that must have a figure for it
EXPECTED = {
    "produce_mb_s": EVERY,
    "produce_msgs_s": EVERY,
    "consume_mb_s": EVERY,
    "consume_msgs_s": EVERY,
    "consume_messages_read": EVERY,
    "latency_p50_ms": EVERY,
    "latency_p99_ms": EVERY,
    "latency_warm_p50_ms": EVERY,
    "latency_warm_p99_ms": EVERY,
    "start_to_api_versions_ms": EVERY,
    "kafka_with_zookeeper_start_ms": ("kafka",),
    "zookeeper_start_ms": ("kafka",),
    "ready_line_ms": ("kafkalite",),
    "reported_start_ms": ("kafkalite",),
    "rebalance_range_ms": EVERY,
    "rebalance_range_assigned_ms": EVERY,
    "rebalance_cooperative-sticky_ms": EVERY,
    "rebalance_cooperative-sticky_assigned_ms": EVERY,
    "commit_sync_per_s": EVERY,
    "commit_async_per_s": EVERY,
    "commit_broker_cpu_us": BROKERS,
}
# table row label -> (cells for kafkalite, Kafka, mock, kafkalite/Kafka, kafkalite/mock):
# "n" a figure, "r" a ratio, "-" none
TABLE = {
    "produce throughput (MB/s)": "nnnrr",
    "produce throughput (msgs/s)": "nnnrr",
    "consume throughput (MB/s)": "nnnr-",
    "consume throughput (msgs/s)": "nnnr-",
    "consume: messages read": "nnn--",
    "produce latency p50, first sends (ms)": "nnnrr",
    "produce latency p99, first sends (ms)": "nnnrr",
    "produce latency p50, after the latency warm-up (ms)": "nnnrr",
    "produce latency p99, after the latency warm-up (ms)": "nnnrr",
    "start-to-ready: spawn to first ApiVersions answered (ms)": "nnnr-",
    "start-to-ready incl. ZooKeeper: its spawn to `ruok` + Kafka's spawn to ApiVersions (ms)":
        "-n-r-",
    "ZooKeeper alone: spawn to `ruok` answered (ms)": "-n---",
    "kafkalite: spawn to its ready line (ms)": "n----",
    "kafkalite: broker's own \"started in\" (ms)": "n----",
    "rebalance 3 -> 4, range (eager): until all four consume (ms)": "nnnr-",
    "rebalance 3 -> 4, range (eager): until last assignment (ms)": "nnnr-",
    "rebalance 3 -> 4, cooperative-sticky: until all four consume (ms)": "nnnr-",
    "rebalance 3 -> 4, cooperative-sticky: until last assignment (ms)": "nnnr-",
    "OffsetCommit, sync (commits/s)": "nnnrr",
    "OffsetCommit, async pipelined (commits/s)": "nnnrr",
    "OffsetCommit: broker CPU per commit (µs)": "nn-r-",
}


def _number(text: str) -> float:
    """The leading figure of a cell ("1,234", "0.150", "3,000 — what the mock still held")."""
    return float(text.split(" ")[0].replace(",", ""))


def _table_rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| measurement"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.timeout(900)
def test_quick_bench_reports_every_figure_for_every_target(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "scripts/bench.py", "--quick", "--targets", "kafkalite,kafka,mock",
         "--json", str(out_json)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "FAILED" not in proc.stdout and "failures:" not in proc.stdout, proc.stdout

    report = json.loads(out_json.read_text())
    assert report["errors"] == {}
    env = report["environment"]
    assert env["targets"] == ["kafkalite", "kafka", "mock"]
    assert env["messages"] == QUICK_MESSAGES and env["repeat"] == 1 and env["starts"] == 1
    assert "-XX:+UseG1GC" in env["kafka_jvm_flags"] and "-Xmx1G" in env["kafka_jvm_flags"]
    assert len(env["loadavg_at_start"]) == 3 and len(env["loadavg_at_end"]) == 3

    runs, medians = report["runs"], report["medians"]
    assert set(runs) == set(EXPECTED)
    for metric, targets in EXPECTED.items():
        assert set(runs[metric]) == set(targets), metric
        for target in targets:
            # One round (or one start) each, so the median is that one value.
            assert len(runs[metric][target]) == 1, (metric, target)
            value = medians[metric][target]
            assert value == runs[metric][target][0]
            assert math.isfinite(value) and value > 0, (metric, target, value)

    # Both brokers keep everything: all 3,000 values read back (compared byte for byte by the
    # bench); the mock keeps the most recent few MB per partition, so at this size all too.
    for target in EVERY:
        assert medians["consume_messages_read"][target] == QUICK_MESSAGES, target
    assert medians["kafka_with_zookeeper_start_ms"]["kafka"] == pytest.approx(
        medians["zookeeper_start_ms"]["kafka"] + medians["start_to_api_versions_ms"]["kafka"])
    # kafkalite is started three times (round, group round, start-up), Kafka likewise; every
    # SIGTERM must end in a clean exit (kafkalite 0, the JVM 143 after its shutdown hook).
    assert report["kafkalite_exit_codes"] == [0, 0, 0]
    assert report["kafka_exit_codes"] == [143, 143, 143]

    rows = _table_rows(proc.stdout)
    assert "| measurement | kafkalite | Apache Kafka 3.9.1 | librdkafka mock | kafkalite/Kafka " \
           "| kafkalite/mock |" in proc.stdout
    assert set(rows) == set(TABLE)
    for label, kinds in TABLE.items():
        cells = rows[label]
        assert len(cells) == 5, (label, cells)
        for kind, text in zip(kinds, cells):
            if kind == "-":
                assert text == "—", (label, cells)
            else:
                assert _number(text) > 0, (label, cells)
    # The ratios are those of the medians.
    produce = medians["produce_msgs_s"]
    assert _number(rows["produce throughput (msgs/s)"][3]) == pytest.approx(
        produce["kafkalite"] / produce["kafka"], abs=0.006)
    assert _number(rows["produce throughput (msgs/s)"][4]) == pytest.approx(
        produce["kafkalite"] / produce["mock"], abs=0.006)
